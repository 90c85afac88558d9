"""L-Transformer text classifier (El Ichi, Jbilou, El Guide & Dufrenois, arXiv 2603.05727).

The width d is split into p spectral slices of width d_s = d / p by an orthogonal transform
Z along the slice (tube) mode (DCT-II by default). In the transform domain the encoder is p
independent pre-LN transformers of width d_s (the paper's equivalence theorem), run here as
one batched computation: p·H heads in one fused attention call, per-slice weights in one
batched matmul. Pipeline, with X̂ stored slice-major (p, B, T, d_s):

    X  = √d · Embed(ids)                          (B, T, d)      original domain
    X̂  = X ×₃ Z + PE_k(t)                         (p, B, T, d_s) transform domain
    X̂  ← LBlock_L ∘ … ∘ LBlock_1 (X̂)               p narrow transformers at once
    Y  = LN_slice(X̂) ×₃ Z⁻¹                       (B, T, d)      back to the original domain
    logits = Linear(mean over real tokens of Y)   (or a cls token)

Encoder parameters (the blocks, plus a learnable transform's p(p−1)/2) are about 1/p of a
standard encoder's of the same width; :func:`encoder_parameter_count` gives the formula.

:class:`LTransformer` is a :class:`~tokengeo.models.transformer.TokengeoModel`: it keeps the
common ``forward`` / ``forward_features`` / ``forward_head`` / ``forward_intermediates`` and
overrides only its blocks (:class:`~tokengeo.nn.lblock.LBlock`), the embedding with the
transform in, and the transform out after the final slice norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tokengeo.checks import check_positive
from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.models.config import EncoderConfig
from tokengeo.models.transformer import TokengeoModel, check_length, mask_with_prefix
from tokengeo.nn.heads import MIXED
from tokengeo.nn.lblock import LBlock
from tokengeo.nn.lposition import SlicePositionalEncoding, check_alpha
from tokengeo.nn.lproduct import SliceLayerNorm, hook_slices, slices_to_tokens, tokens_to_slices
from tokengeo.nn.transforms import check_transform, make_transform


@dataclass
class LTransformerConfig(EncoderConfig):
    """An :class:`EncoderConfig` split into ``p`` slices.

    ``n_heads`` counts heads *per slice* (head width d_s / n_heads); ``n_laplacian`` makes the
    last k heads of every slice Laplacian; ``transform`` is one of
    :data:`~tokengeo.nn.transforms.TRANSFORMS`; ``alpha`` one of
    :data:`~tokengeo.nn.lposition.ALPHAS`.
    """

    p: int = 4
    transform: str = "dct"
    alpha: str = "identity"

    @property
    def d_slice(self) -> int:
        return self.d_model // self.p

    def validate(self) -> None:
        if not isinstance(self.p, int) or isinstance(self.p, bool) or self.p < 1:
            raise ConfigError(f"p={self.p!r} must be an integer >= 1 (the number of slices)")
        check_positive("d_model", self.d_model)
        check_positive("n_heads", self.n_heads)
        if self.d_model % self.p:
            raise ConfigError(f"d_model={self.d_model} is not divisible by p={self.p}")
        if self.d_slice % self.n_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} (heads per slice) does not divide the slice width "
                f"d_model / p = {self.d_slice}"
            )
        check_transform(self.transform, self.p)
        check_alpha(self.alpha)
        super().validate()

    def block_parameter_estimate(self) -> int:
        """About 1/p of a standard encoder's blocks (see :func:`encoder_parameter_count`)."""
        return super().block_parameter_estimate() // self.p


def encoder_parameter_count(cfg: LTransformerConfig) -> int:
    """Parameters of the block stack (and of a learnable transform), by formula.

    Per layer and slice, with h = ⌊r·d_s⌋ the FFN width and n_mix the layer's mixed heads:

        4 d_s² + 2 d_s h            weights of Q, K, V, O and of the FFN
      + 5 d_s + h                   their biases (if ``bias``)
      + 2 d_s (+ 2 d_s)             the two slice LayerNorms' gains (and biases)
      + 2 n_mix                     the (a, b) of each mixed head

    times p slices and summed over layers, plus p(p−1)/2 for a learnable transform. With
    p = 1 it is a standard encoder's count, so the ratio at p slices is about 1/p
    (arXiv 2603.05727, "up to lower-order terms such as biases and normalization
    parameters": weights shrink by p, biases and norms do not).
    """
    d_s, h = cfg.d_slice, int(cfg.mlp_ratio * cfg.d_slice)
    per_slice = 4 * d_s**2 + 2 * d_s * h + 2 * d_s
    if cfg.bias:
        per_slice += 5 * d_s + h + 2 * d_s
    mixed = sum(kinds.count(MIXED) for kinds in cfg.head_kinds())
    transform = cfg.p * (cfg.p - 1) // 2 if cfg.transform.startswith("learnable") else 0
    return cfg.p * (cfg.n_layers * per_slice + 2 * mixed) + transform


