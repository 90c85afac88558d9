"""A ``tokengeo flow`` run for the explorer: tokens on the sphere over time, E(t), G^2(t).

``flow.json`` holds the preset, the seed and the main run's series (energy ``E`` and strong
gradient ``G^2`` per path), not the token positions. Runs are deterministic given the preset
and seed (Massucco et al., arXiv 2605.18870, Eq. 5, integrated by
:func:`tokengeo.flows.simulate.simulate`), so the explorer simulates the main run again with
``record_trajectory=True`` and checks that its ``E(t)`` and ``G^2(t)`` equal the recorded
ones before showing the tokens: a page never shows a trajectory that is not the run's.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from dataclasses import fields
from pathlib import Path

import torch

from tokengeo.errors import ConfigError

# the recomputed series must match flow.json to this relative tolerance (float64 both times;
# the JSON round trip keeps 17 digits)
MATCH_RTOL = 1e-6


def read_flow_json(path: str | Path) -> dict:
    """The parsed ``flow.json``, checked for the fields the explorer needs: read through
    :func:`tokengeo.io.read_json` (a FIFO or device refused, never waited on; depth, size and
    NaN/Infinity bounded), its series lists of numbers (``null`` for a diverged value)."""
    from tokengeo.io import read_json

    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "flow.json"
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"--flow {str(path)!r} does not exist; give the flow.json of a "
                          "`tokengeo flow` run")
    try:
        data = read_json(path, dict, limit=FLOW_JSON_LIMIT)
    except ConfigError as exc:
        raise ConfigError(f"--flow: {exc}; it is not a readable flow.json: run `tokengeo flow` "
                          "again to rewrite it") from None
    main = data.get("main_run")
    ok = isinstance(main, dict) and isinstance(data.get("preset"), dict) and \
        isinstance(main.get("t"), list) and all(isinstance(main.get(k), dict) for k in ("E", "G2"))
    if not ok:
        raise ConfigError(f"--flow {str(path)!r} lacks the preset or the main run's series "
                          "(t, E, G2); it is not a complete flow.json (an interrupted run "
                          "leaves flow.partial.json)")
    _check_series(path, "t", main["t"], nulls=False)
    for name in ("E", "G2"):
        for stat in ("mean", "std"):
            _check_series(path, f"{name}.{stat}", main[name].get(stat), nulls=True)
    return data


FLOW_JSON_LIMIT = 256 << 20  # a paper-scale flow.json is a few MB


def _check_series(path: Path, name: str, values, *, nulls: bool) -> None:
    """``values`` is a list of finite numbers (``null`` allowed where ``nulls``)."""
    def ok(v) -> bool:
        return (v is None and nulls) or (isinstance(v, int | float) and not isinstance(v, bool)
                                         and math.isfinite(v))

    bad = [values] if not isinstance(values, list) else [v for v in values if not ok(v)][:1]
    if bad:
        shown = json.dumps(bad[0])[:40]
        raise ConfigError(f"--flow {str(path)!r}: main_run {name} holds {shown}, not a list of "
                          "numbers; the file was edited: run `tokengeo flow` again to rewrite "
                          "it")


def _preset(data: dict):
    from tokengeo.flows.presets import FlowPreset

    known = {f.name for f in fields(FlowPreset)}
    raw = {k: v for k, v in data["preset"].items() if k in known}
    try:
        return FlowPreset(**raw)
    except ConfigError as exc:
        raise ConfigError(f"the preset in flow.json is not valid ({exc}); the file was edited: "
                          "run `tokengeo flow` again") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the preset in flow.json is not valid ({exc})") from None


def resimulate(data: dict, *, progress=None):
    """The main run of ``data`` again, with its trajectory; checked against the recorded series.

    Everything that can be checked without simulating is checked first: the preset (its
    memory and time estimates included), ``n_heads``, and the number of records the preset
    gives against the series' lengths (an edited T = 1e5 is refused at once)."""
    from tokengeo.checks import check_int
    from tokengeo.flows.simulate import simulate

    preset = _preset(data)
    n_heads = check_int("flow.json main_run n_heads", data["main_run"].get(
        "n_heads", preset.n_heads), lo=1)
    if n_heads != preset.n_heads:  # the main run's heads pass the preset's size checks too
        _preset({"preset": {**data["preset"], "n_heads": n_heads}})
    want = preset.n_records()
    if len(data["main_run"]["t"]) != want:
        raise ConfigError(f"flow.json's series hold {len(data['main_run']['t'])} records but "
                          f"its preset gives {want}; the file was edited or written by another "
                          "version: run `tokengeo flow` again")
    x0, D0 = preset.initial_state(n_heads)
    result = simulate(x0, D0, preset.flow_config(record_trajectory=True), progress=progress)
    check_same_series(result, data["main_run"])
    return preset, n_heads, result


def check_same_series(result, recorded: dict) -> None:
    """Refuse a re-simulation whose t, E or G^2 differ from ``flow.json``'s."""
    for name in ("E", "G2"):
        want = recorded[name].get("mean")
        got = result.mean(name).tolist()
        if not isinstance(want, list) or len(want) != len(got) or \
                len(recorded["t"]) != len(got):
            raise ConfigError(f"flow.json's {name} series has another length than its preset "
                              "gives; the file was edited or written by another version")
        for a, b in zip(want, got, strict=True):
            if a is None and math.isnan(b):
                continue
            if a is None or not math.isclose(a, b, rel_tol=MATCH_RTOL, abs_tol=1e-12):
                raise ConfigError(f"re-simulating flow.json's preset does not give its recorded "
                                  f"{name}(t) ({a} vs {b}); the file was edited or written by "
                                  "another version of tokengeo")


def flow_payload(data: dict, preset, n_heads: int, result) -> dict:
    """Tokens ``(P, R, n, 3)`` as int16 (``round(32767 x)``, error <= 1.6e-5), and the series."""
    x = result.x  # (P, R, n, d)
    xyz = x[..., :3] / x[..., :3].norm(dim=-1, keepdim=True).clamp_min(1e-12) \
        if x.shape[-1] > 3 else x
    codes = torch.round(xyz.clamp(-1, 1) * 32767).to(torch.int16).contiguous()
    packed = base64.b64encode(zlib.compress(codes.numpy().tobytes(), 6)).decode("ascii")
    main = data["main_run"]
    return {
        "kind": "flow", "preset": data["preset"], "n_heads": n_heads,
        "n_paths": int(x.shape[0]), "n_tokens": int(x.shape[2]), "d": int(x.shape[3]),
        "t": result.t.tolist(), "x": packed,
        "series": {k: {"mean": main[k]["mean"], "std": main[k]["std"]} for k in ("E", "G2")},
        "note": "tokens re-simulated from flow.json's preset and seed; E(t), G²(t) match "
                "the recorded series",
    }
