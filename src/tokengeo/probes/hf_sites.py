"""TransformerLens-style hook sites on Hugging Face BERT, GPT-2 and ViT models.

:func:`hf_hook_sites` gives a Hugging Face model the names tokengeo models have, so
:func:`tokengeo.probes.capture.capture` works on both. Names per block ``l``:

==============================  =====================================================
``hook_embed``                  output of the embedding module = what enters block 0
                                (BERT: word + position + type, LayerNorm; GPT-2: wte + wpe;
                                ViT: patches + [CLS] + positions), ``(B, T, D)``
``blocks.{l}.hook_resid_pre``   input of block ``l``, ``(B, T, D)``
``blocks.{l}.attn.hook_q|k|v``  query / key / value projections, ``(B, T, H, Dh)``
``blocks.{l}.attn.hook_pattern`` softmax attention weights, ``(B, H, T, T)`` (read-only)
``blocks.{l}.attn.hook_z``      per-head outputs = input of the attention output
                                projection (BERT/ViT ``o_proj``/``attention.output.dense``,
                                GPT-2 ``attn.c_proj``) reshaped to heads, ``(B, T, H, Dh)``
``blocks.{l}.hook_attn_out``    output of that projection, ``(B, T, D)``
``blocks.{l}.hook_resid_mid``   input of the MLP sub-block (BERT is post-LN: there it is
                                ``LayerNorm(x + attn_out)``), ``(B, T, D)``
``blocks.{l}.hook_mlp_out``     MLP output before the residual add, ``(B, T, D)``
``blocks.{l}.hook_resid_post``  output of block ``l``, ``(B, T, D)``
``hook_final``                  final LayerNorm output (GPT-2, ViT; BERT has none)
==============================  =====================================================

Attention patterns: Hugging Face returns attention weights only from the ``"eager"``
attention implementation (``sdpa`` and flash kernels never form them). Attaching to
``hook_pattern`` on a model loaded otherwise raises :class:`ConfigError` asking to load
it with ``attn_implementation="eager"``; every other site works with any implementation.
Eager attention always forms the pattern, so capturing it adds no computation.

Every site may also *replace* its activation (``fn`` returns a tensor), except
``hook_pattern``, whose replacement would not reach the output (the weights were
already applied) and so raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import ActivationFn, HookSite

Get = Callable[[object], torch.Tensor]
Put = Callable[[object, torch.Tensor], object]


def _identity_get(x):
    return x[0] if isinstance(x, tuple) else x


def _identity_put(old, new):
    return (new, *old[1:]) if isinstance(old, tuple) else new


class _OutputSite:
    """Forward hook on ``module``: ``fn(get(output))``, a replacement goes back via ``put``."""

    def __init__(self, module: nn.Module, get: Get = _identity_get, put: Put = _identity_put):
        self.module, self.get, self.put = module, get, put

    def attach(self, fn: ActivationFn):
        def hook(_mod, _args, output):
            new = fn(self.get(output))
            return None if new is None else self.put(output, new)

        return self.module.register_forward_hook(hook)


class _InputSite:
    """Forward pre-hook on ``module``'s first argument (``hidden_states``)."""

    def __init__(self, module: nn.Module, get: Get = _identity_get, put: Put = _identity_put):
        self.module, self.get, self.put = module, get, put

    def attach(self, fn: ActivationFn):
        def hook(_mod, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            new = fn(self.get(x))
            if new is None:
                return None
            new = self.put(x, new)
            if args:
                return (new, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": new}

        return self.module.register_forward_pre_hook(hook, with_kwargs=True)


class _PatternSite(_OutputSite):
    """Second output of an HF attention module: its softmax weights ``(B, H, T, T)``."""

    def __init__(self, module: nn.Module, model: nn.Module):
        super().__init__(module, get=_pattern_get, put=_pattern_put)
        self.model = model

    def attach(self, fn: ActivationFn):
        impl = getattr(self.model.config, "_attn_implementation", None)
        if impl != "eager":
            raise ConfigError(
                f"attention patterns need eager attention, but this model uses "
                f"attn_implementation={impl!r}: load it with "
                f"from_pretrained(..., attn_implementation=\"eager\")"
            )
        return super().attach(fn)


def _pattern_get(output) -> torch.Tensor:
    if not isinstance(output, tuple) or output[1] is None:
        raise ConfigError("the attention module returned no weights: load the model with "
                          "attn_implementation=\"eager\"")
    return output[1]


def _pattern_put(_old, _new):
    raise ConfigError("hook_pattern is read-only on Hugging Face models: the attention weights "
                      "were already applied when the hook runs")


def _heads_view(n_heads: int) -> tuple[Get, Put]:
    """(B, T, H*Dh) <-> (B, T, H, Dh)."""

    def get(x):
        x = _identity_get(x)
        return x.view(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)

    def put(old, new):
        return _identity_put(old, new.reshape(*new.shape[:-2], -1))

    return get, put


def _fused_qkv_view(n_heads: int, which: int) -> tuple[Get, Put]:
    """GPT-2's fused ``c_attn`` output (B, T, 3*D): slice ``which`` as (B, T, H, Dh)."""

    def get(x):
        d = x.shape[-1] // 3
        part = x[..., which * d : (which + 1) * d]
        return part.reshape(*x.shape[:-1], n_heads, d // n_heads)

    def put(old, new):
        parts = list(old.chunk(3, dim=-1))
        parts[which] = new.reshape(*new.shape[:-2], -1)
        return torch.cat(parts, dim=-1)

    return get, put


@dataclass(frozen=True)
class _Layout:
    """Where each site lives, as module paths relative to the base model / a block."""

    blocks: str
    embed: str
    final: str | None
    q: str | None  # separate q/k/v projections (None: GPT-2's fused c_attn)
    k: str | None
    v: str | None
    qkv: str | None
    attn: str  # module returning (output, weights)
    out_proj: str  # input = hook_z, output = hook_attn_out
    mlp_in: str  # pre-hook target whose input is resid_mid
    mlp_in_is_output_of: str | None  # BERT: resid_mid is the output of `attention`
    mlp_out: str


_LAYOUTS = {
    "bert": _Layout(
        blocks="encoder.layer", embed="embeddings", final=None,
        q="attention.self.query", k="attention.self.key", v="attention.self.value", qkv=None,
        attn="attention.self", out_proj="attention.output.dense",
        mlp_in="intermediate", mlp_in_is_output_of="attention", mlp_out="output.dense",
    ),
    "gpt2": _Layout(
        blocks="h", embed="drop", final="ln_f", q=None, k=None, v=None, qkv="attn.c_attn",
        attn="attn", out_proj="attn.c_proj", mlp_in="ln_2", mlp_in_is_output_of=None,
        mlp_out="mlp",
    ),
    "vit": _Layout(
        blocks="layers", embed="embeddings", final="layernorm",
        q="attention.q_proj", k="attention.k_proj", v="attention.v_proj", qkv=None,
        attn="attention", out_proj="attention.o_proj", mlp_in="layernorm_after",
        mlp_in_is_output_of=None, mlp_out="mlp",
    ),
}


def hf_hook_sites(model: nn.Module) -> dict[str, HookSite]:
    """Named hook sites of a Hugging Face BERT / GPT-2 / ViT model (incl. ``*For*`` heads)."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in _LAYOUTS:
        raise ConfigError(
            f"no hook-site adapter for Hugging Face model_type={kind!r}; supported: "
            f"{sorted(_LAYOUTS)}"
        )
    layout = _LAYOUTS[kind]
    base = getattr(model, "base_model", model)
    n_heads = int(config.num_attention_heads)
    sites: dict[str, HookSite] = {"hook_embed": _OutputSite(_module(base, layout.embed, kind))}
    for l, block in enumerate(_module(base, layout.blocks, kind)):
        sites.update(_block_sites(model, block, l, layout, n_heads, kind))
    if layout.final is not None:
        sites["hook_final"] = _OutputSite(_module(base, layout.final, kind))
    return sites


def _block_sites(model, block, l: int, lay: _Layout, n_heads: int, kind: str) -> dict:
    def m(path: str) -> nn.Module:
        return _module(block, path, kind)

    p = f"blocks.{l}."
    sites: dict[str, HookSite] = {p + "hook_resid_pre": _InputSite(block)}
    for i, name in enumerate("qkv"):
        if lay.qkv is not None:
            sites[p + f"attn.hook_{name}"] = _OutputSite(m(lay.qkv), *_fused_qkv_view(n_heads, i))
        else:
            sites[p + f"attn.hook_{name}"] = _OutputSite(m(getattr(lay, name)),
                                                         *_heads_view(n_heads))
    sites[p + "attn.hook_pattern"] = _PatternSite(m(lay.attn), model)
    sites[p + "attn.hook_z"] = _InputSite(m(lay.out_proj), *_heads_view(n_heads))
    sites[p + "hook_attn_out"] = _OutputSite(m(lay.out_proj))
    if lay.mlp_in_is_output_of is not None:
        sites[p + "hook_resid_mid"] = _OutputSite(m(lay.mlp_in_is_output_of))
    else:
        sites[p + "hook_resid_mid"] = _InputSite(m(lay.mlp_in))
    sites[p + "hook_mlp_out"] = _OutputSite(m(lay.mlp_out))
    sites[p + "hook_resid_post"] = _OutputSite(block)
    return sites


def _module(root: nn.Module, path: str, kind: str):
    try:
        return root.get_submodule(path)
    except AttributeError as exc:
        raise ConfigError(
            f"Hugging Face {kind} model has no module {path!r} ({exc}); tokengeo's adapter "
            "follows the module layout of transformers 5.x"
        ) from exc
