"""The in_place kernel (tokengeo.nn.kernels.in_place, through laplacian_attention): same
values and gradients as the composition a V + b SDPA(q, k, v) on every backward route,
with only standard SDPA's tensors saved for the backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tokengeo.errors import ConfigError
from tokengeo.nn.attention import build_attn_mask
from tokengeo.nn.heads import ATTENTION, KIND_COEFFICIENTS, LAPLACIAN, MIXED, HeadRuns
from tokengeo.nn.kernels import ROUTES, compose, head_runs, laplacian_attention
from tokengeo.nn.kernels import in_place as I
from tokengeo.nn.kernels import pv_roundtrip as R
from tokengeo.nn.kernels.in_place import _combine_in_place, _scale_grads, pv_into
from tokengeo.nn.reference import mix_heads

pytestmark = pytest.mark.usefixtures("one_thread")

COEF = {"attention": (0.0, 1.0), "laplacian": (1.0, -1.0), "mixed": (0.7, -0.3)}
LAYERS = {
    "attention": ("attention",) * 4,
    "laplacian": ("laplacian",) * 4,
    "half": ("attention", "attention", "laplacian", "laplacian"),
    "mixed": ("laplacian", "mixed", "attention", "mixed", "mixed", "laplacian"),
}


def make(kinds, B=2, T=37, Dh=16, dtype=torch.float32, v_scale=1.0, coef_grad=False):
    """A qkv tensor (B, T, 3, H, Dh) and (H, 2) coefficients of ``kinds``."""
    H = len(kinds)
    scale = torch.tensor([1.0, 1.0, v_scale], dtype=dtype).view(1, 1, 3, 1, 1)
    qkv = (torch.randn(B, T, 3, H, Dh, dtype=dtype) * scale).requires_grad_()
    coef = torch.tensor([COEF[k] for k in kinds], dtype=dtype, requires_grad=coef_grad)
    return qkv, coef


def run(fn, qkv, coef, packed=False, **kw):
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh) views
    if packed:
        kw["qkv"] = qkv
    return fn(q, k, v, coef[:, 0], coef[:, 1], **kw)


def lean(q, k, v, a, b, **kw):
    return laplacian_attention(q, k, v, a, b, **kw)


def plain(q, k, v, a, b, attn_mask=None, is_causal=False, dropout_p=0.0, **_):
    return compose(q, k, v, a, b, attn_mask, is_causal, dropout_p)


def is_in_place(z):
    return type(z.grad_fn).__name__ == "LaplacianSDPABackward"


def grads(z, qkv, coef, g):
    inputs = (qkv, coef) if coef.requires_grad else (qkv,)
    return torch.autograd.grad(z, inputs, g)


def bits(t):
    return t.view(torch.int32)  # float32 bit patterns: NaN == NaN, −0 ≠ +0


def masks(B, T):
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[0, T - 5:] = False  # padding at the end of the first sequence
    return {"none": ({}, None), "causal": ({"is_causal": True}, None),
            "padding": ({}, build_attn_mask(keep, T, False)[0]),
            "causal+padding": ({}, build_attn_mask(keep, T, True)[0])}


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("mask", ["none", "causal", "padding", "causal+padding"])
def test_forward_and_gradients_match_the_composition(layer, mask):
    kinds = LAYERS[layer]
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        qkv, coef = make(kinds, dtype=dtype, coef_grad=layer == "mixed")
        kw, attn_mask = masks(2, 37)[mask]
        if attn_mask is not None:
            kw = {"attn_mask": attn_mask}
        z = run(lean, qkv, coef, kernel="in_place", **kw)
        ref = run(plain, qkv, coef, **kw)
        assert is_in_place(z) and z.is_contiguous() and z.shape == ref.shape
        if layer == "mixed":
            eps = torch.finfo(dtype).eps  # a V + b P V rounded in another order
            torch.testing.assert_close(z, ref, rtol=4 * eps, atol=8 * eps)
        else:
            assert torch.equal(z, ref)  # same kernel, same one subtraction
        g = torch.randn_like(z)
        for got, want in zip(grads(z, qkv, coef, g), grads(ref, qkv, coef, g), strict=True):
            assert ((got - want).norm() / want.norm()).item() < tol


@pytest.mark.parametrize("Dh", [16, 32, 64])
def test_float32_gradients_with_large_values(Dh):
    """P V recovered as V − z loses bits when |V| ≫ |P V|; the error stays at float32's."""
    qkv, coef = make(LAYERS["laplacian"], B=2, T=70, Dh=Dh, v_scale=100.0)
    z, ref = run(lean, qkv, coef, is_causal=True), run(plain, qkv, coef, is_causal=True)
    g = torch.randn_like(z)
    for got, want in zip(grads(z, qkv, coef, g), grads(ref, qkv, coef, g), strict=True):
        assert ((got - want).norm() / want.norm()).item() < 1e-5


