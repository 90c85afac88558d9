"""One door each: devices, output folders, TOML; one ownership rule; every check before work.

Each table is a class of hostile or mistaken input; every case fails on the code before the
doors (a second decider of devices, an overwrite that removed the old output first, an
unbounded TOML read, a ``probe.json`` written over a user's file, a late or multi-line
refusal).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokengeo.cli import COMMANDS, build_parser_for, main
from tokengeo.errors import ConfigError
from tokengeo.outmarker import MARKER, write_marker

SRC = Path(__file__).parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
TINY_FLOW = ["--preset", "s2-oscillating", "--T", "0.02", "--dt", "0.01", "--n-paths", "1",
             "--heads", "2", "--scaling-heads", "none", "--record-every", "1", "--no-figures",
             "--quiet", "--threads", "1"]


def one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tokengeo {command}: error: "), err
    return err[0]


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(root.rglob("*"))}


def actions(command: str):
    """The argparse actions of ``tokengeo COMMAND``."""
    parser = build_parser_for([command])
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command]._actions


# --------------------------------------------------------------------------- devices

COMPUTING = ("train", "bench", "flow", "similarity", "probe", "view", "reproduce")


@pytest.mark.parametrize("command", COMPUTING)
def test_every_command_takes_the_same_device_choices(command):
    from tokengeo.devices import DEFAULT, DEVICES

    device = next(a for a in actions(command) if "--device" in a.option_strings)
    assert tuple(device.choices) == DEVICES
    if command == "train":  # None: a config file's device holds, else TrainConfig's
        from tokengeo.train.config import TrainConfig

        assert device.default is None and TrainConfig().device == DEFAULT
    else:
        assert device.default == DEFAULT


@pytest.mark.parametrize("command,extra", [
    ("train", ["--model", "vit-tiny", "--data", "digits"]), ("bench", ["laplacian"]),
    ("flow", TINY_FLOW), ("probe", ["RUN"]), ("reproduce", ["--dry-run"]),
])
@pytest.mark.parametrize("device", ["gpu", "cuda:0", "CPU", ""])
def test_a_device_outside_the_choices_is_one_line(tmp_path, capsys, monkeypatch, command,
                                                  extra, device):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([command, *extra, "--device", device])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device" in err[0] and "invalid choice" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_one_module_decides_auto_for_every_caller(monkeypatch):
    """Every ``auto -> cuda`` goes through tokengeo.devices: making it see a GPU moves
    the commands, DDP's device and reproduce's placement together."""
    import torch

    from tokengeo import devices
    from tokengeo.commands.flags import resolve_device
    from tokengeo.experiments.placement import DeviceConfig, visible_gpus
    from tokengeo.train.distributed import resolve_device as ddp_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(devices, "visible_count", lambda: 2)
    assert visible_gpus() == ["0", "1"]  # what reproduce's workers share
    monkeypatch.setattr(devices, "visible_count", lambda: 1)
    assert resolve_device("auto") == "cuda"
    assert ddp_device("auto", 0) == torch.device("cuda", 0)
    assert DeviceConfig("auto").kind(1) == "cuda"
    monkeypatch.setattr(devices, "visible_count", lambda: 0)
    assert resolve_device("auto") == "cpu" and ddp_device("auto") == torch.device("cpu")
    assert visible_gpus() == []
    for decide in (lambda: resolve_device("cuda"), lambda: ddp_device("cuda"),
                   lambda: DeviceConfig("cuda").kind(0)):
        with pytest.raises(ConfigError, match="no CUDA device"):
            decide()


@pytest.mark.parametrize("device,gpus,lenient,expected", [
    ("auto", 0, False, "cpu"), ("auto", 3, False, "cuda"), ("cpu", 2, False, "cpu"),
    ("cuda", 1, False, "cuda"), ("cuda", 0, True, "cuda"), (None, 0, False, "cpu"),
])
def test_the_device_rule(device, gpus, lenient, expected):
    from tokengeo.devices import kind

    assert kind(device, gpus, lenient=lenient) == expected


@pytest.mark.parametrize("device", ["cuda:1", "gpu", 0, 1.5, "Auto"])
def test_the_device_rule_refuses_names_outside_the_choices(device):
    from tokengeo.devices import check

    with pytest.raises(ConfigError, match="not a device"):
        check(device)


# --------------------------------------------------------------------------- output folders

def test_output_folder_builds_an_overwrite_beside_the_old_one(tmp_path):
    from tokengeo.outfolder import output_folder

    out = tmp_path / "out"
    with output_folder(out, "flow") as work:
        assert work == out and (out / MARKER).is_file()
        (work / "flow.json").write_text("old")
    with output_folder(out, "flow", overwrite=True) as work:
        assert work != out and work.parent == out.parent
        (work / "flow.json").write_text("new")
        assert (out / "flow.json").read_text() == "old"  # untouched until complete
    assert (out / "flow.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "flow.json"]


@pytest.mark.parametrize("error", [KeyboardInterrupt, ConfigError, OSError, RuntimeError])
def test_an_overwrite_that_fails_keeps_the_previous_output(tmp_path, error):
    from tokengeo.outfolder import output_folder

    out = tmp_path / "out"
    with output_folder(out, "similarity") as work:
        (work / "similarity.json").write_text("previous")
    before = snapshot(tmp_path)
    with pytest.raises(error):
        with output_folder(out, "similarity", overwrite=True) as work:
            (work / "similarity.json").write_text("half")
            raise error("stopped")
    assert snapshot(tmp_path) == before


def test_a_file_the_user_adds_during_an_overwrite_stops_the_swap(tmp_path):
    from tokengeo.outfolder import output_folder

    out = tmp_path / "out"
    with output_folder(out, "flow") as work:
        (work / "flow.json").write_text("old")
    with pytest.raises(ConfigError, match="notes.txt"):
        with output_folder(out, "flow", overwrite=True) as work:
            (work / "flow.json").write_text("new")
            (out / "notes.txt").write_text("mine")
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "flow.json").read_text() == "old"


def test_a_refused_new_output_leaves_no_folder(tmp_path):
    from tokengeo.outfolder import output_folder

    out = tmp_path / "a" / "b"
    with pytest.raises(ConfigError):
        with output_folder(out, "flow"):
            raise ConfigError("bad data")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, ConfigError])
def test_flow_overwrite_interrupted_in_process_keeps_the_previous_run(tmp_path, capsys,
                                                                     monkeypatch, error):
    import tokengeo.commands.flow as flow_cmd

    out = tmp_path / "flow"
    assert main(["flow", *TINY_FLOW, "--out", str(out)]) == 0
    before = snapshot(tmp_path)

    def stopped(*a, **k):
        raise error("stopped")

    monkeypatch.setattr(flow_cmd, "_simulate_all", stopped)
    assert main(["flow", *TINY_FLOW, "--out", str(out), "--overwrite"]) in (2, 130)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("error", [KeyboardInterrupt, ConfigError])
def test_train_overwrite_interrupted_keeps_the_previous_run(tmp_path, capsys, monkeypatch,
                                                            error):
    import tokengeo.train.trainer as trainer

    out = tmp_path / "run"
    out.mkdir()
    write_marker(out, "train")
    for name, text in [("config.json", "{}"), ("metrics.jsonl", "{}\n"),
                       ("summary.json", "{}"), ("checkpoints/step-1/model.safetensors", "w")]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = snapshot(tmp_path)

    def stopped(cfg, **k):
        (Path(k["root"]) / "metrics.jsonl").write_text("half")  # it got this far
        raise error("stopped")

    monkeypatch.setattr(trainer, "train", stopped)
    rc = main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
               "--out", str(out), "--overwrite"])
    assert rc in (2, 130)
    assert snapshot(tmp_path) == before


def _interrupt_flow_overwrite(out: Path) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokengeo", "flow", "--preset", "s2-ou", "--T", "100", "--dt",
         "0.005", "--n-paths", "4", "--scaling-heads", "1,2", "--heads", "2", "--no-figures",
         "--threads", "1", "--out", str(out), "--overwrite"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, deadline = b"", time.monotonic() + 120
    os.set_blocking(proc.stderr.fileno(), False)
    try:
        while b"simulating" not in seen:
            assert proc.poll() is None, seen.decode()
            assert time.monotonic() < deadline, seen.decode()
            seen += proc.stderr.read() or b""
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        os.set_blocking(proc.stderr.fileno(), True)
        rest = proc.stderr.read()
        return proc.wait(timeout=60), (seen + rest).decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_during_flow_overwrite_keeps_the_previous_output(tmp_path):
    out = tmp_path / "flow"
    assert main(["flow", *TINY_FLOW, "--out", str(out)]) == 0
    before = snapshot(tmp_path)
    rc, err = _interrupt_flow_overwrite(out)
    assert rc == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "tokengeo flow: interrupted"
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- a second Ctrl-C

SECOND_SIGINT = """
import os, signal, sys
import tokengeo.cli as cli
import tokengeo.commands.flow as flow_cmd

