"""The smoothing probe (tokengeo.probes.smoothing): hand-computed signs, the closed-form
derivative against a finite difference, the Rayleigh quotient against an explicit loop, on
tokengeo models and laplacianized Hugging Face models."""

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.models.registry import create_model
from tokengeo.probes.capture import capture
from tokengeo.probes.smoothing import (
    head_smoothing,
    rayleigh_quotients,
    variance_derivative,
    within_variance,
)

# ------------------------------------------------------------------ pure functions


def _mixing(T: int, lam: float) -> torch.Tensor:
    """P = (1 − λ) I + λ 11ᵀ / T, a row-stochastic attention matrix (T, T)."""
    return (1 - lam) * torch.eye(T) + lam * torch.full((T, T), 1.0 / T)


@pytest.mark.parametrize("sign", [-1.0, 1.0])
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_hand_computed_signs_for_p_and_i_minus_p(sign, lam):
    """A head writing s·x through P or I − P, with P = (1 − λ) I + λ 11ᵀ/T:
    (P X)_c = (1 − λ) X_c and ((I − P) X)_c = λ X_c, so the derivative is 2 s (1 − λ) for
    an attention head and 2 s λ for a Laplacian head: −x smooths, +x sharpens."""
    torch.manual_seed(0)
    x = torch.randn(3, 7, 5, dtype=torch.float64)
    p = _mixing(7, lam).to(x.dtype)
    attention = sign * (p @ x)
    laplacian = sign * (x - p @ x)
    assert variance_derivative(x, attention).item() == pytest.approx(2 * sign * (1 - lam))
    assert variance_derivative(x, laplacian).item() == pytest.approx(2 * sign * lam)


def test_derivative_matches_a_finite_difference_with_padding():
    torch.manual_seed(1)
    x = torch.randn(4, 9, 6, dtype=torch.float64)
    o = torch.randn(4, 9, 6, dtype=torch.float64)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[1, 6:] = False
    mask[3, 2:] = False
    x[~mask] = 1e3  # padding must not count
    eps = 1e-4
    fd = (within_variance(x + eps * o, mask) - within_variance(x - eps * o, mask)) / (2 * eps)
    assert variance_derivative(x, o, mask).item() == pytest.approx(
        (fd / within_variance(x, mask)).item(), rel=1e-7)


def test_rayleigh_matches_an_explicit_loop():
    torch.manual_seed(2)
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    maps = torch.randn(3, 4, 4, dtype=torch.float64)
    got = rayleigh_quotients(x, maps)
    for h in range(3):
        s = (maps[h] + maps[h].T) / 2
        values = []
        for b in range(2):
            mean = x[b].mean(0)
            for t in range(5):
                u = x[b, t] - mean
                values.append(float(u @ s @ u / (u @ u)))
        assert got[h].item() == pytest.approx(sum(values) / len(values), rel=1e-10)


def test_rayleigh_of_minus_identity_is_minus_one():
    x = torch.randn(2, 6, 4)
    maps = torch.stack([-torch.eye(4), 2 * torch.eye(4)])
    assert rayleigh_quotients(x, maps).tolist() == pytest.approx([-1.0, 2.0])


def test_rayleigh_refuses_sequences_without_spread():
    with pytest.raises(ConfigError, match="at least two distinct tokens"):
        rayleigh_quotients(torch.ones(2, 3, 4), torch.eye(4)[None])


# ------------------------------------------------------------------ tokengeo models


def _independent(model, inputs, layer, head):
    """The derivative by a finite difference and the Rayleigh quotient by a loop, from the
    captured stream and z and the raw weights (ln1.weight, qkv.weight, proj.weight)."""
    block = model.blocks[layer]
    with torch.no_grad(), capture(model, [f"blocks.{layer}.hook_resid_pre",
                                          f"blocks.{layer}.attn.hook_z"]) as cache:
        model(inputs)
    with torch.no_grad():
        return _independent_from(block, cache, layer, head)


def _independent_from(block, cache, layer, head):
    attn = block.attn
    d, dh = attn.d_model, attn.head_dim
    x = cache[f"blocks.{layer}.hook_resid_pre"].double()
    z = cache[f"blocks.{layer}.attn.hook_z"][:, :, head].double()  # (B, T, Dh)
    cols = slice(head * dh, (head + 1) * dh)
    w_o = attn.proj.weight[:, cols].double()  # (d, Dh)
    o = z @ w_o.T  # (B, T, d)
    eps = 1e-5
    fd = (within_variance(x + eps * o) - within_variance(x - eps * o)) / (2 * eps)
    w_v = attn.qkv.weight[2 * d:][cols].double()  # (Dh, d): v_h = W x
    m = torch.diag(block.ln1.weight.double()) @ w_v.T @ w_o.T  # (d, d), row-vector maps
    s = (m + m.T) / 2
    quotients = []
    for b in range(x.shape[0]):
        mean = x[b].mean(0)
        for t in range(x.shape[1]):
            u = x[b, t] - mean
            quotients.append(float(u @ s @ u / (u @ u)))
    return float(fd / within_variance(x)), sum(quotients) / len(quotients)