def test_gradcheck_against_finite_differences_with_learnable_coefficients():
    qkv, coef = make(("attention", "laplacian", "mixed"), B=1, T=5, Dh=4,
                     dtype=torch.float64, coef_grad=True)

    def f(qkv, coef):
        return run(lean, qkv, coef, is_causal=True)

    assert torch.autograd.gradcheck(f, (qkv, coef))


def test_double_backward_recomputes_the_composition():
    qkv, coef = make(("laplacian", "mixed"), B=1, T=4, Dh=3, dtype=torch.float64,
                     coef_grad=True)

    def f(qkv, coef):
        return run(lean, qkv, coef)

    assert torch.autograd.gradgradcheck(f, (qkv, coef))


def test_head_kinds_from_values_or_given_agree():
    kinds = LAYERS["mixed"]
    qkv, coef = make(kinds, coef_grad=True)
    assert head_runs(coef[:, 0], coef[:, 1]) == head_runs(coef[:, 0], coef[:, 1], kinds)
    assert head_runs(coef[:, 0], coef[:, 1]).runs == (
        (0, 1, "laplacian"), (1, 2, "mixed"), (2, 3, "attention"), (3, 5, "mixed"),
        (5, 6, "laplacian"))
    z1 = run(lean, qkv, coef)
    z2 = run(lean, qkv, coef, head_kinds=kinds)
    assert torch.equal(z1, z2)


def test_z_is_restored_exactly_and_a_retained_graph_gives_the_same_gradients():
    qkv, coef = make(LAYERS["mixed"], coef_grad=True, v_scale=30.0)
    z = run(lean, qkv, coef, is_causal=True)
    before = z.detach().clone()
    g = torch.randn_like(z)
    first = torch.autograd.grad(z, (qkv, coef), g, retain_graph=True)
    assert torch.equal(z, before)
    second = torch.autograd.grad(z, (qkv, coef), g)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("chunk", [1 << 16, 8, 4])  # whole batch, one token, part of one
def test_the_rare_inexact_round_trip_is_repaired(monkeypatch, chunk):
    """V − (V − z) ≠ z for these float32 values (and NaN ≠ NaN); the backward must still
    restore z bit for bit, whatever the scratch blocks."""
    monkeypatch.setattr(R, "SCRATCH_CHUNK", chunk)
    v = torch.randn(2, 3, 2, 4)  # (B, T, H, Dh)
    pv = torch.randn(2, 3, 2, 4)
    v[1, 2, 1, 3], pv[1, 2, 1, 3] = 0.00397832365706563, 0.011790824122726917
    pv[0, 1, 0, 2] = float("nan")
    z = v - pv
    assert (v - (v - z) != z).sum() == 2  # the cases this test is about
    runs = head_runs(torch.ones(2), -torch.ones(2))
    original = z.clone()
    fixes = R._pv_into_z(z, v, None, runs)
    assert sum(len(f[-1]) for f in fixes) == 2 and bits(z).equal(bits(v - original))
    R._z_from_pv(z, v, None, runs, fixes)
    assert bits(z).equal(bits(original))


@pytest.mark.parametrize("B,T,h,chunk", [(3, 5, 2, 1 << 16), (3, 5, 2, 24), (3, 5, 2, 7),
                                         (1, 9, 1, 1), (4, 2, 3, 13)])
def test_scratch_blocks_tile_batch_and_tokens_once(monkeypatch, B, T, h, chunk):
    monkeypatch.setattr(R, "SCRATCH_CHUNK", chunk)
    z = torch.zeros(B, T, h + 1, 4)
    for bs, ts in R._blocks(z, 1, h + 1):
        assert z[bs, ts, 1:].numel() <= max(chunk, h * 4)  # one token at least
        z[bs, ts, 1:] += 1
    assert torch.equal(z[:, :, 1:], torch.ones(B, T, h, 4)) and not z[:, :, 0].any()


