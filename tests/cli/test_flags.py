"""One name per shared flag across commands; an unknown flag is one line (exit 2); --help
shows defaults; train --loggers / --overwrite / --threads /
--compile; an interrupted flow leaves no flow.partial.json."""

from __future__ import annotations

import json

import pytest
import torch

from tokengeo.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "16", "--steps", "2",
        "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1",
        "--set", "warmup=0", "--set", "eval_every=0", "--set", "final_eval_batches=1",
        "--quiet"]


@pytest.fixture(autouse=True)
def _no_bars(monkeypatch):
    monkeypatch.setenv("CI", "1")


@pytest.mark.parametrize("resume", [False, True])
def test_reproduces_torchrun_command_is_one_train_accepts(tmp_path, resume):
    """The multi-GPU cells of reproduce start ``tokengeo train`` under torchrun; its flags
    must be train's (it passed ``--no-progress``, which train answered with exit 2)."""
    from tokengeo.cli import build_parser_for
    from tokengeo.experiments.training import torchrun_command

    cmd = torchrun_command(tmp_path / "c.toml", tmp_path / "run", 2, resume)
    argv = cmd[cmd.index("tokengeo") + 1:]
    args = build_parser_for(argv).parse_args(argv)
    assert args.quiet and args.resume == resume and args.out == str(tmp_path / "run")


