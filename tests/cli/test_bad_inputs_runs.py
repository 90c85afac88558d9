"""Bad input around a run: the --out rule, run-folder files, suite settings as a whole, inputs at
the door, connect timeouts, environment errors and signals.

Every CLI case runs ``tokengeo.cli.main`` in-process and asserts: the exit status, exactly
one line on stderr that names the offending value or file, no traceback, and every file of
the user's (everything the case set up) unchanged byte for byte, links included. Heavy work
(a simulation, a model analysis, a suite's cells) is replaced by a function that fails the
test, so a refusal that comes late fails too.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from tokengeo.cli import main
from tokengeo.errors import Terminated
from tokengeo.outmarker import MARKER, write_marker
from tokengeo.runlock import LOCK_NAME

pytestmark = pytest.mark.usefixtures("one_thread")

BUILTIN_SUITES = Path(__file__).parents[2] / "src" / "tokengeo" / "experiments" / "suites"
TINY_FLOW = ["--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--record-every", "1",
             "--n-paths", "2", "--scaling-heads", "none", "--no-figures", "--quiet"]


# --------------------------------------------------------------------------- snapshots

def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: file bytes, link targets, folder marks, FIFO marks."""
    found: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                found[rel] = ("link", os.readlink(p))
            elif stat.S_ISFIFO(p.lstat().st_mode):
                found[rel] = "fifo"
            elif p.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = p.read_bytes()
    return found


def last_line(capsys, command: str) -> str:
    """The one line of tokengeo's own on stderr (progress lines of the run aside)."""
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tokengeo")]
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def one_line(capsys, command: str) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert err[0].startswith(f"tokengeo {command}: "), err
    assert "Traceback" not in err[0]
    return err[0]


# --------------------------------------------------------------------------- --out states