def test_small_scratch_blocks_give_the_same_gradients_and_restore_z(monkeypatch):
    qkv, coef = make(LAYERS["mixed"], B=3, coef_grad=True, v_scale=30.0)
    g = torch.randn(3, 37, 6, 16)
    z = run(lean, qkv, coef, is_causal=True)
    want = grads(z, qkv, coef, g)
    monkeypatch.setattr(R, "SCRATCH_CHUNK", 40)  # blocks of 2 tokens of a 1-head run
    z = run(lean, qkv, coef, is_causal=True)
    before = z.detach().clone()
    got = grads(z, qkv, coef, g)
    assert torch.equal(z, before)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("layer", ["laplacian", "half", "mixed"])
@pytest.mark.parametrize("mask", ["causal", "causal+padding"])
def test_packed_qkv_gets_the_same_gradients_in_one_tensor(layer, mask):
    """With qkv given, dq, dk, dv (heads' scaling folded in) are written straight into
    qkv's gradient: the same numbers as through q, k, v and unbind's backward."""
    qkv, coef = make(LAYERS[layer], coef_grad=True)
    kw, attn_mask = masks(2, 37)[mask]
    g = torch.randn(2, 37, len(LAYERS[layer]), 16)
    want = grads(run(lean, qkv, coef, attn_mask=attn_mask, **kw), qkv, coef, g)
    z = run(lean, qkv, coef, attn_mask=attn_mask, packed=True, **kw)
    before = bits(z.detach().clone())
    q_grad_fn = type(z.grad_fn.next_functions[-1][0]).__name__
    got = grads(z, qkv, coef, g)
    assert is_in_place(z) and q_grad_fn == "AccumulateGrad"  # straight to qkv, no unbind
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert bits(z).equal(before)  # P V went into the gradient's v slot, not into z


def test_packed_qkv_double_backward_and_bad_input():
    qkv, coef = make(LAYERS["mixed"], B=1, T=5, Dh=4, dtype=torch.float64, coef_grad=True)

    def f(qkv, coef):
        return run(lean, qkv, coef, is_causal=True, packed=True)

    assert torch.autograd.gradgradcheck(f, (qkv, coef))
    with pytest.raises(ConfigError, match="unbind"):
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        other = qkv.detach().clone().requires_grad_()
        laplacian_attention(q, k, v, coef[:, 0], coef[:, 1], qkv=other)


