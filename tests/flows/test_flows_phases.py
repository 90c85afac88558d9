"""The two oscillating presets: one in-phase target (the paper's figures) and per-head phases.

The in-phase preset is checked against a drift written here from the description of the
authors' commit 496b2f6 (their drift read H = D.shape[0], the number of paths, 1 in their
deterministic run, and so gave every head the phase-0 target), driven by the authors' Euler
loop written out with materialised (n, n) kernels.
"""

from __future__ import annotations

import math

import pytest
import torch

from tokengeo.flows import oscillating_target, simulate
from tokengeo.flows.presets import get_preset
from tokengeo.flows.weights import resolve_drift

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")


def target_496b2f6(t: float, n_rows: int) -> torch.Tensor:
    """The d = 3 target of the paper with phases 2 pi r / n_rows over the first axis, (n_rows, 3, 3).

    diag (2 + 1.5 cos s, 2 + 1.5 sin s, 2 + 1.5 cos(s + pi/4)); (1,2) = sin 2s, (1,3) = sin s,
    (2,3) = cos 2s, with s = t + 2 pi r / n_rows."""
    out = []
    for r in range(n_rows):
        s = t + 2 * math.pi * r / n_rows
        out.append(torch.tensor([
            [2 + 1.5 * math.cos(s), math.sin(2 * s), math.sin(s)],
            [math.sin(2 * s), 2 + 1.5 * math.sin(s), math.cos(2 * s)],
            [math.sin(s), math.cos(2 * s), 2 + 1.5 * math.cos(s + math.pi / 4)],
        ], dtype=F64))
    return torch.stack(out)


def drift_496b2f6(D: torch.Tensor, t: float) -> torch.Tensor:
    """f(D, t) = T(t) - D with H read as D.shape[0] (one path: one phase-0 target), the
    target broadcast over the heads."""
    rows = D.shape[0]
    return target_496b2f6(t, rows)[:, None] - D  # (P, 1, 3, 3) over (P, H, 3, 3)


def drift_693474c(D: torch.Tensor, t: float) -> torch.Tensor:
    """f_h(D, t) = T_h(t) - D_h with H read as D.shape[-3]: phase 2 pi h / H per head."""
    return target_496b2f6(t, D.shape[-3])[None] - D


def euler_loop(x0, D0, drift, *, T, dt):
    """The authors' deterministic Euler loop, each head's kernel materialised."""
    x, D = x0.clone(), D0.clone()  # (P, n, d), (P, H, d, d)
    H = D.shape[1]
    for k in range(round(T / dt)):
        f = drift(D, k * dt)
        K = torch.exp(torch.einsum("pid,phde,pje->phij", x, D, x))  # (P, H, n, n)
        A = K / K.sum(-1, keepdim=True)
        u = torch.einsum("phij,phed,pjd->pie", A, D, x) / H  # (P, n, d)
        v = u - x * (x * u).sum(-1, keepdim=True)
        x = x - dt * v
        x = x / x.norm(dim=-1, keepdim=True)
        D = D + f * dt
    return x, D


def test_in_phase_targets_are_equal_for_every_head_at_every_time():
    for t in (0.0, 0.3, 1.7, 5.0, 12.9):
        target = oscillating_target(t, 8, 3, in_phase=True)  # (8, 3, 3)
        assert torch.equal(target, target[:1].expand_as(target))
        torch.testing.assert_close(target[0], target_496b2f6(t, 1)[0], rtol=0, atol=1e-14)
    D = torch.randn(2, 5, 3, 3, dtype=F64)
    f = resolve_drift("oscillating-inphase")(D, 0.9)
    torch.testing.assert_close(f + D, (f + D)[:, :1].expand_as(f), rtol=0, atol=1e-14)


def test_in_phase_preset_gives_the_496b2f6_trajectories():
    p = get_preset("s2-oscillating-inphase", n_tokens=9, n_paths=1, T=0.3, dt=0.01,
                   record_every=10)
    x0, D0 = p.initial_state(4)
    r = simulate(x0, D0, p.flow_config())
    x_ref, D_ref = euler_loop(x0, D0, drift_496b2f6, T=p.T, dt=p.dt)
    torch.testing.assert_close(r.x_final, x_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(r.weights, D_ref, rtol=0, atol=1e-12)
    # and the heads forget D_h(0): their spread shrinks like e^{-t}
    spread0 = (D0 - D0.mean(1, keepdim=True)).abs().max()
    spread = (r.weights - r.weights.mean(1, keepdim=True)).abs().max()
    torch.testing.assert_close(spread, spread0 * (1 - p.dt) ** round(p.T / p.dt))


def test_per_head_preset_keeps_the_current_formula():
    p = get_preset("s2-oscillating", n_tokens=9, n_paths=1, T=0.3, dt=0.01, record_every=10)
    x0, D0 = p.initial_state(4)
    r = simulate(x0, D0, p.flow_config())
    x_ref, D_ref = euler_loop(x0, D0, drift_693474c, T=p.T, dt=p.dt)
    torch.testing.assert_close(r.x_final, x_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(r.weights, D_ref, rtol=0, atol=1e-12)
    target = oscillating_target(0.4, 4, 3)
    assert not torch.allclose(target[0], target[1])  # the heads' phases differ


def test_each_oscillating_preset_cites_its_commit():
    assert "496b2f6" in get_preset("s2-oscillating-inphase").notes
    assert "693474c" in get_preset("s2-oscillating").notes
    for name in ("s2-oscillating", "s2-oscillating-inphase"):
        assert get_preset(name).noise_var == 0.0


def test_one_head_makes_the_two_oscillating_drifts_equal():
    D = torch.randn(3, 1, 3, 3, dtype=F64)
    a = resolve_drift("oscillating")(D, 2.2)
    b = resolve_drift("oscillating-inphase")(D, 2.2)
    assert torch.equal(a, b)


@pytest.mark.parametrize("per_path", [False, True])
def test_cli_runs_the_in_phase_preset_with_shared_or_per_path_weights(tmp_path, per_path):
    import json

    from tokengeo.cli import main

    out = tmp_path / "flow"
    argv = ["flow", "--preset", "s2-oscillating-inphase", "--T", "0.04", "--dt", "0.01",
            "--n-paths", "2", "--heads", "2", "--scaling-heads", "none", "--out", str(out),
            "--record-every", "1", "--no-figures", "--threads", "1"]
    assert main(argv + (["--per-path-weights"] if per_path else [])) == 0
    data = json.loads((out / "flow.json").read_text())
    assert data["preset"]["drift"] == "oscillating-inphase"
    assert data["preset"]["per_path_weights"] is per_path
    g2 = data["main_run"]["G2"]["paths"]  # deterministic: the paths differ only by D(0)
    assert (g2[0] == g2[1]) is (not per_path)
