"""tokengeo.flows: model-driven heads, diagnostics, presets, the H-scaling run and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.flows import LayerSchedule, evaluate_field, heads_from_model, simulate
from tokengeo.flows.diagnostics import count_clusters, fit_power_law, mean_cosine, time_average
from tokengeo.flows.presets import get_preset
from tokengeo.flows.scaling import run_h_scaling
from tokengeo.flows.simulate import FlowConfig

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")


class StandInAttention(nn.Module):
    """The tokengeo attention layout: qkv columns [q | k | v], head-major; proj after heads."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.head_dim, self.d_model = n_heads, d_model // n_heads, d_model
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward_nobias(self, x):  # x (n, d_model)
        H, dh = self.n_heads, self.head_dim
        q, k, v = (x @ w.T for w in self.qkv.weight.split(self.d_model))  # (n, d_model)
        q, k, v = (m.reshape(-1, H, dh).transpose(0, 1) for m in (q, k, v))  # (H, n, dh)
        att = torch.softmax(q @ k.mT / math.sqrt(dh), dim=-1)
        z = (att @ v).transpose(0, 1).reshape(-1, self.d_model)  # (n, d_model)
        return z @ self.proj.weight.T


class StandInModel(nn.Module):
    def __init__(self, n_layers=2, d_model=8, n_heads=2):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Module() for _ in range(n_layers))
        for block in self.blocks:
            block.attn = StandInAttention(d_model, n_heads)


def unit(n, d, seed=0):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return x / x.norm(dim=-1, keepdim=True)


def test_model_heads_give_the_layers_attention_update_on_the_sphere():
    torch.manual_seed(0)
    model = StandInModel().double()
    schedule = heads_from_model(model)
    assert schedule.score.shape == (2, 2, 8, 8)
    x = unit(6, 8)
    for layer in range(2):
        score, value = schedule.heads(layer + 0.5)
        v = evaluate_field(x[None], score[None], value[None], energy=False).velocity[0]
        out = model.blocks[layer].attn.forward_nobias(x)
        want = out - x * (x * out).sum(-1, keepdim=True)  # P_x Attn(x)
        torch.testing.assert_close(-v, want, rtol=1e-10, atol=1e-12)


def test_layer_schedule_drives_t_in_layer_intervals():
    torch.manual_seed(1)
    model = StandInModel().double()
    schedule = heads_from_model(model)
    assert [schedule.layer_at(t) for t in (0.0, 0.99, 1.0, 1.5, 2.0)] == [0, 0, 1, 1, 1]
    x0, dt = unit(5, 8, seed=2), 0.5
    r = simulate(x0, schedule, FlowConfig(T=2.0, dt=dt, energy=False, record_trajectory=True))
    x = x0
    for k in range(4):  # Euler with layer floor(t)
        out = model.blocks[int(k * dt)].attn.forward_nobias(x)
        x = x + dt * (out - x * (x * out).sum(-1, keepdim=True))
        x = x / x.norm(dim=-1, keepdim=True)
        torch.testing.assert_close(r.x[0, k + 1], x, rtol=1e-10, atol=1e-12)
    assert torch.isnan(r.residual).all() and not r.energy_defined


def test_model_head_coefficients_scale_values_or_raise():
    model = StandInModel().double()
    plain = heads_from_model(model)
    for block in model.blocks:
        block.attn.head_coefficients = lambda: (torch.zeros(2), torch.tensor([0.5, -1.0]))
    scaled = heads_from_model(model)
    torch.testing.assert_close(scaled.value[:, 0], 0.5 * plain.value[:, 0])
    torch.testing.assert_close(scaled.value[:, 1], -plain.value[:, 1])
    model.blocks[1].attn.head_coefficients = lambda: (torch.tensor([1.0, 0.0]), torch.ones(2))
    with pytest.raises(ConfigError, match="Laplacian"):
        heads_from_model(model)


def test_model_schedule_errors():
    schedule = heads_from_model(StandInModel().double())
    with pytest.raises(ConfigError, match="energy=False"):
        simulate(unit(5, 8), schedule, FlowConfig(T=1.0, dt=0.5))
    with pytest.raises(ConfigError, match="layers"):
        simulate(unit(5, 8), schedule, FlowConfig(T=3.0, dt=0.5, energy=False))
    with pytest.raises(ConfigError, match="d=8"):
        simulate(unit(5, 3), schedule, FlowConfig(T=1.0, dt=0.5, energy=False))
    with pytest.raises(ConfigError, match="blocks"):
        heads_from_model(nn.Linear(2, 2))
    with pytest.raises(ConfigError, match="shaped"):
        LayerSchedule(torch.zeros(2, 3, 4, 4), torch.zeros(2, 3, 4, 5))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 30), d=st.integers(2, 6), seed=st.integers(0, 10**6))
def test_mean_cosine_equals_the_pairwise_mean(n, d, seed):
    x = unit(n, d, seed)
    gram = x @ x.T
    want = (gram.sum() - gram.diagonal().sum()) / (n * (n - 1))
    torch.testing.assert_close(mean_cosine(x), want, rtol=1e-12, atol=1e-12)


def test_count_clusters_on_known_configurations():
    g = torch.Generator().manual_seed(0)
    centers = unit(5, 3, seed=3)
    while (centers @ centers.T - 2 * torch.eye(5, dtype=F64)).max() > 0.9:  # well separated
        centers = unit(5, 3, seed=int(torch.randint(0, 10**6, (1,), generator=g)))
    x = centers.repeat_interleave(8, 0) + 1e-3 * torch.randn(40, 3, generator=g, dtype=F64)
    x = x / x.norm(dim=-1, keepdim=True)
    assert count_clusters(x, 0.99).item() == 5
    assert count_clusters(x, -1.0).item() == 1
    assert count_clusters(x[None].expand(3, 40, 3), 0.99, chunk=7).tolist() == [5, 5, 5]
    # a chain of points 0.1 rad apart is one cluster at cos(0.15), although its ends are far
    theta = 0.1 * torch.arange(30, dtype=F64)
    arc = torch.stack([theta.cos(), theta.sin(), torch.zeros_like(theta)], -1)
    assert count_clusters(arc, math.cos(0.15), chunk=4).item() == 1
    assert count_clusters(arc, math.cos(0.05)).item() == 30


