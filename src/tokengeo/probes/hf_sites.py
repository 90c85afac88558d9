"""TransformerLens-style hook sites on Hugging Face models (every family in the table of
:mod:`tokengeo.models.hf.families`: BERT-likes, ViT, GPT-2, Llama, Mistral, Qwen, Gemma, Phi,
GPT-NeoX, OPT, OLMo, ...).

:func:`hf_hook_sites` gives a Hugging Face model the names tokengeo models have, so
:func:`tokengeo.probes.capture.capture` works on both. Names per block ``l``:

==============================  =====================================================
``hook_embed``                  what enters block 0 (BERT: word + position + type, LayerNorm;
                                GPT-2: wte + wpe; ViT: patches + [CLS] + positions; rotary
                                decoders: the (scaled) token embeddings), ``(B, T, D)``
``hook_pos_embed``              learned absolute position embeddings (BERT-likes, GPT-2, OPT),
                                ``(1 or B, T, D)``; absent with rotary or relative positions
``blocks.{l}.hook_resid_pre``   input of block ``l``, ``(B, T, D)``
``blocks.{l}.attn.hook_q|k|v``  query / key / value projections, ``(B, T, H, Dh)``; keys
                                and values have ``Hkv`` heads under grouped-query attention
                                (``ungroup_kv=True``: repeated to ``H``, query head ``h`` reading
                                KV head ``h // (H/Hkv)``, read-only); before rotary / q-k norms
``blocks.{l}.attn.hook_attn_scores`` the input of eager attention's softmax, ``(B, H, T, T)``
                                (:mod:`tokengeo.probes.hf_scores`; eager attention only)
``blocks.{l}.attn.hook_pattern`` softmax attention weights, ``(B, H, T, T)`` (read-only)
``blocks.{l}.attn.hook_z``      per-head outputs = input of the attention output
                                projection (BERT/ViT ``o_proj``/``attention.output.dense``,
                                GPT-2 ``attn.c_proj``) reshaped to heads, ``(B, T, H, Dh)``
``blocks.{l}.attn.hook_result`` each head's term of that projection, ``z_h W_O_hᵀ``,
                                ``(B, T, H, D)`` (formed only when hooked; the projection's
                                output is their sum plus its bias)
``blocks.{l}.hook_attn_out``    output of that projection, ``(B, T, D)``
``blocks.{l}.hook_resid_mid``   input of the MLP sub-block (BERT is post-LN: there it is
                                ``LayerNorm(x + attn_out)``), ``(B, T, D)``; absent in parallel
                                blocks (GPT-J, Phi, Cohere, GPT-NeoX with parallel residual)
``blocks.{l}.mlp.hook_pre``     the MLP's hidden layer before its activation (gated MLPs: the
                                gate projection's output), ``(B, T, F)``; absent where one
                                fused projection gives gate and up (Phi-3, ModernBERT) and in
                                mixture-of-experts MLPs
``blocks.{l}.mlp.hook_post``    the hidden layer after it (the down projection's input)
``blocks.{l}.hook_mlp_out``     MLP module output before the residual add (Gemma 2/3, OLMo 2:
                                before their post-MLP norm), ``(B, T, D)``
``blocks.{l}.hook_resid_post``  output of block ``l``, ``(B, T, D)``
``hook_final``                  final norm output (decoders, ViT; BERT has none)
``blocks.{l}.ln1|ln2.hook_scale``  the scale ``s`` (B, T, 1) and normalized input (B, T, D)
``...hook_normalized``, ``ln_final.*`` of the norm before attention / MLP (post-LN
                                encoders: after each) and the final norm
                                (:mod:`tokengeo.probes.hf_norms`)
==============================  =====================================================

Attention patterns: Hugging Face returns attention weights only from the ``"eager"``
attention implementation (``sdpa`` and flash kernels never form them). Naming
``hook_pattern`` (or ``hook_attn_scores``) on a model loaded otherwise raises
:class:`ConfigError` asking for eager attention; a wildcard (``"*"``, ``blocks.*``) or a
predicate leaves them out there (``unavailable()`` says why); every other site works with
any implementation. Eager attention always forms the pattern, so capturing it adds no
computation.

Every site may also *replace* its activation (``fn`` returns a tensor of the same shape), or
edit it in place (honoured, also where the site hands out a copy), except ``hook_pattern``
and the ungrouped ``hook_k``/``hook_v``, whose edit would not reach the output (the weights
were already applied; the ungrouped tensor is a copy) and so raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import ActivationFn, HookSite
from tokengeo.models.hf.families import (
    Family,
    HeadShape,
    family_of,
    head_shape,
    is_parallel,
    norm_paths,
    qkv_slicer,
    qkv_writer,
    ungroup,
)
from tokengeo.probes.hf_norms import norm_sites
from tokengeo.probes.hf_scores import Handles, ScoresSite

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
    """Second output of an HF attention module: its softmax weights ``(B, H, T, T)``.

    ``weights_flag`` (MPNet: ``output_attentions``) is a keyword without which the module
    returns no weights: a pre-hook sets it for as long as the site is attached.
    """

    def __init__(self, module: nn.Module, model: nn.Module, weights_flag: str | None = None):
        super().__init__(module, get=_pattern_get, put=_pattern_put)
        self.model = model
        self.weights_flag = weights_flag

    def unavailable(self) -> str | None:
        """Why this model cannot show its pattern (not eager attention), or None."""
        impl = getattr(self.model.config, "_attn_implementation", None)
        if impl == "eager":
            return None
        return (f"attention patterns need eager attention, but this model uses "
                f"attn_implementation={impl!r}: load it with "
                f"from_pretrained(..., attn_implementation=\"eager\") or call "
                f"model.set_attn_implementation(\"eager\")")

    def attach(self, fn: ActivationFn):
        why = self.unavailable()
        if why is not None:
            raise ConfigError(why)
        handle = super().attach(fn)
        if self.weights_flag is None:
            return handle
        flag = self.weights_flag

        def ask_weights(_mod, args, kwargs):
            return args, {**kwargs, flag: True}

        return Handles(handle, self.module.register_forward_pre_hook(ask_weights,
                                                                      with_kwargs=True))


def _pattern_get(output) -> torch.Tensor:
    if not isinstance(output, tuple) or len(output) < 2 or output[1] is None:
        raise ConfigError("the attention module returned no weights: load the model with "
                          "attn_implementation=\"eager\"")
    return output[1]


def _pattern_put(_old, _new):
    raise ConfigError("hook_pattern is read-only on Hugging Face models: the attention weights "
                      "were already applied when the hook runs")


class _ResultSite:
    """Each head's term of the output projection, ``r_h = z_h W_O_hᵀ`` (B, T, H, D), from the
    projection's input z and its weight (as TransformerLens' ``hook_result``). What ``fn``
    returns replaces the projection's output by ``Σ_h r_h + b``."""

    def __init__(self, module: nn.Module, n_heads: int) -> None:
        self.module, self.n_heads = module, n_heads

    def _weight(self) -> torch.Tensor:
        """W_O as (D, H*Dh): ``nn.Linear`` keeps it so; GPT-2's ``Conv1D`` keeps it transposed."""
        w = self.module.weight
        conv1d = any(c.__name__ == "Conv1D" for c in type(self.module).__mro__)
        return w.T if conv1d else w  # (a laplacianized model's class is a subclass)

    def attach(self, fn: ActivationFn):
        def hook(mod, args, kwargs, output):
            z = args[0] if args else kwargs["hidden_states"]  # (B, T, H*Dh)
            heads = z.unflatten(-1, (self.n_heads, -1))  # (B, T, H, Dh)
            w = self._weight().unflatten(1, (self.n_heads, -1))  # (D, H, Dh)
            new = fn(torch.einsum("...hk,dhk->...hd", heads, w))  # (B, T, H, D)
            if new is None:
                return None
            out = new.sum(dim=-2)
            bias = getattr(mod, "bias", None)
            return _identity_put(output, out if bias is None else out + bias)

        return self.module.register_forward_hook(hook, with_kwargs=True)


