"""Heads with given, fixed coefficients (a, b): the spec's rules and clear errors, and every
path that computes them (HeadMixer.combine, the attention module on the in_place and compose
kernels, a frozen mixed head) against the reference ``a·V + b·P V`` (values and gradients)."""

from __future__ import annotations

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.nn.heads import (
    ATTENTION,
    FIXED,
    LAPLACIAN,
    MIXED,
    HeadMixer,
    HeadSpec,
    check_coefficients,
    freeze_mixed_heads,
)
from tokengeo.nn.reference import mix_heads, self_attention_reference

# the path from attention (t = 0) to the Laplacian (t = 1), and the control (1, 1)
PAIRS = [(0.0, 1.0), (0.25, 0.5), (0.5, 0.0), (0.75, -0.5), (1.0, -1.0), (1.0, 1.0)]


def test_fixed_spec_holds_its_coefficients():
    spec = HeadSpec.parse(2, 4, n_laplacian=3, kind=FIXED, coefficients=(0.25, 0.5))
    assert spec.layer_kinds(0) == (ATTENTION, FIXED, FIXED, FIXED)
    assert spec.coefficients == (0.25, 0.5)
    assert HeadSpec.parse(2, 4, n_laplacian=1).coefficients is None


@pytest.mark.parametrize("kind,coefficients,message", [
    (FIXED, None, r"head_kind='fixed' needs head_coefficients=\(a, b\)"),
    (LAPLACIAN, (1, 1), r"head_coefficients=\(1, 1\) is read only by head_kind='fixed'"),
    (MIXED, (1, 1), r"is read only by head_kind='fixed'"),
    (FIXED, (1,), r"must be a pair \(a, b\) of finite numbers"),
    (FIXED, (1, 2, 3), r"must be a pair"),
    (FIXED, (1, float("nan")), r"must be a pair"),
    (FIXED, (True, 1), r"must be a pair"),
    (FIXED, "ab", r"must be a pair"),
    ("fix", (1, 1), r"head_kind='fix' is not valid"),
])
def test_bad_fixed_specs_are_refused(kind, coefficients, message):
    with pytest.raises(ConfigError, match=message):
        HeadSpec.parse(2, 4, n_laplacian=1, kind=kind, coefficients=coefficients)


def test_head_kinds_refuse_fixed_heads_without_coefficients_and_the_reverse():
    with pytest.raises(ConfigError, match=r"'fixed' heads need coefficients"):
        HeadMixer(2, (ATTENTION, FIXED))
    with pytest.raises(ConfigError, match=r"no head is 'fixed'"):
        HeadMixer(2, (ATTENTION, LAPLACIAN), coefficients=(1.0, 1.0))
    assert check_coefficients([2, -3]) == (2.0, -3.0)


@pytest.mark.parametrize("ab", PAIRS)
def test_fixed_combine_equals_the_reference(ab):
    kinds = (ATTENTION, FIXED, LAPLACIAN, FIXED)
    heads = HeadMixer(4, kinds, coefficients=ab).double()
    a, b = heads.head_coefficients()
    assert a.tolist() == [0.0, ab[0], 1.0, ab[0]] and b.tolist() == [1.0, ab[1], -1.0, ab[1]]
    assert not a.requires_grad and not list(heads.parameters())  # constants, not learnt
    v, pv = (torch.randn(2, 5, 4, 3, dtype=torch.float64, requires_grad=True)
             for _ in range(2))
    got, want = heads.combine(v, pv), mix_heads(v, pv, a, b)
    assert torch.allclose(got, want, atol=1e-14)
    g = torch.randn_like(got)
    for x, y in zip(torch.autograd.grad(got, (v, pv), g),
                    torch.autograd.grad(want, (v, pv), g), strict=True):
        assert torch.allclose(x, y, atol=1e-14)