@pytest.mark.parametrize("argv, old", [
    (["train", "--no-progress"], "--no-progress"),
    (["flow", "--preset", "s2-ou", "--no-plots"], "--no-plots"),
    (["view", "--run", "somewhere", "--out", "v.html"], "--run"),
])
def test_an_unknown_flag_is_one_line(argv, old, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and old in err[0], err


@pytest.mark.parametrize("command, flags", [
    ("train", ["--quiet", "--threads", "--overwrite", "--loggers", "--compile", "--device"]),
    ("flow", ["--quiet", "--threads", "--overwrite", "--no-figures", "--device"]),
    ("similarity", ["--quiet", "--threads", "--overwrite", "--no-figures", "--device"]),
    ("probe", ["--threads", "--device"]),
    ("view", ["--threads", "--report", "--device", "--colour"]),
])
def test_each_command_has_the_shared_names(command, flags, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    for flag in flags:
        assert f"{flag} " in text or f"{flag}\n" in text or f"{flag}," in text, (command, flag)


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "optimiser updates (default: 1000)" in text
    assert "(default: vit-tiny)" in text and "(default: auto)" in text
    with pytest.raises(SystemExit):
        main(["similarity", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "windows per forward pass (default: 32)" in text
    assert "(default: minilm)" in text


def test_flow_help_states_the_cost_of_each_preset(capsys):
    from tokengeo.commands.flow import cost
    from tokengeo.flows.presets import PRESETS

    with pytest.raises(SystemExit):
        main(["flow", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    s2 = PRESETS["s2-ou"]
    # 4000 steps x 10 paths x (1 + 10 + 100) heads x 200^2 pairs
    assert cost(s2) == 4000 * 10 * 111 * 200**2
    assert f"s2-ou: 4000 steps x 10 paths x H in {{1, 10, 100}} x 200^2 pairs = " \
           f"{cost(s2):.1e} pair updates" in text


def test_train_loggers_overwrite_and_threads(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--loggers", "csv", "--threads", "1", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["loggers"] == ["csv"] and config["compile"] is False
    assert torch.get_num_threads() == 1
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(out)]) == 2  # a previous run is there
    assert "pass --resume to continue it, --overwrite to replace it" in capsys.readouterr().err
    assert main(["train", *TINY, "--overwrite", "--steps", "3", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["steps"] == 3
    assert main(["train", "--resume", "--overwrite", "--out", str(out)]) == 2
    assert "give one" in capsys.readouterr().err


@pytest.mark.slow  # torch.compile's first step compiles the model (tens of seconds)
def test_train_compile_gives_the_same_first_loss(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["train", *TINY, "--out", str(a)]) == 0
    assert main(["train", *TINY, "--compile", "--out", str(b)]) == 0
    rows = [[json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            for run in (a, b)]
    first = [next(r["loss"] for r in rs if "loss" in r) for rs in rows]
    assert abs(first[0] - first[1]) < 1e-4 * max(1.0, abs(first[0]))
    assert json.loads((b / "config.json").read_text())["compile"] is True


def test_interrupted_flow_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    import tokengeo.flows.scaling as scaling

    real = scaling.run_h_scaling
    out = tmp_path / "flow"
    seen = []

    def interrupted(*args, on_run=None, **kwargs):
        def then_stop(run):
            on_run(run)
            seen.append((out / "flow.partial.json").is_file())  # written while running
            raise KeyboardInterrupt
        return real(*args, on_run=then_stop, **kwargs)

    monkeypatch.setattr(scaling, "run_h_scaling", interrupted)
    argv = ["flow", "--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--record-every", "1",
            "--n-paths", "2", "--scaling-heads", "1,2", "--no-figures", "--quiet",
            "--out", str(out)]
    assert main(argv) == 130
    assert seen == [True]
    assert capsys.readouterr().err.strip().endswith("tokengeo flow: interrupted")
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert "flow.partial.json" not in left and "flow.json" not in left
    assert not [n for n in left if n.startswith(".tmp")], left


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU machine")
def test_view_device_cuda_without_cuda_is_one_line(tmp_path, capsys):
    assert main(["view", "--model", "minilm", "--text", "a b", "--device", "cuda",
                 "--out", str(tmp_path / "v.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch sees no CUDA device; use --device cpu" in err[0], err


@pytest.mark.parametrize("command", ["similarity", "probe", "flow", "view"])
def test_device_flag_shows_its_choices_and_default(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--device {auto,cpu,cuda}" in text, command
    after = text[text.rindex("--device {auto,cpu,cuda}"):]  # the option, not the usage
    assert "(default: auto)" in after[:300], after[:300]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU machine")
@pytest.mark.usefixtures("no_heavy_work")
@pytest.mark.parametrize("argv", [
    ["similarity", "--corpus", "shakespeare", "--samples", "2", "--seq-len", "16"],
    ["flow", "--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--n-paths", "1",
     "--scaling-heads", "none", "--record-every", "1", "--quiet"],
])
def test_device_cuda_without_cuda_is_one_line_before_anything_is_written(argv, tmp_path,
                                                                           capsys):
    out = tmp_path / "out"
    assert main([*argv, "--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch sees no CUDA device; use --device cpu" in err[0], err
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU machine")
def test_probe_device_cuda_without_cuda_is_one_line(tmp_path, capsys, monkeypatch):
    import tokengeo.train.loading as loading

    def fail(*a, **k):
        raise AssertionError("the run was loaded before --device was refused")

    monkeypatch.setattr(loading, "load_run", fail)
    run = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    before = sorted(p.name for p in run.iterdir())
    capsys.readouterr()
    assert main(["probe", str(run), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch sees no CUDA device; use --device cpu" in err[0], err
    assert sorted(p.name for p in run.iterdir()) == before  # no probe.json


def test_probe_and_flow_on_the_cpu_device_record_it(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    assert main(["probe", str(run), "--examples", "8", "--device", "cpu"]) == 0
    assert json.loads((run / "probe.json").read_text())["split"] == "test"
    out = tmp_path / "flow"
    assert main(["flow", "--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--n-paths", "1",
                 "--scaling-heads", "none", "--record-every", "1", "--heads", "2", "--no-figures", "--quiet",
                 "--device", "cpu", "--out", str(out)]) == 0
    assert json.loads((out / "flow.json").read_text())["device"] == "cpu"


def test_view_colour_choices_and_a_bad_exclusion_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["view", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--colour {log,linear,row}" in text and "--colour-exclude J,..." in text
    out = tmp_path / "v.html"
    assert main(["view", "--model", "minilm", "--text", "a b", "--colour-exclude", "first",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--colour-exclude 'first' must be comma-separated" in err[0], err
    assert not out.exists()
