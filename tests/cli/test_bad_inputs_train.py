"""Bad input to ``tokengeo train``, ``probe``, the data loaders and the Python entry points
(``create_model``, ``laplacianize``, ``load_dataset``): every case ends in exit status 2
(or the library's exception) with one line naming the offending value, before anything is
created. The CLI cases run in-process (``tokengeo.cli.main``) so the table stays fast."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from tokengeo.cli import main
from tokengeo.errors import ConfigError, DataNotFoundError, TokengeoError

pytestmark = pytest.mark.usefixtures("one_thread")

# A tiny ViT on the digits: a case that passes validation would train only 2 steps.
TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "8", "--steps", "2",
        "--set", "model_overrides.d_model=16", "--set", "model_overrides.n_layers=1",
        "--set", "model_overrides.patch_size=4", "--quiet"]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("CI", "1")


@pytest.fixture(autouse=True)
def _no_training(monkeypatch):
    """A bad input must be refused before training: reaching ``fit`` fails the test fast."""
    def refuse(self):
        raise AssertionError("bad input reached training")

    # the module itself, not a dotted string: tokengeo.train is also the name of a lazy
    # top-level function, which a string path resolves to when this test runs alone
    from tokengeo.train.trainer import Trainer

    monkeypatch.setattr(Trainer, "fit", refuse)


def run_cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


def assert_one_line(code, err, command: str, message: str) -> None:
    assert code == 2, (code, err)
    assert len(err) == 1, err
    assert err[0].startswith(f"tokengeo {command}: error: "), err
    assert "Traceback" not in err[0]
    assert message in err[0], err[0]


# ---- flags and --set values of every type ---------------------------------------------

FLAG_CASES = [
    # argparse-level: one line naming the flag and value
    (["--steps", "1e30"], "--steps: invalid int value: '1e30'"),
    (["--steps", "abc"], "invalid int value: 'abc'"),
    (["--batch-size", "2.5"], "--batch-size: invalid int value: '2.5'"),
    (["--lr", "fast"], "--lr: invalid float value: 'fast'"),
    (["--seed", "x"], "--seed: invalid int value: 'x'"),
    (["--n-laplacian", "one"], "--n-laplacian: invalid int value: 'one'"),
    (["--eval-every", "1.5"], "--eval-every: invalid int value: '1.5'"),
    (["--checkpoint-every", "ten"], "--checkpoint-every: invalid int value: 'ten'"),
    # values out of range
    (["--lr", "inf"], "lr=inf must be a finite number"),
    (["--lr", "nan"], "lr=nan must be a finite number"),
    (["--lr=-inf"], "lr=-inf must be a finite number"),
    (["--lr", "0"], "lr=0.0 must be > 0"),
    (["--lr", "-1"], "lr=-1.0 must be > 0"),
    (["--lr", "1e39"], "lr=1e+39 must lie in"),
    (["--lr", "50"], "lr=50.0 must lie in"),
    (["--steps", "0"], "steps=0 must be > 0"),
    (["--steps", "10000000000"], "steps=10000000000 must be a whole number"),
    (["--batch-size", "0"], "batch_size=0 must be > 0"),
    (["--batch-size", "100000000000"], "batch_size=100000000000 must be a whole number"),
    (["--seed", "-1"], "seed=-1 must be a whole number"),
    (["--seed", "99999999999999999999999"], "seed=99999999999999999999999 must be a whole number"),
    (["--n-laplacian", "-1"], "n_laplacian=-1 must be >= 0"),
    (["--n-laplacian", "9"], "n_laplacian=9 exceeds n_heads=4"),
    (["--eval-every", "-1"], "eval_every=-1 must be >= 0"),
    (["--checkpoint-every", "-5"], "checkpoint_every=-5 must be >= 0"),
    (["--precision", "fp64"], "precision='fp64' is not valid"),
    (["--device", "tpu"], "invalid choice: 'tpu' (choose from 'auto', 'cpu', 'cuda')"),
    (["--task", "bogus"], "unknown task 'bogus'"),
    (["--task", "language-modeling"], "task 'language-modeling' needs language-modeling data"),
    (["--model", "vit-huge"], "unknown model 'vit-huge'"),
    (["--model", "gpt-tiny"], "unknown gpt-tiny option(s) ['patch_size']"),
    (["--data", "imagenet-21k"], "unknown dataset 'imagenet-21k'"),
    (["--data", "no/such/file.txt"], "no such file or folder"),
    (["--out", ""], "out must name a run directory"),
]

SET_CASES = [
    ("lr=abc", "lr='abc' must be a finite number"),
    ('lr="1e-3"', "lr='1e-3' must be a finite number"),
    ("lr=true", "lr=True must be a finite number"),
    ("lr=[1]", "lr=[1] must be a finite number"),
    ("lr.x=1", "lr={'x': 1} must be a finite number"),
    ('batch_size="8"', "batch_size='8' must be a whole number"),
    ("batch_size=8.0", "batch_size=8.0 must be a whole number"),
    ("batch_size=true", "batch_size=True must be a whole number"),
    ("steps=1.5", "steps=1.5 must be a whole number"),
    ("steps=1e30", "steps=1e+30 must be a whole number"),
    ("steps=nan", "steps=nan must be a whole number"),
    ("steps=99999999999999999999", "steps=99999999999999999999 must be a whole number"),
    ("warmup=-1", "warmup=-1 must be >= 0"),
    ("warmup=1.5", "warmup=1.5 must be a whole number"),
    ("min_lr=-1", "min_lr=-1 must be >= 0"),
    ("min_lr=1", "min_lr=1 must not exceed lr="),
    ("min_lr=inf", "min_lr=inf must be a finite number"),
    ("weight_decay=-0.1", "weight_decay=-0.1 must be >= 0"),
    ("weight_decay=nan", "weight_decay=nan must be a finite number"),
    ("beta1=1", "beta1=1 must lie in"),
    ("beta2=-0.1", "beta2=-0.1 must lie in"),
    ('beta1="0.9"', "beta1='0.9' must be a finite number"),
    ("grad_clip=-1", "grad_clip=-1 must be >= 0"),
    ("grad_clip=inf", "grad_clip=inf must be a finite number"),
    ("eval_batches=-1", "eval_batches=-1 must be >= 0"),
    ("final_eval_batches=0.5", "final_eval_batches=0.5 must be a whole number"),
    ("keep_checkpoints=0", "keep_checkpoints=0 must be > 0"),
    ("log_every=0", "log_every=0 must be > 0"),
    ("log_every=1.5", "log_every=1.5 must be a whole number"),
    ("seed=abc", "seed='abc' must be a whole number"),
    ("seed=-3", "seed=-3 must be a whole number"),
    ("seed=1.0", "seed=1.0 must be a whole number"),
    ("precision=16", "precision=16 must be a string"),
    ("device=3", "device=3 must be a string"),
    ("model=3", "model=3 must be a string"),
    ("data=3", "data=3 must be a string"),
    ('data=["digits"]', "data=['digits'] must be a string"),
    ("task=3", "task=3 must be a string"),
    ("head_kind=quadratic", "head_kind='quadratic' is not valid"),
    ("head_kind=1", "head_kind=1 must be a string"),
    ("n_laplacian=1.5", "n_laplacian=1.5 must be a whole number"),
    ("n_laplacian=true", "n_laplacian=True must be a"),
    ('loggers="csv"', "loggers='csv' must be a list of names"),
    ('loggers=["nope"]', "'nope'"),
    ("loggers=[1]", "loggers=[1] must be a list of names"),
    ("model_overrides=3", "model_overrides=3 must be a table"),
    ('data_options="seed=1"', "data_options='seed=1' must be a table"),
    ("task_options=[1]", "task_options=[1] must be a table"),
    ("task_options.x=1", "task_options ['x'] need an explicit --task"),
    ("learning_rate=1", "unknown train config option(s) ['learning_rate']"),
    ("out=3", "out=3 must be a string"),
    ("lr", "--set expects key=value, got 'lr'"),
    ("=3", "--set expects key=value, got '=3'"),
    ("lr..x=1", "--set key 'lr..x' has an empty part"),
    (".lr=1", "--set key '.lr' has an empty part"),
    # model_overrides
    ("model_overrides.d_model=1000000000", "d_model=1000000000"),
    ("model_overrides.n_layers=100000000", "n_layers=100000000"),
    ("model_overrides.d_model=abc", "d_model='abc' must be a whole number"),
    ("model_overrides.d_model=0", "d_model=0 must be > 0"),
    ("model_overrides.d_model=33", "d_model=33 is not divisible by n_heads=4"),
    ("model_overrides.d_model=64.0", "d_model=64.0 must be a whole number"),
    ("model_overrides.n_heads=0", "n_heads=0 must be > 0"),
    ("model_overrides.mlp_ratio=inf", "mlp_ratio=inf must be a finite number"),
    ("model_overrides.mlp_ratio=-1", "mlp_ratio=-1 must be > 0"),
    ("model_overrides.dropout=2", "dropout=2 must lie in"),
    ("model_overrides.dropout=nan", "dropout=nan must be a finite number"),
    ('model_overrides.bias="yes"', "bias='yes' must be true or false"),
    ("model_overrides.norm_eps=-1", "norm_eps=-1 must be > 0"),
    ("model_overrides.bogus=1", "unknown vit-tiny option(s) ['bogus']"),
    ("model_overrides.pool=max", "pool='max' is not valid"),
    ("model_overrides.laplacian_heads=[1]", "laplacian_heads=[1] must be a dict"),
    # data_options (the digits loader's)
    ("data_options.seed=abc", "seed='abc' must be a whole number"),
    ("data_options.seed=-1", "seed=-1 must be a whole number"),
    ("data_options.val_fraction=0", "val_fraction=0 must lie in"),
    ("data_options.val_fraction=1.5", "val_fraction=1.5 must lie in"),
    ("data_options.val_fraction=nan", "val_fraction=nan must be a finite number"),
    ('data_options.val_fraction="0.1"', "val_fraction='0.1' must be a finite number"),
    ("data_options.test_fraction=0.95", "must sum to less than 1"),
    ("data_options.bogus=1", "unknown option(s) ['bogus'] for dataset 'digits'"),
]


@pytest.mark.parametrize("args, message", FLAG_CASES, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_bad_flag(tmp_path, capsys, args, message):
    out = tmp_path / "run"
    code, err = run_cli(["train", *TINY, "--out", str(out), *args], capsys)
    assert_one_line(code, err, "train", message)
    assert not out.exists()  # nothing created for a refused run


@pytest.mark.parametrize("assignment, message", SET_CASES, ids=[a for a, _ in SET_CASES])
def test_bad_set_value(tmp_path, capsys, assignment, message):
    out = tmp_path / "run"
    code, err = run_cli(["train", *TINY, "--out", str(out), "--set", assignment], capsys)
    assert_one_line(code, err, "train", message)
    assert not out.exists()


def test_set_into_a_scalar_names_it(tmp_path, capsys):
    code, err = run_cli(["train", *TINY, "--out", str(tmp_path / "run"), "--set", "lr=1",
                         "--set", "lr.x=2"], capsys)
    assert_one_line(code, err, "train", "--set lr.x=2: lr is not a table")


def test_model_too_big_for_memory_says_the_estimate(tmp_path, capsys):
    code, err = run_cli(["train", *TINY, "--out", str(tmp_path / "run"),
                         "--set", "model_overrides.d_model=1000000000"], capsys)
    assert_one_line(code, err, "train", "GiB")
    assert "memory" in err[0] and "parameters" in err[0]


def test_patch_size_is_checked_against_the_data_image_size(tmp_path, capsys):
    """The digits are 8 px: the message names image_size=8, not the registry's 28."""
    code, err = run_cli(["train", *TINY, "--out", str(tmp_path / "run"),
                         "--set", "model_overrides.patch_size=3"], capsys)
    assert_one_line(code, err, "train", "image_size=8 is not divisible by patch_size=3")


