"""The flows cells (suites/flows/runs.py): the static control replays the flow cell's weights."""

from __future__ import annotations

import torch


def test_the_control_replays_the_flow_cells_weight_path_exactly():
    from tokengeo.experiments.suites.flows.runs import weight_records
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.simulate import simulate

    p = get_preset("s2-ou", n_tokens=6, n_paths=2, T=0.2, dt=0.02, record_every=2)
    x0, D0 = p.initial_state(3)
    res = simulate(x0, D0, p.flow_config(record_weights=True))
    t, path = weight_records(p, 3)
    torch.testing.assert_close(t, res.t)
    torch.testing.assert_close(path, res.weight_path, rtol=0, atol=0)


def test_the_static_control_cell_runs_at_the_drifts_time_average():
    from tokengeo.experiments.suites.flows.runs import static_mean_cell

    out = static_mean_cell("s2-oscillating-inphase", 2,
                           {"n_tokens": 8, "T": 0.4, "dt": 0.02, "record_every": 2})
    s = out["summary"]
    assert len(s["mean_cosine_T"]) == 1 and -1 <= s["mean_cosine_T"][0] <= 1
    lo, hi = s["mean_weights_eig"]
    assert lo <= hi
