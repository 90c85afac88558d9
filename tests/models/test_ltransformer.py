"""L-Transformer numerics: the equivalence theorem, transforms, the L-product, parameter count.

El Ichi et al., arXiv 2603.05727.
"""

import numpy as np
import pytest
import scipy.fft
import torch

import tokengeo
from tokengeo.models.ltransformer import LTransformerConfig, encoder_parameter_count
from tokengeo.nn.lblock import LBlock, slice_block
from tokengeo.nn.lposition import ALPHAS, SlicePositionalEncoding, alpha_schedule, sinusoid
from tokengeo.nn.lproduct import (
    SliceLayerNorm,
    SliceLinear,
    l_product,
    slices_to_tokens,
    tokens_to_slices,
)
from tokengeo.nn.transforms import (
    TRANSFORMS,
    LearnableOrthogonal,
    dct_matrix,
    hadamard_matrix,
    make_transform,
)


def lblock_of(p: int, d_s: int, n_heads: int, kinds, *, causal=False, **cfg) -> LBlock:
    """An L-block of p slices of width d_s (blocks take the config)."""
    config = LTransformerConfig(d_model=p * d_s, p=p, n_heads=n_heads, **cfg)
    return LBlock(config, kinds, causal=causal)


def randomise(module: torch.nn.Module, scale: float = 0.3) -> None:
    """Replace every parameter by random values, so copies and layouts are really tested."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * scale)


def padding_mask(B: int, T: int) -> torch.Tensor:
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, T // 2:] = 0
    return mask


# ---------------------------------------------------------------- transforms


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_transforms_are_orthogonal_and_invert_to_float_precision(name, p):
    t = make_transform(name, p)
    if p > 1 and name.startswith("learnable"):
        with torch.no_grad():
            t.skew_params.normal_()  # a rotation far from the DCT
    z = t.matrix()
    assert torch.allclose(z @ z.T, torch.eye(p), atol=1e-6)
    x = torch.randn(p, 3, 5, 7)
    x_hat = t(x)
    assert torch.allclose(t.inverse(x_hat), x, atol=1e-6)
    assert torch.allclose(x_hat.norm(), x.norm(), rtol=1e-6)  # orthogonal: energy preserved
    if p > 1 and name != "identity":
        assert not torch.allclose(x_hat, x, atol=1e-3)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_dct_is_scipy_orthonormal_dct_ii(p):
    x = np.random.default_rng(0).standard_normal((p, 6))
    expected = scipy.fft.dct(x, type=2, norm="ortho", axis=0)
    assert np.allclose(dct_matrix(p).numpy() @ x, expected, atol=1e-12)


def test_walsh_hadamard_rows_are_in_sequency_order():
    h = hadamard_matrix(8) * np.sqrt(8)
    assert torch.equal(h.abs(), torch.ones(8, 8, dtype=h.dtype))
    sign_changes = (h[:, 1:] != h[:, :-1]).sum(1)
    assert sign_changes.tolist() == list(range(8))


@pytest.mark.parametrize("parametrization", ["expm", "cayley"])
def test_learnable_transform_stays_orthogonal_after_optimiser_steps(parametrization):
    t = LearnableOrthogonal(4, parametrization)
    start = t.matrix().detach().clone()
    assert torch.allclose(start, dct_matrix(4).float(), atol=1e-7)  # initialised at the DCT
    opt = torch.optim.Adam(t.parameters(), lr=0.1)
    target = torch.randn(4, 4)
    for _ in range(25):
        loss = (t.matrix() - target).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    z = t.matrix().detach()
    assert (z - start).abs().max() > 0.1  # it moved
    assert torch.allclose(z @ z.T, torch.eye(4), atol=1e-6)


# ---------------------------------------------------------------- the L-product


def test_slice_linear_in_the_transform_domain_is_the_l_product():
    """X ⋆_L W = ((X ×₃ Z) △ (W ×₃ Z)) ×₃ Z⁻¹ equals SliceLinear with weights Ŵ_k."""
    p, T, d_s, d_out = 4, 5, 3, 6
    t = make_transform("dct", p)
    z = t.matrix().double()
    x_tokens = torch.randn(1, T, p * d_s, dtype=torch.float64)
    w = torch.randn(d_s, d_out, p, dtype=torch.float64)  # tube-last, the paper's layout
    lin = SliceLinear(p, d_s, d_out, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_((w @ z.T).permute(2, 0, 1))  # Ŵ_k = (W ×₃ Z)[:, :, k]
    x_slices = tokens_to_slices(x_tokens, p)  # (p, 1, T, d_s)
    fast = t.double().inverse(lin(t.double()(x_slices)))  # (p, 1, T, d_out)
    x_tensor = x_slices[:, 0].permute(1, 2, 0)  # 𝒳 ∈ R^{T×d_s×p}
    reference = l_product(x_tensor, w, z)  # (T, d_out, p)
    assert torch.allclose(fast[:, 0].permute(1, 2, 0), reference, atol=1e-12)


def test_token_slice_layout_round_trip():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    s = tokens_to_slices(x, 4)
    assert s.shape == (4, 2, 3, 2)
    assert torch.equal(s[1, 0, 0], x[0, 0, 2:4])  # slice k = features [k·d_s, (k+1)·d_s)
    assert torch.equal(slices_to_tokens(s), x)


def test_slice_layer_norm_normalises_each_slice_separately():
    ln = SliceLayerNorm(3, 4)
    x = torch.randn(3, 2, 5, 4) * torch.tensor([1.0, 10.0, 100.0]).view(3, 1, 1, 1)
    y = ln(x)
    assert torch.allclose(y.mean(-1), torch.zeros(3, 2, 5), atol=1e-5)
    assert torch.allclose(y.var(-1, unbiased=False), torch.ones(3, 2, 5), atol=1e-3)


# ---------------------------------------------------------------- the equivalence theorem


BLOCK_KINDS = [("attention", "attention"), ("attention", "laplacian"), ("mixed", "laplacian")]


@pytest.mark.parametrize("kinds", BLOCK_KINDS)
@pytest.mark.parametrize("transform", ["dct", "hadamard", "learnable"])
def test_l_block_equals_p_standard_blocks_conjugated_by_the_transform(kinds, transform):
    """Z⁻¹ ∘ LBlock ∘ Z == Z⁻¹ ∘ (Block_1 ⊕ … ⊕ Block_p) ∘ Z within 1e-5 (float32)."""
    p, d_s, B, T = 4, 16, 3, 9
    lblock = lblock_of(p, d_s, 2, kinds, mlp_ratio=2.0)
    randomise(lblock)
    t = make_transform(transform, p)
    randomise(t)
    mask = padding_mask(B, T)
    x = torch.randn(B, T, p * d_s)
    x_hat = t(tokens_to_slices(x, p))  # (p, B, T, d_s)
    y = slices_to_tokens(t.inverse(lblock(x_hat, mask)))
    per_slice = torch.stack([slice_block(lblock, k)(x_hat[k], mask) for k in range(p)])
    y_ref = slices_to_tokens(t.inverse(per_slice))
    assert torch.allclose(y, y_ref, atol=1e-5)
    assert not torch.allclose(y, x, atol=1e-2)  # the block did something


def test_causal_l_block_with_pattern_hook_equals_causal_standard_blocks():
    """The reference path (pattern captured) and causal masking, slice by slice."""
    p, d_s, B, T = 2, 8, 2, 6
    lblock = lblock_of(p, d_s, 2, ("laplacian", "attention"), causal=True)
    randomise(lblock)
    x_hat = torch.randn(p, B, T, d_s)
    patterns = []
    handle = lblock.attn.hook_pattern.add_hook(lambda pat, hp: patterns.append(pat))
    try:
        y = lblock(x_hat, padding_mask(B, T))
    finally:
        handle.remove()
    for k in range(p):
        ref = slice_block(lblock, k)
        assert torch.allclose(y[k], ref(x_hat[k], padding_mask(B, T)), atol=1e-5)
    pattern = patterns[0]  # (B, p·H, T, T)
    assert pattern.shape == (B, p * 2, T, T)
    assert torch.all(pattern.triu(1) == 0)  # causal


def test_whole_model_equals_p_standard_transformers_on_the_spectral_slices():
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=50, n_laplacian=1,
                                  alpha="exponential", transform="haar").eval()
    randomise(model.blocks)
    randomise(model.ln_final)
    ids, mask = torch.randint(0, 50, (2, 11)), padding_mask(2, 11)
    x_hat, _ = model.embed(ids, mask)  # (p, B, T, d_s)
    outs = []
    for k in range(model.config.p):
        h = x_hat[k]
        for block in model.blocks:
            h = slice_block(block, k)(h, mask)  # a standard transformer of width d_s
        ln = torch.nn.functional.layer_norm(h, (model.config.d_slice,), eps=1e-5)
        outs.append(ln * model.ln_final.weight[k] + model.ln_final.bias[k])
    expected = slices_to_tokens(model.transform.inverse(torch.stack(outs)))
    assert torch.allclose(model.forward_features(ids, mask), expected, atol=1e-5)


def test_benchmark_slice_after_slice_equals_batched_forward_and_backward():
    """The benchmark's sequential contender (copies of each slice's weights in standard
    blocks) computes the model's function, and the same gradients slice by slice."""
    from tokengeo.bench.ltransformer import SequentialSlices

    kw = dict(vocab_size=60, n_laplacian=1, head_kind="mixed", pool="cls", alpha="learnable",
              transform="learnable")
    batched = tokengeo.create_model("ltransformer-tiny", **kw)
    randomise(batched.blocks)
    sequential = SequentialSlices(batched)
    ids, mask = torch.randint(0, 60, (3, 10)), padding_mask(3, 10)
    out_b = batched(ids, mask)
    assert torch.allclose(out_b, sequential(ids, mask), atol=1e-5)
    lt_grads = torch.autograd.grad(out_b.sum(), [b.attn.qkv.weight for b in batched.blocks])
    out_s = sequential(ids, mask)
    for layer, grad in enumerate(lt_grads):
        per_slice = [sequential.slices[k][layer].attn.qkv.weight for k in range(4)]
        seq_grads = torch.autograd.grad(out_s.sum(), per_slice, retain_graph=True)
        for k, g in enumerate(seq_grads):
            assert torch.allclose(grad[k], g.T, atol=1e-5), (layer, k)
    enc = sequential.num_parameters(only_blocks=True)
    assert enc == batched.num_parameters(only_blocks=True)
    assert sequential.num_parameters() == batched.num_parameters()


