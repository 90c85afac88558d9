"""``ActivationCache``: the activations of one run by name, stacked by layer or by head.

It is a ``dict`` ``{name: tensor}`` (what :func:`tokengeo.probes.capture.run_with_cache`
returned before), with TransformerLens' conveniences:

* ``cache["z", 3]`` is ``cache["blocks.3.attn.hook_z"]`` (``cache["resid_post", -1]`` the last
  block's, counting from the model's number of blocks); short names are those of
  :func:`act_name` (``resid_pre``, ``resid_mid``, ``resid_post``, ``attn_out``, ``mlp_out``,
  ``q``, ``k``, ``v``, ``z``, ``pattern``, ``attn_scores``, ``result``, ``pre``, ``post`` (the
  MLP's), ``embed``, ``pos_embed``, ``final``);
* ``cache.stack_layers("resid_post")`` is ``torch.stack([cache["resid_post", l] for l in
  range(L)])``, ``(L, ...)``;
* ``cache.stack_by_head("z")`` puts every (layer, head) first: ``(L*H, B, T, Dh)`` for
  ``q``/``k``/``v``/``z`` (stored ``(B, T, H, Dh)``) and ``(L*H, B, T, T)`` for ``pattern``
  (stored ``(B, H, T, T)``), row ``l*H + h`` being head ``h`` of layer ``l`` (labels
  ``"L{l}H{h}"`` with ``return_labels=True``);
* ``cache.to_str_tokens(ids)``: each token id as text, when a tokenizer is known.

Example::

    logits, cache = tokengeo.run_with_cache(model, ids, names=["blocks.*.attn.hook_z"])
    z = cache.stack_by_head("z")      # (L*H, B, T, Dh)

(TransformerLens' ``stack_head_results`` is another thing: each head's contribution to the
residual stream, ``z_h W_O_h``; here ``stack_by_head`` only moves the head axis of a cached
activation first.)
"""

from __future__ import annotations

import re
from typing import Any

import torch

from tokengeo.errors import ConfigError

ATTENTION_SITES = ("q", "k", "v", "z", "pattern", "attn_scores", "result")
MLP_SITES = ("pre", "post")
_HEADS_SECOND = ("pattern", "attn_scores")  # stored (B, H, T, T); the others (B, T, H, ...)
_LAYER = re.compile(r"^blocks\.(\d+)\.(.+)$")


def act_name(name: str, layer: int | None = None) -> str:
    """The full site name of a short one: ``act_name("z", 3) == "blocks.3.attn.hook_z"``,
    ``act_name("resid_post", 0) == "blocks.0.hook_resid_post"``, ``act_name("embed") ==
    "hook_embed"``. A full name (containing ``hook_``) is returned unchanged."""
    if "hook_" in name:
        return name
    if name in ATTENTION_SITES:
        suffix = f"attn.hook_{name}"
    else:
        suffix = f"mlp.hook_{name}" if name in MLP_SITES else f"hook_{name}"
    return suffix if layer is None else f"blocks.{layer}.{suffix}"


def _suffix(name: str) -> str:
    """What follows ``blocks.{l}.`` in a site name, for a short or a per-layer name."""
    full = act_name(name)
    m = _LAYER.match(full)
    return m.group(2) if m else full


