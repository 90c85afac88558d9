"""Capture named activations of tokengeo and Hugging Face models.

Names follow TransformerLens: ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.attn.hook_z``
(per-head outputs before the output projection, ``(B, T, H, Dh)``),
``blocks.{l}.attn.hook_pattern`` (``(B, H, T, T)``, computed only when captured),
``blocks.{l}.hook_resid_post``, ... Names may be shell patterns (``blocks.*.attn.hook_z``).

A *hook site* (:class:`tokengeo.hooks.HookSite`) is anything with ``attach(fn) -> handle``
where ``fn(tensor)`` sees the activation and may return a replacement. tokengeo models
expose their :class:`~tokengeo.hooks.HookPoint` modules as sites; Hugging Face models get
the same names from :func:`tokengeo.probes.hf_sites.hf_hook_sites`. Hooks are always removed when
the context exits, also on error.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import ActivationFn, HookPoint, HookPointSite, HookSite
from tokengeo.probes.activation_cache import ActivationCache
from tokengeo.probes.hf_sites import hf_hook_sites


def hook_sites(model: nn.Module, *, ungroup_kv: bool = False) -> dict[str, HookSite]:
    """Every named hook site of ``model`` (tokengeo or supported Hugging Face model).

    ``ungroup_kv``: Hugging Face grouped-query models give ``hook_k``/``hook_v`` one entry per
    query head instead of per KV head.
    """
    if is_hf_model(model):
        return hf_hook_sites(model, ungroup_kv=ungroup_kv)
    points = {n: m for n, m in model.named_modules() if isinstance(m, HookPoint)}
    wrapped = wrapped_hf_model(model)
    if wrapped is not None:  # e.g. HFCausalLM (``hf:`` models): the HF model's sites, and
        # the wrapper's own hook points (its hook_final) in place of the same-named ones
        sites = hf_hook_sites(wrapped, ungroup_kv=ungroup_kv)
        return {**sites, **{n: HookPointSite(p) for n, p in points.items()}}
    if points:
        return {n: HookPointSite(p) for n, p in points.items()}
    raise ConfigError(
        f"{type(model).__name__} has no hook points: use a tokengeo model or a supported "
        "Hugging Face model (see tokengeo.models.hf.families.FAMILIES)"
    )


def wrapped_hf_model(model: nn.Module) -> nn.Module | None:
    """The Hugging Face model a tokengeo wrapper holds as a direct child (``HFCausalLM.hf``),
    or None. A wrapper has at most one, and its hook sites are that model's. A Hugging Face
    model is no wrapper: its own children (``BertModel.encoder``) carry its config too, but
    only a whole pretrained model (one with a ``base_model``) counts as wrapped."""
    if is_hf_model(model):
        return None
    inner = [m for m in model.children() if is_hf_model(m) and _is_pretrained(m)]
    return inner[0] if len(inner) == 1 else None


def is_hf_model(model: nn.Module) -> bool:
    return hasattr(model, "config") and hasattr(model.config, "model_type")


def _is_pretrained(model: nn.Module) -> bool:
    """A whole Hugging Face model (``PreTrainedModel`` has ``base_model``), not one of its
    submodules that keeps a reference to the config."""
    return hasattr(type(model), "base_model")


def resolve_names(available: Iterable[str], names: Iterable[str]) -> list[str]:
    """Expand shell patterns; an unknown name raises with examples of valid ones."""
    available = list(available)
    out: list[str] = []
    for pattern in names:
        hits = [a for a in available if fnmatch.fnmatchcase(a, pattern)]
        if not hits:
            examples = ", ".join(available[:8])
            raise ConfigError(
                f"no hook point matches {pattern!r}; available names include: {examples} "
                f"({len(available)} in all; see tokengeo.probes.capture.hook_sites(model))"
            )
        out.extend(h for h in hits if h not in out)
    return out


@contextmanager
def capture(
    model: nn.Module, names: Iterable[str], *, detach: bool = True, device: str | None = None,
    ungroup_kv: bool = False,
) -> Iterator[dict[str, torch.Tensor]]:
    """Context manager filling a dict ``{name: activation}`` during forward passes.

    Each forward pass overwrites the entry. ``device="cpu"`` moves captured tensors.
    ``ungroup_kv=True``: see :func:`hook_sites`.
    """
    sites = hook_sites(model, ungroup_kv=ungroup_kv)
    cache: dict[str, torch.Tensor] = {}
    handles = []
    try:
        for name in resolve_names(sites, names):
            handles.append(sites[name].attach(_recorder(cache, name, detach, device)))
        yield cache
    finally:
        for h in handles:
            h.remove()


def _recorder(cache: dict, name: str, detach: bool, device: str | None) -> ActivationFn:
    def record(x: torch.Tensor) -> None:
        y = x.detach() if detach else x
        cache[name] = y.to(device) if device is not None else y
        return None

    return record


def run_with_cache(
    model: nn.Module, *args: Any, names: Iterable[str] = ("*",), tokenizer: Any = None,
    **kwargs: Any
) -> tuple[Any, ActivationCache]:
    """Run ``model(*args, **kwargs)`` and return ``(output, cache)``.

    ``cache`` is an :class:`~tokengeo.probes.activation_cache.ActivationCache` (a dict
    ``{name: activation}`` that also stacks by layer and head); ``tokenizer`` lets it turn ids
    back into text (``cache.to_str_tokens(ids)``).
    """
    with capture(model, names) as cache:
        out = model(*args, **kwargs)
    return out, ActivationCache(cache, tokenizer=tokenizer)
