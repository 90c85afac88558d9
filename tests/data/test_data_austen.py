"""Jane Austen's novels: the R lazy-load reader on a database written here (R's XDR
serialisation, built byte by byte), the split by novel, clear errors on missing or corrupt
files, the registry entries, and the installed package behind ``require_source``."""

import gzip
import struct
import zlib

import pytest

from tokengeo.data import austen, list_datasets, load_dataset
from tokengeo.data.registry import check_options, dataset_info
from tokengeo.errors import ConfigError, DataNotFoundError

pytest.importorskip("rdata", reason="rdata is not installed: pip install rdata")
pytestmark = pytest.mark.usefixtures("private_cache")

# R serialisation (format 2, XDR): a header, then items "flags [length] payload"; the low
# byte of flags is the SEXP type, 0x200 = has attributes, 0x400 = has a tag, bits 12+ the
# "levels" (8 = UTF-8 for a CHARSXP). R Internals, "Serialization Formats".
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, STRSXP, VECSXP, NILVALUE = 1, 2, 9, 10, 13, 16, 19, 254


def _i(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def _chars(s: str | None) -> bytes:
    if s is None:  # NA_STRING
        return _i(CHARSXP, -1)
    raw = s.encode("utf-8")
    return _i(CHARSXP | (8 << 12), len(raw)) + raw


def _strings(items) -> bytes:
    return _i(STRSXP, len(items)) + b"".join(_chars(s) for s in items)


def _named_list(items: dict[str, bytes]) -> bytes:
    names = _i(LISTSXP | 0x400) + _i(SYMSXP) + _chars("names") + _strings(list(items))
    return _i(VECSXP | 0x200, len(items)) + b"".join(items.values()) + names + _i(NILVALUE)


def _serialise(item: bytes) -> bytes:
    return b"X\n" + _i(2, 4 * 65536 + 2 * 256 + 1, 2 * 65536 + 3 * 256) + item


NOVEL_LINES = {n: [n.upper(), "", f"Chapter 1 of {n}: Émile's line.", None, "The end."]
               for n in austen.NOVELS}
NOVEL_LINES["persuasion"].append("Only in the validation novel.")


def write_database(folder, lines=NOVEL_LINES, compressed: bytes | None = None):
    """``folder/Rdata.{rdb,rdx}`` as R's lazy-load database holds character vectors."""
    rdb, index = b"", {}
    for name, novel in lines.items():
        raw = _serialise(_strings(novel))
        blob = struct.pack(">I", len(raw)) + zlib.compress(raw)
        index[name] = _i(INTSXP, 2, len(rdb), len(blob))
        rdb += blob
    flag = compressed if compressed is not None else _i(LGLSXP, 1, 1)
    rdx = _serialise(_named_list({"variables": _named_list(index),
                                  "references": _i(VECSXP, 0), "compressed": flag}))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Rdata.rdb").write_bytes(rdb)
    (folder / "Rdata.rdx").write_bytes(gzip.compress(rdx))
    return folder


@pytest.fixture
def fake(tmp_path):
    return write_database(tmp_path / "db")


def test_reads_every_novel_line_by_line(fake):
    novels = austen.read_novels(str(fake))
    assert list(novels) == list(austen.NOVELS)
    for name, text in novels.items():  # NA lines read as empty ones
        assert text.split("\n") == ["" if s is None else s for s in NOVEL_LINES[name]]


def test_split_by_novel_keeps_the_validation_novel_out_of_training(fake):
    lm = austen.load_austen("char", root=str(fake))
    assert lm.kind == "language-modeling" and lm.name == "austen-char"
    assert lm.val_documents == ["persuasion"] and "persuasion" not in lm.train_documents
    assert len(lm.train_documents) == 5
    train = lm.tokenizer.decode(lm.train_tokens.tolist())
    val = lm.tokenizer.decode(lm.val_tokens.tolist())
    assert "Only in the validation novel." in val and "validation novel" not in train
    assert "EMMA" in train and "EMMA" not in val
    assert lm.val_characters == len(val)


def test_bpe_is_trained_on_the_training_novels_only(fake):
    lm = austen.load_austen("bpe", root=str(fake), bpe_vocab_size=300,
                            val_novels=("emma", "persuasion"))
    assert lm.val_documents == ["emma", "persuasion"]
    text = lm.tokenizer.decode(lm.val_tokens.tolist())
    assert "Only in the validation novel." in text  # byte-level: any text round-trips
    assert lm.vocab_size <= 300


@pytest.mark.parametrize("val_novels, match", [
    (("hamlet",), "not novels"),
    ((), "1 to 5"),
    (austen.NOVELS, "1 to 5"),
])
def test_bad_validation_novels_are_refused(fake, val_novels, match):
    with pytest.raises(ConfigError, match=match):
        austen.load_austen("char", root=str(fake), val_novels=val_novels)


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_missing_folder_names_the_install_command(tmp_path):
    with pytest.raises(DataNotFoundError) as exc:
        austen.read_novels(str(tmp_path / "nowhere"))
    assert "scripts/install_austen.sh" in _one_line(exc)


@pytest.mark.parametrize("damage", ["truncated rdb", "bad gzip", "bad zlib", "no novel",
                                    "xz compression"])
def test_corrupt_database_is_refused_in_one_line(tmp_path, damage):
    folder = tmp_path / "db"
    if damage == "no novel":
        write_database(folder, {n: v for n, v in NOVEL_LINES.items() if n != "emma"})
    elif damage == "xz compression":
        write_database(folder, compressed=_i(INTSXP, 1, 3))
    else:
        write_database(folder)
    rdb, rdx = folder / "Rdata.rdb", folder / "Rdata.rdx"
    if damage == "truncated rdb":
        rdb.write_bytes(rdb.read_bytes()[:-10])
    elif damage == "bad gzip":
        rdx.write_bytes(b"not gzip at all")
    elif damage == "bad zlib":
        data = bytearray(rdb.read_bytes())
        data[6:40] = b"\x00" * 34  # inside the first novel's zlib stream
        rdb.write_bytes(bytes(data))
    with pytest.raises(DataNotFoundError) as exc:
        austen.read_novels(str(folder))
    msg = _one_line(exc)
    assert "is corrupt" in msg and "install_austen.sh" in msg


def test_registered_by_tokenizer_with_their_options(fake, monkeypatch):
    assert {"austen", "austen-bpe", "austen-char", "austen-gpt2"} <= set(
        list_datasets("language-modeling"))
    info = dataset_info("austen-bpe")
    assert info.fixed == {"tokenizer": "bpe"} and "val_novels" in info.options()
    with pytest.raises(ConfigError, match="val_novels"):
        check_options(info, {"val_novels": "persuasion"})  # a string, not a list
    monkeypatch.setenv(austen.AUSTEN.env, str(fake))
    lm = load_dataset("austen-char", val_novels=["emma"])
    assert lm.val_documents == ["emma"]


@pytest.fixture(scope="module")
def installed(require_source):
    require_source(austen.AUSTEN)
    return austen.read_novels()


@pytest.mark.slow
def test_installed_package_holds_the_six_novels(installed):
    assert sum(map(len, installed.values())) == 4_025_022
    assert "It is a truth universally acknowledged" in installed["prideprejudice"]
    assert installed["persuasion"].startswith("Persuasion")