def _notes(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("my notes\n")


def _named_like(name: str):
    def setup(out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("the user's own file\n")
    return setup


def _own_plus(command: str, extra: str):
    def setup(out: Path) -> None:
        out.mkdir(parents=True)
        write_marker(out, command)
        (out / extra).parent.mkdir(parents=True, exist_ok=True)
        (out / extra).write_text("added by the user\n")
    return setup


def _other_marker(other: str):
    def setup(out: Path) -> None:
        out.mkdir(parents=True)
        write_marker(out, other)
        (out / "data.bin").write_bytes(b"\x00\x01")
    return setup


def _broken_marker(text: str):
    def setup(out: Path) -> None:
        out.mkdir(parents=True)
        (out / MARKER).write_text(text)
        (out / "notes.txt").write_text("mine\n")
    return setup


def _fifo_marker(out: Path) -> None:
    out.mkdir(parents=True)
    os.mkfifo(out / MARKER)
    (out / "notes.txt").write_text("mine\n")


def _lock_link(out: Path) -> None:
    out.mkdir(parents=True)
    victim = out.parent / "precious.txt"
    victim.write_text("a file the lock must never truncate\n")
    os.symlink(victim, out / LOCK_NAME)


def _lock_fifo(out: Path) -> None:
    out.mkdir(parents=True)
    os.mkfifo(out / LOCK_NAME)


def _out_link_to_file(out: Path) -> None:
    victim = out.parent / "precious.txt"
    victim.write_text("keep\n")
    os.symlink(victim, out)


def _folder_link_inside(command: str, name: str):
    def setup(out: Path) -> None:
        elsewhere = out.parent / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "keep.txt").write_text("keep\n")
        out.mkdir(parents=True)
        write_marker(out, command)
        os.symlink(elsewhere, out / name)
    return setup


def _file_link_inside(command: str):
    def setup(out: Path) -> None:
        victim = out.parent / "precious.txt"
        victim.write_text("a logger or a figure must never write through a link into this\n")
        out.mkdir(parents=True)
        write_marker(out, command)
        os.symlink(victim, out / OWN_NAME[command])
    return setup


def _own_nested_user(command: str):
    def setup(out: Path) -> None:
        out.mkdir(parents=True)
        write_marker(out, command)
        (out / "mine").mkdir()
        (out / "mine" / "draft.tex").write_text("deep in my folder\n")
    return setup


COMMAND_ARGS = {
    "flow": (["flow", *TINY_FLOW], []),
    "similarity": (["similarity", "--corpus", "{corpus}", "--no-figures"], []),
    "reproduce": (["reproduce", "--jobs", "1", "--only", "flows"], []),
    "train": (["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
               "--quiet"], []),
}
# an output file name each command writes, to stand for a user's file of the same name
OWN_NAME = {"flow": "flow.json", "similarity": "similarity.json", "reproduce": "report.md",
            "train": "config.json"}
OVERWRITE = {"flow": ["--overwrite"], "similarity": ["--overwrite"], "reproduce": [],
             "train": ["--resume"]}

OUT_STATES = {
    # state: (setup(out, command), needle in the line, extra flags)
    "user-file": (lambda c: _notes, "notes.txt", False),
    "user-file-named-like-output": (lambda c: _named_like(OWN_NAME[c]), None, False),
    "user-file-with-overwrite": (lambda c: _notes, "notes.txt", True),
    "other-command-marker": (lambda c: _other_marker("similarity" if c != "similarity"
                                                     else "flow"), "the output of", True),
    "own-marker-plus-user-file": (lambda c: _own_plus(c, "notes.txt"), "'notes.txt'", True),
    "own-marker-plus-nested-user-file": (lambda c: _own_nested_user(c), "mine/draft.tex", True),
    "marker-not-json": (lambda c: _broken_marker("{oops"), "notes.txt", True),
    "marker-a-list": (lambda c: _broken_marker("[]"), "notes.txt", True),
    "marker-command-not-text": (lambda c: _broken_marker('{"command": 3}'), "notes.txt", True),
    "marker-a-fifo": (lambda c: _fifo_marker, "notes.txt", True),
    "lock-a-symlink": (lambda c: _lock_link, LOCK_NAME, False),
    "lock-a-fifo": (lambda c: _lock_fifo, LOCK_NAME, False),
    "out-a-link-to-a-file": (lambda c: _out_link_to_file, "out", False),
    "folder-link-inside": (lambda c: _folder_link_inside(c, "figures"), "figures", True),
    "file-link-inside": (lambda c: _file_link_inside(c), None, True),
}
OUT_CASES = [pytest.param(command, state, id=f"{command}-{state}")
             for command in COMMAND_ARGS for state in OUT_STATES]


@pytest.mark.parametrize("command,state", OUT_CASES)
def test_out_rule_never_touches_a_users_file(tmp_path, capsys, monkeypatch, no_heavy_work,
                                            command, state):
    maker, needle, resume_or_overwrite = OUT_STATES[state]
    if state in ("user-file-named-like-output", "file-link-inside"):
        needle = OWN_NAME[command]
    out = tmp_path / "out"
    maker(command)(out)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence. Another one.\n")
    args = [a.format(corpus=corpus) for a in COMMAND_ARGS[command][0]]
    if resume_or_overwrite:
        args += OVERWRITE[command]
    before = snapshot(tmp_path)
    code = main([*args, "--out", str(out)])
    line = one_line(capsys, command)
    assert code == 2, line
    # train --resume first looks for the run's config.json: refused there, naming it
    resumed = command == "train" and resume_or_overwrite and "nothing to resume" in line
    assert needle in line or resumed, line
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- suite settings

def _suite_copy(tmp: Path, name: str, edit) -> Path:
    cfg = tmp / "cfg"
    shutil.copytree(BUILTIN_SUITES, cfg, ignore=shutil.ignore_patterns("*.py", "__*"))
    path = cfg / f"{name}.toml"
    text = path.read_text()
    for old, new in edit:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return cfg


IMG, LANG, DINO, RETRO, LT, FLOWS = ("laplacian-images", "laplacian-language", "dino",
                                     "retrofit", "ltransformer", "flows")
SETTINGS_CASES = [
    # (suite, mode, edits, needle)
    (IMG, "quick", [("seeds = [0, 1, 2]", "seeds = [0, 1, 1]")], "repeats 1"),
    (IMG, "full", [("seeds = [0, 1, 2, 3]", "seeds = [3, 3]")], "repeats 3"),
    (LANG, "quick", [("seeds = [0, 1, 2]", "seeds = [2, 2, 2]")], "repeats 2"),
    (LANG, "full", [("seeds = [0, 1, 2, 3, 4, 5]\nks = [0, 2, 4]",
                      "seeds = [0, 1, 0, 3, 4, 5]\nks = [0, 2, 4]")],
     "repeats 0"),
    (DINO, "quick", [("seeds = [0, 1]", "seeds = [1, 1]")], "repeats 1"),
    (DINO, "full", [("seeds = [0, 1, 2]", "seeds = [3, 3]")], "repeats 3"),
    (LT, "quick", [("seeds = [0, 1, 2]", "seeds = [0, 0, 2]")], "repeats 0"),
    (RETRO, "quick", [("seeds = [0, 1]", "seeds = [5, 5]")], "repeats 5"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 2, 5]")], "k = 5"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 2, 40]")], "k = 40"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 1, 9]")], "k = 9"),
    (LANG, "quick", [("ks = [0, 2, 4]", "ks = [0, 6]")], "k = 6"),
    (DINO, "quick", [("ks = [0, 3]", "ks = [0, 5]")], "k = 5"),
    (RETRO, "quick", [("k = 3", "k = 10")], "k = 10"),
    (RETRO, "quick", [("last_layers = [1, 3, 10]", "last_layers = [1, 31]")], "L = 31"),
    (RETRO, "quick", [("last_layers = [1, 3, 10]", "last_layers = [3, 3]")], "repeats 3"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [2, 4]")], "ks = [2, 4]"),
    (LANG, "quick", [("ks = [0, 2, 4]", "ks = [0]")], "ks = [0]"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 2, 2]")], "repeats 2"),
    (LANG, "quick", [("ks = [0, 2, 4]", "ks = [0, 4, 4]")], "repeats 4"),
    (DINO, "quick", [("ks = [0, 3]", "ks = [3, 3]")], "repeats 3"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 1, 4]")], "lacks k = 2"),
    (IMG, "quick", [("ks = [0, 2, 4]", "ks = [0, 1, 2]")], "lacks k = 4"),
    (DINO, "quick", [("patch_size = 7, d_model = 32", "patch_size = 7, d_model = 32, n_heads = 2")],
     "k = 3"),
    (DINO, "quick", [("n_seg_train = 2000", "n_seg_train = 2")], "n_seg_train = 2"),
    (FLOWS, "quick", [("heads = [1, 4, 16]", "heads = [4]")], "heads = [4]"),
    (FLOWS, "full", [("heads = [1, 2, 4, 8, 10, 16, 32, 100]", "heads = [10, 10]")], "repeats 10"),
    (FLOWS, "quick", [("figure_heads = 4", "figure_heads = 2")], "figure_heads = 2"),
    (FLOWS, "full", [("figure_heads = 10", "figure_heads = 1000")], "figure_heads = 1000"),
    (IMG, "quick", [("model_overrides = { patch_size = 2, d_model = 32 }",
                     "model_overrides = { patch_size = 2, d_model = 32, n_heads = 2 }")],
     "k = 4"),
]