# ---------------------------------------------------------------- positional encoding


@pytest.mark.parametrize("alpha", ALPHAS)
def test_slice_positional_encoding_scales_each_slice_frequency(alpha):
    p, d_s, T = 4, 8, 6
    pe = SlicePositionalEncoding(p, d_s, alpha)(T)  # (p, 1, T, d_s)
    a = alpha_schedule(alpha, p).float()
    for k in range(p):
        t = torch.arange(T, dtype=torch.float32) * a[k]
        assert torch.allclose(pe[k, 0], sinusoid(t, d_s), atol=1e-6)
    expected = {"identity": [1, 1, 1, 1], "linear": [1, 2, 3, 4], "harmonic": [1, 1 / 2, 1 / 3,
                1 / 4], "exponential": [1, 2, 4, 8], "learnable": [1, 1, 1, 1]}[alpha]
    assert torch.allclose(a, torch.tensor(expected, dtype=torch.float32))


def test_sinusoid_is_vaswani_code():
    code = sinusoid(torch.tensor([3.0]), 6)[0]
    omega = 10000.0 ** (-torch.tensor([0, 0, 2, 2, 4, 4]) / 6)
    expected = torch.where(torch.arange(6) % 2 == 0, (3 * omega).sin(), (3 * omega).cos())
    assert torch.allclose(code, expected)


