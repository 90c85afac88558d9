"""The flows settings (suites/flows/plan.py): bad values refused by name."""

from __future__ import annotations

import tomllib

import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments.suites import flows


@pytest.mark.parametrize("line,match", [
    ("control_heads = [4, 4]", "repeats an H"),
    ("residual_heads = [0]", "whole numbers >= 1"),
    ("long_run = { T = 40.0 }", "long_run must be"),
    ("long_run = { T = -1.0, heads = [4, 8] }", "long_run must be"),
    ("long_run = { T = 4.0, heads = [] }", "long_run must be"),
    ("long_run = { T = 4.0, heads = [4, 4] }", "repeats an H"),
])
def test_bad_flows_settings_are_refused_by_name(line, match, tmp_path):
    from tokengeo.experiments.settings import check_settings

    settings = {"exponent_tolerance": 0.3, "residual_tolerance": 0.05, "heads": [1, 4],
                "preset": {}} | tomllib.loads(line)
    with pytest.raises(ConfigError, match=match):
        check_settings("flows", tmp_path / "flows.toml", settings, flows.SETTINGS)


def test_theory_dts_must_halve(tmp_path):
    from tokengeo.experiments.settings import check_settings

    theory = {"n_tokens": 8, "T": 1.0, "dt": 0.1, "heads": 2, "dt_heads": [1],
              "dts": [0.04, 0.03, 0.01], "eps": [1e-2, 1e-3, 1e-4],
              "deltas": [1e-1, 1e-2, 1e-3], "directions": 2, "record_every": 2}
    settings = {"exponent_tolerance": 0.3, "residual_tolerance": 0.05, "heads": [1, 4],
                "preset": {}, "theory": theory}
    with pytest.raises(ConfigError, match="halve"):
        check_settings("flows", tmp_path / "flows.toml", settings, flows.SETTINGS)
