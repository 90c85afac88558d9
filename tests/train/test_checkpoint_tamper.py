"""Checkpoints that cannot lie: an edited or corrupt checkpoint is refused, files untouched.

Every case resumes a copy of one finished run (checkpoints at steps 2 and 4). Edits are made
twice: as a user would (the sidecar digest no longer matches) and re-signed (the digest
recomputed), which reaches the field-type and value checks behind the digest.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tokengeo.cli import main
from tokengeo.data.samplers import EpochBatchSampler, RandomWindowSampler
from tokengeo.errors import CheckpointError
from tokengeo.train import checkpoint as ckpt
from tokengeo.train import sidecar as sc
from tokengeo.train.trainer import SIDECAR_FIELDS, Trainer

SRC = Path(__file__).resolve().parents[2] / "src"
TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "32",
        "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1",
        "--set", "warmup=1", "--set", "eval_batches=1", "--quiet"]
RUN = [*TINY, "--steps", "4", "--checkpoint-every", "2", "--eval-every", "0"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("CI", "1")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """An uninterrupted run: checkpoints step-2 and step-4 (kept: the last 2)."""
    out = tmp_path_factory.mktemp("base") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        os.environ["CI"] = "1"
        assert main(["train", *RUN, "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert [p.name for p in ckpt.list_checkpoints(out / "checkpoints")] == [
        "step-00000002", "step-00000004"]
    return out


@pytest.fixture
def run(base, tmp_path) -> Path:
    return Path(shutil.copytree(base, tmp_path / "run"))


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def edit(run: Path, change, *, step: int = 4, resign: bool = False) -> None:
    file = run / "checkpoints" / f"step-{step:08d}" / "state.json"
    state = json.loads(file.read_text())
    change(state)
    if resign:
        state["digest"] = sc.digest(state)
    file.write_text(json.dumps(state, indent=1))


def refused(run: Path, capsys, *args: str) -> str:
    """Resume ``run``: exit 2, one line, and not a byte of the run changed."""
    before = tree(run)
    assert main(["train", "--resume", "--out", str(run), "--quiet", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tokengeo train: error: checkpoint ")
    assert tree(run) == before
    return err[0]


def same_result(a: Path, b: Path) -> None:
    """Same final metrics and bit-identical weights and optimizer state at the last step."""
    final = [json.loads((d / "summary.json").read_text())["final"] for d in (a, b)]
    assert final[0] == final[1]
    for name in (ckpt.MODEL_FILE, ckpt.OPTIM_FILE):
        files = [(d / "checkpoints" / "step-00000004" / name).read_bytes() for d in (a, b)]
        assert files[0] == files[1], name


def _set(path: str, value):
    """A change setting the dotted ``path`` of the sidecar (list indices as integers)."""
    *parents, leaf = [int(k) if k.isdigit() else k for k in path.split(".")]

    def change(state):
        node = state
        for key in parents:
            node = node[key]
        node[leaf] = value(node[leaf]) if callable(value) else value
    return change


EDITS = {  # name -> (change, message once re-signed)
    "step": (_set("step", 3), "records step 3 but lies in step-00000004"),
    "step type": (_set("step", "4"), "state.json is malformed: step must be an integer >= 0"),
    "sampler position": (_set("sampler.position", lambda p: p + 1), "has sampler state"),
    "sampler epoch type": (_set("sampler.epoch", "0"), "sampler.epoch must be an integer or"),
    "optimizer lr": (_set("optimizer.param_groups.0.lr", 0.5), "group 0 has lr=0.5 but"),
    "optimizer weight_decay": (_set("optimizer.param_groups.1.weight_decay", 0.1),
                               "group 1 has weight_decay=0.1 but this run has weight_decay=0.0"),
    "optimizer betas": (_set("optimizer.param_groups.0.betas", [0.8, 0.99]), "betas=[0.8, 0.99]"),
    "optimizer eps": (_set("optimizer.param_groups.0.eps", "x"), "has eps='x' but this run"),
    "optimizer params type": (_set("optimizer.param_groups.0.params", ["a"]),
                              "optimizer.param_groups[0].params[0] must be an integer >= 0"),
    "optimizer scalars type": (_set("optimizer.scalars", {"0": {"step": {}}}),
                               "optimizer.scalars.0.step must be a finite number, not {}"),
    "added field": (_set("extra", 1), "unknown fields ['extra']"),
    "removed field": (lambda s: s.pop("wall_s"), "missing fields ['wall_s']"),
    "wall_s type": (_set("wall_s", "x"), "wall_s must be a finite number, not 'x'"),
    "aliases type": (_set("aliases", []), "aliases must be an object, not []"),
    "sha256 type": (_set("sha256", "abc"), "sha256 must be an object"),
    "rng states": (_set("rng", []), "holds 0 RNG states for 1 processes"),
    "world size": (_set("world_size", 2), "written by 2 processes, this run has 1"),
    "schedule": (_set("schedule.steps", 5), "checkpoint schedule"),
    "config": (_set("config.seed", 7), "seed: 7 -> 0"),
    "model": (_set("model.name", "gpt-tiny"), "holds model 'gpt-tiny'"),
    "format": (_set("format", "x"), "is not a tokengeo-checkpoint/2 sidecar"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_edited_sidecar_is_refused_by_its_digest(run, capsys, name):
    change, _ = EDITS[name]
    edit(run, change)
    line = refused(run, capsys)
    if name != "format":
        assert "step-00000004/state.json is corrupt or was edited" in line
    assert "the last good checkpoint is" in line and "--resume-from 2" in line


@pytest.mark.parametrize("name", sorted(EDITS))
def test_edited_and_resigned_sidecar_is_refused_by_its_checks(run, capsys, name):
    change, message = EDITS[name]
    edit(run, change, resign=True)
    line = refused(run, capsys)
    assert message in line
    assert "step-00000004" in line


def test_corrupt_latest_names_the_last_good_and_resume_from_continues(run, base, capsys,
                                                                      monkeypatch):
    weights = run / "checkpoints" / "step-00000004" / ckpt.MODEL_FILE
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    line = refused(run, capsys)
    assert f"checkpoint {run}/checkpoints/step-00000004 is corrupt: model.safetensors" in line
    assert (f"the last good checkpoint is {run}/checkpoints/step-00000002: continue from it "
            "with --resume-from 2") in line
    with monkeypatch.context() as m:  # continue from step 2, interrupted at once
        m.setattr(Trainer, "train_step", lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
        assert main(["train", "--resume-from", "2", "--out", str(run), "--quiet"]) == 130
    kept = [p.name for p in ckpt.list_checkpoints(run / "checkpoints")]
    assert kept == ["step-00000002"]  # the later (corrupt) one is gone, so --resume works
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 0
    same_result(base, run)
    strip = [[{k: v for k, v in json.loads(line).items() if k not in ("wall_s", "throughput")}
              for line in (d / "metrics.jsonl").read_text().splitlines()] for d in (base, run)]
    assert strip[0] == strip[1]


def test_resume_from_a_missing_step_or_with_no_good_checkpoint(run, capsys):
    before = tree(run)
    assert main(["train", "--resume-from", "3", "--out", str(run), "--quiet"]) == 2
    line = capsys.readouterr().err.strip()
    assert "--resume-from 3:" in line and "it has steps [2, 4]" in line
    assert tree(run) == before
    for step in (2, 4):
        edit(run, _set("wall_s", 1.0), step=step)
    assert "no earlier checkpoint is intact" in refused(run, capsys)


def test_load_checkpoint_refuses_an_edited_sidecar_from_python(run):
    path = run / "checkpoints" / "step-00000002"
    ckpt.load_checkpoint(path, SIDECAR_FIELDS)
    edit(run, _set("sampler.position", 0), step=2)
    with pytest.raises(CheckpointError, match="does not match its recorded digest"):
        ckpt.load_checkpoint(path)


@pytest.mark.parametrize("n, batch, drop_last", [(10, 3, True), (10, 3, False), (9, 3, False),
                                                 (5, 5, True), (7, 2, False)])
def test_sampler_state_after_matches_drawing(n, batch, drop_last):
    sampler = EpochBatchSampler(n, batch, seed=1, drop_last=drop_last)
    windows = RandomWindowSampler(50, batch, seed=1)
    for steps in range(3 * n):
        assert sampler.state_dict() == sampler.state_after(steps)
        assert windows.state_dict() == windows.state_after(steps)
        next(sampler), next(windows)


def test_sigkill_during_a_checkpoint_write_then_resume_is_bit_identical(base, tmp_path):
    """A real process killed while writing its step-4 checkpoint: its lock does not block,
    the partial checkpoint is dropped, and the resumed run equals the uninterrupted one."""
    out = tmp_path / "killed"
    script = textwrap.dedent(f"""
        import os, signal, torch
        torch.set_num_threads(1)
        from tokengeo.train import checkpoint as ckpt
        from tokengeo.cli import main
        real, calls = ckpt.save_file, []
        def save_file(tensors, path):
            calls.append(path)
            real(tensors, path)
            if len(calls) == 3:  # step 4: model written, optimizer not yet
                os.kill(os.getpid(), signal.SIGKILL)
        ckpt.save_file = save_file
        main(["train", *{RUN!r}, "--out", {str(out)!r}])
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC), "CI": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=300)
    assert done.returncode == -signal.SIGKILL
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names[0].startswith(".tmp-step-00000004-") and names[1:] == ["step-00000002"]
    assert main(["train", "--resume", "--out", str(out), "--quiet"]) == 0
    same_result(base, out)
