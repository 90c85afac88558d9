"""simulate(x0, weights, FlowConfig): the config API gives the old keyword API's numbers.

``data/simulate_reference.npz`` holds every recorded series of seven runs computed with the
keyword ``simulate`` of commit 630b88f (before the FlowConfig refactor), one
thread, float64 except one float32 run: Euler with weight noise, RK4, stochastic Heun,
general (non-symmetric) frozen heads without energy, a layer schedule, float32 and a preset.
The refactor only moved code, so the new path must give the same numbers. The file was written
on one CPU: it is compared at the dtype's tolerance (``helpers.saved``), never bit for bit,
because another CPU's kernels may round the last bit differently.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.saved import assert_close_to_saved

from tokengeo.errors import ConfigError
from tokengeo.flows import FlowConfig, simulate
from tokengeo.flows.presets import get_preset
from tokengeo.flows.weights import LayerSchedule

F64 = torch.float64
REFERENCE = Path(__file__).parent / "data" / "simulate_reference.npz"
FIELDS = ("t", "E", "G2", "dE_int", "ito_int", "G2_int", "mart_int", "residual", "x_final",
          "x", "weights")

pytestmark = pytest.mark.usefixtures("one_thread")
saved_reference = pytest.mark.saved_reference


def sphere(P, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(P, n, d, generator=g, dtype=F64)
    return x / x.norm(dim=-1, keepdim=True)


def sym(P, H, d, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(P, H, d, d, generator=g, dtype=F64)
    return (z + z.mT) / 2


def cases() -> dict:
    """The reference runs: name -> (tokens, weights, FlowConfig), as the fixture drew them."""
    out = {}
    out["ou-euler"] = (sphere(3, 10, 3, 1), sym(3, 2, 3, 2), FlowConfig(
        drift="ou", noise_var=2.0, T=0.1, dt=0.01, n_paths=3, seed=7, record_every=3,
        record_trajectory=True))
    out["osc-rk4"] = (sphere(2, 9, 3, 3), sym(2, 3, 3, 4), FlowConfig(
        drift="oscillating", noise_var=0.0, T=0.2, dt=0.02, n_paths=2, integrator="rk4",
        record_every=2, record_trajectory=True))
    out["inphase-heun"] = (sphere(2, 8, 4, 5), sym(2, 3, 4, 6), FlowConfig(
        drift="oscillating-inphase", noise_var=1.0, T=0.1, dt=0.02, n_paths=2,
        integrator="heun", seed=3))
    general = torch.randn(2, 2, 3, 3, generator=torch.Generator().manual_seed(8), dtype=F64)
    out["frozen-general"] = (sphere(2, 7, 3, 7), general, FlowConfig(
        drift="frozen", noise_var=0.0, T=0.1, dt=0.01, n_paths=2, energy=False,
        record_trajectory=True))
    g = torch.Generator().manual_seed(9)
    schedule = LayerSchedule(torch.randn(3, 2, 4, 4, generator=g, dtype=F64),
                             torch.randn(3, 2, 4, 4, generator=g, dtype=F64))
    out["schedule"] = (sphere(1, 6, 4, 10)[0], schedule, FlowConfig(
        T=2.0, dt=0.25, energy=False, record_trajectory=True))
    out["ou-float32"] = (sphere(2, 10, 3, 11).float(), sym(2, 2, 3, 12).float(), FlowConfig(
        drift="ou", noise_var=2.0, T=0.1, dt=0.01, n_paths=2, seed=5, dtype=torch.float32,
        record_trajectory=True))
    p = get_preset("s2-ou", n_tokens=20, n_paths=3, T=0.2, dt=0.01, record_every=5)
    out["preset-s2-ou"] = (*p.initial_state(4), p.flow_config(record_trajectory=True))
    return out


@saved_reference
@pytest.mark.parametrize("name", list(cases()))
def test_config_api_gives_the_keyword_api_numbers(name):
    reference = np.load(REFERENCE, allow_pickle=False)
    x0, weights, config = cases()[name]
    result = simulate(x0, weights, config)
    compared = 0
    for field in FIELDS:
        key = f"{name}/{field}"
        got = getattr(result, field)
        assert (got is None) == (key not in reference.files), key
        if got is not None:
            want = torch.from_numpy(reference[key])
            # the residual is E(t) - E(0) + the integrals: its rounding is that of E
            scale = float(np.nanmax(np.abs(reference[f"{name}/E"]), initial=0.0)) \
                if field == "residual" else None
            assert_close_to_saved(got, want, key, computed_in=config.dtype, scale=scale)
            compared += 1
    assert compared >= 9


def test_recorded_weights_follow_the_ou_solution():
    """record_weights keeps D(t_k); for f = I - D without noise, D(t_k) - I =
    (1 - dt)^k (D(0) - I) exactly (Euler), and the recording changes nothing else."""
    x0, D0 = sphere(1, 6, 3, 1), sym(1, 2, 3, 2)
    config = FlowConfig(drift="ou", noise_var=0.0, T=0.1, dt=0.01, record_every=5)
    plain = simulate(x0, D0, config)
    r = simulate(x0, D0, config.replace(record_weights=True))
    assert r.weight_path.shape == (1, 3, 2, 3, 3) and plain.weight_path is None
    eye = torch.eye(3, dtype=F64)
    for k, step in enumerate((0, 5, 10)):
        torch.testing.assert_close(r.weight_path[:, k] - eye, 0.99**step * (D0 - eye),
                                   rtol=1e-12, atol=1e-14)
    assert torch.equal(r.x_final, plain.x_final) and torch.equal(r.E, plain.E)


def test_a_config_that_is_not_a_flow_config_is_one_error():
    x0, D0 = sphere(1, 5, 3, 1)[0], sym(1, 2, 3, 2)[0]
    with pytest.raises(ConfigError, match="must be a FlowConfig"):
        simulate(x0, D0, {"T": 0.1})


@pytest.mark.parametrize("change,match", [
    (dict(record_weights="yes"), "record_weights"),
    (dict(drift=3), "drift"),
    (dict(steps=3), "unknown flow config"),
])
def test_bad_config_is_refused_with_its_field(change, match):
    with pytest.raises(ConfigError, match=match):
        FlowConfig().replace(**change)


def test_a_schedule_cannot_record_weights():
    schedule = LayerSchedule(torch.zeros(1, 1, 3, 3, dtype=F64), torch.zeros(1, 1, 3, 3,
                                                                             dtype=F64))
    with pytest.raises(ConfigError, match="record_weights"):
        simulate(sphere(1, 4, 3, 0)[0], schedule,
                 FlowConfig(T=1.0, dt=0.5, energy=False, record_weights=True))


def test_no_function_in_flows_is_longer_than_a_screen():
    """Every function of tokengeo.flows (docstring included) fits in 60 lines."""
    import ast

    import tokengeo.flows

    folder = Path(tokengeo.flows.__file__).parent
    long = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert len(list(folder.glob("*.py"))) >= 10 and not long, long
