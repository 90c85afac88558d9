"""TransformerLens' remaining hook sites on tokengeo's models, each compared with the tensor
computed by hand from neighbouring sites and the weights, and each edit shown to flow on:
``attn.hook_attn_scores``, ``attn.hook_result``, ``mlp.hook_pre`` / ``mlp.hook_post``,
``ln1/ln2/ln_final.hook_scale`` / ``hook_normalized`` and ``hook_pos_embed``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tokengeo
from tokengeo.probes.capture import run_with_cache
from tokengeo.probes.hooked import run_with_hooks, with_hooks


def tiny_gpt():
    torch.manual_seed(0)
    model = tokengeo.create_model("gpt-tiny", vocab_size=31, n_layers=2, n_laplacian=1).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # biases and norms away from their init
    return model


IDS = torch.randint(0, 31, (2, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def run():
    model = tiny_gpt()
    with torch.no_grad():
        out, cache = run_with_cache(model, IDS)
    return model, out, cache


def test_every_new_site_is_cached(run):
    _, _, cache = run
    for name in ("hook_pos_embed", "blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_result",
                 "blocks.1.mlp.hook_pre", "blocks.1.mlp.hook_post", "blocks.0.ln1.hook_scale",
                 "blocks.0.ln2.hook_normalized", "ln_final.hook_scale"):
        assert name in cache, name


def test_attention_scores_are_the_logits_of_the_pattern(run):
    _, _, cache = run
    q, k = cache["q", 1].transpose(1, 2), cache["k", 1].transpose(1, 2)  # (B, H, T, Dh)
    T = q.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(cache["attn_scores", 1], scores)
    torch.testing.assert_close(cache["attn_scores", 1].softmax(-1), cache["pattern", 1])


def test_an_edit_of_the_scores_flows_on():
    model = tiny_gpt()
    T = IDS.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    def flat_scores(s, hook):  # every allowed key the same logit: a uniform causal pattern
        return torch.zeros_like(s).masked_fill(~causal, float("-inf"))

    def uniform_pattern(p, hook):
        return causal.float().expand_as(p) / causal.sum(-1, keepdim=True)

    with torch.no_grad():
        a = run_with_hooks(model, IDS, fwd_hooks=[("blocks.0.attn.hook_attn_scores", flat_scores)])
        b = run_with_hooks(model, IDS, fwd_hooks=[("blocks.0.attn.hook_pattern", uniform_pattern)])
        plain = model(IDS)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, plain, atol=1e-4)


def test_head_results_are_z_times_their_slice_of_w_o_and_sum_to_attn_out(run):
    model, _, cache = run
    proj = model.blocks[0].attn.proj
    z = cache["z", 0]  # (B, T, H, Dh)
    H, Dh = z.shape[2], z.shape[3]
    result = cache["result", 0]  # (B, T, H, d)
    for h in range(H):
        w_h = proj.weight[:, h * Dh:(h + 1) * Dh]  # (d, Dh)
        torch.testing.assert_close(result[:, :, h], z[:, :, h] @ w_h.T)
    torch.testing.assert_close(result.sum(2) + proj.bias, cache["attn_out", 0])


def test_zeroing_a_head_result_equals_zeroing_its_z():
    model = tiny_gpt()

    def zero_head_2(x, hook):
        x = x.clone()
        x[:, :, 2] = 0
        return x

    with torch.no_grad():
        a = run_with_hooks(model, IDS, fwd_hooks=[("blocks.1.attn.hook_result", zero_head_2)])
        b = run_with_hooks(model, IDS, fwd_hooks=[("blocks.1.attn.hook_z", zero_head_2)])
    torch.testing.assert_close(a, b)


def test_mlp_pre_and_post_activation(run):
    model, _, cache = run
    mlp, ln2 = model.blocks[1].mlp, model.blocks[1].ln2
    pre = mlp.fc1(ln2(cache["resid_mid", 1]))
    torch.testing.assert_close(cache["blocks.1.mlp.hook_pre"], pre)
    torch.testing.assert_close(cache["blocks.1.mlp.hook_post"], F.gelu(pre))
    torch.testing.assert_close(cache["post", 1], cache["blocks.1.mlp.hook_post"])


def test_mlp_post_edit_flows_into_mlp_out():
    model = tiny_gpt()
    with torch.no_grad():
        with with_hooks(model, fwd_hooks=[("blocks.1.mlp.hook_post",
                                           lambda x, hook: torch.zeros_like(x))]):
            _, cache = run_with_cache(model, IDS, names="blocks.1.hook_mlp_out")
    bias = model.blocks[1].mlp.fc2.bias
    torch.testing.assert_close(cache["mlp_out", 1], bias.expand_as(cache["mlp_out", 1]))


@pytest.mark.parametrize("norm, source", [("blocks.0.ln1", "blocks.0.hook_resid_pre"),
                                          ("blocks.1.ln2", "blocks.1.hook_resid_mid")])
def test_layer_norm_scale_and_normalized(run, norm, source):
    model, out, cache = run
    x = cache[source]
    centred = x - x.mean(-1, keepdim=True)
    eps = model.get_submodule(norm).eps
    scale = (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    torch.testing.assert_close(cache[f"{norm}.hook_scale"], scale)
    torch.testing.assert_close(cache[f"{norm}.hook_normalized"], centred / scale)
    with torch.no_grad():
        torch.testing.assert_close(out, tiny_gpt()(IDS))  # the hooked norm is the same norm


def test_an_edit_of_the_normalized_stream_flows_on():
    """Normalized tokens all zero: ln1 gives its bias at every token, so every query of the
    layer is the same vector."""
    model = tiny_gpt()
    with torch.no_grad():
        with with_hooks(model, fwd_hooks=[("blocks.0.ln1.hook_normalized",
                                           lambda x, hook: torch.zeros_like(x))]):
            _, cache = run_with_cache(model, IDS, names="blocks.0.attn.hook_q")
    q = cache["q", 0]
    torch.testing.assert_close(q, q[:1, :1].expand_as(q))


def test_position_embeddings(run):
    model, _, cache = run
    T = IDS.shape[1]
    torch.testing.assert_close(cache["hook_pos_embed"],
                               model.pos_emb.weight[:T].expand(IDS.shape[0], T, -1))
    with torch.no_grad():
        edited = run_with_hooks(model, IDS, fwd_hooks=[("hook_pos_embed",
                                                        lambda x, hook: torch.zeros_like(x))])
        saved = model.pos_emb.weight.clone()
        model.pos_emb.weight.zero_()
        try:
            expected = model(IDS)
        finally:
            model.pos_emb.weight.copy_(saved)
    torch.testing.assert_close(edited, expected)