def test_time_average_is_exact_for_linear_series():
    t = torch.linspace(0, 4, 9, dtype=F64)
    series = torch.stack([2 * t + 1, -t])
    torch.testing.assert_close(time_average(t, series, 2.0), torch.tensor([7.0, -3.0], dtype=F64))
    with pytest.raises(ConfigError, match="records"):
        time_average(t, series, 4.0)


def test_power_law_fit_recovers_the_exponent():
    heads = [1, 10, 100]
    exact = [torch.full((5,), 3.0 * h**-1.0, dtype=F64) for h in heads]
    fit = fit_power_law(heads, exact, n_boot=200)
    assert fit.exponent == pytest.approx(-1.0, abs=1e-12)
    assert fit.prefactor == pytest.approx(3.0, rel=1e-12)
    assert fit.ci_low == pytest.approx(-1.0, abs=1e-9) and fit.ci_high == pytest.approx(-1.0)
    g = torch.Generator().manual_seed(0)
    noisy = [3.0 * h**-0.5 * torch.exp(0.2 * torch.randn(40, generator=g, dtype=F64))
             for h in heads]
    fit = fit_power_law(heads, noisy, n_boot=500)
    assert fit.ci_low < -0.5 < fit.ci_high and fit.ci_high - fit.ci_low < 0.2
    with pytest.raises(ConfigError, match="at least 2"):
        fit_power_law([10], noisy[:1])
    with pytest.raises(ConfigError, match="positive"):
        fit_power_law(heads, [-s for s in noisy])


def test_presets_draw_the_papers_initial_state():
    p = get_preset("s2-ou", n_paths=3, init_std=0.01)
    x0, D0 = p.initial_state(7)
    assert x0.shape == (3, 200, 3) and D0.shape == (3, 7, 3, 3)
    torch.testing.assert_close(x0.norm(dim=-1), torch.ones(3, 200, dtype=F64))
    assert torch.equal(D0, D0.mT)
    vertices = torch.cat([torch.eye(3), -torch.eye(3)]).double()
    assert ((x0 @ vertices.T).max(-1).values > 0.99).all()  # every token near a vertex
    assert torch.equal(x0, x0[:1].expand_as(x0))  # one token state shared by the paths
    x0_other, D0_other = p.initial_state(2)
    assert torch.equal(x0, x0_other) and D0_other.shape[1] == 2
    assert (p.T, p.dt, p.noise_var, p.scaling_heads) == (20.0, 5e-3, 2.0, (1, 10, 100))
    with pytest.raises(ConfigError, match="preset"):
        get_preset("s3-ou")
    with pytest.raises(ConfigError, match="unknown flow preset option"):
        get_preset("s2-ou", heads=3)
    with pytest.raises(ConfigError, match="init"):
        get_preset("s2-ou", init="cube")


def test_h_scaling_run_reports_balance_and_fit():
    p = get_preset("s2-ou", n_tokens=12, n_paths=3, T=0.2, dt=0.01, record_every=5)
    r = run_h_scaling(p, (1, 2, 4))
    assert [run.n_heads for run in r.runs] == [1, 2, 4]
    assert r.fit is not None and r.fit.heads == [1, 2, 4]
    for run in r.runs:
        assert len(run.g2_avg) == 3 and all(g > 0 for g in run.g2_avg)
        assert all(0 <= rel < 1 for rel in run.relative_residual_T)
        assert all(1 <= c <= 12 for c in run.clusters_T)
    json.dumps(r.to_dict(), allow_nan=False)


def test_cli_flow_writes_json(tmp_path):
    out = tmp_path / "flow"
    rc = main(["flow", "--preset", "s2-oscillating", "--T", "0.05", "--dt", "0.01",
               "--n-paths", "2", "--heads", "2", "--scaling-heads", "1,2", "--out", str(out),
               "--record-every", "1", "--no-figures", "--threads", "1"])
    assert rc == 0
    data = json.loads((out / "flow.json").read_text())
    assert [r["n_heads"] for r in data["runs"]] == [1, 2]
    assert data["fit"]["heads"] == [1, 2] and data["main_run"]["n_heads"] == 2
    assert len(data["main_run"]["t"]) == len(data["main_run"]["E"]["mean"]) == 6
    assert not (out / "flow.partial.json").exists()  # only kept while a run is unfinished


def test_cli_flow_bad_input_is_one_line_exit_2(tmp_path, capsys):
    rc = main(["flow", "--preset", "s2-ou", "--scaling-heads", "1,x", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scaling-heads" in err[0]
    rc = main(["flow", "--preset", "s2-ou", "--dt", "0", "--out", str(tmp_path)])
    assert rc == 2


@pytest.mark.slow
def test_cli_flow_writes_figures(tmp_path):
    out = tmp_path / "flow"
    rc = main(["flow", "--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--n-paths", "2",
               "--heads", "2", "--scaling-heads", "1,2", "--record-every", "2", "--out", str(out),
               "--gif", "--threads", "1"])
    assert rc == 0
    for name in ("snapshots", "energy", "g2", "balance", "scaling"):
        assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / "sphere.gif").stat().st_size > 1000
