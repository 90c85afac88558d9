"""tokengeo's GPT as a Hugging Face GPT-2 (the layout TransformerLens' bridge reads).

Both are pre-LN GPT-2 blocks (Radford et al. 2019): token + learned position embeddings,
``x + Attn(LN(x))``, ``x + MLP(LN(x))`` with exact GELU, a final LayerNorm and the LM head.
GPT-2 stores its linear maps as ``Conv1D`` (weight (in, out), the transpose of
``nn.Linear``'s) and always has biases: a model built with ``bias=False`` gets zero biases.
The head kinds are not part of GPT-2: :func:`head_mixers` gives them, per layer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tokengeo._deps import require
from tokengeo.nn.heads import FIXED, HeadMixer


def gpt2_config(cfg: Any) -> Any:
    """The ``transformers.GPT2Config`` of a tokengeo ``GPTConfig`` (no dropout: an
    interpretability copy runs in eval mode)."""
    transformers = require("transformers")
    return transformers.GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model,
        n_layer=cfg.n_layers, n_head=cfg.n_heads, n_inner=int(cfg.mlp_ratio * cfg.d_model),
        activation_function="gelu", layer_norm_epsilon=cfg.norm_eps, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=cfg.tie_weights,
        architectures=["GPT2LMHeadModel"], bos_token_id=None, eos_token_id=None,
    )


def _copy_linear(conv: nn.Module, linear: nn.Linear) -> None:
    conv.weight.copy_(linear.weight.t())  # Conv1D: (in, out)
    conv.bias.copy_(linear.bias if linear.bias is not None else torch.zeros_like(conv.bias))


def _copy_norm(target: nn.LayerNorm, norm: nn.LayerNorm) -> None:
    target.weight.copy_(norm.weight)
    target.bias.copy_(norm.bias if norm.bias is not None else torch.zeros_like(target.bias))


@torch.no_grad()
def to_gpt2(model: nn.Module) -> Any:
    """A ``GPT2LMHeadModel`` computing what ``model`` (a tokengeo GPT) computes with every
    head an attention head; a copy of the weights, on the model's device and dtype."""
    transformers = require("transformers")
    weight = model.tok_emb.weight
    hf = transformers.GPT2LMHeadModel(gpt2_config(model.config))
    hf.to(device=weight.device, dtype=weight.dtype).eval()
    hf.transformer.wte.weight.copy_(model.tok_emb.weight)
    hf.transformer.wpe.weight.copy_(model.pos_emb.weight)
    for block, layer in zip(model.blocks, hf.transformer.h, strict=True):
        _copy_norm(layer.ln_1, block.ln1)
        _copy_linear(layer.attn.c_attn, block.attn.qkv)  # [q | k | v], each head-major
        _copy_linear(layer.attn.c_proj, block.attn.proj)
        _copy_norm(layer.ln_2, block.ln2)
        _copy_linear(layer.mlp.c_fc, block.mlp.fc1)
        _copy_linear(layer.mlp.c_proj, block.mlp.fc2)
    _copy_norm(hf.transformer.ln_f, model.ln_final)
    if not model.config.tie_weights:
        hf.lm_head.weight.copy_(model.lm_head.weight)
    return hf


def head_mixers(model: nn.Module) -> dict[int, HeadMixer]:
    """``{layer: a copy of its head kinds}`` for the layers of a tokengeo GPT with some head
    other than attention; learnable (a, b) are copied into new parameters."""
    mixers = {}
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        if not attn.uses_values():
            continue
        fixed = [tuple(attn.coef_fixed[h].tolist()) for h, k in enumerate(attn.head_kinds)
                 if k == FIXED]
        mixer = HeadMixer(attn.n_heads, attn.head_kinds, coefficients=fixed[0] if fixed else None)
        if attn.mix_coef is not None:
            mixer.mix_coef = nn.Parameter(attn.mix_coef.detach().clone())
        mixers[layer] = mixer.to(attn.coef_fixed.device)
    return mixers
