"""Mutation check of the hardening guards: removing any one guard makes a test fail.

Each case disables one guard (a monkeypatch applied by a tiny pytest plugin in a child
pytest) and runs the tests that stand behind it; the child must FAIL (or hang past its time
limit, which a guard against blocking opens also counts as caught). Slow: one child pytest
per guard. The no-orphans guard of worker processes is checked the same way by hand in
test_no_orphans (its workers are separate interpreters a plugin cannot patch).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RUNS = "tests/cli/test_bad_inputs_runs.py"
NOOP = "lambda *a, **k: None"
# name: (patch lines run in the child before its tests, test file, -k expression)
MUTATIONS = {
    "out rule: files the marker does not list": (
        ["import tokengeo.outmarker as m", "m._listed = lambda rel, patterns: True"],
        RUNS, "own-marker-plus-user-file"),
    "out rule: this command's marker": (
        ["import tokengeo.outmarker as m",
         "m.read_marker = lambda folder: {'command': 'flow'}"],
        RUNS, "flow-user-file-named-like-output"),
    "out rule: linked folders": (
        ["import tokengeo.outmarker as m", "m.os.path.islink = lambda p: False"],
        RUNS, "folder-link-inside"),
    "lock: O_NOFOLLOW": (
        ["import tokengeo.runlock as m", "m.NOFOLLOW = 0"], RUNS, "lock-a-symlink"),
    "lock: regular file only": (
        ["import types, tokengeo.runlock as m",
         "m.stat = types.SimpleNamespace(S_ISREG=lambda mode: True)"], RUNS, "lock-a-fifo"),
    "reads: regular file only": (
        ["import tokengeo.io as m", f"m._require_regular = {NOOP}"], RUNS, "fifo_named_like"),
    "reads: JSON top-level type": (
        ["import tokengeo.io as m", "m.isinstance = lambda v, k: True"], RUNS, "list or null"),
    "settings: cross-checks": (
        ["import tokengeo.experiments.reproduce as m", f"m.check_suite = {NOOP}"], RUNS,
        "settings_checked_as_a_whole"),
    "settings: --only once": (
        ["import tokengeo.experiments.reproduce as m", f"m.check_only = {NOOP}"], RUNS,
        "only_names_each_suite_once"),
    "cells: schema": (
        ["import tokengeo.experiments.reproduce as m", f"m.cell_value_problem = {NOOP}"], RUNS,
        "schema_is_recomputed"),
    "npz: headers before allocating": (
        ["import tokengeo.data.user as m", f"m._check_npz_headers = {NOOP}"], RUNS, "short"),
    "npz: labels and class names together": (
        ["import tokengeo.data.user as m",
         "m._named_labels = lambda y, names, p: (m._labels(y, str(p))[0], list(map(str, names)))"],
        RUNS, "npz_refused"),
    "text: binary refused": (
        ["import tokengeo.data.user as m", f"m.refuse_binary = {NOOP}"], RUNS, "binary"),
    "hf: tokenizer required": (
        ["import tokengeo.models.hf.lm as m", f"m.require_tokenizer = {NOOP}"], RUNS,
        "no-tokenizer"),
    "hf: config sizes typed": (
        ["import tokengeo.models.hf.names as m",
         "m.sizes_of = lambda cfg, where='': {size: next((cfg[k] for k in keys if k in (cfg or "
         "{})), None) for size, keys in m.SIZE_KEYS.items()}"], RUNS,
        "train_hf_folder and (heads-str or vocab or positions)"),
    "cli: disk full and permissions": (
        ["import tokengeo.cli as m", "m.ENVIRONMENT_ERRNOS = set()"], RUNS, "disk_full"),
    "cli: only rank 0 prints": (
        ["import tokengeo.cli as m", "m.os = __import__('types').SimpleNamespace("
         "environ={})"], RUNS, "rank_0"),
    "checkpoints follow the umask": (
        ["import tokengeo.train.checkpoint as m", f"m.follow_umask = {NOOP}"], RUNS,
        "umask_022"),
    "model cache: checked": (
        ["import tokengeo.models.hf.pretrained as m",
         "m.cache_problem = lambda folder, record: None if folder.is_dir() else 'missing'"],
        "tests/models/test_model_cache_trust.py", "damaged"),
    "model cache: umask": (
        ["import tokengeo.io as m", f"m.follow_umask = {NOOP}"],
        "tests/models/test_model_cache_trust.py", "umask"),
    "ray: address probed": (
        ["import tokengeo.experiments.executors as m", f"m.probe_address = {NOOP}"], RUNS,
        "ray_address"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_removing_a_guard_fails_a_test(tmp_path, name):
    lines, target, select = MUTATIONS[name]
    root = Path(__file__).resolve().parents[2]
    plugin = tmp_path / "guard_mutation.py"
    plugin.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root / "src")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "guard_mutation", "-p",
           "no:cacheprovider", target, "-k", select]
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)
    except subprocess.TimeoutExpired:
        return  # a guard against blocking removed: the test hung, which is caught too
    # 1: tests ran and one failed (5 would be "no tests selected": a broken case)
    assert proc.returncode == 1, (name, textwrap.shorten(proc.stdout[-1500:], 800))