def first(*a, **k):
    raise KeyboardInterrupt
flow_cmd.run = first
say = cli._say
def say_twice(command, text):  # a second Ctrl-C arrives while the message is written
    os.kill(os.getpid(), signal.SIGINT)
    say(command, text)
cli._say = say_twice
sys.exit(cli.main(["flow", "--preset", "s2-ou", "--out", sys.argv[1]]))
"""


def test_a_second_ctrl_c_during_the_interrupted_message_is_no_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-c", SECOND_SIGINT, str(tmp_path / "out")],
                          env=ENV, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "tokengeo flow: interrupted"


# --------------------------------------------------------------------------- TOML

def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


TOML_CASES = {
    "a FIFO": lambda p: _fifo(p),
    "a folder": lambda p: p.mkdir() or p,
    "over the bound": lambda p: _write(p, b"# pad\n" * 400_000 + b"steps = 0\n"),
    "not UTF-8": lambda p: _write(p, b'model = "\xff\xfe"\n'),
    "not TOML": lambda p: _write(p, b"model = \n"),
    "a link to a FIFO": lambda p: p.symlink_to(_fifo(p.with_name("fifo"))) or p,
}


@pytest.mark.parametrize("case", list(TOML_CASES))
def test_train_config_toml_is_read_bounded_and_refused_in_one_line(tmp_path, capsys, case):
    path = TOML_CASES[case](tmp_path / "cfg.toml")
    t0 = time.monotonic()
    assert main(["train", str(path), "--out", str(tmp_path / "run")]) == 2
    assert time.monotonic() - t0 < 30  # a FIFO never blocks
    line = one_line(capsys, "train")
    assert "cfg.toml" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("case", list(TOML_CASES))
def test_suite_toml_is_read_by_the_same_reader(tmp_path, case):
    from tokengeo.experiments.reproduce import load_settings

    folder = tmp_path / "cfg"
    folder.mkdir()
    TOML_CASES[case](folder / "flows.toml")
    with pytest.raises(ConfigError, match="flows.toml"):
        load_settings(folder, "flows", "quick")


# --------------------------------------------------------------------------- probe.json

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from tokengeo.train import TrainConfig, train

    out = tmp_path_factory.mktemp("runs") / "vit"
    cfg = TrainConfig(model="vit-tiny", data="digits", steps=2, batch_size=16, warmup=1,
                      eval_every=0, final_eval_batches=1, n_laplacian=1, out=str(out),
                      model_overrides={"n_layers": 1, "patch_size": 2})
    train(cfg, progress=False)
    return out


def _no_model(monkeypatch):
    import tokengeo.train.loading as loading

    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(loading, "load_run", refuse)


PROBE_JSON = {
    "a user's own file": lambda p: p.write_text('{"mine": 1}'),
    "a folder": lambda p: p.mkdir(),
    "a link": lambda p: p.symlink_to(p.with_name("elsewhere.json")),
    "a FIFO": lambda p: os.mkfifo(p),
    "an edited copy of ours": None,  # set up in the test
}


@pytest.mark.parametrize("case", list(PROBE_JSON))
def test_probe_never_replaces_what_it_did_not_write(run_dir, tmp_path, capsys, monkeypatch,
                                                   case):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    target = run / "probe.json"
    if PROBE_JSON[case] is None:
        assert main(["probe", str(run), "--examples", "20"]) == 0
        target.write_text(target.read_text().replace("test", "tset"))
    else:
        PROBE_JSON[case](target)
    capsys.readouterr()
    before = snapshot(run)
    _no_model(monkeypatch)
    assert main(["probe", str(run), "--examples", "20"]) == 2
    line = one_line(capsys, "probe")
    assert "probe.json" in line and "free disk space" not in line
    assert snapshot(run) == before


def test_probe_replaces_its_own_output_and_train_resume_accepts_it(run_dir, tmp_path,
                                                                   capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    assert main(["probe", str(run), "--examples", "20"]) == 0
    assert main(["probe", str(run), "--examples", "30"]) == 0  # ours: replaced
    assert json.loads((run / "probe.json").read_text())["geometry"]["n_examples"] == 30
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 0
    assert json.loads((run / "summary.json").read_text())["step"] == 2
    assert (run / "probe.json").is_file()  # another command's output, kept


def test_a_users_probe_json_still_blocks_train_resume(run_dir, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "probe.json").write_text('{"mine": 1}')
    assert main(["train", "--resume", "--out", str(run)]) == 2
    assert "probe.json" in one_line(capsys, "train")


# --------------------------------------------------------------------------- checks before work

def test_view_finds_an_unwritable_output_before_the_model_runs(tmp_path, capsys,
                                                               monkeypatch):
    import errno

    import tokengeo.checks as checks
    import tokengeo.view.loading as loading

    def denied(path, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(checks.os, "mkdir", denied)
    monkeypatch.setattr(loading, "load_for_view", no_model)
    out = tmp_path / "view.html"
    assert main(["view", "--model", "minilm", "--text", "a b", "--out", str(out)]) == 2
    line = one_line(capsys, "view")
    assert str(out) in line and "free disk space" not in line and ".tmp-" not in line


@pytest.mark.parametrize("code,word", [("EACCES", "write to"), ("EPERM", "write to"),
                                       ("EROFS", "write to"), ("ENOSPC", "free disk space"),
                                       ("EDQUOT", "free disk space")])
def test_an_environment_error_names_the_users_path_and_its_own_fix(code, word):
    import errno

    from tokengeo.cli import environment_message

    number = getattr(errno, code)
    msg = environment_message(OSError(number, os.strerror(number),
                                      "/data/run/.tmp-probe.json-0a1b2c3d"))
    assert "/data/run/probe.json" in msg and ".tmp-" not in msg and word in msg
    assert ("free disk space" in msg) == (word == "free disk space")


@pytest.mark.parametrize("how", ["missing", "broken"])
def test_train_compile_without_a_working_compiler_is_refused_up_front(tmp_path, capsys,
                                                                      monkeypatch, how):
    from torch._inductor import cpp_builder, exc

    def missing():
        raise exc.InvalidCxxCompiler()

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler",
                        missing if how == "missing" else (lambda: "/bin/false"))
    out = tmp_path / "run"
    assert main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
                 "--compile", "--out", str(out)]) == 2
    assert "C++ compiler" in one_line(capsys, "train")
    assert not out.exists()


@pytest.mark.parametrize("json_path", ["", " ", "new.json/", "sub/", "{tmp}/new.json/",
                                       "{tmp}", "{tmp}/."])
def test_bench_json_must_name_a_file(tmp_path, capsys, monkeypatch, json_path):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["bench", "laplacian", "--device", "cpu", "--json",
                 json_path.format(tmp=tmp_path)]) == 2
    assert "--json" in one_line(capsys, "bench")
    assert snapshot(tmp_path) == before


GPU_SHARES = [
    ["--gpus-per-cell", "0.5"],  # local workers: no share to ask
    ["--gpus-per-cell", "0.5", "--executor", "ray", "--device", "cpu"],  # cells on the CPU
    ["--gpus-per-cell", "0.3", "--executor", "ray"],  # not 1/n
    ["--gpus-per-cell", "0", "--executor", "ray"],
]


@pytest.mark.parametrize("args", GPU_SHARES, ids=lambda a: " ".join(a))
def test_dry_run_refuses_the_gpu_shares_the_run_refuses(tmp_path, capsys, monkeypatch, args):
    from tokengeo.experiments.executors import ExecutorConfig
    from tokengeo.experiments.placement import DeviceConfig, check_devices

    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--only", "flows", "--dry-run", *args]) == 2
    dry = one_line(capsys, "reproduce").split("error: ", 1)[1]
    share = float(args[1])
    executor = ExecutorConfig("ray" if "ray" in args else "process")
    kind = "cpu" if "cpu" in args else "cuda"
    with pytest.raises(ConfigError) as real:  # what the run itself says
        check_devices(DeviceConfig("auto", share), kind, [], executor, 1)
    assert dry == str(real.value)
    assert list(tmp_path.iterdir()) == []


def test_docs_list_the_dry_run_refusals():
    text = (Path(__file__).parents[2] / "docs" / "reproduce.md").read_text()
    assert "`--dry-run` refuses the same `--gpus-per-cell` combinations" in text


# --------------------------------------------------------------------------- the CLI one types

HASH = re.compile(r"\b[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_has_help_and_no_commit_hash(command):
    import argparse

    for action in actions(command):
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{command} {name} has no help"
        assert HASH.search(action.help) is None, f"{command} {name}: {action.help}"


@pytest.mark.parametrize("command", ["train", "flow", "similarity", "reproduce", "bench"])
def test_every_long_command_takes_quiet(command):
    assert any("--quiet" in a.option_strings for a in actions(command))


def test_reproduce_seed_shifts_every_seed_and_changes_every_training_cell(tmp_path):
    from tokengeo.experiments.reproduce import ReproduceConfig, plan_suite, shift_seeds

    nested = {"seeds": [0, 1], "train": {"seed": 3, "lr": 0.1}, "preset": {"n": 2},
              "names": ["a"], "seed_note": "x"}
    assert shift_seeds(nested, 5) == {"seeds": [5, 6], "train": {"seed": 8, "lr": 0.1},
                                      "preset": {"n": 2}, "names": ["a"], "seed_note": "x"}
    assert shift_seeds(nested, 0) is nested
    base = plan_suite("laplacian-images", ReproduceConfig(out=tmp_path))
    shifted = plan_suite("laplacian-images", ReproduceConfig(out=tmp_path, seed=7))
    assert len(base.cells) == len(shifted.cells)
    assert not {c.key for c in base.cells} & {c.key for c in shifted.cells}


@pytest.mark.parametrize("seed", ["-1", "99999999999", "x"])
def test_reproduce_refuses_a_bad_seed(tmp_path, capsys, monkeypatch, seed):
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(["reproduce", "--dry-run", "--seed", seed])
    except SystemExit as exit_:  # argparse: not a number
        rc = exit_.code
    assert rc == 2
    assert "--seed" in capsys.readouterr().err


def test_dry_run_tables_cut_no_name():
    from tokengeo.experiments.dry_run import SuiteCost, render

    long = "a-suite-with-a-rather-long-name"
    reason = "its data must be supplied with --data-path CIFAR100=/some/rather/long/path"
    text = render("quick", [SuiteCost(long, cells=3, skipped=reason)], jobs=2)
    assert long in text and reason in text and "…" not in text


def test_the_similarity_table_explains_every_column(capsys):
    from tokengeo.commands.similarity import TABLE_LEGEND
    from tokengeo.probes.similarity.result import _TABLE

    explained = {line.split()[0] for line in TABLE_LEGEND.splitlines()[1:] if line.strip()}
    explained |= set(re.findall(r"\s{2,}(\w+)\s{2,}", TABLE_LEGEND))
    for column in [*_TABLE.values(), "distinct", "in_dist", "in_chance"]:
        assert column in explained, column
    with pytest.raises(SystemExit):
        main(["similarity", "--help"])
    assert "in_chance" in capsys.readouterr().out


def test_the_probe_help_explains_what_it_prints(run_dir, tmp_path, capsys):
    import shutil

    from tokengeo.commands.probe import LEGEND

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    assert main(["probe", str(run), "--examples", "20"]) == 0
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines()
               if line and not line.startswith("written")]
    assert printed
    for name in printed:
        stem = re.sub(r"_(per_image|per_sequence|interp)$", "", name)
        assert stem in LEGEND or (name.startswith("nc2_") and "nc2_*" in LEGEND), name


def test_train_final_evaluation_is_bounded_by_a_flag_and_announced(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1",
                 "--batch-size", "8", "--final-eval-batches", "2", "--set",
                 "model_overrides.n_layers=1", "--quiet", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["final_eval_batches"] == 2
    assert "final evaluation of test (at most 16 examples)" in capsys.readouterr().err


def test_an_output_built_aside_appears_whole_or_not_at_all(tmp_path):
    from tokengeo.outfolder import output_folder

    out = tmp_path / "sim"
    with pytest.raises(KeyboardInterrupt):
        with output_folder(out, "similarity", aside=True) as work:
            assert work != out
            (work / "similarity.json").write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with output_folder(out, "similarity", aside=True) as work:
        (work / "similarity.json").write_text("whole")
        assert not (out / "similarity.json").exists()
    assert (out / "similarity.json").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim"]


def test_probe_finds_an_unwritable_run_folder_before_the_model_loads(run_dir, tmp_path,
                                                                      capsys, monkeypatch):
    import errno
    import shutil

    import tokengeo.checks as checks

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)

    def denied(path, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    _no_model(monkeypatch)
    monkeypatch.setattr(checks.os, "mkdir", denied)
    assert main(["probe", str(run), "--examples", "20"]) == 2
    line = one_line(capsys, "probe")
    assert str(run / "probe.json") in line and "free disk space" not in line
    assert ".tmp-" not in line and not (run / "probe.json").exists()


def _train_folder(out: Path) -> Path:
    out.mkdir()
    write_marker(out, "train")
    (out / "config.json").write_text("{}")
    return out


def _view_page(out: Path) -> None:
    """A page and its data folder as `tokengeo view --out OUT/view.html` leaves them."""
    import hashlib

    from tokengeo.outmarker import write_file_marker

    (out / "view.html").write_text("<html></html>")
    (out / "view_files").mkdir()
    (out / "view_files" / "c0.js").write_text("data")
    digest = {k: [hashlib.sha256((out / k).read_bytes()).hexdigest()]
              for k in ("view.html", "view_files/c0.js")}
    write_file_marker(out / "view.html", "view", digest)


@pytest.mark.parametrize("tamper,blocks", [
    (None, None),  # our page, unchanged: another command's known output
    (lambda o: (o / "view.html").write_text("edited"), "view.html"),
    (lambda o: (o / "view_files" / "c1.js").write_text("mine"), "view_files/c1.js"),
    (lambda o: [p.unlink() for p in [o / "view.html", *(o / "view_files").iterdir()]],
     ".view.html.tokengeo.json"),  # a sidecar that vouches for nothing is not ours
])
def test_other_commands_files_never_block_a_run_folder(tmp_path, tamper, blocks):
    from tokengeo.outmarker import check_output

    out = _train_folder(tmp_path / "run")
    _view_page(out)
    if tamper is not None:
        tamper(out)
    if blocks is None:
        assert check_output(out, "train", resume=True) == []
        assert "view.html" in check_output(out, "train", overwrite=True, resume=False)
    else:
        with pytest.raises(ConfigError, match=re.escape(repr(blocks))):
            check_output(out, "train", resume=True)


def test_a_forged_sidecar_does_not_make_a_users_file_ours(tmp_path):
    from tokengeo.outmarker import check_output, write_file_marker

    out = _train_folder(tmp_path / "run")
    (out / "notes.txt").write_text("mine")
    write_file_marker(out / "notes.txt", "view", {"notes.txt": ["0" * 64]})
    with pytest.raises(ConfigError, match="notes.txt"):
        check_output(out, "train", resume=True)