@pytest.mark.parametrize("suite,mode,edits,needle", SETTINGS_CASES,
                         ids=[f"{s}-{m}-{i}" for i, (s, m, _, _) in enumerate(SETTINGS_CASES)])
def test_suite_settings_checked_as_a_whole(tmp_path, capsys, monkeypatch, suite, mode, edits,
                                           needle):
    import tokengeo.experiments.reproduce as rp

    def cells_never(*a, **k):
        raise AssertionError("cells computed")

    monkeypatch.setattr(rp, "compute_cells", cells_never)
    cfg = _suite_copy(tmp_path, suite, edits)
    before = snapshot(tmp_path)
    code = main(["reproduce", f"--{mode}", "--only", suite, "--config-dir", str(cfg),
                 "--jobs", "1", "--out", str(tmp_path / "out")])
    line = one_line(capsys, "reproduce")
    assert code == 2 and needle in line and f"{suite}.toml" in line, line
    assert snapshot(tmp_path) == before  # nothing written, not even --out


def test_valid_full_dino_settings_reach_the_cells(tmp_path, monkeypatch):
    import tokengeo.experiments.reproduce as rp

    reached = []

    def cells(*a, **k):
        reached.append(True)
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "compute_cells", cells)
    cfg = _suite_copy(tmp_path, DINO, [])
    code = main(["reproduce", "--full", "--only", DINO, "--config-dir", str(cfg),
                 "--jobs", "1", "--out", str(tmp_path / "out")])
    assert reached == [True] and code == 130


