"""``hook_scale`` and ``hook_normalized`` of Hugging Face norms (TransformerLens' names).

A LayerNorm computes ``y = (x - mean x) / s · w + b`` with ``s = sqrt(var x + eps)`` (Ba et
al. 2016); an RMSNorm ``y = x / s · w`` with ``s = sqrt(mean x² + eps)`` (Zhang & Sennrich
2019), Gemma's with ``(1 + w)`` for ``w``. ``hook_scale`` sees ``s`` (B, T, 1) and
``hook_normalized`` sees ``x̂ = (x - mean x) / s`` (or ``x / s``) (B, T, D), both in float32
as the Hugging Face norms compute them. The norm module runs as it is; a forward hook then
forms ``s`` and ``x̂`` from its input and shows them: when neither is replaced (nor edited
in place) the module's own output flows on untouched; when one is, the output is formed
again from the edited parts, ``x̂ · w (+ b)`` in the module's formula, with ``x̂``
recomputed from an edited ``s``.

Each call checks first that the decomposition rebuilds the module's own output (to a few
ulps of its dtype), and raises otherwise, so a norm whose formula is not one of the above
is refused at its first forward pass, never shown as something else. The sites exist for the
norms a family has before attention (``ln1``) and before the MLP (``ln2``; in post-LN
encoders, BERT-likes, the norms after the attention and after the MLP) and the final norm
(``ln_final``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import ActivationFn

PARTS = ("hook_scale", "hook_normalized")
_TAP_KEY = "_tokengeo_norm_tap"  # in a norm module's __dict__: its _NormTap


@dataclass(frozen=True)
class NormKind:
    """How a norm class computes: ``centred`` (LayerNorm) or not (RMSNorm), and the offset
    added to its weight (Gemma's ``1 + w``)."""

    centred: bool
    weight_offset: float = 0.0


def norm_kind(module: nn.Module) -> NormKind | None:
    """The :class:`NormKind` of a norm module, or None when it is not one tokengeo knows."""
    name = type(module).__name__
    if isinstance(module, nn.LayerNorm) or name.endswith("LayerNorm"):
        return NormKind(centred=True)
    if name.endswith("RMSNorm"):
        return NormKind(centred=False, weight_offset=1.0 if name.startswith("Gemma") else 0.0)
    return None


def _eps(module: nn.Module) -> float:
    for attr in ("eps", "variance_epsilon"):
        value = getattr(module, attr, None)
        if isinstance(value, float):
            return value
    return 1e-5  # a norm that keeps none (OLMo's): the check below says whether it is right


def decompose(module: nn.Module, kind: NormKind, x: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(centred or plain x, s) in float32: (B, T, D), (B, T, 1)."""
    x32 = x.float()
    if kind.centred:
        x32 = x32 - x32.mean(-1, keepdim=True)
    return x32, (x32.pow(2).mean(-1, keepdim=True) + _eps(module)).sqrt()


def finish(module: nn.Module, kind: NormKind, normalized: torch.Tensor,
           dtype: torch.dtype) -> torch.Tensor:
    """``x̂ · (w + offset) + b`` in float32, cast to the module's output dtype."""
    weight = getattr(module, "weight", None)
    bias = getattr(module, "bias", None)
    y = normalized
    if isinstance(weight, torch.Tensor):
        y = y * (weight.float() + kind.weight_offset)
    if isinstance(bias, torch.Tensor):
        y = y + bias.float()
    return y.to(dtype)


@dataclass
class _NormTap:
    """One forward hook on a norm module that serves both of its sites."""

    module: nn.Module
    kind: NormKind
    where: str
    fns: dict[str, list[ActivationFn]] = field(default_factory=lambda: {p: [] for p in PARTS})
    handle: object = None

    def add(self, part: str, fn: ActivationFn) -> _Removal:
        self.fns[part].append(fn)
        if self.handle is None:
            # first of the module's forward hooks: it sees the module's own output
            self.handle = self.module.register_forward_hook(self._hook, prepend=True)
        return _Removal(self, part, fn)

    def drop(self, part: str, fn: ActivationFn) -> None:
        if fn in self.fns[part]:
            self.fns[part].remove(fn)
        if self.handle is not None and not any(self.fns.values()):
            self.handle.remove()
            self.handle = None

    def _hook(self, _mod, args, output):
        x = args[0]  # (B, T, D)
        base, scale = decompose(self.module, self.kind, x)
        self._check(finish(self.module, self.kind, base / scale, output.dtype), output)
        edited = False
        for fn in list(self.fns["hook_scale"]):
            new = fn(scale)
            if new is not None:
                scale, edited = new, True
        normalized = base / scale
        for fn in list(self.fns["hook_normalized"]):
            new = fn(normalized)
            if new is not None:
                normalized, edited = new, True
        return finish(self.module, self.kind, normalized, output.dtype) if edited else None

    def _check(self, rebuilt: torch.Tensor, output: torch.Tensor) -> None:
        tol = 16 * torch.finfo(output.dtype).eps
        gap = (rebuilt.float() - output.float()).abs()
        if bool((gap > tol * (output.float().abs() + 1)).any()):
            raise ConfigError(
                f"hook_scale/hook_normalized: tokengeo's decomposition of {self.where} "
                f"({type(self.module).__name__}) does not rebuild its output (off by "
                f"{gap.max().item():.3g}): its formula is not a LayerNorm's or an RMSNorm's, "
                "so these sites are not available on it")


@dataclass(frozen=True)
class _Removal:
    tap: _NormTap
    part: str
    fn: ActivationFn

    def remove(self) -> None:
        self.tap.drop(self.part, self.fn)


@dataclass(frozen=True)
class NormSite:
    """``hook_scale`` or ``hook_normalized`` of one norm module."""

    tap: _NormTap
    part: str

    def attach(self, fn: ActivationFn) -> _Removal:
        return self.tap.add(self.part, fn)


def norm_sites(module: nn.Module | None, prefix: str, where: str) -> dict[str, NormSite]:
    """``{prefix + "hook_scale": ..., prefix + "hook_normalized": ...}`` of a norm module;
    empty when ``module`` is None or not a norm tokengeo knows (:func:`norm_kind`)."""
    kind = None if module is None else norm_kind(module)
    if kind is None:
        return {}
    tap = module.__dict__.get(_TAP_KEY)  # one per module, whoever asks for its sites
    if tap is None:
        tap = module.__dict__[_TAP_KEY] = _NormTap(module, kind, where)
    return {prefix + part: NormSite(tap, part) for part in PARTS}
