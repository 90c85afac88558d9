"""Laplacian heads in Hugging Face transformers models (Zhang & Papyan, arXiv 2602.09297).

A standard head writes ``z_h = P_h V_h`` (``P_h`` the row-stochastic softmax attention
matrix); a Laplacian head writes ``z_h = (I - P_h) V_h = V_h - P_h V_h``. It adds no
parameters. :func:`laplacianize` converts a loaded model in place, whatever its attention
kernel (eager, sdpa, ...), with two hooks per patched layer and no T x T matrix:

1. a forward hook on the value projection keeps ``V`` of the current call, shaped
   (B, T, H*Dh): the values of the *query* tokens (with a KV cache: the new tokens only);
2. a forward pre-hook on the output projection, whose input is the per-head outputs
   ``z = P V`` (B, T, H*Dh), replaces ``z_h`` by ``V_h - z_h`` on the chosen heads.

In training mode the kernel applies attention dropout to ``P``, so a Laplacian head
computes ``V - dropout(P) V``, as tokengeo's own attention does. The chosen heads are
recorded in ``model.config.tokengeo_laplacian_heads`` (``{"layer": [heads]}``), so they
survive ``save_pretrained``; :func:`from_pretrained` reloads a model and re-applies them
(a plain ``transformers`` load gives the unpatched model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from tokengeo._deps import require
from tokengeo.config import check_choice
from tokengeo.errors import ConfigError

CONFIG_KEY = "tokengeo_laplacian_heads"
KINDS = ("laplacian",)
SUPPORTED = (
    "BertModel and its Bert*For* heads (BertForSequenceClassification, BertForMaskedLM, ...), "
    "GPT2Model and its heads (GPT2LMHeadModel, ...), "
    "ViTModel and its heads (ViTForImageClassification, ...)"
)
_PATCH_ATTR = "_tokengeo_laplacian_patch"

HeadChoice = dict[int, list[int]]  # layer index -> sorted head indices


@dataclass
class _Patch:
    """What :func:`laplacianize` installed on a backbone, kept there to undo it."""

    heads: HeadChoice
    handles: list[RemovableHandle]


@dataclass(frozen=True)
class AttentionSite:
    """Where one layer's self-attention computes V and consumes the per-head outputs z."""

    value_module: nn.Module  # its output holds V
    take_value: Callable[[torch.Tensor], torch.Tensor]  # that output -> V (B, T, H*Dh)
    out_proj: nn.Module  # its input is z (B, T, H*Dh)
    n_heads: int
    head_dim: int


def _whole(output: torch.Tensor) -> torch.Tensor:
    return output


def _bert_sites(base: nn.Module) -> list[AttentionSite]:
    """BertLayer: ``attention.self.value`` -> V, ``attention.output.dense`` <- z."""
    sites = []
    for layer in base.encoder.layer:
        attn = layer.attention
        sites.append(
            AttentionSite(
                attn.self.value, _whole, attn.output.dense,
                attn.self.num_attention_heads, attn.self.attention_head_size,
            )
        )
    return sites


def _gpt2_sites(base: nn.Module) -> list[AttentionSite]:
    """GPT2Block: ``attn.c_attn`` -> [Q | K | V] (V the last third), ``attn.c_proj`` <- z."""
    sites = []
    for block in base.h:
        attn = block.attn
        width = attn.split_size

        def take_value(qkv: torch.Tensor, width: int = width) -> torch.Tensor:
            return qkv[..., 2 * width :]  # (B, T, 3*H*Dh) -> (B, T, H*Dh)

        sites.append(
            AttentionSite(attn.c_attn, take_value, attn.c_proj, attn.num_heads, attn.head_dim)
        )
    return sites


def _vit_sites(base: nn.Module) -> list[AttentionSite]:
    """ViTLayer (transformers 5): ``attention.v_proj`` -> V, ``attention.o_proj`` <- z."""
    sites = []
    for layer in base.layers:
        attn = layer.attention
        sites.append(
            AttentionSite(attn.v_proj, _whole, attn.o_proj, attn.num_attention_heads, attn.head_dim)
        )
    return sites


def _base_model(model: Any) -> nn.Module:
    """The backbone (BertModel, GPT2Model, ViTModel) of ``model``, or a ConfigError."""
    transformers = require("transformers")
    base = getattr(model, "base_model", None)
    backbones = (transformers.BertModel, transformers.GPT2Model, transformers.ViTModel)
    if not isinstance(base, backbones):
        raise ConfigError(
            f"laplacianize does not support {type(model).__name__}; supported: {SUPPORTED}"
        )
    return base