@pytest.mark.parametrize("only", ["flows,flows", "flows, flows", "dino,flows,dino",
                                  "similarity,similarity"])
def test_only_names_each_suite_once(tmp_path, capsys, no_heavy_work, only):
    before = snapshot(tmp_path)
    assert main(["reproduce", "--only", only, "--jobs", "1", "--out",
                 str(tmp_path / "out")]) == 2
    line = one_line(capsys, "reproduce")
    assert "twice" in line and only.split(",")[-1].strip() in line
    assert snapshot(tmp_path) == before


def _hf_folder(tmp: Path, config, tokenizer: bool = True) -> Path:
    folder = tmp / "model"
    folder.mkdir()
    if config == "fifo":
        os.mkfifo(folder / "config.json")
    else:
        (folder / "config.json").write_text(config if isinstance(config, str)
                                            else json.dumps(config))
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
    return folder


HF_RETROFIT_CASES = [
    ({"num_attention_heads": 2}, "k = 3", True),
    ({"num_attention_heads": "9"}, "num_attention_heads = '9'", True),
    ({"num_attention_heads": 0}, "num_attention_heads = 0", True),
    ("[1, 2, 3]", "hold a JSON object", True),
    ("{not json", "not valid JSON", True),
    ("fifo", "unknown Hugging Face model", True),  # not a config file: never opened
    ({"num_attention_heads": 9}, "no tokenizer", False),
]


@pytest.mark.parametrize("config,needle,tokenizer", HF_RETROFIT_CASES,
                         ids=["heads-2", "heads-str", "heads-0", "list", "not-json", "fifo",
                              "no-tokenizer"])
def test_hf_model_heads_known_before_weights(tmp_path, capsys, no_heavy_work, config, needle,
                                             tokenizer):
    folder = _hf_folder(tmp_path, config, tokenizer)
    cfg = _suite_copy(tmp_path, RETRO, [('model = "hf:smollm2-135m"', f'model = "hf:{folder}"')])
    before = snapshot(tmp_path)
    assert main(["reproduce", "--quick", "--only", RETRO, "--config-dir", str(cfg),
                 "--jobs", "1", "--out", str(tmp_path / "out")]) == 2
    line = one_line(capsys, "reproduce")
    assert needle in line, line
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- train: hf: and data

def _corpus(tmp: Path) -> Path:
    p = tmp / "corpus.txt"
    p.write_text("to be or not to be, that is the question.\n" * 20)
    return p


TRAIN_HF_CASES = [
    ({"num_attention_heads": 2}, ["--n-laplacian", "3"], "n_laplacian=3", True),
    ({"num_attention_heads": 4}, ["--n-laplacian", "9"], "n_laplacian=9", True),
    ("[]", [], "must hold a JSON object", True),
    ("null", [], "must hold a JSON object", True),
    ("{", [], "not valid JSON", True),
    ("fifo", [], "unknown Hugging Face model", True),  # not a config file: never opened
    ({"num_attention_heads": 4}, [], "no tokenizer", False),
    ({"num_attention_heads": "9"}, [], "num_attention_heads = '9'", True),
    ({"num_attention_heads": 4, "vocab_size": -3}, [], "vocab_size = -3", True),
    ({"num_attention_heads": 4, "max_position_embeddings": 1.5}, [],
     "max_position_embeddings = 1.5", True),
]