@pytest.mark.parametrize("name,inputs", [
    ("vit-tiny", lambda: torch.randn(3, 1, 28, 28)),
    ("gpt-tiny", lambda: torch.randint(0, 256, (3, 12))),
])
def test_rows_match_independent_computation(name, inputs):
    torch.manual_seed(3)
    model = create_model(name, n_laplacian=2, n_layers=2)
    with torch.no_grad():  # trained-looking norms: a non-unit scale must enter S
        for block in model.blocks:
            block.ln1.weight.uniform_(0.5, 1.5)
    x = inputs()
    rows = head_smoothing(model, x)
    assert [(r.layer, r.head) for r in rows] == [(l, h) for l in range(2) for h in range(4)]
    assert [r.kind for r in rows[:4]] == ["attention"] * 2 + ["laplacian"] * 2
    for r in rows:
        deriv, ray = _independent(model, x, r.layer, r.head)
        assert r.variance_derivative == pytest.approx(deriv, rel=1e-3, abs=1e-6)
        assert r.rayleigh == pytest.approx(ray, rel=1e-4, abs=1e-7)


def _signed_model(sign: float):
    """One layer, d = 8, H = 2: W_V = I, W_O = s I, the norm plain, no biases: head h's map
    is s times the projection onto its 4 coordinates."""
    model = create_model("gpt-tiny", d_model=8, n_heads=2, n_layers=1, vocab_size=16,
                         laplacian_heads={0: [1]}, bias=False)
    with torch.no_grad():
        attn = model.blocks[0].attn
        attn.qkv.weight[16:] = torch.eye(8)
        attn.proj.weight.copy_(sign * torch.eye(8))
    return model


@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_model_head_writing_minus_x_smooths(sign):
    """Tokens of zero feature-mean and equal norm r, so LN(x) = x √d / r; P = I for the
    attention head (z = V) and P = 11ᵀ/T for the Laplacian head (z = V − V̄): both write
    s·(x_c restricted to their coordinates)·√d / r, a derivative of 2 s (√d/r) ‖X_c|h‖²/‖X_c‖²
    and a Rayleigh quotient s·mean ‖u|h‖²/‖u‖²."""
    torch.manual_seed(4)
    model = _signed_model(sign)
    B, T, d = 2, 6, 8
    x = torch.randn(B, T, d)
    x = x - x.mean(-1, keepdim=True)
    r = 3.0
    x = r * x / x.norm(dim=-1, keepdim=True)
    eye, flat = torch.eye(T), torch.full((T, T), 1.0 / T)
    pattern = torch.stack([eye, flat])[None].expand(B, 2, T, T)
    points = model.blocks[0]
    h1 = points.hook_resid_pre.add_hook(lambda act, hp: x)
    h2 = points.attn.hook_pattern.add_hook(lambda act, hp: pattern)
    try:
        rows = head_smoothing(model, torch.zeros(B, T, dtype=torch.long))
    finally:
        h1.remove()
        h2.remove()
    xc = x - x.mean(1, keepdim=True)
    scale = (d ** 0.5) / r * (1 / (1 + 1e-5 * d / r**2)) ** 0.5  # LN's eps, to first order
    for h, row in enumerate(rows):
        part = xc[..., 4 * h:4 * h + 4]
        expected = 2 * sign * scale * part.pow(2).sum() / xc.pow(2).sum()
        assert row.variance_derivative == pytest.approx(expected.item(), rel=1e-4)
        assert (row.variance_derivative < 0) == (sign < 0)
        ray = (part.pow(2).sum(-1) / xc.pow(2).sum(-1)).mean()
        assert row.rayleigh == pytest.approx(sign * ray.item(), rel=1e-4)
    assert [row.kind for row in rows] == ["attention", "laplacian"]


