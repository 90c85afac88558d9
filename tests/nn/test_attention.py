"""Head-kind attention: fused path == materialised reference, and the paper's identities."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.errors import ConfigError
from tokengeo.models.config import TransformerConfig
from tokengeo.nn.attention import MultiHeadAttention, attention_reference, build_attn_mask
from tokengeo.nn.heads import HeadMixer, resolve_head_kinds


def mha(d_model, n_heads, *, head_kinds=None, causal=False, **cfg) -> MultiHeadAttention:
    """The module built from a config of these sizes (blocks take the config)."""
    config = TransformerConfig(d_model=d_model, n_heads=n_heads, **cfg)
    return MultiHeadAttention(config, head_kinds, causal=causal)

KIND_MIXES = [
    ("attention",) * 4,
    ("laplacian",) * 4,
    ("attention", "attention", "laplacian", "laplacian"),
    ("laplacian", "attention", "mixed", "attention"),
    ("mixed",) * 4,
]


def reference_forward(attn: MultiHeadAttention, x, key_padding_mask=None):
    """The same module computed through the materialised-P path."""
    B, T, D = x.shape
    q, k, v = attn.qkv(x).view(B, T, 3, attn.n_heads, attn.head_dim).unbind(2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    mask, is_causal = build_attn_mask(key_padding_mask, T, attn.causal)
    a, b = attn.head_coefficients()
    z, _ = attention_reference(q, k, v, a, b, mask, is_causal)
    return attn.proj(z.transpose(1, 2).reshape(B, T, D))


CASES = list(itertools.product(KIND_MIXES, [False, True], [False, True]))


@pytest.mark.parametrize("kinds,causal,padded", CASES)
def test_fused_equals_reference(kinds, causal, padded):
    torch.manual_seed(1)
    attn = mha(32, 4, head_kinds=kinds, causal=causal).double()
    if attn.mix_coef is not None:  # move mixed heads away from their init
        attn.mix_coef.data = torch.randn_like(attn.mix_coef)
    x = torch.randn(3, 11, 32, dtype=torch.float64)
    mask = None
    if padded:
        mask = torch.ones(3, 11, dtype=torch.bool)
        mask[0, 7:] = False  # right padding
        mask[1, :4] = False  # left padding (causal: early pad rows attend to themselves)
    fused = attn(x, mask)
    ref = reference_forward(attn, x, mask)
    assert torch.allclose(fused, ref, atol=1e-10), (fused - ref).abs().max()
    assert torch.isfinite(fused).all()


def test_fused_equals_reference_float32():
    attn = mha(64, 4, head_kinds=("attention", "laplacian") * 2, causal=True)
    x = torch.randn(2, 128, 64)
    assert torch.allclose(attn(x), reference_forward(attn, x), atol=1e-5)


def test_hook_pattern_switches_to_reference_with_same_output():
    attn = mha(32, 4, head_kinds=("attention", "laplacian") * 2)
    x = torch.randn(2, 9, 32)
    fused = attn(x)
    seen = {}
    handle = attn.hook_pattern.add_hook(lambda p, hp: seen.setdefault("p", p))
    try:
        via_ref = attn(x)
    finally:
        handle.remove()
    assert torch.allclose(fused, via_ref, atol=1e-6)
    assert torch.allclose(seen["p"].sum(-1), torch.ones(2, 4, 9), atol=1e-6)  # rows of P sum to 1


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 16), k=st.integers(0, 4), causal=st.booleans(), seed=st.integers(0, 10_000))
def test_identical_tokens_give_zero_laplacian_output(T, k, causal, seed):
    """(I − P)·1 = 0 for row-stochastic P: identical tokens get zero from Laplacian heads."""
    torch.manual_seed(seed)
    kinds = resolve_head_kinds(1, 4, n_laplacian=k)[0]
    attn = mha(16, 4, head_kinds=kinds, causal=causal).double()
    x = torch.randn(1, 1, 16, dtype=torch.float64).expand(2, T, 16)
    seen = {}
    attn.hook_z.add_hook(lambda z, hp: seen.setdefault("z", z))
    attn(x)
    z = seen["z"]  # (B, T, H, Dh)
    lap = [h for h, kind in enumerate(kinds) if kind == "laplacian"]
    assert torch.allclose(z[:, :, lap], torch.zeros(()).double(), atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 12), causal=st.booleans(), seed=st.integers(0, 10_000))
def test_mean_component_passed_by_attention_removed_by_laplacian(T, causal, seed):
    """P(1cᵀ) = 1cᵀ and (I − P)(1cᵀ) = 0: shifting every value by c shifts attention-head
    outputs by c and leaves Laplacian-head outputs unchanged (fused SDPA path)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 2, T, 8, generator=g, dtype=torch.float64) for _ in range(3))
    c = torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64)
    kinds = HeadMixer(2, ("attention", "laplacian"))

    def heads(values):
        pv = torch.nn.functional.scaled_dot_product_attention(q, k, values, is_causal=causal)
        out = kinds.combine(values.transpose(1, 2), pv.transpose(1, 2))
        return out.transpose(1, 2)  # (B, H, T, Dh)

    base, shifted = heads(v), heads(v + c)
    assert torch.allclose(shifted[:, 0] - base[:, 0], c[:, 0].expand_as(base[:, 0]), atol=1e-12)
    assert torch.allclose(shifted[:, 1], base[:, 1], atol=1e-12)


