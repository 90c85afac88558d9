"""Named hook points, in the manner of TransformerLens' ``HookPoint``.

A :class:`HookPoint` is an identity module placed where an activation is worth reading
or editing. Its name is its module path (``blocks.3.attn.hook_z``), so names are stable
and discoverable with :func:`hook_points`. Every hook point the model passes is called as a
module on every forward pass, hooked or not (an identity forward), so tools that wrap module
calls (nnsight, torch's module hooks) see it with nothing attached. Expensive activations
(attention patterns, attention scores, per-head results) are only computed when a hook is
attached (:meth:`HookPoint.is_active`): their points are called only then.

A *hook site* (:class:`HookSite`) is the model-independent view of a hook point: anything
with ``attach(fn) -> handle`` where ``fn(activation)`` (an :data:`ActivationFn`) may return a
replacement. tokengeo's hook points are sites (:class:`HookPointSite`); Hugging Face models
get sites from :mod:`tokengeo.probes.hf_sites`; :mod:`tokengeo.probes.capture` uses both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, "HookPoint"], torch.Tensor | None]
ActivationFn = Callable[[torch.Tensor], torch.Tensor | None]


class HookSite(Protocol):
    def attach(self, fn: ActivationFn) -> Any:  # returns a handle with .remove()
        ...


class HookPoint(nn.Module):
    """Identity module whose forward hooks see (and may replace) one activation."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None  # filled by :func:`name_hook_points`

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def layer(self) -> int | None:
        """The block of this point (``blocks.3.attn.hook_z`` -> 3), as TransformerLens'
        ``HookPoint.layer()``; None outside the blocks or before the model named it."""
        parts = (self.name or "").split(".")
        return int(parts[1]) if len(parts) > 2 and parts[0] == "blocks" and \
            parts[1].isdigit() else None

    def is_active(self) -> bool:
        """True when some hook is attached, i.e. the activation is wanted."""
        return bool(self._forward_hooks) or bool(self._forward_pre_hooks)

    def add_hook(self, fn: HookFn) -> torch.utils.hooks.RemovableHandle:
        """Attach ``fn(activation, hook_point) -> replacement or None``; returns a handle."""

        def _hook(module: nn.Module, inputs: tuple, output: torch.Tensor):
            return fn(output, module)

        return self.register_forward_hook(_hook)


def name_hook_points(model: nn.Module) -> None:
    """Give every :class:`HookPoint` its module path as ``name``."""
    for name, module in model.named_modules():
        if isinstance(module, HookPoint):
            module.name = name


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """All hook points of a tokengeo model, keyed by their stable names."""
    return {n: m for n, m in model.named_modules() if isinstance(m, HookPoint)}


class HookPointSite:
    """A :class:`HookPoint` seen as a :class:`HookSite` (``fn`` gets the activation only)."""

    def __init__(self, point: HookPoint) -> None:
        self.point = point

    def attach(self, fn: ActivationFn) -> torch.utils.hooks.RemovableHandle:
        return self.point.add_hook(lambda x, _hp: fn(x))