# ---- --out -------------------------------------------------------------------------------


def test_out_under_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, err = run_cli(["train", *TINY, "--out", str(tmp_path / "file" / "run")], capsys)
    assert_one_line(code, err, "train", f"{tmp_path / 'file'} is a file, not a folder")


def test_out_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, err = run_cli(["train", *TINY, "--out", str(tmp_path / "file")], capsys)
    assert_one_line(code, err, "train", "is a file")
    assert (tmp_path / "file").read_text() == "x"


def test_out_where_nothing_can_be_created(tmp_path, capsys):
    code, err = run_cli(["train", *TINY, "--out", "/proc/tokengeo-run/x"], capsys)
    assert_one_line(code, err, "train", "--out /proc/tokengeo-run/x: cannot write in /proc")


# ---- config files --------------------------------------------------------------------------

CONFIG_CASES = [
    ("binary.toml", b"\xff\xfe\x00\x81steps", "is not UTF-8 text"),
    ("bad.toml", b"steps = = 3\n", "is not valid TOML"),
    ("str.toml", b'steps = "abc"\n', "steps='abc' must be a whole number"),
    ("lr.toml", b'lr = "fast"\n', "lr='fast' must be a finite number"),
    ("unknown.toml", b"learning_rate = 1\n", "unknown train config option(s) ['learning_rate']"),
    ("nested.toml", b"[model_overrides]\nbogus = 1\n", "unknown vit-tiny option(s) ['bogus']"),
    ("inf.toml", b"lr = inf\n", "lr=inf must be a finite number"),
    ("neg.toml", b"steps = -5\n", "steps=-5 must be > 0"),
    ("table.toml", b"model_overrides = 3\n", "model_overrides=3 must be a table"),
    ("frac.toml", b"[data_options]\nval_fraction = 0\n", "val_fraction=0 must lie in"),
    ("list.json", b"[1, 2]", "must hold a JSON object of settings"),
    ("broken.json", b"{not json", "cannot read the run config"),
    ("binary.json", b"\xff\xfe{}", "cannot read the run config"),
]