class ActivationCache(dict):
    """``{site name: activation}`` of one forward pass; see the module docstring.

    ``tokenizer``: anything with ``decode(list[int]) -> str`` (a Hugging Face tokenizer, a
    tokengeo one), for :meth:`to_str_tokens`. ``n_layers``: the model's number of blocks,
    against which a negative layer counts (default: one more than the largest cached).
    """

    def __init__(self, activations: Any = (), *, tokenizer: Any = None,
                 n_layers: int | None = None) -> None:
        super().__init__(activations)
        self.tokenizer = tokenizer
        self.n_layers = n_layers

    def _layer(self, layer: Any) -> int | None:
        """A layer index, a negative one counted from the end."""
        if layer is None or isinstance(layer, bool) or not isinstance(layer, int):
            if layer is None:
                return None
            raise ConfigError(f"a layer index is an int, got {layer!r}")
        if layer >= 0:
            return layer
        n = self.n_layers
        if n is None:
            found = [int(m.group(1)) for key in self if (m := _LAYER.match(key)) is not None]
            n = max(found) + 1 if found else 0
        if layer < -n:
            raise KeyError(f"layer {layer} of a model of {n} blocks")
        return n + layer

    def __getitem__(self, key: str | tuple[str, int]) -> torch.Tensor:
        if isinstance(key, tuple):
            key = act_name(key[0], *(self._layer(x) for x in key[1:]))
        try:
            return super().__getitem__(key)
        except KeyError:
            raise KeyError(f"{key!r} is not in the cache; it holds {len(self)} activations, "
                           f"e.g. {', '.join(list(self)[:6])}") from None

    def layers_of(self, name: str) -> list[int]:
        """The layers whose ``name`` (short or per-layer suffix) is cached, ascending."""
        suffix = _suffix(name)
        found = [int(m.group(1)) for key in self
                 if (m := _LAYER.match(key)) is not None and m.group(2) == suffix]
        if not found:
            raise ConfigError(f"no layer of {suffix!r} is cached; capture it, e.g. "
                              f"names=['blocks.*.{suffix}']")
        return sorted(found)

    def stack_layers(self, name: str) -> torch.Tensor:
        """``(L, ...)``: ``name`` of every cached layer, in layer order (layers must be
        contiguous from 0, so that row ``l`` is layer ``l``)."""
        layers = self.layers_of(name)
        if layers != list(range(len(layers))):
            raise ConfigError(f"layers {layers} of {_suffix(name)!r} are cached; stacking needs "
                              "every layer from 0 (capture blocks.*)")
        suffix = _suffix(name)
        return torch.stack([super(ActivationCache, self).__getitem__(f"blocks.{l}.{suffix}")
                            for l in layers])

    def stack_by_head(self, name: str = "z", *, return_labels: bool = False):
        """``(L*H, ...)``: every head of every layer first, row ``l*H + h``; with
        ``return_labels`` also the labels ``["L0H0", "L0H1", ...]``."""
        suffix = _suffix(name)
        short = suffix.removeprefix("attn.hook_")
        if short not in ATTENTION_SITES or not suffix.startswith("attn."):
            raise ConfigError(f"{suffix!r} has no head axis; stack_by_head takes one of "
                              f"{', '.join(ATTENTION_SITES)}")
        stacked = self.stack_layers(suffix)  # (L, B, T, H, Dh) or (L, B, H, T, T)
        axis = 2 if short in _HEADS_SECOND else stacked.ndim - 2
        heads = stacked.movedim(axis, 1)  # (L, H, ...)
        L, H = heads.shape[:2]
        out = heads.reshape(L * H, *heads.shape[2:])
        if return_labels:
            return out, [f"L{l}H{h}" for l in range(L) for h in range(H)]
        return out

    def to_str_tokens(self, ids: torch.Tensor | list[int]) -> list[str]:
        """Each id of a 1-D sequence (or ``(1, T)`` batch) as its text."""
        if self.tokenizer is None:
            raise ConfigError("this cache knows no tokenizer: pass tokenizer= to "
                              "run_with_cache (or ActivationCache(..., tokenizer=tok))")
        if isinstance(ids, torch.Tensor):
            if ids.ndim == 2 and ids.shape[0] == 1:
                ids = ids[0]
            if ids.ndim != 1:
                raise ConfigError(f"to_str_tokens takes one sequence; got ids shaped "
                                  f"{tuple(ids.shape)}")
            ids = ids.tolist()
        return [self.tokenizer.decode([int(i)]) for i in ids]

    def to(self, device: str | torch.device) -> ActivationCache:
        """A copy with every activation on ``device``."""
        return ActivationCache({k: v.to(device) for k, v in self.items()},
                               tokenizer=self.tokenizer, n_layers=self.n_layers)
