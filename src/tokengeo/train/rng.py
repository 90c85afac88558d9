"""Seeding and JSON-able snapshots of every random number generator a run touches.

Snapshots hold plain lists and base64 strings (no pickle), so they can live in a
checkpoint's JSON sidecar: torch CPU (and CUDA) generator states as base64 bytes, numpy's
MT19937 state as a list, Python's ``random`` state as a list.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import numpy as np
import torch

from tokengeo.errors import CheckpointError


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices) from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode("ascii")


def _from_b64(s: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)


def rng_state() -> dict[str, Any]:
    """The current state of every generator, as JSON-able values."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a snapshot of :func:`rng_state`."""
    try:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(_from_b64(state["torch"]))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([_from_b64(s) for s in state["cuda"]])
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"checkpoint RNG state is malformed ({exc!r})") from None