def test_fixed_heads_take_the_kernels_fast_kinds_when_exact():
    """(0, 1) and (1, −1) run as attention / Laplacian; anything else as a constant mix."""
    assert HeadMixer(2, (FIXED, FIXED), coefficients=(1, -1)).head_runs.runs == (
        (0, 2, LAPLACIAN),)
    assert HeadMixer(2, (FIXED, ATTENTION), coefficients=(0, 1)).head_runs.runs == (
        (0, 2, ATTENTION),)
    assert HeadMixer(2, (ATTENTION, FIXED), coefficients=(1, 1)).head_runs.runs == (
        (0, 1, ATTENTION), (1, 2, MIXED))


def _config():
    from tokengeo.models.config import TransformerConfig

    return TransformerConfig(d_model=16, n_heads=4, bias=False)


@pytest.mark.parametrize("kernel", ["in_place", "compose"])
@pytest.mark.parametrize("ab", PAIRS)
def test_attention_with_fixed_heads_equals_the_reference_layer(kernel, ab):
    from tokengeo.nn.attention import MultiHeadAttention

    kinds = (ATTENTION, FIXED, FIXED, LAPLACIAN)
    attn = MultiHeadAttention(_config(), kinds, causal=True, kernel=kernel,
                              coefficients=ab).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64, requires_grad=True)
    a, b = attn.head_coefficients()
    got = attn(x)
    want = self_attention_reference(x, attn.qkv.weight, attn.proj.weight, 4, a, b,
                                     is_causal=True)
    assert torch.allclose(got, want, atol=1e-12)
    inputs = (x, attn.qkv.weight, attn.proj.weight)
    g = torch.randn_like(got)
    for u, w in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g),
                    strict=True):
        assert torch.allclose(u, w, atol=1e-10)


@pytest.mark.parametrize("ab", PAIRS)
def test_a_frozen_mixed_head_is_a_fixed_head(ab):
    """freeze_mixed_heads gives the fixed head's values and gradients, and (a, b) get none."""
    from tokengeo.nn.attention import MultiHeadAttention

    torch.manual_seed(0)
    fixed = MultiHeadAttention(_config(), (ATTENTION, FIXED, FIXED, FIXED),
                               coefficients=ab).double()
    mixed = MultiHeadAttention(_config(), (ATTENTION, MIXED, MIXED, MIXED)).double()
    mixed.load_state_dict(fixed.state_dict(), strict=False)
    assert freeze_mixed_heads(mixed, ab) == 3
    assert not mixed.mix_coef.requires_grad
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    y_fixed, y_mixed = fixed(x), mixed(x)
    assert torch.allclose(y_fixed, y_mixed, atol=1e-13)
    g = torch.randn_like(y_fixed)
    y_fixed.backward(g)
    y_mixed.backward(g)
    assert torch.allclose(fixed.qkv.weight.grad, mixed.qkv.weight.grad, atol=1e-12)
    assert mixed.mix_coef.grad is None


def test_freezing_a_model_without_mixed_heads_is_refused():
    from tokengeo.nn.attention import MultiHeadAttention

    with pytest.raises(ConfigError, match="has no mixed heads to freeze"):
        freeze_mixed_heads(MultiHeadAttention(_config(), (ATTENTION,) * 4), (1, 1))
    with pytest.raises(ConfigError, match="must be a pair"):
        freeze_mixed_heads(MultiHeadAttention(_config(), (MIXED,) * 4), (1, None))


def test_attention_reads_fixed_coefficients_from_a_config_that_carries_them():
    """A model config with ``head_coefficients`` (and a spec of kind 'fixed') needs no
    further plumbing: the attention module takes them from it."""
    from dataclasses import dataclass

    from tokengeo.models.config import TransformerConfig
    from tokengeo.nn.attention import MultiHeadAttention

    @dataclass
    class FixedConfig(TransformerConfig):
        head_coefficients: tuple[float, float] | None = None

    cfg = FixedConfig(d_model=16, n_heads=4)
    spec = HeadSpec.parse(cfg.n_layers, 4, n_laplacian=2, kind=FIXED, coefficients=(0.75, -0.5))
    cfg.head_coefficients = spec.coefficients
    attn = MultiHeadAttention(cfg, spec.layer_kinds(0))
    a, b = attn.head_coefficients()
    assert a.tolist() == [0.0, 0.0, 0.75, 0.75] and b.tolist() == [1.0, 1.0, -0.5, -0.5]
