"""Per-head context-similarity matrices (Halevi et al., arXiv 2512.21956).

For layer ``l``, head ``h`` and one input, the head's *unnormalised output vectors*
``z_i = sum_j P_ij v_j`` (one per token, before the output projection: ``hook_z``) give
the context-similarity matrix

    S^{l,h}_{ij} = <z^{l,h}_i, z^{l,h}_j>   for i != j,   S^{l,h}_{ii} = 0

(the paper's 128 x 128 matrices of dot products with the diagonal zeroed).

Causal decoders (GPT-2, Llama, ...): ``z_i = sum_{j <= i} P_ij v_j`` summarises the prefix up
to token ``i``, so ``S_ij`` compares the prefix summaries of ``i`` and ``j``; all pairs are
kept (``S`` stays symmetric) and only padded tokens are zeroed. With right padding a causal
model's real tokens see no padding, so their pairs equal those of the unpadded sequence.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import capture, is_hf_model

Z_PATTERN = "blocks.*.attn.hook_z"


def context_similarity(z: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """``S_ij = <z_i, z_j>`` per head with a zero diagonal.

    ``z``: ``(..., B, T, H, Dh)`` per-head outputs; returns ``(..., H, B, T, T)``. Pairs with a
    padded token (``attention_mask == 0``, shape ``(B, T)``) are set to 0.
    """
    zh = z.movedim(-2, -4)  # (..., H, B, T, Dh)
    s = zh @ zh.transpose(-1, -2)  # (..., H, B, T, T)
    s.diagonal(dim1=-2, dim2=-1).zero_()
    if attention_mask is not None:
        keep = attention_mask.to(torch.bool)  # (B, T)
        s = s * (keep[:, :, None] & keep[:, None, :]).to(s.dtype)
    return s


def layer_index(name: str) -> int:
    """``blocks.3.attn.hook_z`` -> 3."""
    m = re.match(r"blocks\.(\d+)\.", name)
    if m is None:
        raise ConfigError(f"hook name {name!r} has no block index")
    return int(m.group(1))


def forward_tokens(model: nn.Module, input_ids, attention_mask=None):
    """One forward pass: HF models get ``attention_mask``; tokengeo models take ``(ids)``."""
    if is_hf_model(model):
        return model(input_ids=input_ids, attention_mask=attention_mask)
    if attention_mask is not None:
        raise ConfigError("attention_mask is only supported for Hugging Face models; give "
                          "tokengeo models unpadded windows of one length")
    return model(input_ids)


@torch.no_grad()
def head_output_similarity(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Context-similarity matrices of every layer and head: ``(L, H, B, T, T)``.

    ``S[l, h, b, i, j] = <z_i, z_j>`` of head ``h`` in block ``l`` on input ``b``
    (``z`` = ``blocks.{l}.attn.hook_z``), diagonal zeroed, padded pairs zero
    (Halevi et al., arXiv 2512.21956, Sec. 2).
    """
    check_token_ids(model, input_ids, attention_mask)
    with capture(model, [Z_PATTERN]) as cache:
        forward_tokens(model, input_ids, attention_mask)
        names = sorted(cache, key=layer_index)
        z = torch.stack([cache[n] for n in names])  # (L, B, T, H, Dh)
    return context_similarity(z, attention_mask)


def _model_limits(model: nn.Module) -> tuple[int | None, int | None]:
    """(vocabulary size, positions) from a tokengeo or Hugging Face model's config."""
    cfg = getattr(model, "config", None)

    def first(*names):
        return next((int(v) for n in names if isinstance(v := getattr(cfg, n, None), int)),
                    None)

    return (first("vocab_size"),
            first("block_size", "max_position_embeddings", "n_positions", "max_seq_len"))


def check_token_ids(model: nn.Module, input_ids, attention_mask=None) -> None:
    """``input_ids`` is a non-empty ``(B, T)`` integer tensor of ids the model has, at most
    its positions long; ``attention_mask`` (if given) is shaped like it."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or \
            input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        what = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else \
            type(input_ids).__name__
        raise ConfigError(f"input_ids must be an integer tensor shaped (B, T); got {what}")
    if input_ids.numel() == 0:
        raise ConfigError(f"input_ids is empty, shaped {tuple(input_ids.shape)}; give at least "
                          "one window of one token")
    vocab, positions = _model_limits(model)
    lo, hi = int(input_ids.min()), int(input_ids.max())
    if lo < 0 or (vocab is not None and hi >= vocab):
        raise ConfigError(f"input_ids hold ids in [{lo}, {hi}] but the model's vocab has "
                          f"ids 0..{vocab - 1 if vocab else '?'}; tokenise with its tokenizer")
    if positions is not None and input_ids.shape[1] > positions:
        raise ConfigError(f"input_ids have {input_ids.shape[1]} tokens but the model has "
                          f"{positions} positions; use shorter windows")
    if attention_mask is not None and (not isinstance(attention_mask, torch.Tensor)
                                       or attention_mask.shape != input_ids.shape):
        shape = getattr(attention_mask, "shape", None)
        raise ConfigError(f"attention_mask shaped {tuple(shape) if shape else shape} must be "
                          f"shaped like input_ids {tuple(input_ids.shape)}")