def test_padding_mask_restricts_the_means():
    torch.manual_seed(5)
    model = create_model("encoder-tiny", n_laplacian=2, vocab_size=50)
    ids = torch.randint(0, 50, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    rows = head_smoothing(model, ids, attention_mask=mask)
    ids2 = ids.clone()
    ids2[1, 5:] = 7  # other padding tokens: same rows
    rows2 = head_smoothing(model, ids2, attention_mask=mask)
    for a, b in zip(rows, rows2, strict=True):
        assert a.variance_derivative == pytest.approx(b.variance_derivative, rel=1e-5)
        assert a.rayleigh == pytest.approx(b.rayleigh, rel=1e-5)


def test_ltransformer_is_refused_clearly():
    model = create_model("ltransformer-tiny")
    with pytest.raises(ConfigError, match="spectral slices"):
        head_smoothing(model, torch.randint(0, 100, (2, 8)))


def test_training_mode_is_restored():
    model = create_model("gpt-tiny", n_layers=1).train()
    head_smoothing(model, torch.randint(0, 256, (2, 5)))
    assert model.training


# ------------------------------------------------------------------ Hugging Face


def _tiny_llama():
    transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager")  # the Dirichlet step reads the softmax pattern
    torch.manual_seed(6)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
    return model


def test_laplacianized_llama_matches_explicit_weights():
    from tokengeo.models.hf import laplacianize

    model = laplacianize(_tiny_llama(), n_laplacian=2)
    ids = torch.randint(0, 64, (2, 10))
    rows = head_smoothing(model, {"input_ids": ids})
    assert [r.kind for r in rows[:4]] == ["attention"] * 2 + ["laplacian"] * 2
    names = [f"blocks.{l}.{p}" for l in range(2) for p in ("hook_resid_pre", "attn.hook_z")]
    with torch.no_grad(), capture(model, names) as cache:
        model(input_ids=ids)
    torch.set_grad_enabled(False)
    try:
        _check_llama_rows(model, rows, cache)
    finally:
        torch.set_grad_enabled(True)


def _check_llama_rows(model, rows, cache):
    for r in rows:
        layer = model.model.layers[r.layer]
        x = cache[f"blocks.{r.layer}.hook_resid_pre"].double()
        z = cache[f"blocks.{r.layer}.attn.hook_z"][:, :, r.head].double()  # (B, T, 8)
        w_o = layer.self_attn.o_proj.weight[:, 8 * r.head:8 * r.head + 8].double()  # (32, 8)
        o = z @ w_o.T
        eps = 1e-5
        fd = (within_variance(x + eps * o) - within_variance(x - eps * o)) / (2 * eps)
        assert r.variance_derivative == pytest.approx(float(fd / within_variance(x)), rel=1e-3)
        kv = r.head // 2  # grouped: query head h reads KV head h // 2
        w_v = layer.self_attn.v_proj.weight[8 * kv:8 * kv + 8].double()  # (8, 32)
        m = torch.diag(layer.input_layernorm.weight.double()) @ w_v.T @ w_o.T
        s = (m + m.T) / 2
        u = (x - x.mean(1, keepdim=True)).reshape(-1, 32)
        loop = sum(float(v @ s @ v / (v @ v)) for v in u) / len(u)
        assert r.rayleigh == pytest.approx(loop, rel=1e-4)


def test_hf_gpt2_fused_projection():
    transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")
    from tokengeo.models.hf import laplacianize

    config = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2,
                                     n_positions=32, attn_implementation="eager")
    torch.manual_seed(7)
    model = laplacianize(transformers.GPT2LMHeadModel(config).eval(), n_laplacian=1)
    ids = torch.randint(0, 64, (2, 9))
    rows = head_smoothing(model, {"input_ids": ids})
    attn = model.transformer.h[0].attn
    with torch.no_grad(), capture(model, ["blocks.0.hook_resid_pre"]) as cache:
        model(input_ids=ids)
    x = cache["blocks.0.hook_resid_pre"].double()
    gamma = model.transformer.h[0].ln_1.weight.double()
    for r in rows:
        cols = slice(8 * r.head, 8 * r.head + 8)
        w_v = attn.c_attn.weight[:, 32:][:, cols].double()  # Conv1D: (in, out)
        w_o = attn.c_proj.weight[cols].double()  # (8, 16)
        m = torch.diag(gamma) @ w_v @ w_o
        expected = rayleigh_quotients(x, m[None])[0]
        assert r.rayleigh == pytest.approx(expected.item(), rel=1e-4)
    assert [r.kind for r in rows] == ["attention", "laplacian"]


def test_hf_model_without_eager_attention_is_refused_clearly():
    transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")
    config = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2,
                                     n_positions=32, attn_implementation="sdpa")
    model = transformers.GPT2LMHeadModel(config).eval()
    with pytest.raises(ConfigError, match="eager"):
        head_smoothing(model, {"input_ids": torch.randint(0, 64, (2, 9))})