@pytest.mark.parametrize("config,extra,needle,tokenizer", TRAIN_HF_CASES,
                         ids=["k3-of-2", "k9-of-4", "list", "null", "not-json", "fifo",
                              "no-tokenizer", "heads-str", "vocab-negative",
                              "positions-float"])
def test_train_hf_folder_refused_before_weights(tmp_path, capsys, config, extra, needle,
                                                tokenizer):
    folder = _hf_folder(tmp_path, config, tokenizer)
    corpus = _corpus(tmp_path)
    before = snapshot(tmp_path)
    code = main(["train", "--model", f"hf:{folder}", "--data", str(corpus), "--steps", "1",
                 "--quiet", *extra, "--out", str(tmp_path / "run")])
    line = one_line(capsys, "train")
    assert code == 2 and needle in line, line
    assert snapshot(tmp_path) == before


def _text_folder(tmp: Path, bad: str) -> Path:
    folder = tmp / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("plain text, enough of it to train on.\n" * 10)
    if bad == "binary":
        (folder / "b.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    elif bad == "binary-md":
        (folder / "notes.md").write_bytes(b"PK\x03\x04\x00\x00" * 20)
    elif bad == "nul-in-utf8":
        (folder / "c.txt").write_bytes("caf\u00e9\x00".encode())
    elif bad == "fifo":
        os.mkfifo(folder / "pipe.txt")
    return folder


@pytest.mark.parametrize("bad,needle", [("binary", "b.txt"), ("binary-md", "notes.md"),
                                        ("nul-in-utf8", "c.txt")])
def test_text_folder_refuses_binary_files_and_fifos(tmp_path, capsys, bad, needle):
    folder = _text_folder(tmp_path, bad)
    before = snapshot(tmp_path)
    code = main(["train", "--model", "gpt-tiny", "--data", str(folder), "--steps", "1",
                 "--quiet", "--out", str(tmp_path / "run")])
    line = one_line(capsys, "train")
    assert code == 2 and needle in line, line
    assert snapshot(tmp_path) == before


def test_a_fifo_named_like_text_is_refused_not_waited_on(tmp_path):
    from tokengeo.data.user import read_text
    from tokengeo.errors import ConfigError

    os.mkfifo(tmp_path / "pipe.txt")
    with pytest.raises(ConfigError, match="pipe.txt.*not a regular file"):
        read_text(tmp_path / "pipe.txt")


def _npz(tmp: Path, kind: str) -> Path:
    p = tmp / "data.npz"
    x = np.zeros((6, 8, 8), np.uint8)
    y = np.array([0, 1, 0, 1, 0, 1])
    if kind == "names-short":
        np.savez(p, x=x, y=np.array([0, 1, 2, 0, 1, 2]), class_names=np.array(["a", "b"]))
    elif kind == "names-2d":
        np.savez(p, x=x, y=y, class_names=np.array([["a", "b"]]))
    elif kind == "labels-negative":
        np.savez(p, x=x, y=np.array([-1, 0, 1, 0, 1, 0]), class_names=np.array(["a", "b"]))
    elif kind == "string-labels-count":
        np.savez(p, x=x, y=np.array(["u", "v", "w", "u", "v", "w"]),
                 class_names=np.array(["a", "b"]))
    else:  # a header declaring an absurd shape, or more data than stored
        np.savez(p, x=x, y=y)
        import zipfile

        member = "x.npy" if kind.startswith("x-") else "y.npy"
        with zipfile.ZipFile(p) as zf:
            parts = {n: zf.read(n) for n in zf.namelist()}
        raw = parts[member]
        header_len = int.from_bytes(raw[8:10], "little")
        header = raw[10:10 + header_len].decode("latin1")
        shape = "(6, 8, 8)" if member == "x.npy" else "(6,)"
        new = "(1000000000000, 8, 8)" if kind.endswith("absurd") else (
            "(60, 8, 8)" if member == "x.npy" else "(60,)")
        header = header.replace(shape, new).rstrip("\n").rstrip()
        header = header + " " * (header_len - 1 - len(header)) + "\n"
        assert len(header) == header_len
        parts[member] = raw[:10] + header.encode("latin1") + raw[10 + header_len:]
        p.unlink()
        with zipfile.ZipFile(p, "w") as zf:
            for n, b in parts.items():
                zf.writestr(n, b)
    return p


@pytest.mark.parametrize("kind,needle", [
    ("x-absurd", "x.npy declares shape (1000000000000, 8, 8)"),
    ("y-absurd", "y.npy declares shape"),
    ("x-short", "x.npy declares shape (60, 8, 8)"),
    ("y-short", "y.npy declares shape (60,)"),
    ("names-short", "labels run from 0 to 2 but class_names has 2 names"),
    ("names-2d", "class_names must be 1-D"),
    ("labels-negative", "labels run from -1"),
    ("string-labels-count", "3 distinct labels but class_names has 2 names"),
])
def test_npz_refused_at_the_door(tmp_path, capsys, kind, needle):
    p = _npz(tmp_path, kind)
    before = snapshot(tmp_path)
    code = main(["train", "--model", "vit-tiny", "--data", str(p), "--steps", "1",
                 "--quiet", "--out", str(tmp_path / "run")])
    line = one_line(capsys, "train")
    assert code == 2 and needle in line, line
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- timeouts

@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9"])
def test_reproduce_connect_timeout_range(tmp_path, capsys, no_heavy_work, value):
    before = snapshot(tmp_path)
    assert main(["reproduce", "--only", "flows", "--connect-timeout", value,
                 "--out", str(tmp_path / "out")]) == 2
    line = one_line(capsys, "reproduce")
    assert f"--connect-timeout {float(value)!r}" in line and "(0, 86400]" in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["reproduce", "train"])
