"""Fixtures shared by the bad-input tables of tests/cli/."""

import pytest


@pytest.fixture
def no_heavy_work(monkeypatch):
    """Simulations, analyses and cells fail the test: a refusal must come before them."""
    import tokengeo.experiments.reproduce as rp
    import tokengeo.flows.scaling as scaling
    import tokengeo.probes.similarity.run as sim_run

    def fail(*a, **k):
        raise AssertionError("heavy work started before the input was refused")

    monkeypatch.setattr(scaling, "run_h_scaling", fail)
    monkeypatch.setattr(sim_run, "run_similarity", fail)
    monkeypatch.setattr(rp, "compute_cells", fail)
    import tokengeo.commands.flow as flow_cmd

    if hasattr(flow_cmd, "run_h_scaling"):
        monkeypatch.setattr(flow_cmd, "run_h_scaling", fail)
