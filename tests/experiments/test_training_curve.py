"""A training cell's learning curve (the trainer's callback) and smoothing rows, on a real
tiny run (slow: two evaluations of the test split per point on a loaded machine): the
points land at the asked steps, the last one is the run's final evaluation; and the
recorder's file keeps the points before a resume."""

import json

import pytest

from tokengeo.experiments.training import CurveRecorder, train_cell

CONFIG = {"model": "vit-tiny", "data": "digits", "steps": 6, "batch_size": 16, "lr": 1e-3,
          "warmup": 1, "eval_every": 0, "n_laplacian": 1,
          "model_overrides": {"patch_size": 4, "d_model": 16, "n_layers": 2, "n_heads": 2}}


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    run = tmp_path_factory.mktemp("curve") / "run"
    return run, train_cell(str(run), CONFIG, geometry="classification", geometry_examples=40,
                           smoothing_examples=8, curve_every=2)


@pytest.mark.slow
def test_curve_points_at_every_asked_step_and_the_end(cell):
    run, out = cell
    assert [p["step"] for p in out["curve"]] == [2, 4, 6]
    assert all(p["metrics"]["examples"] == 40 for p in out["curve"])  # geometry_examples
    assert set(out["curve"][0]["metrics"]) == set(out["final"]["test"])
    assert out["final"]["test"]["examples"] > 40  # the final evaluation: the whole split
    assert "nc1" in out["curve"][0]["geometry"] and "layers" not in out["curve"][0]["geometry"]
    assert json.loads((run / "curve.json").read_text()) == out["curve"]


@pytest.mark.slow
def test_smoothing_rows_of_every_head(cell):
    _, out = cell
    rows = out["smoothing"]
    assert [(r["layer"], r["head"], r["kind"]) for r in rows] == [
        (0, 0, "attention"), (0, 1, "laplacian"), (1, 0, "attention"), (1, 1, "laplacian")]
    assert all(isinstance(r["variance_derivative"], float) for r in rows)


class _Trainer:
    """What CurveRecorder reads of a trainer: its step, evaluate(split), model and task."""

    def __init__(self, step):
        self.step, self.model, self.task = step, None, None

    def evaluate(self, split, max_examples=0):
        return {"accuracy": self.step / 10}


def test_recorder_keeps_points_before_a_resume_and_replaces_later_ones(tmp_path):
    recorder = CurveRecorder(tmp_path, None, "test", 10)
    for step in (2, 4, 6):
        recorder(_Trainer(step))
    # resumed from the checkpoint at step 4: step 6 is recorded again, 2 and 4 are kept
    again = CurveRecorder(tmp_path, None, "test", 10)
    again(_Trainer(6))
    points = again.finish(_Trainer(8), None)
    assert [p["step"] for p in points] == [2, 4, 6, 8]
    assert [p["metrics"]["accuracy"] for p in points] == [0.2, 0.4, 0.6, 0.8]
