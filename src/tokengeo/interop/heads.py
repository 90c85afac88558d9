"""Laplacian and mixed heads computed inside a TransformerLens bridge's own hook points.

The bridge wraps the *unpatched* model: its attention computes ``z = P V`` with ``V`` from
the value projection. Head h of a converted layer outputs instead

    z_h <- a_h V_g(h) + b_h z_h  =  a_h V + b_h P V

(Zhang & Papyan, arXiv 2602.09297, Eq. 2 with P replaced by I - P for Laplacian heads:
(a, b) = (1, -1); ``g(h) = h // (H / Hkv)`` with grouped KV heads). Two hook points of the
bridge's attention carry it, each given a subclass of its class (no hook, so
``reset_hooks()`` cannot remove it and no user hook can run before it):

* ``hook_v``: keeps V *after* the point's hooks, so an edit of ``hook_v`` reaches every
  head kind;
* ``hook_z``: swaps the heads *before* the point's hooks, so ``hook_z`` (and
  ``hook_result``, ``stack_head_results``, patching, ablation) sees ``a V + b P V``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokengeo.models.hf.families import ungroup
from tokengeo.nn.heads import HeadMixer
from tokengeo.nn.kernels import combine_runs

_STATE = "_tokengeo_heads"  # in a swapped hook point's __dict__: its LayerHeads
_CLASSES: dict[tuple[type, str], type] = {}


@dataclass
class LayerHeads:
    """One layer's head kinds (``mixer``: (a_h, b_h) per head) and the V of the current call."""

    mixer: HeadMixer
    n_heads: int
    n_kv_heads: int
    head_dim: int
    value: torch.Tensor | None = None

    def heads_of(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """(B, T, n*Dh) or (B, T, n, Dh) -> (B, T, n, Dh)."""
        return x if x.dim() == 4 else x.unflatten(-1, (n, self.head_dim))

    def swap(self, z: torch.Tensor) -> torch.Tensor:
        """``a V + b z`` on every head (attention heads: z itself), in z's layout."""
        if self.value is None:
            raise RuntimeError("Laplacian heads: hook_z fired without hook_v in the same "
                               "attention call (the attention was called piecewise)")
        value, self.value = self.value, None
        z_heads = self.heads_of(z, self.n_heads)  # (B, T, H, Dh)
        v_heads = ungroup(self.heads_of(value, self.n_kv_heads),
                          self.n_heads // self.n_kv_heads)  # (B, T, H, Dh)
        if v_heads.shape != z_heads.shape:
            raise RuntimeError(f"Laplacian heads: V {tuple(v_heads.shape)} does not match "
                               f"z {tuple(z_heads.shape)}")
        a, b = self.mixer.head_coefficients()  # (H,) each
        out = combine_runs(v_heads.to(z.dtype), z_heads, a.to(z), b.to(z), self.mixer.head_runs)
        return out.reshape(z.shape)


def _swapping_class(cls: type, role: str) -> type:
    """The subclass of a hook point's class that keeps V (``role="v"``) after its hooks or
    swaps the heads of z (``role="z"``) before them."""
    key = (cls, role)
    if key not in _CLASSES:
        if role == "v":
            def __call__(self, x, *args, **kwargs):
                out = cls.__call__(self, x, *args, **kwargs)
                self.__dict__[_STATE].value = out
                return out
        else:
            def __call__(self, x, *args, **kwargs):
                return cls.__call__(self, self.__dict__[_STATE].swap(x), *args, **kwargs)
        _CLASSES[key] = type(f"Tokengeo{role.upper()}{cls.__name__}", (cls,),
                             {"__call__": __call__})
    return _CLASSES[key]


def install(point_v: nn.Module, point_z: nn.Module, heads: LayerHeads) -> None:
    """Make ``point_v`` keep V and ``point_z`` swap z, for one layer's ``heads``."""
    for point, role in ((point_v, "v"), (point_z, "z")):
        base = type(point)
        if _STATE in point.__dict__:  # installed before: the class to subclass is its base
            base = base.__mro__[1]
        point.__class__ = _swapping_class(base, role)
        point.__dict__[_STATE] = heads


def installed(point: nn.Module) -> Any:
    """The :class:`LayerHeads` installed on a hook point, or None."""
    return point.__dict__.get(_STATE)