@pytest.mark.parametrize("value", ["abc", "", "30s"])
def test_connect_timeout_not_a_number(tmp_path, capsys, command, value):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--connect-timeout", value, "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2
    line = one_line(capsys, command)
    assert f"--connect-timeout: invalid float value: {value!r}" in line
    assert snapshot(tmp_path) == {}


def test_train_connect_timeout_range(tmp_path, capsys, monkeypatch):
    for var, val in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0",
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(var, val)
    before = snapshot(tmp_path)
    code = main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
                 "--quiet", "--device", "cpu", "--connect-timeout", "-5",
                 "--out", str(tmp_path / "run")])
    line = one_line(capsys, "train")
    assert code == 2 and "--connect-timeout -5.0" in line
    assert snapshot(tmp_path) == before


def test_ray_address_that_answers_nothing_is_refused_within_the_timeout(tmp_path, capsys,
                                                                        monkeypatch):
    pytest.importorskip("ray", reason="needs the 'cluster' extra")
    import socket
    import time

    from tokengeo.errors import ConfigError
    from tokengeo.experiments.executors import probe_address

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=f"127.0.0.1:{port}.*no Ray cluster answers"):
        probe_address(f"127.0.0.1:{port}", 2.0, "--ray-address")
    assert time.monotonic() - t0 < 10


# --------------------------------------------------------------------------- environment errors

ENV_ERRORS = [(errno.ENOSPC, "No space left on device"), (errno.EFBIG, "File too large"),
              (errno.EDQUOT, "Disk quota exceeded"), (errno.EACCES, "Permission denied"),
              (errno.EROFS, "Read-only file system"), (errno.EPERM, "Operation not permitted")]