def _heads_view(n_heads: int) -> tuple[Get, Put]:
    """(B, T, H*Dh) <-> (B, T, H, Dh)."""

    def get(x):
        x = _identity_get(x)
        return x.view(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)

    def put(old, new):
        return _identity_put(old, new.reshape(*new.shape[:-2], -1))

    return get, put


def _part_view(family: Family, which: int, shape: HeadShape, ungrouped: bool) -> tuple[Get, Put]:
    """Output of the q/k/v (or fused qkv) projection -> part ``which`` as (B, T, n, Dh)."""
    take = qkv_slicer(family.qkv_split, which, shape)
    write = qkv_writer(family.qkv_split, which, shape)
    n_heads = shape.n_heads if which == 0 else shape.n_kv_heads

    def get(x):
        part = take(_identity_get(x))
        heads = part.unflatten(-1, (n_heads, shape.head_dim))  # (B, T, n, Dh)
        return ungroup(heads, shape.groups) if ungrouped and which else heads

    def put(old, new):
        if ungrouped and which and shape.groups > 1:
            raise ConfigError("ungrouped hook_k/hook_v are read-only: replace the grouped "
                              "activation (capture with ungroup_kv=False)")
        return _identity_put(old, write(_identity_get(old), new.flatten(-2)))

    return get, put


