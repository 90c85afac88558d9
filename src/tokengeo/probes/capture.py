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
from collections.abc import Callable, Iterable, Iterator, Mapping
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


Selector = str | Callable[[str], bool]  # a name, a shell pattern or a predicate on names


def selectors(names: Selector | Iterable[Selector] | None, what: str = "names") -> list:
    """``names`` as a list of selectors: one name, pattern or predicate, or several (a string
    is one name, never a sequence of characters); None is every site (``"*"``)."""
    if names is None:
        return ["*"]
    if isinstance(names, str) or callable(names):
        return [names]
    if isinstance(names, Iterable):
        found = list(names)
        bad = [n for n in found if not (isinstance(n, str) or callable(n))]
        if not bad:
            return found
    raise ConfigError(f"{what} takes a site name, a shell pattern, a predicate "
                      f"(lambda name: ...) or a list of them; got {names!r}")


def select(sites: Mapping[str, Any], selector: Selector) -> list[str]:
    """The site names one selector picks. A shell pattern or predicate skips the sites that
    cannot serve this model (a pattern of an sdpa Hugging Face model) as long as it picks
    others; an exact name, or a selector that picks only such sites, raises their reason."""
    available = list(sites)
    if callable(selector):
        hits, what = [n for n in available if selector(n)], "the name filter"
    elif isinstance(selector, str):
        hits = [n for n in available if fnmatch.fnmatchcase(n, selector)]
        what = repr(selector)
    else:
        raise ConfigError(f"a hook name is a string or a predicate, got "
                          f"{type(selector).__name__}")
    if not hits:
        raise ConfigError(f"no hook point matches {what}; available names include: "
                          f"{', '.join(available[:8])} ({len(available)} in all; see "
                          "tokengeo.probes.capture.hook_sites(model))")
    reasons = {n: why for n in hits
               if (why := getattr(sites[n], "unavailable", lambda: None)()) is not None}
    served = [n for n in hits if n not in reasons]
    if reasons and (not served or selector in sites):
        raise ConfigError(next(iter(reasons.values())))
    return served


def resolve_names(sites: Mapping[str, Any], names: Selector | Iterable[Selector] | None
                  ) -> list[str]:
    """Every site name the selectors pick (see :func:`select`), each once, in order."""
    out: list[str] = []
    for selector in selectors(names):
        out.extend(h for h in select(sites, selector) if h not in out)
    return out


@contextmanager
def capture(
    model: nn.Module, names: Selector | Iterable[Selector] | None, *, detach: bool = True,
    device: str | torch.device | None = None, ungroup_kv: bool = False,
) -> Iterator[dict[str, torch.Tensor]]:
    """Context manager filling a dict ``{name: activation}`` during forward passes.

    ``names``: see :func:`resolve_names`. Each forward pass overwrites the entry.
    ``device="cpu"`` moves captured tensors.
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


RUN_WITH_CACHE_KEYWORDS = ("names", "names_filter", "tokenizer", "ungroup_kv", "device",
                           "remove_batch_dim")


def run_with_cache(
    model: nn.Module, *args: Any, names: Selector | Iterable[Selector] | None = None,
    names_filter: Selector | Iterable[Selector] | None = None, tokenizer: Any = None,
    ungroup_kv: bool = False, device: str | torch.device | None = None,
    remove_batch_dim: bool = False, **kwargs: Any
) -> tuple[Any, ActivationCache]:
    """Run ``model(*args, **kwargs)`` and return ``(output, cache)``.

    ``names`` (or TransformerLens' spelling ``names_filter``; not both): a site name, a shell
    pattern, a predicate ``lambda name: ...`` or a list of them; default every site (on a
    Hugging Face model without eager attention: every site but the patterns, which need
    ``attn_implementation="eager"``). ``cache`` is an
    :class:`~tokengeo.probes.activation_cache.ActivationCache` (a dict ``{name:
    activation}`` that also stacks by layer and head); ``tokenizer`` lets it turn ids back
    into text (``cache.to_str_tokens(ids)``). ``ungroup_kv``: see :func:`hook_sites`.
    ``device``: where the cached tensors go; ``remove_batch_dim``: drop the batch axis of a
    batch of one. Keyword arguments the model's ``forward`` does not take are refused.
    """
    from tokengeo.probes.forward_args import check_forward_kwargs

    if names is not None and names_filter is not None:
        raise ConfigError("give names= or names_filter= (TransformerLens' name), not both")
    check_forward_kwargs(model, kwargs, "run_with_cache", RUN_WITH_CACHE_KEYWORDS)
    with capture(model, names if names_filter is None else names_filter,
                 ungroup_kv=ungroup_kv, device=device) as cache:
        out = model(*args, **kwargs)
    if remove_batch_dim:
        cache = _without_batch_axis(cache)
    return out, ActivationCache(cache, tokenizer=tokenizer,
                                n_layers=n_layers_of(hook_sites(model, ungroup_kv=ungroup_kv)))


def _without_batch_axis(cache: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    sizes = {tuple(x.shape[:1]) for x in cache.values()}
    if sizes - {(1,)}:
        raise ConfigError(f"remove_batch_dim=True needs a batch of one; the activations have "
                          f"batch sizes {sorted(s[0] for s in sizes if s)}")
    return {name: x[0] for name, x in cache.items()}


def n_layers_of(names: Iterable[str]) -> int:
    """How many blocks the site names span (``blocks.{l}.``), 0 when none."""
    layers = [int(n.split(".")[1]) for n in names
              if n.startswith("blocks.") and n.split(".")[1].isdigit()]
    return max(layers) + 1 if layers else 0