# ---------------------------------------------------------------- parameter count


@pytest.mark.parametrize("overrides", [
    {},
    {"bias": False, "mlp_ratio": 2.5},
    {"head_kind": "mixed", "n_laplacian": 1, "transform": "learnable"},
    {"laplacian_heads": {1: [0, 1]}, "head_kind": "mixed", "p": 2, "d_model": 96},
    {"p": 1},
])
def test_parameter_count_formula_matches_the_model(overrides):
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=40, **overrides)
    assert model.num_parameters(only_blocks=True) == encoder_parameter_count(model.config)


def test_formula_at_p1_is_the_standard_encoder_count():
    enc = tokengeo.create_model("encoder-tiny", vocab_size=40, mlp_ratio=3.0)
    cfg = LTransformerConfig(d_model=128, n_layers=2, n_heads=4, p=1, mlp_ratio=3.0)
    assert enc.num_parameters(only_blocks=True) == encoder_parameter_count(cfg)


def test_encoder_parameters_are_about_a_quarter_at_p4_d768():
    sizes = dict(d_model=768, n_layers=1, vocab_size=10)  # the ratio does not depend on depth
    base = tokengeo.create_model("encoder-tiny", n_heads=12, **sizes)
    lt = tokengeo.create_model("ltransformer-tiny", n_heads=3, p=4, **sizes)
    ratio = lt.num_parameters(only_blocks=True) / base.num_parameters(only_blocks=True)
    assert 0.24 <= ratio <= 0.27
    assert ratio == pytest.approx((12 * 768**2 / 4 + 13 * 768) / (12 * 768**2 + 13 * 768))


