"""The L-Transformer's TransformerLens sites (``attn.hook_attn_scores``, ``attn.hook_result``,
``mlp.hook_pre``/``hook_post``, ``ln1``/``ln2`` ``hook_scale``/``hook_normalized``,
``hook_pos_embed``), read against the equivalence theorem (El Ichi et al., arXiv
2603.05727): slice k of each site is that site of the standard block slice k runs
(:func:`~tokengeo.nn.lblock.slice_block`), and an edit of slice k's part is that edit of the
standard block."""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tests.models.test_ltransformer import lblock_of, padding_mask, randomise
from tokengeo.hooks import hook_points
from tokengeo.nn.lblock import slice_block
from tokengeo.nn.lproduct import slices_to_tokens

P, D_S, H, B, T = 2, 8, 2, 2, 5
SITES = ["attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_result", "mlp.hook_pre",
         "mlp.hook_post", "ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale",
         "ln2.hook_normalized"]


def capture(module, names, *args):
    """Run ``module(*args)`` with a recorder on each named hook point; (output, records)."""
    points, seen = hook_points(module), {}
    handles = [points[n].add_hook(lambda x, hp, n=n: seen.update({n: x.clone()}))
               for n in names]
    try:
        out = module(*args)
    finally:
        for h in handles:
            h.remove()
    return out, seen


def slice_part(name: str, x: torch.Tensor, k: int) -> torch.Tensor:
    """Slice k of an L-Transformer site (its layout is slice-major along one axis)."""
    if name.endswith(("hook_attn_scores", "hook_pattern")):
        return x[:, k * H:(k + 1) * H]  # (B, p·H, T, T)
    if name.endswith("hook_result"):
        return x[:, :, k * H:(k + 1) * H]  # (B, T, p·H, d_s)
    width = x.shape[-1] // P
    return x[..., k * width:(k + 1) * width]  # (B, T, p·w)


@pytest.mark.parametrize("kinds", [("attention", "laplacian"), ("mixed", "laplacian")])
def test_each_slice_of_a_site_is_that_site_of_its_standard_block(kinds):
    lblock = lblock_of(P, D_S, H, kinds, mlp_ratio=2.0)
    randomise(lblock)
    x_hat, mask = torch.randn(P, B, T, D_S), padding_mask(B, T)
    with torch.no_grad():
        y, seen = capture(lblock, SITES, x_hat, mask)
        assert torch.allclose(y, lblock(x_hat, mask), atol=1e-5)  # reading changes nothing
        for k in range(P):
            _, ref = capture(slice_block(lblock, k), SITES, x_hat[k], mask)
            for name in SITES:
                torch.testing.assert_close(slice_part(name, seen[name], k), ref[name],
                                           atol=1e-5, rtol=1e-5, msg=name)
    scale = seen["ln1.hook_scale"]
    assert scale.shape == (B, T, P)  # one scale per token and slice
    assert seen["attn.hook_result"].shape == (B, T, P * H, D_S)


@pytest.mark.parametrize("name", ["attn.hook_attn_scores", "attn.hook_result", "mlp.hook_post",
                                  "ln2.hook_normalized", "ln1.hook_scale"])
def test_an_edit_of_one_slice_is_that_edit_of_its_standard_block(name):
    lblock = lblock_of(P, D_S, H, ("attention", "laplacian"), mlp_ratio=2.0)
    randomise(lblock)
    x_hat, mask = torch.randn(P, B, T, D_S), padding_mask(B, T)
    k = 1

    def halve_slice(x, hp):
        x = x.clone()
        part = slice_part(name, x, k)
        part.mul_(0.5)  # a view of x: slice k halved
        return x

    def halve(x, hp):
        return x * 0.5

    with torch.no_grad():
        handle = hook_points(lblock)[name].add_hook(halve_slice)
        y = lblock(x_hat, mask)
        handle.remove()
        ref = slice_block(lblock, k)
        handle = hook_points(ref)[name].add_hook(halve)
        y_ref = ref(x_hat[k], mask)
        handle.remove()
        plain = lblock(x_hat, mask)
    torch.testing.assert_close(y[k], y_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(y[0], plain[0], atol=1e-6, rtol=1e-6)  # other slice untouched
    assert not torch.allclose(y[k], plain[k], atol=1e-4)


def test_the_position_code_site_is_the_slice_code_added_to_the_stream():
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=50, alpha="exponential").eval()
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        plain = model(ids)
        _, cache = tokengeo.run_with_cache(model, ids, names=["hook_pos_embed"])
        edited = tokengeo.run_with_hooks(model, ids, fwd_hooks=[
            ("hook_pos_embed", lambda x, hook: torch.zeros_like(x))])
        x_hat, _ = model.embed(ids)
        code = model.pos_enc(7)  # (p, 1, T, d_s)
    pos = cache["hook_pos_embed"]
    assert pos.shape == (2, 7, model.config.d_model)
    torch.testing.assert_close(pos, slices_to_tokens(code.expand(-1, 2, -1, -1)))
    with torch.no_grad():
        model.hook_pos_embed.add_hook(lambda x, hp: torch.zeros_like(x))
        no_code, _ = model.embed(ids)
    torch.testing.assert_close(no_code + code, x_hat, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(edited, plain, atol=1e-5)