@pytest.mark.parametrize("name, content, message", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_config_file(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    out = tmp_path / "run"
    code, err = run_cli(["train", str(path), "--model", "vit-tiny", "--data", "digits",
                         "--out", str(out)], capsys)
    assert_one_line(code, err, "train", message)
    assert not out.exists()


def test_config_that_is_a_folder(tmp_path, capsys):
    code, err = run_cli(["train", str(tmp_path), "--out", str(tmp_path / "run")], capsys)
    assert_one_line(code, err, "train", f"config file {str(tmp_path)!r} is a folder")


def test_config_that_is_missing(tmp_path, capsys):
    code, err = run_cli(["train", str(tmp_path / "nope.toml")], capsys)
    assert_one_line(code, err, "train", "does not exist")


# ---- data sets -------------------------------------------------------------------------------


def _npz(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


def _png(path: Path, value: int = 0, size: int = 8) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(value)
    Image.fromarray(rng.integers(0, 255, (size, size), dtype=np.uint8)).save(path)


def _images(n=40, classes=4, size=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, (n, size, size), dtype=np.uint8), np.arange(n) % classes


def make_data(kind: str, root: Path) -> Path:
    """The bad data set ``kind`` under ``root``; returns what ``--data`` names."""
    x, y = _images()
    if kind == "npz-empty-file":
        (root / "d.npz").write_bytes(b"")
    elif kind == "npz-not-zip":
        (root / "d.npz").write_text("these are not arrays")
    elif kind == "npz-truncated":
        _npz(root / "full.npz", x=x, y=y)
        (root / "d.npz").write_bytes((root / "full.npz").read_bytes()[:300])
    elif kind == "npz-object":
        np.savez(root / "d.npz", x=np.array([None] * 40, dtype=object), y=y)
    elif kind == "npz-no-y":
        _npz(root / "d.npz", x=x)
    elif kind == "npz-channels":
        _npz(root / "d.npz", x=np.zeros((40, 5, 8, 8), np.uint8), y=y)
    elif kind == "npz-float-range":
        _npz(root / "d.npz", x=x.astype(np.float32), y=y)
    elif kind == "npz-nan":
        xf = x.astype(np.float32) / 255
        xf[0, 0, 0] = np.nan
        _npz(root / "d.npz", x=xf, y=y)
    elif kind == "npz-distinct-labels":
        _npz(root / "d.npz", x=x, y=np.arange(40))
    elif kind == "npz-zero-images":
        _npz(root / "d.npz", x=np.zeros((0, 8, 8), np.uint8), y=np.zeros(0, np.int64))
    elif kind == "npz-length":
        _npz(root / "d.npz", x=x, y=y[:30])
    elif kind == "npz-constant":
        _npz(root / "d.npz", x=np.full((40, 8, 8), 7, np.uint8), y=y)
    elif kind == "npz-2d-labels":
        _npz(root / "d.npz", x=x, y=np.zeros((40, 2)))
    elif kind == "npz-complex":
        _npz(root / "d.npz", x=x.astype(np.complex64), y=y)
    elif kind == "png-corrupt":
        for c in "ab":
            for i in range(4):
                _png(root / "imgs" / c / f"{i}.png", i)
        (root / "imgs" / "a" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
        return root / "imgs"
    elif kind == "png-no-images":
        for c in "ab":
            (root / "imgs" / c).mkdir(parents=True)
            (root / "imgs" / c / "notes.csv").write_text("x")
        return root / "imgs"
    elif kind == "png-sizes":
        _png(root / "imgs" / "a" / "0.png", 0, 8)
        _png(root / "imgs" / "b" / "0.png", 1, 9)
        return root / "imgs"
    elif kind == "png-no-classes":
        _png(root / "imgs" / "0.png")
        return root / "imgs"
    elif kind == "text-folder-empty":
        (root / "texts").mkdir()
        return root / "texts"
    elif kind == "text-empty-files":
        (root / "texts").mkdir()
        (root / "texts" / "a.txt").write_text("")
        (root / "texts" / "b.txt").write_text("")
        return root / "texts"
    elif kind == "csv-binary":
        (root / "d.csv").write_bytes(b"text,label\n\xff\xfe\x81,1\n")
        return root / "d.csv"
    elif kind == "csv-columns":
        (root / "d.csv").write_text("words,tag\nhello,1\n")
        return root / "d.csv"
    elif kind == "csv-empty":
        (root / "d.csv").write_text("")
        return root / "d.csv"
    return root / "d.npz"


DATA_CASES = [
    ("npz-empty-file", "is not a readable .npz"),
    ("npz-not-zip", "is not a readable .npz"),
    ("npz-truncated", "is not a readable .npz"),
    ("npz-object", "holds Python objects"),
    ("npz-no-y", "must hold arrays 'x' and 'y'"),
    ("npz-channels", "images must be (N,H,W), (N,C,H,W) or (N,H,W,C)"),
    ("npz-float-range", "images must be uint8 or floats in [0, 1]"),
    ("npz-nan", "images must be uint8 or floats in [0, 1]"),
    ("npz-distinct-labels", "split is empty"),
    ("npz-zero-images", "holds no images"),
    ("npz-length", "40 images but 30 labels"),
    ("npz-constant", "the same value"),
    ("npz-2d-labels", "labels must be 1-D"),
    ("npz-complex", "images must be uint8 or floats in [0, 1]"),
    ("png-corrupt", "bad.png"),
    ("png-no-images", "holds no image files"),
    ("png-sizes", "images have different sizes"),
    ("png-no-classes", "has no class subfolders"),
    ("text-folder-empty", "holds no image files"),
    ("text-empty-files", "holds no text"),
]


@pytest.mark.parametrize("kind, message", DATA_CASES, ids=[k for k, _ in DATA_CASES])
def test_bad_data_set(tmp_path, capsys, kind, message):
    data = make_data(kind, tmp_path)
    out = tmp_path / "run"
    code, err = run_cli(["train", *TINY, "--data", str(data), "--out", str(out)], capsys)
    assert_one_line(code, err, "train", message)
    assert not out.exists()


CSV_CASES = [
    ("csv-binary", "is not UTF-8 text"),
    ("csv-columns", "lacks column(s) ['label', 'text']"),
    ("csv-empty", "lacks column(s)"),
]


@pytest.mark.parametrize("kind, message", CSV_CASES, ids=[k for k, _ in CSV_CASES])
def test_bad_csv(tmp_path, capsys, kind, message):
    data = make_data(kind, tmp_path)
    out = tmp_path / "run"
    code, err = run_cli(["train", "--model", "encoder-tiny", "--data", str(data),
                         "--out", str(out), "--quiet"], capsys)
    assert_one_line(code, err, "train", message)
    assert not out.exists()


def test_text_too_short_for_the_block(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("short text")
    code, err = run_cli(["train", "--model", "gpt-tiny", "--data", str(tmp_path / "t.txt"),
                         "--out", str(tmp_path / "run")], capsys)
    assert_one_line(code, err, "train", "block_size=")
    assert not (tmp_path / "run").exists()


def test_corrupt_fashion_mnist_file_is_named(tmp_path, capsys, monkeypatch):
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    for n in names:
        (tmp_path / n).write_bytes(b"not gzip at all")
    monkeypatch.setenv("TOKENGEO_FASHION_MNIST_DIR", str(tmp_path))
    code, err = run_cli(["train", "--data", "fashion-mnist", "--out", str(tmp_path / "run")],
                        capsys)
    assert_one_line(code, err, "train", "train-images-idx3-ubyte.gz")


def test_truncated_gzip_idx_is_named(tmp_path):
    from tokengeo.data.images import load_fashion_mnist

    raw = gzip.compress(b"\x00\x00\x08\x03" + b"\x00" * 200)
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    for n in names:
        (tmp_path / n).write_bytes(raw[:-10])
    with pytest.raises(DataNotFoundError, match="train-images-idx3-ubyte.gz"):
        load_fashion_mnist(root=str(tmp_path))


# ---- probe ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--examples", "0"], "--examples 0 must be >= 1"),
    (["--examples", "1000000000"], "--examples 1000000000 exceeds"),
    (["--examples", "many"], "--examples: invalid int value: 'many'"),
])
def test_bad_probe_arguments(tmp_path, capsys, args, message):
    code, err = run_cli(["probe", str(tmp_path), *args], capsys)
    assert_one_line(code, err, "probe", message)


def test_probe_of_a_folder_without_a_run(tmp_path, capsys):
    code, err = run_cli(["probe", str(tmp_path / "nothing")], capsys)
    assert code == 2 and len(err) == 1 and "nothing" in err[0]


# ---- Python entry points ---------------------------------------------------------------------

CREATE_CASES = [
    (("nope",), {}, ConfigError, "unknown model 'nope'"),
    (("vit-tiny",), {"d_model": 10**9}, ConfigError, "d_model=1000000000"),
    (("gpt-tiny",), {"vocab_size": 10**12}, ConfigError, "vocab_size=1000000000000"),
    (("vit-tiny",), {"d_model": "64"}, ConfigError, "d_model='64' must be a whole number"),
    (("vit-tiny",), {"n_layers": 2.0}, ConfigError, "n_layers=2.0 must be a whole number"),
    (("vit-tiny",), {"dropout": float("nan")}, ConfigError, "dropout=nan must be a finite"),
    (("vit-tiny",), {"bogus": 1}, ConfigError, "unknown vit-tiny option(s) ['bogus']"),
    (("vit-tiny",), {"device": "bogus"}, ConfigError, "device='bogus'"),
    (("vit-tiny",), {"dtype": "float16"}, ConfigError, "dtype='float16'"),
    (("vit-tiny",), {"n_laplacian": True}, ConfigError, "n_laplacian=True must be a"),
    (("vit-tiny",), {"laplacian_heads": [1]}, ConfigError, "laplacian_heads=[1] must be a"),
    (("vit-tiny",), {"bias": "no"}, ConfigError, "bias='no' must be true or false"),
    (("vit-tiny",), {"mlp_ratio": float("inf")}, ConfigError, "mlp_ratio=inf must be a finite"),
    (("ltransformer-tiny",), {"p": 0}, ConfigError, "p=0"),
    (("ltransformer-tiny",), {"p": "4"}, ConfigError, "p='4' must be an integer"),
    (("encoder-tiny",), {"max_len": -1}, ConfigError, "max_len=-1 must be > 0"),
]


@pytest.mark.parametrize("args, kwargs, exc, message", CREATE_CASES,
                         ids=[f"{a[0]}-{sorted(k)}" for a, k, _, _ in CREATE_CASES])
def test_create_model_refuses(args, kwargs, exc, message):
    from tokengeo import create_model

    with pytest.raises(exc) as info:
        create_model(*args, **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def _dataset_case(kind: str, root: Path):
    x, y = _images()
    if kind == "text":
        (root / "t.txt").write_text("hello world " * 50)
        return root / "t.txt"
    if kind == "csv":
        (root / "d.csv").write_text("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(20)))
        return root / "d.csv"
    return make_data(kind, root)


LOAD_CASES = [
    ("nope", {}, ConfigError, "unknown dataset 'nope'"),
    ("digits", {"val_fraction": 0}, ConfigError, "val_fraction=0 must lie in"),
    ("digits", {"seed": "x"}, ConfigError, "seed='x' must be a whole number"),
    ("digits", {"seed": 1.5}, ConfigError, "seed=1.5 must be a whole number"),
    ("digits", {"val_fraction": float("inf")}, ConfigError, "val_fraction=inf must be a finite"),
    ("digits", {"bogus": 1}, ConfigError, "unknown option(s) ['bogus']"),
    ("digits", {"test_fraction": -0.1}, ConfigError, "test_fraction=-0.1 must lie in"),
    ("npz-empty-file", {}, ConfigError, "is not a readable .npz"),
    ("npz-object", {}, ConfigError, "holds Python objects"),
    ("npz-distinct-labels", {}, ConfigError, "split is empty"),
    ("npz-constant", {}, ConfigError, "the same value"),
    ("npz-no-y", {"kind": "bogus"}, ConfigError, "kind='bogus' is not valid"),
    ("png-corrupt", {}, ConfigError, "bad.png"),
    ("png-no-images", {}, DataNotFoundError, "holds no image files"),
    ("text", {"tokenizer": "x"}, ConfigError, "tokenizer='x' is not valid"),
    ("text", {"val_fraction": 0.95}, ConfigError, "val_fraction=0.95 must lie in"),
    ("text", {"bpe_vocab_size": 0}, ConfigError, "bpe_vocab_size=0 must be a whole number"),
    ("csv", {"max_len": 0}, ConfigError, "max_len=0 must be a whole number"),
    ("csv", {"max_len": "64"}, ConfigError, "max_len='64' must be a whole number"),
    ("csv-binary", {}, ConfigError, "is not UTF-8 text"),
]


@pytest.mark.parametrize("name, options, exc, message", LOAD_CASES,
                         ids=[f"{n}-{sorted(o)}" for n, o, _, _ in LOAD_CASES])
def test_load_dataset_refuses(tmp_path, name, options, exc, message):
    from tokengeo.data import load_dataset

    known = {"nope", "digits"}
    target = name if name in known else str(_dataset_case(name, tmp_path))
    with pytest.raises(exc) as info:
        load_dataset(target, **options)
    assert isinstance(info.value, TokengeoError)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.fixture(scope="module")
def tiny_bert():
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=32, max_position_embeddings=16,
    )
    return transformers.BertModel(config).eval()


LAPLACIANIZE_CASES = [
    ({"n_laplacian": -1}, "n_laplacian=-1 must be >= 0"),
    ({"n_laplacian": 1.5}, "n_laplacian=1.5 must be an int"),
    ({"n_laplacian": True}, "n_laplacian=True must be a"),
    ({"n_laplacian": 99}, "n_laplacian=99 exceeds n_heads=4"),
    ({}, "pass exactly one of n_laplacian"),
    ({"heads": "0"}, "heads='0' must be a dict"),
    ({"heads": {0: [99]}}, "99"),
    ({"heads": {99: [0]}}, "99"),
    ({"heads": {0: [1, 1]}}, "lists a head twice"),
    ({"n_laplacian": 1, "kind": "quadratic"}, "kind='quadratic' is not valid"),
    ({"n_laplacian": 1, "mixed_init": "x"}, "mixed_init='x' is not valid"),
    ({"n_laplacian": 1, "heads": {0: [1]}}, "not both"),
    ({"n_laplacian": "2"}, "n_laplacian='2' must be an int"),
    ({"heads": {0: [1.5]}}, "head index=1.5 must be an int"),
    ({"heads": {-1: [0]}}, "layer index=-1 is out of range"),
    ({"n_laplacian": 1, "kind": 3}, "kind=3 is not valid"),
]


@pytest.mark.parametrize("kwargs, message", LAPLACIANIZE_CASES,
                         ids=[str(k) for k, _ in LAPLACIANIZE_CASES])
def test_laplacianize_refuses(tiny_bert, kwargs, message):
    from tokengeo.models.hf import laplacian_heads, laplacianize

    with pytest.raises(ConfigError) as info:
        laplacianize(tiny_bert, **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert laplacian_heads(tiny_bert) == {}  # a refusal leaves the model as it was


@pytest.mark.parametrize("model, name", [(torch.nn.Linear(2, 2), "Linear"), (None, "NoneType"),
                                         ("bert", "str")])
def test_laplacianize_refuses_a_model_that_is_not_hugging_face(model, name):
    from tokengeo.models.hf import laplacianize

    with pytest.raises(ConfigError, match=f"laplacianize does not support {name}"):
        laplacianize(model, n_laplacian=1)


def test_the_table_is_big_enough():
    n = (len(FLAG_CASES) + len(SET_CASES) + len(CONFIG_CASES) + len(DATA_CASES)
         + len(CSV_CASES) + len(CREATE_CASES) + len(LOAD_CASES) + len(LAPLACIANIZE_CASES))
    assert n >= 150


def test_a_constant_channel_among_varying_ones_normalises_to_zero():
    """Only images with no variation at all are refused; one flat channel (e.g. an empty
    blue channel) is kept and normalises to 0 instead of 0/0 = nan."""
    from tokengeo.data.bundles import ImageClassificationData, ImageSplit

    x = torch.randint(0, 255, (6, 3, 4, 4), dtype=torch.uint8)
    x[:, 2] = 7
    split = ImageSplit(x, torch.arange(6) % 2)
    data = ImageClassificationData("rgb", split, split, split, 2, ["a", "b"], (3, 4, 4))
    out = data.normalize(x)
    assert torch.isfinite(out).all() and (out[:, 2] == 0).all()
    assert out[:, 0].std() > 0.5