@pytest.mark.parametrize("code,text", ENV_ERRORS, ids=[errno.errorcode[c] for c, _ in ENV_ERRORS])
def test_disk_full_and_permission_errors_are_one_line_naming_the_path(tmp_path, capsys,
                                                                      monkeypatch, code, text):
    import tokengeo.commands.flow as flow_cmd

    target = tmp_path / "out" / "flow.json"

    def failing_write(path, *a, **k):
        raise OSError(code, text, str(target))

    monkeypatch.setattr(flow_cmd, "write_json", failing_write)
    (tmp_path / "mine.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    assert main(["flow", *TINY_FLOW, "--out", str(tmp_path / "out")]) == 2
    line = last_line(capsys, "flow")
    assert str(target) in line and text in line
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("out")} == before


@pytest.mark.parametrize("exc,code,word", [(KeyboardInterrupt, 130, "interrupted"),
                                           (Terminated, 143, "terminated")])
def test_interrupt_and_sigterm_are_one_line(tmp_path, capsys, monkeypatch, exc, code, word):
    import tokengeo.commands.flow as flow_cmd

    def stop(*a, **k):
        raise exc()

    monkeypatch.setattr(flow_cmd, "run_h_scaling", stop, raising=False)
    import tokengeo.flows.scaling as scaling

    monkeypatch.setattr(scaling, "run_h_scaling", stop)
    assert main(["flow", *TINY_FLOW, "--out", str(tmp_path / "out")]) == code
    assert last_line(capsys, "flow") == f"tokengeo flow: {word}"


def test_only_rank_0_prints_under_torchrun(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    assert main(["flow", "--preset", "s2-ou", "--T=-1", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert main(["flow", "--preset", "s2-ou", "--T=-1", "--out", str(tmp_path / "o")]) == 2
    assert "T=-1" in one_line(capsys, "flow")


# --------------------------------------------------------------------------- readable results

def test_written_files_follow_umask_022(tmp_path):
    """A tiny training run: checkpoints (safetensors), sidecars, config, metrics: 0644."""
    old = os.umask(0o022)
    try:
        assert main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
                     "--batch-size", "8", "--set", "model_overrides.d_model=32",
                     "--set", "model_overrides.n_layers=1", "--set", "warmup=1",
                     "--set", "eval_batches=1", "--quiet",
                     "--out", str(tmp_path / "run")]) == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.suffix == ".safetensors" for p in files)
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    for p in [tmp_path / "run", *[d for d in (tmp_path / "run").rglob("*") if d.is_dir()]]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o755, p


# --------------------------------------------------------------------------- resume reads

RESUME_CASES = {
    "config-a-list": ("config.json", "[1, 2]", "must hold a JSON object"),
    "config-not-json": ("config.json", "{", "not valid JSON"),
    "config-a-number": ("config.json", "3", "must hold a JSON object"),
    "config-a-fifo": ("config.json", "fifo", "nothing to resume"),  # never opened
}


@pytest.mark.parametrize("case", list(RESUME_CASES))
def test_resume_reads_are_checked(tmp_path, capsys, case):
    name, content, needle = RESUME_CASES[case]
    run = tmp_path / "run"
    run.mkdir()
    write_marker(run, "train")
    if content == "fifo":
        os.mkfifo(run / name)
    else:
        (run / name).write_text(content)
    before = snapshot(tmp_path)
    code = main(["train", "--resume", "--out", str(run)])
    line = one_line(capsys, "train")
    assert code == 2 and needle in line and name in line, line
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- cached cells

CELL_CALLS: list[int] = []


def _cell_fn(seed: int) -> dict:
    CELL_CALLS.append(seed)
    return {"final": {"test": {"accuracy": 0.5 + seed / 10, "loss": float("nan")}},
            "t": [0.0, 0.5, 1.0], "G2": [[1.0, 0.5, 0.2], [1.0, 0.4, 0.1]],
            "wall_time_s": 1.5, "warnings": [], "figures": []}


