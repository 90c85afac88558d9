"""The flows suite's tests judge claims; the sweep figures are drawn and tested in
tests/experiments/test_figures.py."""

import pytest


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch):
    """The claims, not the sweep figures (drawn and tested in test_figures)."""
    from tokengeo.experiments.suites.flows import scaling

    monkeypatch.setattr(scaling, "_sweep_figures", lambda *args: None)
