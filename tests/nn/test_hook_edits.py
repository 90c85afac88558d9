"""Hook edits take effect (TransformerLens semantics): what a hook returns flows on, for
every hook point of tokengeo models and the L-Transformer."""

import pytest
import torch

import tokengeo
from tokengeo.hooks import hook_points
from tokengeo.models.config import TransformerConfig
from tokengeo.models.ltransformer import LTransformerConfig
from tokengeo.nn.attention import MultiHeadAttention
from tokengeo.nn.lblock import LBlock, slice_block

TINY = ["vit-tiny", "gpt-tiny", "encoder-tiny", "ltransformer-tiny"]


def tiny_model(name: str):
    extra = {} if name.startswith("vit") else {"vocab_size": 31}
    torch.manual_seed(0)
    model = tokengeo.create_model(name, n_layers=2, n_laplacian=1, **extra).eval()
    with torch.no_grad():  # weights far from init, so every activation matters
        for param in model.parameters():
            param.copy_(torch.randn_like(param) * 0.3)
    return model


def tiny_input(model):
    cfg = model.config
    if model.family == "vit":
        return torch.randn(2, cfg.in_chans, cfg.image_size, cfg.image_size), None
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 5:] = 0
    return torch.randint(0, cfg.vocab_size, (2, 7)), mask


def run_with_hook(model, x, mask, point, fn):
    handle = point.add_hook(lambda t, hp: fn(t))
    try:
        with torch.no_grad():
            return model(x, mask)
    finally:
        handle.remove()


@pytest.mark.parametrize("name", TINY)
def test_every_hook_point_can_be_edited(name):
    """Each hook point: returning a copy changes nothing; returning a perturbed activation
    changes the output."""
    model = tiny_model(name)
    x, mask = tiny_input(model)
    with torch.no_grad():
        plain = model(x, mask)
    points = hook_points(model)
    # embed, positions, final, the final norm's 2; per block 5 residual, 7 attention (q, k, v,
    # scores, pattern, z, result), 2 MLP, 2 per norm (the L-Transformer's too)
    expected = 5 + 2 * (5 + 7 + 2 + 4)
    assert len(points) == expected
    for hook_name, point in points.items():
        same = run_with_hook(model, x, mask, point, lambda t: t.clone())
        assert torch.allclose(same, plain, rtol=1e-4, atol=1e-4), hook_name
        edited = run_with_hook(model, x, mask, point, lambda t: t + torch.randn_like(t))
        assert not torch.allclose(edited, plain, rtol=1e-3, atol=1e-3), f"{hook_name} ignored"


def _mha():
    torch.manual_seed(1)
    cfg = TransformerConfig(d_model=16, n_heads=4)
    return MultiHeadAttention(cfg, ("attention", "laplacian", "mixed", "attention")).double()


def test_replaced_pattern_is_the_one_applied_to_v():
    """out = proj(a V + b R V) for a pattern R returned by the hook (hand computation)."""
    attn = _mha()
    with torch.no_grad():
        attn.mix_coef.copy_(torch.tensor([[0.3, 0.7]]))
    B, T = 2, 5
    x = torch.randn(B, T, 16, dtype=torch.float64)
    r = torch.rand(B, 4, T, T, dtype=torch.float64).softmax(-1)  # another row-stochastic P
    handle = attn.hook_pattern.add_hook(lambda p, hp: r)
    try:
        out = attn(x)
    finally:
        handle.remove()
    q, k, v = attn.qkv(x).view(B, T, 3, 4, 4).unbind(2)
    v = v.transpose(1, 2)  # (B, H, T, Dh)
    a = torch.tensor([0.0, 1.0, 0.3, 0.0], dtype=torch.float64).view(1, 4, 1, 1)
    b = torch.tensor([1.0, -1.0, 0.7, 1.0], dtype=torch.float64).view(1, 4, 1, 1)
    z = a * v + b * (r @ v)  # (B, H, T, Dh)
    expected = attn.proj(z.transpose(1, 2).reshape(B, T, 16))
    assert torch.allclose(out, expected, atol=1e-12)
    assert not torch.allclose(out, attn(x), atol=1e-3)


@pytest.mark.parametrize("name", ["gpt-tiny", "ltransformer-tiny"])
def test_zeroed_pattern_leaves_v_on_laplacian_heads_and_zero_on_attention_heads(name):
    """P = 0: attention heads output P V = 0, Laplacian heads V − P V = V."""
    model = tiny_model(name)
    x, mask = tiny_input(model)
    attn = model.blocks[1].attn
    seen = {}
    handles = [attn.hook_pattern.add_hook(lambda p, hp: torch.zeros_like(p)),
               attn.hook_v.add_hook(lambda v, hp: seen.setdefault("v", v)),
               attn.hook_z.add_hook(lambda z, hp: seen.setdefault("z", z))]
    try:
        with torch.no_grad():
            model(x, mask)
    finally:
        for h in handles:
            h.remove()
    z, v = seen["z"], seen["v"]  # (B, T, [p·]H, Dh)
    lap = torch.tensor([k == "laplacian" for k in attn.head_kinds])
    lap = lap.repeat(z.shape[2] // attn.n_heads)  # every slice has the same kinds
    assert lap.any() and (~lap).any()
    assert torch.equal(z[:, :, ~lap], torch.zeros_like(z[:, :, ~lap]))
    assert torch.allclose(z[:, :, lap], v[:, :, lap])


def test_l_block_pattern_edit_equals_the_same_edit_per_slice():
    """Replacing the (B, p·H, T, T) pattern of an L-block == replacing each slice's
    standard block pattern by its H-head part (head index k·H + h)."""
    p, d_s, H, B, T = 2, 8, 2, 2, 5
    torch.manual_seed(2)
    lblock = LBlock(LTransformerConfig(d_model=p * d_s, p=p, n_heads=H),
                    ("laplacian", "attention"))
    x_hat = torch.randn(p, B, T, d_s)
    r = torch.rand(B, p * H, T, T).softmax(-1)
    handle = lblock.attn.hook_pattern.add_hook(lambda pat, hp: r)
    try:
        y = lblock(x_hat)
    finally:
        handle.remove()
    assert not torch.allclose(y, lblock(x_hat), atol=1e-4)
    for k in range(p):
        ref = slice_block(lblock, k)
        ref.attn.hook_pattern.add_hook(lambda pat, hp, k=k: r[:, k * H:(k + 1) * H])
        assert torch.allclose(y[k], ref(x_hat[k]), atol=1e-5)