def _schema_cells(settings, ctx):
    from tokengeo.experiments.cells import Cell

    return [Cell("fake", f"s{seed}", _cell_fn, {"seed": seed},
                 fields=("final", "t", "G2", "wall_time_s", "warnings"))
            for seed in range(2)]


def _schema_summary(settings, results, ctx):
    from tokengeo.experiments.report import SuiteOutput

    for r in results.values():  # what a suite does with the numbers
        float(r.value["final"]["test"]["accuracy"]) + r.value["wall_time_s"]
        sum(r.value["t"]) + sum(sum(row) for row in r.value["G2"])
    return SuiteOutput("fake", "Fake suite", "Fake et al.", [])


@pytest.fixture
def schema_suite(fake_suite):
    return fake_suite(_schema_cells, _schema_summary, "[quick]\n")


def _set(path: str, value):
    def edit(v: dict) -> None:
        *parents, last = path.split(".")
        node = v
        for p in parents:
            node = node[p]
        node[last] = value
    return edit


CELL_EDITS = {
    "number-to-string": (_set("final.test.accuracy", "0.9"), "'0.9'"),
    "number-to-list": (_set("wall_time_s", [1.5]), "'wall_time_s'"),
    "number-to-bool": (_set("wall_time_s", True), "'wall_time_s'"),
    "number-to-infinity": (_set("final.test.accuracy", float("inf")), "inf"),
    "series-with-a-string": (_set("t", [0.0, "0.5", 1.0]), "'t'"),
    "series-ragged": (_set("G2", [[1.0, 0.5], [1.0]]), "'G2'"),
    "series-a-number": (_set("G2", 3.0), "'G2'"),
    "series-of-dicts": (_set("t", [{"a": 1}]), "'t'"),
    "tree-a-string": (_set("final", "broken"), "'final'"),
    "strings-holding-a-number": (_set("warnings", [1]), "'warnings'"),
}


@pytest.mark.parametrize("edit", list(CELL_EDITS))
def test_a_cell_failing_its_schema_is_recomputed_with_one_warning(tmp_path, schema_suite,
                                                                  edit):
    import tokengeo.experiments.reproduce as rp

    out = tmp_path / "out"
    cfg = rp.ReproduceConfig(out=out, config_dir=schema_suite)
    rp.reproduce(cfg, log=lambda m: None)
    (cell,) = (out / "cells" / "fake").glob("s1-*.json")
    data = json.loads(cell.read_text())
    change, needle = CELL_EDITS[edit]
    change(data["value"])
    cell.write_text(json.dumps(data))
    CELL_CALLS.clear()
    logs: list[str] = []
    rp.reproduce(cfg, log=logs.append)
    assert CELL_CALLS == [1]  # only the damaged cell
    warnings = [m for m in logs if "recomputing" in m]
    assert len(warnings) == 1 and needle in warnings[0] and cell.name in warnings[0], warnings


def test_a_valid_cell_with_nan_is_trusted(tmp_path, schema_suite):
    import tokengeo.experiments.reproduce as rp

    cfg = rp.ReproduceConfig(out=tmp_path / "out", config_dir=schema_suite)
    rp.reproduce(cfg, log=lambda m: None)
    CELL_CALLS.clear()
    logs: list[str] = []
    rp.reproduce(cfg, log=logs.append)
    assert CELL_CALLS == [] and not [m for m in logs if "recomputing" in m]


@pytest.mark.slow
def test_torchrun_rendezvous_gives_up_after_connect_timeout(tmp_path, capsys, monkeypatch):
    """Rank 0 of 2 whose partner never comes: one line within the timeout, nothing written."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for var, val in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0",
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(var, val)
    before = snapshot(tmp_path)
    t0 = time.monotonic()
    code = main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
                 "--quiet", "--device", "cpu", "--connect-timeout", "2",
                 "--out", str(tmp_path / "run")])
    line = one_line(capsys, "train")
    assert code == 2 and f"127.0.0.1:{port} within 2 s" in line, line
    assert time.monotonic() - t0 < 60
    assert snapshot(tmp_path) == before