def hf_hook_sites(model: nn.Module, *, ungroup_kv: bool = False) -> dict[str, HookSite]:
    """Named hook sites of a supported Hugging Face model (incl. ``*For*`` heads).

    ``ungroup_kv=True`` gives ``hook_k``/``hook_v`` one entry per query head.
    """
    family = family_of(model, "hook sites")
    config = model.config.get_text_config()
    base = getattr(model, "base_model", model)
    shape = head_shape(config)
    blocks = _module(base, family.blocks, config.model_type)
    if family.embed is not None:
        sites: dict[str, HookSite] = {"hook_embed": _OutputSite(_module(base, family.embed,
                                                                        config.model_type))}
    else:
        sites = {"hook_embed": _InputSite(blocks[0])}
    if family.pos_embed is not None:
        sites["hook_pos_embed"] = _OutputSite(_module(base, family.pos_embed, config.model_type))
    for l, block in enumerate(blocks):
        sites.update(_block_sites(model, block, l, family, shape, ungroup_kv))
    if family.final is not None and _has_module(base, family.final):
        final = base.get_submodule(family.final)
        sites["hook_final"] = _OutputSite(final)
        sites.update(norm_sites(final, "ln_final.", "the final norm"))
    return sites


def _block_sites(model, block, l: int, fam: Family, shape: HeadShape, ungroup_kv: bool) -> dict:
    def m(path: str) -> nn.Module:
        return _module(block, path, model.config.model_type)

    p = f"blocks.{l}."
    sites: dict[str, HookSite] = {p + "hook_resid_pre": _InputSite(block)}
    for i, name in enumerate("qkv"):
        path = fam.qkv if fam.qkv is not None else getattr(fam, name)
        sites[p + f"attn.hook_{name}"] = _OutputSite(m(path),
                                                     *_part_view(fam, i, shape, ungroup_kv))
    sites[p + "attn.hook_attn_scores"] = ScoresSite(m(fam.attn), model, shape.n_heads,
                                                    f"of block {l}")
    sites[p + "attn.hook_pattern"] = _PatternSite(m(fam.attn), model, fam.weights_flag)
    sites[p + "attn.hook_z"] = _InputSite(m(fam.out_proj), *_heads_view(shape.n_heads))
    sites[p + "attn.hook_result"] = _ResultSite(m(fam.out_proj), shape.n_heads)
    sites[p + "hook_attn_out"] = _OutputSite(m(fam.out_proj))
    if not is_parallel(fam, model.config.get_text_config()):
        where, path = fam.resid_mid
        site = _OutputSite if where == "output" else _InputSite
        sites[p + "hook_resid_mid"] = site(m(path))
    if fam.mlp_pre is not None:
        sites[p + "mlp.hook_pre"] = _OutputSite(m(fam.mlp_pre))
    if fam.mlp_post is not None:
        sites[p + "mlp.hook_post"] = _InputSite(m(fam.mlp_post))
    sites[p + "hook_mlp_out"] = _OutputSite(m(fam.mlp))
    for name, path in zip(("ln1", "ln2"), norm_paths(fam), strict=True):
        if path is not None:
            sites.update(norm_sites(m(path), f"{p}{name}.", f"{name} of block {l}"))
    sites[p + "hook_resid_post"] = _OutputSite(block)
    return sites


def _has_module(root: nn.Module, path: str) -> bool:
    try:
        root.get_submodule(path)
    except AttributeError:
        return False
    return True


def _module(root: nn.Module, path: str, kind: str):
    try:
        return root.get_submodule(path)
    except AttributeError as exc:
        raise ConfigError(
            f"Hugging Face {kind} model has no module {path!r} ({exc}); tokengeo's adapter "
            "follows the module layout of transformers 5.x"
        ) from exc
