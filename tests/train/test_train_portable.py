"""Portable runs: no train <-> dino import circle, ``tokengeo.load_model`` without data,
a run's ``config.json`` read back as a config file."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.train import TrainConfig, Trainer, build_config
from tokengeo.train.loading import load_run
from tokengeo.train.tasks import ImageClassification, list_tasks, register_task

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "tokengeo"
TINY_VIT = {"d_model": 32, "n_layers": 1, "n_heads": 4, "mlp_ratio": 2.0}

pytestmark = pytest.mark.usefixtures("one_thread")


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` statement of ``path`` names (at any depth)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_train_never_imports_dino_and_dino_helpers_not_train():
    for path in sorted((PKG / "train").glob("*.py")):
        assert not any(m.startswith("tokengeo.dino") for m in imported_modules(path)), path
    for name in ("evaluate.py", "segmentation.py"):  # they need only the generic helpers
        mods = imported_modules(PKG / "dino" / name)
        assert not any(m.startswith("tokengeo.train") for m in mods), name
    assert "tokengeo.train.tasks" in imported_modules(PKG / "dino" / "task.py")


def test_dino_registers_into_the_task_registry():
    """Explicitly, when tokengeo.dino is imported (the CLI and the dino suite import it);
    train loads no module by name."""
    script = ("from tokengeo.train.tasks import list_tasks\n"
              "before = list_tasks()\n"
              "import tokengeo.dino\n"
              "print(before, list_tasks())")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True).stdout
    supervised = ["image-classification", "text-classification", "language-modeling"]
    assert out.strip() == f"{supervised} {[*supervised, 'dino']}"
    import tokengeo.dino  # noqa: F401 (registers dino in this process)

    assert "dino" in list_tasks()

    class Other(ImageClassification):
        name = "dino"

    with pytest.raises(ConfigError, match="task 'dino' is already registered"):
        register_task(Other)


def _train(out: Path, **kw) -> Trainer:
    base = dict(model="vit-tiny", data="digits", steps=2, batch_size=16, warmup=1,
                eval_every=0, final_eval_batches=1, n_laplacian=1, out=str(out),
                model_overrides=TINY_VIT)
    trainer = Trainer(TrainConfig(**{**base, **kw}), progress=False)
    trainer.fit()
    return trainer


@pytest.fixture(scope="module")
def vit_run(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("runs") / "vit"
    trainer = _train(out)
    x = torch.linspace(-1, 1, 64).reshape(1, 1, 8, 8)
    with torch.no_grad():
        expected = trainer.model.eval()(x)
    return out, x, expected


def test_load_model_runs_without_the_data_packages(vit_run, tmp_path):
    """A subprocess where scikit-learn (the digits data) and tokenizers cannot be imported."""
    out, x, expected = vit_run
    script = (
        "import sys, torch\n"
        "sys.modules['sklearn'] = None; sys.modules['tokenizers'] = None\n"
        "import tokengeo\n"
        f"model = tokengeo.load_model({str(out)!r})\n"
        f"x = torch.linspace(-1, 1, 64).reshape(1, 1, 8, 8)\n"
        "with torch.no_grad():\n"
        f"    torch.save(model(x), {str(tmp_path / 'y.pt')!r})\n"
        "assert not model.training and 'sklearn.datasets' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    torch.testing.assert_close(torch.load(tmp_path / "y.pt"), expected)


def test_load_run_still_gives_model_and_task(vit_run):
    out, x, expected = vit_run
    loaded = load_run(out)
    assert loaded.step == 2 and loaded.task.name == "image-classification"
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(x), expected)


def test_load_model_of_a_dino_run_is_the_trained_dino_module(tmp_path):
    options = {"out_dim": 16, "hidden_dim": 16, "bottleneck_dim": 8, "knn_bank": 50,
               "crops": {"local_size": 4, "n_local": 1}}
    trainer = _train(tmp_path / "dino", task="dino", task_options=options)
    model = tokengeo.load_model(tmp_path / "dino")
    assert type(model).__name__ == "DINO"
    for (name, a), b in zip(trainer.model.state_dict().items(),
                            model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_load_model_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(ConfigError, match="not a tokengeo run directory"):
        tokengeo.load_model(tmp_path)


def test_config_json_of_a_run_is_accepted_as_a_config_file(vit_run):
    out, _, _ = vit_run
    saved = json.loads((out / "config.json").read_text())
    again = build_config(out / "config.json")
    assert again.to_dict() == saved
    changed = build_config(out / "config.json", {"out": "elsewhere"}, ["lr=0.5"])
    assert (changed.out, changed.lr, changed.steps) == ("elsewhere", 0.5, saved["steps"])


def test_bad_json_config_file_names_the_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the run config"):
        build_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        build_config(bad)