@pytest.mark.parametrize("bias", [True, False])
def test_slice_layer_norm_is_layer_norm_with_a_per_slice_affine(bias):
    ln = SliceLayerNorm(3, 5, bias=bias).double()
    randomise(ln)
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64)
    ref_gain = ln.weight.view(3, 1, 1, 5)
    ref_bias = ln.bias.view(3, 1, 1, 5) if bias else 0.0
    expected = torch.nn.functional.layer_norm(x, (5,), eps=ln.eps) * ref_gain + ref_bias
    assert torch.allclose(ln(x), expected, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_affine_folded_into_slice_linear(bias):
    """(x ⊙ γ + β) W + b == x (diag(γ) W) + (β W + b), values and gradients."""
    ln, lin = SliceLayerNorm(3, 5, bias=bias).double(), SliceLinear(3, 5, 7, bias=bias).double()
    randomise(ln)
    randomise(lin)
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64)
    params = [*ln.parameters(), *lin.parameters()]
    unfolded = lin(ln(x))
    folded = lin(ln.normalize(x), in_affine=ln.affine())
    assert torch.allclose(folded, unfolded, atol=1e-12)
    grad = torch.randn_like(folded)
    for a, b in zip(torch.autograd.grad(folded, params, grad),
                    torch.autograd.grad(unfolded, params, grad), strict=True):
        assert torch.allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
def test_hadamard_is_scipy_hadamard_in_sequency_order(p):
    """Our rows are scipy's Sylvester rows, sorted by number of sign changes, over √p."""
    import scipy.linalg

    h = scipy.linalg.hadamard(p).astype(np.float64)
    order = np.argsort((h[:, 1:] != h[:, :-1]).sum(1), kind="stable")
    assert np.array_equal(hadamard_matrix(p).numpy() * np.sqrt(p), h[order])


@pytest.mark.parametrize("name", ["dct", "hadamard"])
def test_fixed_transform_module_applies_the_scipy_matrix(name):
    """FixedTransform(x) is x ×₃ Z with Z the scipy DCT-II (norm='ortho') / Hadamard."""
    import scipy.linalg

    p = 8
    x = np.random.default_rng(1).standard_normal((p, 2, 3))
    if name == "dct":
        expected = scipy.fft.dct(x, type=2, norm="ortho", axis=0)
    else:
        h = scipy.linalg.hadamard(p) / np.sqrt(p)
        expected = h[np.argsort((h[:, 1:] != h[:, :-1]).sum(1), kind="stable")] @ x.reshape(p, -1)
    got = make_transform(name, p).double()(torch.from_numpy(x)).numpy()
    assert np.allclose(got, expected.reshape(x.shape), atol=1e-12)