class LTransformer(TokengeoModel):
    """Bidirectional L-Transformer classifier: ``model(ids, attention_mask) -> (B, C)``.

    Same inputs and API as the ``encoder`` family. Hook points (all editable: what a hook
    returns flows on), in the transform domain, where every slice is an ordinary pre-LN
    transformer of width d_s: ``hook_embed`` and the blocks' residual hooks see the stream
    (B, T, p·d_s), slice k = features [k·d_s, (k+1)·d_s); ``hook_pos_embed`` the slice
    positional code PE_k(t) added to it (B, T, p·d_s; after a cls token, the T text tokens
    only); ``blocks.{l}.attn.hook_z|q|k|v`` are (B, T, p·H, D_h) with head index k·H + h;
    ``hook_attn_scores`` and ``hook_pattern`` (B, p·H, T, T); ``hook_result``
    (B, T, p·H, d_s); ``mlp.hook_pre|hook_post`` (B, T, p·h); ``ln1``, ``ln2``, ``ln_final``
    ``.hook_scale`` (B, T, p, one scale per slice) and ``.hook_normalized`` (B, T, p·d_s);
    ``hook_final`` is in the original domain (B, T, d), after the inverse transform.
    """

    family = "ltransformer"

    def __init__(self, cfg: LTransformerConfig) -> None:
        super().__init__(cfg)
        p, d, d_s = cfg.p, cfg.d_model, cfg.d_slice
        self.tok_emb = nn.Embedding(cfg.vocab_size, d)
        self.emb_scale = math.sqrt(d)  # Vaswani et al. (2017), Sec. 3.4
        self.transform = make_transform(cfg.transform, p)
        self.pos_enc = SlicePositionalEncoding(p, d_s, cfg.alpha)
        self.hook_pos_embed = HookPoint()  # PE_k(t), (B, T, p·d_s); called only when hooked
        self.cls_token = nn.Parameter(torch.zeros(p, 1, 1, d_s)) if cfg.pool == "cls" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(d, cfg.num_classes)
        self.finish_init()  # embedding and head; slice modules initialise themselves

    def make_block(self, head_kinds) -> LBlock:
        return LBlock(self.config, head_kinds, causal=self.causal)

    def make_final_norm(self) -> SliceLayerNorm:
        cfg = self.config
        return SliceLayerNorm(cfg.p, cfg.d_slice, eps=cfg.norm_eps, bias=cfg.bias)

    def embed(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Transform in: X̂ = (√d · Embed(ids)) ×₃ Z + PE_k(t), (p, B, T, d_s), and the mask."""
        B, T = ids.shape
        check_length(T, self.config.max_len, "max_len")
        x = tokens_to_slices(self.tok_emb(ids) * self.emb_scale, self.config.p)  # (p, B, T, d_s)
        positions = self.pos_enc(T)  # (p, 1, T, d_s)
        if self.hook_pos_embed.is_active():
            positions = hook_slices(self.hook_pos_embed, positions.expand(-1, B, -1, -1))
        x = self.transform(x) + positions  # (p, B, T, d_s)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(-1, B, -1, -1), x], dim=2)  # (p, B, 1 + T, d_s)
            attention_mask = mask_with_prefix(attention_mask)
        return self.drop(x), attention_mask

    def stream_to_tokens(self, h: torch.Tensor) -> torch.Tensor:
        return slices_to_tokens(h)  # (p, B, T, d_s) -> (B, T, p·d_s)

    def tokens_to_stream(self, h: torch.Tensor) -> torch.Tensor:
        return tokens_to_slices(h, self.config.p)

    def features_out(self, h: torch.Tensor) -> torch.Tensor:
        """Transform out: Y = LN_slice(X̂) ×₃ Z⁻¹ in the original domain, (B, T, d)."""
        return slices_to_tokens(self.transform.inverse(self.ln_final(h)))

    def encoder_modules(self) -> list[nn.Module]:
        """The blocks and a learnable transform (its p(p−1)/2 angles)."""
        return [self.blocks, self.transform]
