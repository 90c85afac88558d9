"""nnsight on tokengeo's models: trace, save and patch give what tokengeo's own hooks give.

On a laplacianized Hugging Face model the Laplacian heads' z is the output projection's
input (``self_attn.o_proj.input``), swapped before anything reads it; on tokengeo's own
models the hook points (``blocks.{l}.attn.hook_z``) are modules nnsight can read."""

from __future__ import annotations

import pytest
import torch

from interop.cases import REASON, all_cases

pytest.importorskip("nnsight", reason=REASON)

import tokengeo  # noqa: E402
from tokengeo.interop.imports import nnsight  # noqa: E402

LAYER, HEAD = 1, 3  # a Laplacian (or mixed) head in every case below


def _ablate(z, hook=None):
    z = z.clone()
    z[:, :, HEAD] = 0.0
    return z


@pytest.mark.parametrize("name", ["llama-laplacian", "llama-mixed"])
def test_trace_save_and_patch_a_laplacianized_llama(llama_folder, name):
    case = {c.name: c for c in all_cases(llama_folder)}[name]
    tokens = case.tokens(seed=8)
    model = case.build()
    want_logits, cache = tokengeo.run_with_cache(model, tokens, names=["blocks.*.attn.hook_z"])
    ablated = tokengeo.run_with_hooks(model, tokens,
                                      fwd_hooks=[(f"blocks.{LAYER}.attn.hook_z", _ablate)])
    traced = nnsight().NNsight(model)
    o_proj = traced.model.layers[LAYER].self_attn.o_proj
    with traced.trace(tokens):
        z = o_proj.input.save()
        logits = traced.output.logits.save()
    assert torch.allclose(z.unflatten(-1, (case.n_heads, case.head_dim)),
                          cache[f"blocks.{LAYER}.attn.hook_z"], atol=1e-6, rtol=0)
    assert torch.allclose(logits, want_logits.logits, atol=1e-6, rtol=0)
    cols = slice(HEAD * case.head_dim, (HEAD + 1) * case.head_dim)
    with traced.trace(tokens):
        o_proj.input[:, :, cols] = 0.0
        patched = traced.output.logits.save()
    assert torch.allclose(patched, ablated.logits, atol=1e-6, rtol=0)
    assert (patched - logits).abs().max() > 1e-4  # the patch did something


def test_trace_save_and_patch_gpt_tiny_hook_points(llama_folder):
    case = {c.name: c for c in all_cases(llama_folder)}["gpt-tiny-laplacian"]
    tokens = case.tokens(seed=9)
    model = case.build()
    want_logits, cache = tokengeo.run_with_cache(model, tokens, names=["blocks.*.attn.hook_z"])
    ablated = tokengeo.run_with_hooks(model, tokens,
                                      fwd_hooks=[(f"blocks.{LAYER}.attn.hook_z", _ablate)])
    traced = nnsight().NNsight(model)
    with traced.trace(tokens):
        z = traced.blocks[LAYER].attn.hook_z.output.save()
        logits = traced.output.save()
    assert torch.allclose(z, cache[f"blocks.{LAYER}.attn.hook_z"], atol=1e-6, rtol=0)
    assert torch.allclose(logits, want_logits, atol=1e-6, rtol=0)
    with traced.trace(tokens):
        traced.blocks[LAYER].attn.hook_z.output[:, :, HEAD] = 0.0
        patched = traced.output.save()
    assert torch.allclose(patched, ablated, atol=1e-6, rtol=0)