def test_packed_qkv_under_autocast_takes_the_unpacked_path():
    qkv, coef = make(LAYERS["half"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = run(lean, qkv, coef, is_causal=True, packed=True)
        ref = run(lean, qkv, coef, is_causal=True)
    assert torch.equal(z, ref)
    g = torch.randn_like(z)
    assert torch.equal(grads(z, qkv, coef, g)[0], grads(ref, qkv, coef, g)[0])


def test_fallback_to_the_composition_where_the_kernel_cannot_be_used():
    qkv, coef = make(LAYERS["half"])
    torch.manual_seed(1)
    z = run(lean, qkv, coef, dropout_p=0.5)  # dropout cannot be replayed
    torch.manual_seed(1)
    ref = run(plain, qkv, coef, dropout_p=0.5)
    assert not is_in_place(z) and torch.equal(z, ref)
    float_mask = torch.zeros(1, 1, 37, 37, requires_grad=True)  # a learnt bias
    z = run(lean, qkv, coef, attn_mask=float_mask)
    assert not is_in_place(z) and torch.equal(z, run(plain, qkv, coef, attn_mask=float_mask))
    assert is_in_place(run(lean, qkv, coef, attn_mask=float_mask.detach()))


def test_under_autocast_the_output_has_sdpa_dtype():
    qkv, coef = make(LAYERS["half"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = run(lean, qkv, coef)
        ref = run(lambda q, k, v, *_: F.scaled_dot_product_attention(q, k, v), qkv, coef)
    assert z.dtype == ref.dtype == torch.bfloat16


def test_bad_input_raises_config_error():
    qkv, coef = make(LAYERS["half"])
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
    with pytest.raises(ConfigError, match="one shape"):
        laplacian_attention(q, k[:, :, :5], v[:, :, :5], coef[:, 0], coef[:, 1])
    with pytest.raises(ConfigError, match="one per head"):
        laplacian_attention(q, k, v, coef[:3, 0], coef[:3, 1])
    with pytest.raises(ConfigError, match="head_kinds"):
        laplacian_attention(q, k, v, coef[:, 0], coef[:, 1], head_kinds=("attention",) * 3)


def saved_bytes(attention, kinds, B=2, T=64, D=64):
    """Bytes of distinct storages saved for the backward of qkv → attention → proj."""
    H = len(kinds)
    x = torch.randn(B, T, D)
    qkv_proj, proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
    coef = torch.tensor([COEF[k] for k in kinds])
    storages: dict[int, int] = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        q, k, v = qkv_proj(x).view(B, T, 3, H, D // H).unbind(2)
        z = attention(*(t.transpose(1, 2) for t in (q, k, v)), coef[:, 0], coef[:, 1],
                      is_causal=True)
        proj(z.reshape(B, T, D))
    return sum(storages.values()), B * T * D * 4


def test_saved_tensors_are_those_of_standard_attention():
    def standard(q, k, v, a, b, is_causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(1, 2)

    base, z_bytes = saved_bytes(standard, LAYERS["attention"])
    for layer in ("laplacian", "half"):
        lean_bytes, _ = saved_bytes(lean, LAYERS[layer])
        plain_bytes, _ = saved_bytes(plain, LAYERS[layer])
        assert lean_bytes <= base + 64  # the (H,) coefficients
        assert plain_bytes >= base + z_bytes  # the composition keeps P V and z


def test_kernel_choice_by_name_and_its_refusals():
    qkv, coef = make(LAYERS["half"])
    assert is_in_place(run(lean, qkv, coef, kernel="in_place"))
    z = run(lean, qkv, coef, kernel="compose")
    assert not is_in_place(z) and torch.allclose(z, run(plain, qkv, coef), atol=1e-6)
    with pytest.raises(ConfigError, match="kernel='in_place' cannot run: dropout_p > 0"):
        run(lean, qkv, coef, kernel="in_place", dropout_p=0.1)
    with pytest.raises(ConfigError, match="kernel='fast' is not valid"):
        run(lean, qkv, coef, kernel="fast")


def test_an_attention_module_plans_its_kernel_once(monkeypatch):
    """The kernel is chosen at the first call of an input signature, not at every call."""
    from tokengeo.models.config import TransformerConfig
    from tokengeo.nn import attention as A

    calls = []
    planner = A.plan_kernel
    monkeypatch.setattr(A, "plan_kernel", lambda *a, **kw: calls.append(1) or planner(*a, **kw))
    attn = A.MultiHeadAttention(TransformerConfig(d_model=16, n_heads=4),
                                LAYERS["half"], causal=True)
    x = torch.randn(2, 9, 16)
    for _ in range(3):
        attn(x).sum().backward()
    assert len(calls) == 1
    attn(torch.randn(3, 9, 16)).sum().backward()  # a new shape: planned once more
    assert len(calls) == 2
    attn = A.MultiHeadAttention(TransformerConfig(d_model=16, n_heads=4),
                                LAYERS["half"], causal=True, kernel="compose")
    attn(x)
    assert len(calls) == 3 and attn._plans[next(iter(attn._plans))].kernel.name == "compose"


@pytest.mark.parametrize("layer", ["mixed", "half"])
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_the_cuda_backward_paths_give_the_same_gradients(packed, layer):
    """The CUDA paths (P V in a buffer of its own; whole-tensor passes for several fixed
    kinds), run on the CPU kernel: the CPU paths' values and gradients."""
    qkv, coef = make(LAYERS[layer], coef_grad=True)
    g = torch.randn(2, 37, len(LAYERS[layer]), 16)
    z_cpu = run(lean, qkv, coef, is_causal=True, packed=packed)
    want = grads(z_cpu, qkv, coef, g)
    z = run(lean, qkv, coef, is_causal=True, packed=packed, device_path=True)
    assert torch.equal(z, z_cpu)
    before = z.detach().clone()
    got = grads(z, qkv, coef, g.transpose(1, 2).contiguous().transpose(1, 2))  # strided dz
    assert torch.equal(z, before)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("device_path", [False, True], ids=["host", "device"])
def test_each_backward_route_is_the_one_backward_route_names(monkeypatch, packed, device_path):
    """backward_route decides the route from three facts, passed explicitly (no switch a
    test flips): a double backward, a packed qkv, the device path. Each route gives the
    composition's gradients."""
    taken = []
    decide = I.backward_route
    monkeypatch.setattr(I, "backward_route", lambda **kw: taken.append(decide(**kw)) or taken[-1])
    qkv, coef = make(LAYERS["half"], coef_grad=True)
    g = torch.randn(2, 37, len(LAYERS["half"]), 16)
    want = grads(run(plain, qkv, coef, is_causal=True), qkv, coef, g)
    z = run(lean, qkv, coef, is_causal=True, packed=packed, device_path=device_path)
    got = grads(z, qkv, coef, g)
    assert taken == [("packed_" if packed else "") + ("device" if device_path else "host")]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want, strict=True))
    z = run(lean, qkv, coef, is_causal=True, packed=packed, device_path=device_path)
    torch.autograd.grad(z, qkv, g, create_graph=True)
    assert taken[-1] == "double" and set(taken) <= set(ROUTES)


def full_buffers(fn, kinds, B=2, T=16, Dh=8) -> int:
    """How many new (B, H, T, Dh)-sized tensors ``fn`` allocates in its forward."""
    from torch.utils._python_dispatch import TorchDispatchMode

    H = len(kinds)
    coef = torch.tensor([COEF[k] for k in kinds])
    q, k, v = (torch.randn(B, H, T, Dh) for _ in range(3))
    count = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
            for t in out if isinstance(out, tuple | list) else (out,):
                if (isinstance(t, torch.Tensor) and t.numel() == q.numel()
                        and t.untyped_storage().data_ptr() not in seen):
                    count.append(func)
            return out

    with Count():
        fn(q, k, v, coef[:, 0], coef[:, 1], True)
    return len(count)


def test_the_composition_of_fixed_kinds_costs_what_v_minus_sdpa_costs():
    """Where the composition must run (dropout, a learnt mask), Laplacian heads cost what
    ``V − SDPA`` costs: P V and one subtraction, no a·V and b·P V temporaries."""
    def v_minus_sdpa(q, k, v, a, b, is_causal):
        return v.transpose(1, 2) - F.scaled_dot_product_attention(
            q, k, v, is_causal=is_causal).transpose(1, 2)

    def with_runs(q, k, v, a, b, is_causal):
        return compose(q, k, v, a, b, is_causal=is_causal, runs=head_runs(a, b))

    def general(q, k, v, a, b, is_causal):
        return compose(q, k, v, a, b, is_causal=is_causal)

    reference = full_buffers(v_minus_sdpa, LAYERS["laplacian"])
    assert full_buffers(with_runs, LAYERS["laplacian"]) == reference
    assert full_buffers(general, LAYERS["laplacian"]) > reference  # a·V, b·P V, their sum


# ---- the kernel's passes against the formulas (heads of every kind, several runs)

FORMULA_KINDS = (LAPLACIAN, ATTENTION, MIXED, LAPLACIAN, MIXED, ATTENTION)


def formula_coefficients(kinds, dtype=torch.float64):
    g = torch.Generator().manual_seed(3)
    ab = [KIND_COEFFICIENTS.get(k) or tuple(torch.randn(2, generator=g).tolist())
          for k in kinds]
    a, b = (torch.tensor(c, dtype=dtype) for c in zip(*ab, strict=True))
    return a, b


def test_in_place_combine_and_pv_recovery_equal_the_reference():
    a, b = formula_coefficients(FORMULA_KINDS)
    runs = HeadRuns.of(FORMULA_KINDS)
    v, pv = (torch.randn(2, 5, len(FORMULA_KINDS), 3, dtype=torch.float64) for _ in range(2))
    z = pv.clone()
    _combine_in_place(z, v, a, b, runs, False)
    assert torch.allclose(z, mix_heads(v, pv, a, b), atol=1e-14)
    mixed = torch.cat([pv[:, :, h0:h1] for h0, h1 in runs.mixed], dim=2)
    back = torch.empty_like(z)
    pv_into(back, z, v, mixed, runs, False)
    assert torch.allclose(back, pv, atol=1e-14)


@pytest.mark.parametrize("path", ["device", "cpu-small", "cpu-large"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fixed_kinds_formulas_are_exact(dtype, path, monkeypatch):
    """Heads of several fixed kinds: the whole-tensor passes with (H, Dh) coefficient rows
    (z ← b z + a V, P V = b (z − a V), dq ← b dq, dv ← b dv + a g; the device path and small
    CPU tensors) and the CPU's per-run passes (tensors above WHOLE_PASS_BYTES) give bitwise
    what the kinds' formulas give."""
    from tokengeo.nn.kernels import in_place

    t = torch.zeros(2, 5, 5, 3, dtype=dtype)
    if path == "cpu-large":
        monkeypatch.setattr(in_place, "WHOLE_PASS_BYTES", 0)
    device = path == "device"
    assert in_place.whole_tensor_passes(HeadRuns.of(("laplacian", "attention")), t, device) == (
        path != "cpu-large")
    fixed_kinds_formulas_are_exact(dtype, device)


def fixed_kinds_formulas_are_exact(dtype, device: bool):
    kinds = (LAPLACIAN, ATTENTION, ATTENTION, LAPLACIAN, LAPLACIAN)
    a, b = formula_coefficients(kinds, dtype)
    runs = HeadRuns.of(kinds)
    assert len(runs.runs) == 3 and not runs.mixed
    v, pv = (torch.randn(2, 5, len(kinds), 3, dtype=dtype) for _ in range(2))
    z = pv.clone()
    _combine_in_place(z, v, a, b, runs, device)
    lap = torch.tensor([k == LAPLACIAN for k in kinds]).view(1, 1, -1, 1)
    assert torch.equal(z, torch.where(lap, v - pv, pv))
    back = torch.empty_like(z)
    pv_into(back, z, v, None, runs, device)
    assert torch.equal(back, torch.where(lap, v - z, z))  # what the per-run pass writes
    grads = tuple(torch.randn(2, len(kinds), 5, 3, dtype=dtype) for _ in range(3))
    g = torch.randn(2, len(kinds), 5, 3, dtype=dtype)
    outs = tuple(torch.empty_like(t) for t in grads)
    _scale_grads(grads, g, a, b, runs, device, outs=outs)
    lap = lap.view(1, -1, 1, 1)
    for got, want in zip(outs, (torch.where(lap, -grads[0], grads[0]),
                                torch.where(lap, -grads[1], grads[1]),
                                torch.where(lap, g - grads[2], grads[2])), strict=True):
        assert torch.equal(got, want)


def test_scaled_kernel_gradients_equal_the_chain_rule():
    """dq, dk ← b dq, b dk and dv ← b dv + a g, head-wise, as differentiating mix_heads."""
    a, b = formula_coefficients(FORMULA_KINDS)
    grads = tuple(torch.randn(2, len(FORMULA_KINDS), 5, 3, dtype=torch.float64) for _ in range(3))
    g = torch.randn(2, len(FORMULA_KINDS), 5, 3, dtype=torch.float64)
    outs = tuple(torch.empty_like(t) for t in grads)
    _scale_grads(grads, g, a, b, HeadRuns.of(FORMULA_KINDS), False, outs=outs)
    bb, aa = b.view(1, -1, 1, 1), a.view(1, -1, 1, 1)
    for got, want in zip(outs, (bb * grads[0], bb * grads[1], bb * grads[2] + aa * g),
                         strict=True):
        assert torch.allclose(got, want, atol=1e-14)


def test_the_output_takes_an_in_place_edit_and_a_backward_through_it_is_refused():
    """z is no view made inside the autograd Function (autograd forbids editing those in
    place): an ablation edits it, and a backward through the edit (z is saved) raises."""
    qkv, coef = make(LAYERS["half"])
    z = run(lean, qkv, coef, kernel="in_place")
    assert is_in_place(z) and not z._is_view()
    want = run(plain, qkv, coef).detach().clone()
    z[:, :, 1] = 0.0  # a head ablated in place, under autograd
    want[:, :, 1] = 0.0
    assert torch.equal(z, want)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
