import numpy as np
import pytest
import torch

from tokengeo.data import load_dataset, path_kind
from tokengeo.errors import ConfigError, DataNotFoundError


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """Tokenizer and encoding caches go to a temporary folder, not the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENGEO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def test_single_text_file_splits_its_tail(tmp_path):
    text = "".join(f"line {i}: the quick brown fox\n" for i in range(200))
    path = tmp_path / "notes.txt"
    path.write_text(text)
    lm = load_dataset(str(path), val_fraction=0.25)
    assert lm.kind == "language-modeling" and lm.tokenizer.name == "char"
    train = lm.tokenizer.decode(lm.train_tokens.tolist())
    val = lm.tokenizer.decode(lm.val_tokens.tolist())
    assert train + val == text and len(val) == int(np.ceil(0.25 * len(text)))


def test_text_folder_splits_whole_files(tmp_path):
    for i in range(10):
        sub = tmp_path / ("a" if i % 2 else "b")
        sub.mkdir(exist_ok=True)
        (sub / f"doc{i}.txt").write_text(f"document {i} " * 50)
    (tmp_path / "image.png").write_bytes(b"not text")  # ignored: not a text suffix
    lm = load_dataset(tmp_path, val_fraction=0.2, seed=0)
    assert len(lm.val_documents) == 2 and len(lm.train_documents) == 8
    assert not set(lm.val_documents) & set(lm.train_documents)
    again = load_dataset(tmp_path, val_fraction=0.2, seed=0)
    assert again.val_documents == lm.val_documents
    val = lm.tokenizer.decode(lm.val_tokens.tolist())
    for name in lm.train_documents:
        assert f"document {name.split('doc')[1].removesuffix('.txt')} " not in val


def test_npz_images_any_layout(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((40, 6, 6, 3))  # (N, H, W, C) floats in [0, 1]
    y = np.array(["cat", "dog"] * 20)
    np.savez(tmp_path / "pets.npz", x=x, y=y)
    data = load_dataset(tmp_path / "pets.npz", val_fraction=0.25, test_fraction=0.25)
    assert data.kind == "image-classification" and data.image_shape == (3, 6, 6)
    assert data.class_names == ["cat", "dog"] and (len(data.val), len(data.test)) == (10, 10)
    assert data.train.images.dtype == torch.uint8
    expected = torch.from_numpy(np.rint(x * 255).astype(np.uint8)).permute(0, 3, 1, 2)
    all_images = torch.cat([data.train.images, data.val.images, data.test.images])
    assert sorted(map(bytes, all_images.numpy())) == sorted(map(bytes, expected.numpy()))


def test_npz_errors(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros((4, 5)), y=np.zeros(4))
    with pytest.raises(ConfigError, match="images must be"):
        load_dataset(tmp_path / "a.npz")
    np.savez(tmp_path / "b.npz", images=np.zeros((4, 5, 5)))
    with pytest.raises(ConfigError, match="'x' and 'y'"):
        load_dataset(tmp_path / "b.npz")
    np.savez(tmp_path / "c.npz", x=np.full((4, 5, 5), 3.0), y=np.zeros(4))
    with pytest.raises(ConfigError, match="floats in"):
        load_dataset(tmp_path / "c.npz")


def test_image_folder_with_pillow(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="image folders need Pillow")
    for k, cls in enumerate(["circle", "square"]):
        (tmp_path / cls).mkdir()
        for i in range(10):
            Image.new("RGB", (7, 5), (10 * i, 100 * k, 7)).save(tmp_path / cls / f"{i}.png")
    assert path_kind(tmp_path) == "image-classification"
    data = load_dataset(tmp_path, val_fraction=0.2, test_fraction=0.2)
    assert data.image_shape == (3, 5, 7) and data.class_names == ["circle", "square"]
    assert (len(data.train), len(data.val), len(data.test)) == (12, 4, 4)
    green = data.train.images[:, 1, 0, 0]  # the class is written in the green channel
    assert torch.equal(green, (data.train.labels * 100).to(torch.uint8))
    gray = load_dataset(tmp_path, grayscale=True)
    assert gray.image_shape == (1, 5, 7)
    (tmp_path / "README.txt").write_text("a folder of images with a note")
    assert path_kind(tmp_path) == "image-classification"
    notes = load_dataset(tmp_path, kind="language-modeling")
    assert notes.kind == "language-modeling" and notes.train_documents == ["README.txt[:27]"]


def test_csv_text_classification(tmp_path):
    rows = ["text,label"] + [f"good film number {i},pos" for i in range(20)]
    rows += [f"awful film number {i},neg" for i in range(20)]
    (tmp_path / "reviews.csv").write_text("\n".join(rows) + "\n")
    data = load_dataset(tmp_path / "reviews.csv", max_len=8, val_fraction=0.2, test_fraction=0.2)
    assert data.kind == "text-classification" and data.class_names == ["neg", "pos"]
    assert data.train.input_ids.shape == (24, 8)
    i = 0
    assert data.train.input_ids[i, :3].tolist() == data.tokenizer.encode(data.train.texts[i])[:3]
    with pytest.raises(ConfigError, match="label_column"):
        load_dataset(tmp_path / "reviews.csv", label_column="stars")


def test_missing_user_path_is_data_not_found(tmp_path):
    with pytest.raises(DataNotFoundError, match="no such file"):
        load_dataset(str(tmp_path / "absent.txt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="no text files"):
        load_dataset(tmp_path / "empty")
