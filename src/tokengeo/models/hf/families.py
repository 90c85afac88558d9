"""Where each Hugging Face architecture keeps its self-attention: one table for all adapters.

Both :func:`tokengeo.laplacianize` (value projection -> V, output projection <- z) and the
TransformerLens-style capture (:mod:`tokengeo.probes.hf_sites`) read module paths from
:data:`FAMILIES`, keyed by ``config.model_type``. Every family's attention goes through
``transformers``' attention interface (``ALL_ATTENTION_FUNCTIONS``) or computes ``P V`` in
the same per-head layout, so the per-head outputs ``z`` (B, T, H*Dh) are the input of the
output projection whatever the kernel, and the values of the *current* tokens are the
output of the value projection (with a KV cache: the new tokens only, whatever the cache).

Families whose attention cannot be made Laplacian exactly are in :data:`REFUSED` with the
reason, which :func:`family_of` raises instead of returning a silently wrong model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tokengeo.errors import ConfigError

# How a fused projection lays out Q, K and V along its last dimension.
QKV_SPLITS = ("separate", "thirds", "grouped", "per_head")


@dataclass(frozen=True)
class Family:
    """Module paths of one architecture; attention paths are relative to a block.

    ``qkv_split``: ``separate`` (``q``/``k``/``v`` projections), ``thirds`` (one projection
    ``[Q | K | V]`` of equal widths: GPT-2, ModernBERT), ``grouped`` (``[Q | K | V]`` of widths
    ``H*Dh, Hkv*Dh, Hkv*Dh``: Phi-3), ``per_head`` (per head ``[q_h | k_h | v_h]``: GPT-NeoX).
    ``resid_mid`` is ``("input" | "output", path)``: the residual stream between attention
    and MLP is that module's input or output; ``None`` for parallel blocks (attention and MLP
    read the same input), as when the config flag ``parallel_flag`` is true.
    ``attn_norm``: the norm before the attention (its scale enters a head's value-output map
    in the residual basis). ``weights_flag``: the keyword argument without which the
    attention module returns no weights (MPNet's ``output_attentions``); ``None`` when eager
    attention always returns them.
    """

    blocks: str  # backbone -> ModuleList of blocks
    attn: str  # block -> self-attention module (returns (output, weights))
    out_proj: str  # block -> output projection: input z (B, T, H*Dh)
    mlp: str  # block -> MLP (its output is hook_mlp_out)
    resid_mid: tuple[str, str] | None
    q: str | None = None
    k: str | None = None
    v: str | None = None
    qkv: str | None = None
    qkv_split: str = "separate"
    embed: str | None = None  # backbone -> module whose output enters block 0 (None: its input)
    final: str | None = None  # backbone -> final norm
    causal: bool = True
    parallel_flag: str | None = None
    weights_flag: str | None = None  # keyword the attention needs to return its weights
    # block -> the norm whose output the attention reads (pre-LN); None: it reads the
    # residual stream itself (post-LN encoders, OLMo 2). Read by the smoothing probe.
    attn_norm: str | None = None
    # TransformerLens' MLP sites: block -> the projection whose output is the hidden layer
    # before the activation (gated MLPs: the gate's; None where one fused projection gives
    # gate and up together, or experts), and the one whose input is the hidden layer after it
    mlp_pre: str | None = None
    mlp_post: str | None = None
    pos_embed: str | None = None  # backbone -> module whose output is the position embeddings
    # TransformerLens' ln1 / ln2 where they are not ``attn_norm`` / the norm ``resid_mid``
    # enters (post-LN encoders: the norms after the attention and after the MLP)
    ln1: str | None = None
    ln2: str | None = None

    @property
    def value(self) -> str:
        """Block -> the projection whose output holds V."""
        return self.v if self.qkv is None else self.qkv


def _bert_like() -> Family:
    return Family(
        blocks="encoder.layer", attn="attention.self", out_proj="attention.output.dense",
        mlp="output.dense", resid_mid=("output", "attention"), q="attention.self.query",
        k="attention.self.key", v="attention.self.value", embed="embeddings", causal=False,
        mlp_pre="intermediate.dense", mlp_post="output.dense",
        pos_embed="embeddings.position_embeddings", ln1="attention.output.LayerNorm",
        ln2="output.LayerNorm",
    )


def _llama_like(resid_mid: tuple[str, str] | None = ("input", "post_attention_layernorm"),
                **changes: Any) -> Family:
    fields = dict(
        blocks="layers", attn="self_attn", out_proj="self_attn.o_proj", mlp="mlp",
        resid_mid=resid_mid, q="self_attn.q_proj", k="self_attn.k_proj", v="self_attn.v_proj",
        final="norm", attn_norm="input_layernorm", mlp_pre="mlp.gate_proj",
        mlp_post="mlp.down_proj",
    )
    return Family(**{**fields, **changes})


_GEMMA2 = _llama_like(("input", "pre_feedforward_layernorm"))

FAMILIES: dict[str, Family] = {
    # encoders
    "bert": _bert_like(),
    "roberta": _bert_like(),
    "electra": _bert_like(),
    # MPNet: q/k/v/o all sit inside ``attention.attn``; the relative position bias is added
    # to the scores there, so z (the input of ``o``) is still P V
    "mpnet": Family(
        blocks="encoder.layer", attn="attention.attn", out_proj="attention.attn.o",
        mlp="output.dense", resid_mid=("output", "attention"), q="attention.attn.q",
        k="attention.attn.k", v="attention.attn.v", embed="embeddings", causal=False,
        weights_flag="output_attentions", mlp_pre="intermediate.dense", mlp_post="output.dense",
        pos_embed="embeddings.position_embeddings", ln1="attention.LayerNorm",
        ln2="output.LayerNorm",
    ),
    "distilbert": Family(
        blocks="transformer.layer", attn="attention", out_proj="attention.out_lin", mlp="ffn",
        resid_mid=("output", "sa_layer_norm"), q="attention.q_lin", k="attention.k_lin",
        v="attention.v_lin", embed="embeddings", causal=False, mlp_pre="ffn.lin1",
        mlp_post="ffn.lin2", pos_embed="embeddings.position_embeddings", ln1="sa_layer_norm",
        ln2="output_layer_norm",
    ),
    "modernbert": Family(
        blocks="layers", attn="attn", out_proj="attn.Wo", mlp="mlp",
        resid_mid=("input", "mlp_norm"), qkv="attn.Wqkv", qkv_split="thirds",
        embed="embeddings", final="final_norm", causal=False, attn_norm="attn_norm",
        mlp_post="mlp.Wo",
    ),
    "vit": Family(
        blocks="layers", attn="attention", out_proj="attention.o_proj", mlp="mlp",
        resid_mid=("input", "layernorm_after"), q="attention.q_proj", k="attention.k_proj",
        v="attention.v_proj", embed="embeddings", final="layernorm", causal=False,
        attn_norm="layernorm_before", mlp_pre="mlp.fc1", mlp_post="mlp.fc2",
    ),
    # decoders
    "gpt2": Family(
        blocks="h", attn="attn", out_proj="attn.c_proj", mlp="mlp",
        resid_mid=("input", "ln_2"), qkv="attn.c_attn", qkv_split="thirds", embed="drop",
        final="ln_f", attn_norm="ln_1", mlp_pre="mlp.c_fc", mlp_post="mlp.c_proj",
        pos_embed="wpe",
    ),
    "llama": _llama_like(),
    "mistral": _llama_like(),
    "mixtral": _llama_like(mlp_pre=None, mlp_post=None),  # experts
    "qwen2": _llama_like(),
    "qwen3": _llama_like(),
    "qwen3_moe": _llama_like(mlp_pre=None, mlp_post=None),
    "gemma": _llama_like(),
    "gemma2": _GEMMA2,
    "gemma3_text": _GEMMA2,
    "granite": _llama_like(),
    "smollm3": _llama_like(),
    "starcoder2": _llama_like(mlp_pre="mlp.c_fc", mlp_post="mlp.c_proj"),
    "olmo": _llama_like(),
    "olmo2": _llama_like(("input", "mlp"), attn_norm=None),  # norms after attention
    "cohere": _llama_like(None),
    "phi": _llama_like(None, out_proj="self_attn.dense", final="final_layernorm",
                       mlp_pre="mlp.fc1", mlp_post="mlp.fc2"),
    "phi3": _llama_like(q=None, k=None, v=None, qkv="self_attn.qkv_proj", qkv_split="grouped",
                        mlp_pre=None),
    "gpt_neox": Family(
        blocks="layers", attn="attention", out_proj="attention.dense", mlp="mlp",
        resid_mid=("input", "post_attention_layernorm"), qkv="attention.query_key_value",
        qkv_split="per_head", final="final_layer_norm", parallel_flag="use_parallel_residual",
        attn_norm="input_layernorm", mlp_pre="mlp.dense_h_to_4h", mlp_post="mlp.dense_4h_to_h",
    ),
    "gptj": Family(
        blocks="h", attn="attn", out_proj="attn.out_proj", mlp="mlp", resid_mid=None,
        q="attn.q_proj", k="attn.k_proj", v="attn.v_proj", final="ln_f", attn_norm="ln_1",
        mlp_pre="mlp.fc_in", mlp_post="mlp.fc_out",
    ),
    "opt": Family(
        blocks="decoder.layers", attn="self_attn", out_proj="self_attn.out_proj", mlp="fc2",
        resid_mid=("input", "final_layer_norm"), q="self_attn.q_proj", k="self_attn.k_proj",
        v="self_attn.v_proj", final="decoder.final_layer_norm",
        attn_norm="self_attn_layer_norm", mlp_pre="fc1", mlp_post="fc2",
        pos_embed="decoder.embed_positions",
    ),
}

_CROSS = ("encoder-decoder model: its cross-attention is not self-attention (I - P needs "
          "queries and keys from the same tokens); not supported")
REFUSED: dict[str, str] = {
    "gpt_oss": "attention sinks: P does not sum to 1 over the tokens (mass goes to a learnt "
               "sink), so I - P is not a graph Laplacian",
    "deepseek_v2": "multi-head latent attention (MLA): V is decompressed from a shared latent, "
                   "not the output of a value projection",
    "deepseek_v3": "multi-head latent attention (MLA): V is decompressed from a shared latent, "
                   "not the output of a value projection",
    "gemma3n": "V is post-processed (v_norm) and layers share KV states, so no module output "
               "is the layer's V",
    "t5": _CROSS, "mt5": _CROSS, "bart": _CROSS, "mbart": _CROSS, "marian": _CROSS,
    "pegasus": _CROSS, "whisper": _CROSS,
}


def family_of(model: Any, what: str = "laplacianize") -> Family:
    """The :class:`Family` of a Hugging Face model, or a ConfigError naming why not."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind in REFUSED:
        raise ConfigError(f"{what} refuses {type(model).__name__} (model_type={kind!r}): "
                          f"{REFUSED[kind]}")
    if kind not in FAMILIES:
        raise ConfigError(
            f"{what} does not support {type(model).__name__} (model_type={kind!r}); supported "
            f"model types: {', '.join(FAMILIES)}"
        )
    return FAMILIES[kind]


@dataclass(frozen=True)
class HeadShape:
    """Query heads H, key/value heads Hkv (H/Hkv query heads share one) and head width Dh."""

    n_heads: int
    n_kv_heads: int
    head_dim: int

    @property
    def groups(self) -> int:
        return self.n_heads // self.n_kv_heads


def head_shape(config: Any) -> HeadShape:
    """Heads of a (text) config; ``num_key_value_heads`` absent or None means MHA."""
    n_heads = int(config.num_attention_heads)
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    return HeadShape(n_heads, int(n_kv), int(head_dim))


@dataclass(frozen=True)
class QkvPart:
    """Where part ``which`` (0 q, 1 k, 2 v) of a fused projection's output (B, T, W) lies.

    A dataclass rather than a closure, so that a model that keeps one (a laplacianized
    model's value taps) can be pickled whole by ``torch.save``.
    """

    split: str
    which: int
    shape: HeadShape

    def _bounds(self) -> tuple[int, int]:
        h, hkv, dh = self.shape.n_heads, self.shape.n_kv_heads, self.shape.head_dim
        widths = (h * dh,) * 3 if self.split == "thirds" else (h * dh, hkv * dh, hkv * dh)
        start = sum(widths[:self.which])
        return start, start + widths[self.which]

    def take(self, x: torch.Tensor) -> torch.Tensor:
        """Fused output (B, T, W) -> the part (B, T, n*Dh), heads contiguous (n = H for q,
        Hkv for k and v)."""
        if self.split == "separate":
            return x
        if self.split == "per_head":
            dh = self.shape.head_dim
            heads = x.unflatten(-1, (self.shape.n_heads, 3 * dh))  # (B, T, H, 3*Dh)
            return heads[..., self.which * dh : (self.which + 1) * dh].flatten(-2)
        start, stop = self._bounds()
        return x[..., start:stop]

    def write(self, old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`take`: a copy of the fused ``old`` with the part set to ``new``."""
        if self.split == "separate":
            return new
        if self.split == "per_head":
            h, dh = self.shape.n_heads, self.shape.head_dim
            heads = old.unflatten(-1, (h, 3 * dh)).clone()  # (B, T, H, 3*Dh)
            heads[..., self.which * dh : (self.which + 1) * dh] = new.unflatten(-1, (h, dh))
            return heads.flatten(-2)
        start, stop = self._bounds()
        out = old.clone()
        out[..., start:stop] = new
        return out


def qkv_slicer(split: str, which: int, shape: HeadShape) -> Callable[[torch.Tensor], torch.Tensor]:
    """Function: fused projection output (B, T, W) -> part ``which`` (see :class:`QkvPart`)."""
    return QkvPart(split, which, shape).take


def qkv_writer(split: str, which: int, shape: HeadShape):
    """Inverse of :func:`qkv_slicer`: ``(fused, part) -> fused`` with the part replaced."""
    return QkvPart(split, which, shape).write


def ungroup(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(..., Hkv, Dh) -> (..., H, Dh): query head h reads KV head ``h // groups``.

    This is ``transformers``' ``repeat_kv`` on the head axis of a (B, T, Hkv, Dh) tensor.
    """
    return x if groups == 1 else x.repeat_interleave(groups, dim=-2)


def norm_paths(family: Family) -> tuple[str | None, str | None]:
    """Block -> TransformerLens' ``ln1`` and ``ln2``: the norms before the attention and
    before the MLP (post-LN encoders: after each); None where the block has none (the
    module a path names may still be no norm: OLMo 2's ``resid_mid`` is its MLP)."""
    ln1 = family.ln1 or family.attn_norm
    mid = family.resid_mid
    ln2 = family.ln2 or (mid[1] if mid is not None and mid[0] == "input" else None)
    return ln1, ln2


def is_parallel(family: Family, config: Any) -> bool:
    """True when attention and MLP read the same input (no ``resid_mid``)."""
    if family.resid_mid is None:
        return True
    return bool(family.parallel_flag and getattr(config, family.parallel_flag, False))
