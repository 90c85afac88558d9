"""The flow simulator in float32 (float64 sums) and on CUDA, eager and as captured graphs."""

from __future__ import annotations

import math

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.flows import simulate
from tokengeo.flows.graph import GraphedEulerBlock, block_length
from tokengeo.flows.integrators import EULER, rk_step
from tokengeo.flows.presets import get_preset
from tokengeo.flows.simulate import FlowConfig

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")


def state(n=24, H=3, P=2, seed=0):
    p = get_preset("s2-ou", n_tokens=n, n_paths=P, seed=seed)
    return p.initial_state(H)


def test_block_length_divides_record_every_and_caps_at_the_steps():
    assert block_length(20, 4000) == 20
    assert block_length(10**6, 4000) == 50
    assert block_length(97, 4000) == 1  # a prime above the cap: single steps
    assert block_length(20, 7) == 7
    for every in (1, 6, 35, 64, 100):
        k = block_length(every, 10**4)
        assert every % k == 0 and 1 <= k <= 50


def test_float32_sums_the_balance_in_float64_and_still_closes():
    """H = 1, deterministic: the residual is the scheme's O(dt) error in both precisions."""
    x0, D0 = state(n=30, H=1, P=1)
    kw = dict(drift="oscillating", noise_var=0.0, T=2.0, dt=0.01, record_every=20)
    r64 = simulate(x0, D0, FlowConfig(**kw))
    r32 = simulate(x0.float(), D0.float(), FlowConfig(dtype=torch.float32, **kw))
    for name in ("E", "G2", "G2_int", "dE_int", "residual"):
        assert getattr(r32, name).dtype == F64
    rel64 = (r64.residual[:, -1].abs() / r64.G2_int[:, -1]).item()
    rel32 = (r32.residual[:, -1].abs() / r32.G2_int[:, -1]).item()
    assert rel64 < 0.05 and abs(rel32 - rel64) < 0.05 * rel64, (rel64, rel32)
    torch.testing.assert_close(r32.G2_int, r64.G2_int, rtol=1e-4, atol=1e-7)


def test_cuda_graph_true_off_cuda_is_a_clear_error():
    x0, D0 = state()
    with pytest.raises(ConfigError, match="cuda_graph=True"):
        simulate(x0, D0, FlowConfig(T=0.02, dt=0.01, n_paths=2, cuda_graph=True))
    r = simulate(x0, D0, FlowConfig(T=0.02, dt=0.01, n_paths=2))
    assert r.config["cuda_graph"] is False


# ---- CUDA (make gpu-check) -------------------------------------------------------------------


def _series(r):
    return torch.stack([r.E, r.G2, r.dE_int, r.G2_int, r.residual]).cpu()


@pytest.mark.cuda
@pytest.mark.parametrize("drift", ["ou", "oscillating", "oscillating-inphase"])
def test_cuda_eager_equals_the_cpu(drift):
    x0, D0 = state(n=40, H=5)
    kw = dict(drift=drift, noise_var=0.0, T=0.2, dt=0.01, n_paths=2, record_every=4)
    cpu = simulate(x0, D0, FlowConfig(**kw))
    gpu = simulate(x0.cuda(), D0.cuda(), FlowConfig(cuda_graph=False, **kw))
    torch.testing.assert_close(gpu.x_final.cpu(), cpu.x_final, rtol=0, atol=1e-12)
    torch.testing.assert_close(_series(gpu), _series(cpu), rtol=1e-11, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.parametrize("drift", ["ou", "oscillating", "oscillating-inphase", "frozen"])
def test_cuda_graph_equals_eager_without_noise(drift):
    x0, D0 = state(n=40, H=5)
    kw = dict(drift=drift, noise_var=0.0, T=0.23, dt=0.01, n_paths=2, record_every=5,
              record_trajectory=True)  # 23 steps: blocks of 5 and a remainder of 3
    eager = simulate(x0.cuda(), D0.cuda(), FlowConfig(cuda_graph=False, **kw))
    graph = simulate(x0.cuda(), D0.cuda(), FlowConfig(cuda_graph=True, **kw))
    assert graph.config["cuda_graph"] and not eager.config["cuda_graph"]
    torch.testing.assert_close(graph.t, eager.t)
    torch.testing.assert_close(graph.x.cpu(), eager.x.cpu(), rtol=0, atol=1e-12)
    torch.testing.assert_close(_series(graph), _series(eager), rtol=1e-11, atol=1e-12)


@pytest.mark.cuda
def test_cuda_graph_block_equals_eager_steps_with_the_same_noise():
    from tokengeo.flows.simulate import _Run
    from tokengeo.flows.weights import resolve_drift, symmetric_increment

    x0, D0 = (t.cuda() for t in state(n=32, H=4))
    run = _Run(resolve_drift("ou"), None, 2, True, 2.0, 1 << 20, trusted=True)
    K, dt = 6, 0.01
    noise = math.sqrt(2.0) * symmetric_increment((K, *D0.shape), dt,
                                                 torch.Generator("cuda").manual_seed(3),
                                                 dtype=F64, device="cuda")
    cum = torch.zeros(2, 4, dtype=F64, device="cuda")
    block = GraphedEulerBlock(run.rates, x0.clone(), D0.clone(), cum, dt=dt, steps=K,
                              noisy=True)
    out = block.replay(0.5, noise)
    x, D, want = x0, D0, torch.zeros_like(cum)
    for j in range(K):
        x, D, quad, ev = rk_step(run.rates, x, D, 0.5 + j * dt, dt, EULER, noise[j])
        if j == 0:
            torch.testing.assert_close(out.energy, ev.energy, rtol=1e-12, atol=0)
        want[:, :3] += quad
        want[:, 3] += (noise[j] * ev.moment).sum((1, 2, 3))
    torch.testing.assert_close(block.x, x, rtol=0, atol=1e-12)
    torch.testing.assert_close(block.D, D, rtol=0, atol=1e-12)
    torch.testing.assert_close(cum, want, rtol=1e-11, atol=1e-13)


@pytest.mark.cuda
def test_cuda_graph_float32_balance_closes_like_float64():
    x0, D0 = state(n=60, H=1, P=1)
    kw = dict(drift="oscillating", noise_var=0.0, T=2.0, dt=0.01, record_every=20)
    r64 = simulate(x0.cuda(), D0.cuda(), FlowConfig(**kw))
    r32 = simulate(x0.float().cuda(), D0.float().cuda(), FlowConfig(dtype=torch.float32, **kw))
    assert r64.config["cuda_graph"] and r32.config["cuda_graph"]
    rel64 = (r64.residual[:, -1].abs() / r64.G2_int[:, -1]).item()
    rel32 = (r32.residual[:, -1].abs() / r32.G2_int[:, -1]).item()
    assert abs(rel32 - rel64) < 0.05 * rel64, (rel64, rel32)


@pytest.mark.cuda
def test_cuda_graph_noisy_ou_runs_balance_within_their_spread():
    x0, D0 = state(n=40, H=4, P=64)
    r = simulate(x0.cuda(), D0.cuda(), FlowConfig(
        drift="ou", noise_var=2.0, T=0.5, dt=0.01, n_paths=64, record_every=10, seed=5))
    res = r.residual[:, -1].cpu()
    quiet = simulate(x0, D0, FlowConfig(
        drift="ou", noise_var=0.0, T=0.5, dt=0.01, n_paths=64, record_every=10))
    se = res.std() / math.sqrt(64)
    assert abs(res.mean() - quiet.residual[:, -1].mean()) < 5 * se + 1e-6
