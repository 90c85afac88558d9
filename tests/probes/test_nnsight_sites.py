"""tokengeo's hook points are plain module calls on every forward pass, so nnsight sees and
edits them with nothing attached; an nnsight edit of a laplacianized Hugging Face model's V
reaches its Laplacian heads. Skipped without the optional nnsight."""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tokengeo.probes.hooked import run_with_hooks

nnsight = pytest.importorskip("nnsight", reason="nnsight is optional (the 'interp' extra)")


def tiny_gpt():
    torch.manual_seed(0)
    return tokengeo.create_model("gpt-tiny", vocab_size=31, n_layers=2, n_laplacian=1).eval()


IDS = torch.randint(0, 31, (2, 6), generator=torch.Generator().manual_seed(1))


def test_nnsight_reads_and_edits_tokengeo_hook_points_with_nothing_attached():
    model = tiny_gpt()
    assert not any(m._forward_hooks for m in model.modules())
    wrapped = nnsight.NNsight(model)
    with torch.no_grad(), wrapped.trace(IDS):
        v = wrapped.blocks[0].attn.hook_v.output.save()
        z = wrapped.blocks[0].attn.hook_z.output.save()
        wrapped.blocks[1].attn.hook_z.output = wrapped.blocks[1].attn.hook_z.output * 0
        out = wrapped.output.save()
    with torch.no_grad():
        _, cache = tokengeo.run_with_cache(model, IDS, names=["blocks.0.attn.hook_[vz]"])
        expected = run_with_hooks(model, IDS, fwd_hooks=[("blocks.1.attn.hook_z",
                                                          lambda x, hook: x * 0)])
    torch.testing.assert_close(v, cache["v", 0], rtol=0, atol=0)
    torch.testing.assert_close(z, cache["z", 0], rtol=0, atol=0)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_an_nnsight_value_edit_reaches_the_laplacian_heads():
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.LlamaConfig(vocab_size=31, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2)
    torch.manual_seed(0)
    model = tokengeo.laplacianize(transformers.LlamaForCausalLM(config).eval(), n_laplacian=2)
    wrapped = nnsight.NNsight(model)
    attn = wrapped.model.layers[0].self_attn
    with torch.no_grad(), wrapped.trace(IDS):
        attn.v_proj.output = attn.v_proj.output * 0
        z = attn.o_proj.input.save()  # (B, T, H*Dh): V - P V on the Laplacian heads
    assert z.abs().max() == 0


def _ablate_head_0(z, hook):
    z[:, :, 0] = 0.0  # in place, returning None: what an nnsight assignment does


def test_an_nnsight_in_place_edit_of_z_under_autograd_gives_the_hooked_gradients():
    """A hook point nnsight wraps counts as watched: the kernel that saves z for its backward
    is not planned, so the edit and a backward through it are those of a tokengeo hook."""
    model = tiny_gpt()
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(IDS):
        wrapped.blocks[1].attn.hook_z.output[:, :, 0] = 0.0
        out = wrapped.output.save()
    out.square().sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    want = run_with_hooks(model, IDS, fwd_hooks=[("blocks.1.attn.hook_z", _ablate_head_0)])
    want.square().sum().backward()
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    for name, p in model.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=0, atol=0, msg=name)


def test_nnsight_reads_the_gradient_of_a_hook_point_with_nothing_attached():
    """V's gradient reaches ``hook_v``'s tensor (not only the packed qkv projection)."""
    model = tiny_gpt()
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(IDS):
        v = wrapped.blocks[1].attn.hook_v.output
        with wrapped.output.square().sum().backward():
            grad = v.grad.save()
    seen = {}

    def keep_grad(x, hook):
        x.register_hook(lambda g: seen.update(grad=g))

    run_with_hooks(model, IDS, fwd_hooks=[("blocks.1.attn.hook_v", keep_grad)]
                   ).square().sum().backward()
    torch.testing.assert_close(grad, seen["grad"], rtol=0, atol=0)
    assert grad.abs().sum() > 0