def attention_sites(model: Any) -> list[AttentionSite]:
    """One :class:`AttentionSite` per layer of a supported Hugging Face model."""
    transformers = require("transformers")
    base = _base_model(model)
    if isinstance(base, transformers.BertModel):
        return _bert_sites(base)
    if isinstance(base, transformers.GPT2Model):
        return _gpt2_sites(base)
    return _vit_sites(base)


class LaplacianSwap:
    """Hook pair of one layer: ``z_h <- V_h - z_h`` for the heads in ``heads``.

    ``z = P V`` is the output projection's input, so ``V - z = (I - P) V``
    (Zhang & Papyan, arXiv 2602.09297, the Laplacian head).
    """

    def __init__(self, site: AttentionSite, heads: Sequence[int]) -> None:
        self.site = site
        self.is_laplacian = torch.zeros(site.n_heads, dtype=torch.bool)  # (H,)
        self.is_laplacian[list(heads)] = True
        self._value: torch.Tensor | None = None

    def keep_value(self, module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        self._value = self.site.take_value(output)  # (B, T, H*Dh)

    def swap_heads(self, module: nn.Module, args: tuple) -> tuple:
        z = args[0]  # (B, T, H*Dh)
        value, self._value = self._value, None
        if value is None or value.shape != z.shape:
            got = None if value is None else tuple(value.shape)
            raise RuntimeError(
                f"Laplacian hook: output projection called with z {tuple(z.shape)} but the "
                f"value projection gave {got}; the module was called outside its attention layer"
            )
        shape = (*z.shape[:-1], self.site.n_heads, self.site.head_dim)
        z_heads, v_heads = z.reshape(shape), value.reshape(shape)  # (B, T, H, Dh)
        if self.is_laplacian.device != z.device:
            self.is_laplacian = self.is_laplacian.to(z.device)
        is_laplacian = self.is_laplacian.view(-1, 1)  # (H, 1)
        swapped = torch.where(is_laplacian, v_heads - z_heads, z_heads)  # (B, T, H, Dh)
        return (swapped.flatten(-2), *args[1:])

    def install(self) -> list[RemovableHandle]:
        return [
            self.site.value_module.register_forward_hook(self.keep_value),
            self.site.out_proj.register_forward_pre_hook(self.swap_heads),
        ]


def _check_index(what: str, value: Any, size: int, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what}={value!r} must be an int in [0, {size - 1}]")
    if not 0 <= value < size:
        raise ConfigError(
            f"{what}={value} is out of range: the model has {size} {unit} (valid 0..{size - 1})"
        )
    return value


def _last_heads(n_laplacian: Any, n_layers: int, n_heads: int) -> HeadChoice:
    """The last ``k`` heads of every layer, the authors' choice."""
    if isinstance(n_laplacian, bool) or not isinstance(n_laplacian, int):
        raise ConfigError(f"n_laplacian={n_laplacian!r} must be an int in [0, {n_heads}]")
    if not 0 <= n_laplacian <= n_heads:
        raise ConfigError(
            f"n_laplacian={n_laplacian} must lie in [0, {n_heads}] (the model has {n_heads} heads)"
        )
    return {layer: list(range(n_heads - n_laplacian, n_heads)) for layer in range(n_layers)}


def _listed_heads(heads: Any, n_layers: int, n_heads: int) -> HeadChoice:
    """Validate ``{layer: [head indices]}``; layers not listed keep standard heads."""
    if not isinstance(heads, Mapping):
        raise ConfigError(f"heads={heads!r} must be a dict {{layer: [head indices]}}")
    chosen: HeadChoice = {}
    for layer, indices in heads.items():
        _check_index("heads layer index", layer, n_layers, "layers")
        if isinstance(indices, str | bytes) or not isinstance(indices, Sequence):
            raise ConfigError(f"heads[{layer}]={indices!r} must be a list of head indices")
        for head in indices:
            _check_index(f"heads[{layer}] head index", head, n_heads, "heads per layer")
        if len(set(indices)) != len(indices):
            raise ConfigError(f"heads[{layer}]={list(indices)} lists a head twice")
        chosen[layer] = sorted(indices)
    return chosen


def resolve_heads(n_laplacian: Any, heads: Any, n_layers: int, n_heads: int) -> HeadChoice:
    """The Laplacian heads per layer from exactly one of ``n_laplacian`` or ``heads``."""
    if (n_laplacian is None) == (heads is None):
        raise ConfigError(
            "pass exactly one of n_laplacian=k (the last k heads of every layer) or "
            "heads={layer: [head indices]}"
        )
    if heads is None:
        chosen = _last_heads(n_laplacian, n_layers, n_heads)
    else:
        chosen = _listed_heads(heads, n_layers, n_heads)
    return {layer: idx for layer, idx in sorted(chosen.items()) if idx}


def laplacianize(
    model: Any,
    n_laplacian: int | None = None,
    *,
    heads: Mapping[int, Sequence[int]] | None = None,
    kind: str = "laplacian",
) -> Any:
    """Make chosen heads of a Hugging Face model Laplacian, in place; returns ``model``.

    A Laplacian head outputs ``(I - P) V = V - P V`` instead of ``P V`` (Zhang & Papyan,
    arXiv 2602.09297). Choose heads with ``n_laplacian=k`` (the last ``k`` of ``H`` heads
    in every layer, as the authors) or ``heads={layer: [head indices]}``. A new call
    replaces the previous patch; ``n_laplacian=0`` (or ``heads={}``) leaves the model
    exactly as unpatched. Supported: BERT, GPT-2 and ViT models (see ``SUPPORTED``).

    Raises :class:`~tokengeo.errors.ConfigError` on bad input.
    """
    check_choice("kind", kind, KINDS)
    sites = attention_sites(model)
    chosen = resolve_heads(n_laplacian, heads, len(sites), sites[0].n_heads)
    unlaplacianize(model)
    handles = []
    for layer, indices in chosen.items():
        handles += LaplacianSwap(sites[layer], indices).install()
    if chosen:
        setattr(_base_model(model), _PATCH_ATTR, _Patch(chosen, handles))
        setattr(model.config, CONFIG_KEY, {str(layer): idx for layer, idx in chosen.items()})
    return model


def unlaplacianize(model: Any) -> Any:
    """Remove the Laplacian heads of :func:`laplacianize`, in place; returns ``model``."""
    base = _base_model(model)
    patch = getattr(base, _PATCH_ATTR, None)
    if patch is not None:
        for handle in patch.handles:
            handle.remove()
        delattr(base, _PATCH_ATTR)
    if hasattr(model.config, CONFIG_KEY):
        delattr(model.config, CONFIG_KEY)
    return model


def laplacian_heads(model: Any) -> HeadChoice:
    """The Laplacian heads active in a model, ``{layer: [heads]}`` (empty when unpatched)."""
    patch = getattr(_base_model(model), _PATCH_ATTR, None)
    return {} if patch is None else {layer: list(idx) for layer, idx in patch.heads.items()}


def recorded_heads(config: Any) -> HeadChoice:
    """The Laplacian heads recorded in a (possibly reloaded) config, ``{layer: [heads]}``."""
    recorded = getattr(config, CONFIG_KEY, None) or {}
    return {int(layer): list(idx) for layer, idx in recorded.items()}


def _saved_class(config: Any) -> type:
    """The transformers class named first in ``config.architectures``."""
    transformers = require("transformers")
    names = getattr(config, "architectures", None) or []
    cls = getattr(transformers, names[0], None) if names else None
    if cls is None:
        raise ConfigError(
            f"the saved config names no loadable architecture ({names}); pass model_cls="
        )
    return cls


def from_pretrained(path: str, model_cls: type | None = None, **kwargs: Any) -> Any:
    """Load a saved model and re-apply the Laplacian heads recorded in its config.

    ``model_cls`` defaults to the class in ``config.architectures`` (the class that was
    saved); ``kwargs`` go to ``model_cls.from_pretrained`` (e.g. ``attn_implementation``).
    """
    transformers = require("transformers")
    if model_cls is None:
        model_cls = _saved_class(transformers.AutoConfig.from_pretrained(path))
    model = model_cls.from_pretrained(path, **kwargs)
    recorded = recorded_heads(model.config)
    if recorded:
        laplacianize(model, heads=recorded)
    return model


def load(name: str, **kwargs: Any) -> Any:
    """``(model, tokenizer)`` of a named pretrained model, offline (``"smollm2-135m"``).

    See :func:`tokengeo.models.pretrained.load` (the names, the cache, the install command).
    """
    from tokengeo.models.pretrained import load as load_pretrained

    return load_pretrained(name, **kwargs)