def test_mixed_heads_receive_gradients_and_start_as_laplacian():
    attn = mha(16, 2, head_kinds=("mixed", "laplacian"), mixed_init="laplacian")
    a, b = attn.head_coefficients()
    assert a.tolist() == [1.0, 1.0] and b.tolist() == [-1.0, -1.0]
    attn(torch.randn(2, 5, 16)).sum().backward()
    assert attn.mix_coef.grad is not None and attn.mix_coef.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_laplacian=5), "exceeds n_heads=4"),
        (dict(n_laplacian=-1), "must be >= 0"),
        (dict(heads={0: [4]}), "out of range"),
        (dict(heads={3: [0]}), "layer index=3"),
        (dict(heads={0: [1]}, n_laplacian=1), "not both"),
        (dict(kind="smooth"), "not valid"),
    ],
)
def test_bad_head_selection(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        resolve_head_kinds(2, 4, **kwargs)


def test_bad_head_kind_and_shapes():
    with pytest.raises(ConfigError, match="not valid"):
        mha(16, 2, head_kinds=("attention", "heat"))
    with pytest.raises(ConfigError, match="one per head"):
        mha(16, 2, head_kinds=("attention",))
    with pytest.raises(ConfigError, match="not divisible"):
        mha(10, 4)
    with pytest.raises(ConfigError, match="key_padding_mask"):
        mha(16, 2)(torch.randn(2, 5, 16), torch.ones(2, 6))


def test_a_q_hook_sees_its_gradient_and_the_packed_qkv_path_gives_the_same_ones():
    """Without q/k/v hooks the lean path writes one gradient for the qkv projection's
    output; a hook on q turns that off, so gradients hooked on q still arrive."""
    torch.manual_seed(0)
    attn = mha(32, 4, head_kinds=("laplacian", "laplacian", "attention", "laplacian"),
               causal=True)
    x, g = torch.randn(2, 9, 32, requires_grad=True), torch.randn(2, 9, 32)
    want = torch.autograd.grad(attn(x), (x, attn.qkv.weight), g)
    seen = {}

    def watch(q, hp):
        q.register_hook(lambda d: seen.setdefault("dq", d))  # returns None: q unchanged

    attn.hook_q.add_hook(watch)
    got = torch.autograd.grad(attn(x), (x, attn.qkv.weight), g)
    assert seen["dq"].shape == (2, 9, 4, 8)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
