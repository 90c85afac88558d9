"""`tokengeo probe RUN_DIR`: geometry of a trained run, read-only on the run."""

import json

import pytest

from tokengeo.cli import main
from tokengeo.train import TrainConfig, train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "vit"
    cfg = TrainConfig(model="vit-tiny", data="digits", steps=2, batch_size=16, warmup=1,
                      eval_every=0, final_eval_batches=1, n_laplacian=1, out=str(out),
                      model_overrides={"n_layers": 1, "patch_size": 2})
    train(cfg, progress=False)
    return out


def test_probe_writes_geometry_and_leaves_the_run_alone(run_dir, capsys):
    metrics_before = (run_dir / "metrics.jsonl").read_text()
    assert main(["probe", str(run_dir), "--examples", "40"]) == 0
    result = json.loads((run_dir / "probe.json").read_text())
    geo = result["geometry"]
    assert result["split"] == "test" and result["step"] == 2
    assert geo["n_examples"] == 40
    assert 0 <= geo["within_sequence_share"] <= 1 and 0 <= geo["between_class_share"] <= 1
    assert 1 <= geo["components_99"] <= 64
    assert (run_dir / "metrics.jsonl").read_text() == metrics_before
    assert "components_99" in capsys.readouterr().out


def test_probe_bad_input_exits_2_with_one_line(tmp_path, run_dir, capsys):
    assert main(["probe", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a tokengeo run directory" in err and "\n" not in err
    assert main(["probe", str(run_dir), "--split", "train"]) == 2
    assert "not an evaluation split" in capsys.readouterr().err
