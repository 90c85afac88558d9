"""kernel="recompute": torch's own SDPA autograd with its saved output rebuilt from z.

The same values and gradients as the composition a V + b SDPA(q, k, v) and the float64
reference; SDPA's output not held after the forward; no reference cycle; refusals where it
cannot be exact (mixed heads, learnt coefficients, other saved-tensor hooks) and a clear
error when z is edited in place before the backward.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.nn.functional as F
from test_laplacian_sdpa import COEF, masks
from torch.utils._python_dispatch import TorchDispatchMode

from tokengeo.errors import ConfigError
from tokengeo.nn.heads import HeadRuns
from tokengeo.nn.kernels import Call, compose, laplacian_attention, plan_kernel
from tokengeo.nn.kernels.recompute import hooks_refusal, laplacian_recompute
from tokengeo.nn.reference import attention_reference

pytestmark = pytest.mark.usefixtures("one_thread")

FIXED = {
    "laplacian": ("laplacian",) * 4,
    "half": ("attention", "attention", "laplacian", "laplacian"),
    "alternating": ("laplacian", "attention", "laplacian", "attention"),
    "attention": ("attention",) * 4,
}


def make(kinds, B=2, T=37, Dh=16, dtype=torch.float64):
    gen = torch.Generator().manual_seed(len(kinds) + T)
    qkv = torch.randn(B, T, 3, len(kinds), Dh, dtype=dtype, generator=gen).requires_grad_()
    coef = torch.tensor([COEF[k] for k in kinds], dtype=dtype)
    return qkv, coef


def heads(qkv):
    return tuple(t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh) views


def recompute(qkv, coef, kinds, packed=False, **kw):
    return laplacian_attention(*heads(qkv), coef[:, 0], coef[:, 1], head_kinds=kinds,
                               kernel="recompute", qkv=qkv if packed else None, **kw)


def is_recompute(z):
    """Not our autograd Function: torch's own nodes (the in_place kernel's is LaplacianSDPA)."""
    return "LaplacianSDPA" not in type(z.grad_fn).__name__


@pytest.mark.parametrize("layer", list(FIXED))
@pytest.mark.parametrize("mask", ["none", "causal", "padding", "causal+padding"])
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_values_and_gradients_equal_the_float64_reference(layer, mask, packed):
    kinds = FIXED[layer]
    qkv, coef = make(kinds)
    kw, attn_mask = masks(2, 37)[mask]
    z = recompute(qkv, coef, kinds, packed, attn_mask=attn_mask, **kw)
    ref = attention_reference(*heads(qkv), coef[:, 0], coef[:, 1], attn_mask=attn_mask,
                              **kw)[0].transpose(1, 2)
    assert is_recompute(z) and z.shape == ref.shape
    assert torch.allclose(z, ref, atol=1e-12)
    g = torch.randn_like(z)
    got, = torch.autograd.grad(z, qkv, g)
    want, = torch.autograd.grad(ref, qkv, g)
    assert torch.allclose(got, want, atol=1e-11)


@pytest.mark.parametrize("layer", ["laplacian", "half"])
def test_float32_gradients_equal_the_composition(layer):
    kinds = FIXED[layer]
    qkv, coef = make(kinds, dtype=torch.float32)
    z = recompute(qkv, coef, kinds, is_causal=True)
    ref = compose(*heads(qkv), coef[:, 0], coef[:, 1], is_causal=True)
    g = torch.randn_like(z)
    assert torch.allclose(z, ref, atol=1e-6)
    got, want = (torch.autograd.grad(t, qkv, g)[0] for t in (z, ref))
    assert torch.allclose(got, want, atol=1e-5)


class _CatchSDPA(TorchDispatchMode):
    """Every fused SDPA forward's output, held here."""

    def __init__(self):
        super().__init__()
        self.outputs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if "_scaled_dot_product" in func.name() and "backward" not in func.name():
            self.outputs.append(out[0])
        return out


@pytest.mark.parametrize("layer", ["laplacian", "half"])
def test_sdpa_node_keeps_a_rebuilder_not_its_output(layer, saved_slots):
    """What keeps the composition's memory above standard attention's is the SDPA node's
    saved output. Here the node's slot for it holds the rebuilder (z and V), and no slot
    holds a tensor on the output's storage. (That autograd then frees it is measured by
    ``benchmarks/laplacian_host.py``: the forward keeps one tensor, as standard
    attention's does.)"""
    from tokengeo.nn.kernels import recompute as R

    slots = saved_slots
    kinds = FIXED[layer]
    qkv, coef = make(kinds, dtype=torch.float32)
    with _CatchSDPA() as caught:
        z = recompute(qkv, coef, kinds, is_causal=True)
    out = caught.outputs[0]
    assert len(caught.outputs) == 1 and len(slots) >= 4  # q, k, v, out (and lse)
    rebuilders = [s[0] for s in slots if isinstance(s[0], R._PVFromZ)]
    tensors = [s[0] for s in slots if isinstance(s[0], torch.Tensor)]
    assert len(rebuilders) == 1 and len(tensors) == len(slots) - 1
    assert all(t.untyped_storage().data_ptr() != out.untyped_storage().data_ptr()
               for t in tensors)
    rebuilt = rebuilders[0]()
    assert rebuilt.stride() == out.stride() and torch.allclose(rebuilt, out, atol=1e-6)
    z.sum().backward()


def test_no_reference_cycle_keeps_z_alive():
    kinds = FIXED["half"]
    qkv, coef = make(kinds, dtype=torch.float32)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        z = recompute(qkv, coef, kinds, is_causal=True)
        alive = weakref.ref(z)
        del z
        assert alive() is None  # freed by reference counting alone
    finally:
        if was_enabled:
            gc.enable()


def test_retain_graph_gives_the_same_gradients_twice():
    kinds = FIXED["half"]
    qkv, coef = make(kinds)
    z = recompute(qkv, coef, kinds, is_causal=True)
    g = torch.randn_like(z)
    first = torch.autograd.grad(z, qkv, g, retain_graph=True)[0]
    assert torch.equal(first, torch.autograd.grad(z, qkv, g)[0])


def test_dropout_is_replayed_by_sdpa_itself():
    kinds = FIXED["half"]
    qkv, coef = make(kinds, dtype=torch.float32)
    torch.manual_seed(3)
    z = recompute(qkv, coef, kinds, dropout_p=0.5)
    torch.manual_seed(3)
    ref = compose(*heads(qkv), coef[:, 0], coef[:, 1], dropout_p=0.5)
    assert torch.equal(z, ref)
    g = torch.randn_like(z)
    assert torch.allclose(*(torch.autograd.grad(t, qkv, g)[0] for t in (z, ref)), atol=1e-6)


def test_editing_z_in_place_before_the_backward_is_a_clear_error():
    kinds = FIXED["laplacian"]
    qkv, coef = make(kinds, dtype=torch.float32)
    z = recompute(qkv, coef, kinds, is_causal=True)
    with torch.no_grad():
        z[:, 0] = 0.0
    with pytest.raises(RuntimeError, match="modified in place after the forward"):
        z.sum().backward()


def test_refusals_name_the_reason():
    qkv, coef = make(("laplacian", "mixed"))
    q, k, v = heads(qkv)
    runs = HeadRuns.of(("laplacian", "mixed"))
    with pytest.raises(ConfigError, match="kernel='recompute' cannot run: mixed heads"):
        plan_kernel(Call(q, k, v, runs), "recompute")
    with pytest.raises(ConfigError, match="coefficients that require grad"):
        plan_kernel(Call(q, k, v, HeadRuns.of(FIXED["half"][:2]), coef_grad=True), "recompute")


def test_under_other_saved_tensor_hooks_it_refuses_and_runs_once_they_are_gone():
    """Checkpointing and offloading work through saved-tensor hooks; ours would shadow
    theirs, so ``recompute`` (opt-in: ``auto`` never takes it) refuses under them, at the
    call, since one call may be wrapped and the next not."""
    kinds = FIXED["half"]
    qkv, coef = make(kinds, dtype=torch.float32)
    q, k, v = heads(qkv)
    plan = plan_kernel(Call(q, k, v, HeadRuns.of(kinds), is_causal=True), "recompute")
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert hooks_refusal() is not None
        with pytest.raises(ConfigError, match="other saved-tensor hooks are active"):
            recompute(qkv, coef, kinds, is_causal=True)
    assert hooks_refusal() is None
    assert is_recompute(plan.run(q, k, v, coef[:, 0], coef[:, 1], None, True, 0.0, None))


def test_an_attention_module_runs_it_and_matches_the_in_place_kernel():
    from types import SimpleNamespace

    from tokengeo.nn.attention import MultiHeadAttention

    cfg = SimpleNamespace(d_model=32, n_heads=4, mlp_ratio=4.0, dropout=0.0,
                          attn_dropout=0.0, bias=True, norm_eps=1e-5, mixed_init="laplacian")
    torch.manual_seed(0)
    attn = MultiHeadAttention(cfg, FIXED["half"], causal=True).double()
    x = torch.randn(3, 11, 32, dtype=torch.float64, requires_grad=True)
    outs = {}
    for kernel in ("in_place", "recompute"):
        attn.set_kernel(kernel)
        y = attn(x)
        outs[kernel] = (y, *torch.autograd.grad(y.square().sum(), (x, attn.qkv.weight)))
        assert [plan.kernel.name for plan in attn._plans.values()] == [kernel]
    for got, want in zip(outs["recompute"], outs["in_place"], strict=True):
        assert torch.allclose(got, want, atol=1e-12)


def test_no_grad_inference_gives_the_same_values():
    kinds = FIXED["half"]
    qkv, coef = make(kinds)
    with torch.no_grad():
        z = laplacian_recompute(*heads(qkv), coef[:, 0], coef[:, 1], HeadRuns.of(kinds),
                                is_causal=True)
    ref = compose(*heads(qkv), coef[:, 0], coef[:, 1], is_causal=True)
    assert z.grad_fn is None and torch.allclose(z, ref, atol=1e-12)


def test_its_hooks_are_popped_after_a_call_and_after_an_error():
    """Nothing of ours stays pushed: a later SDPA call saves through the caller's hooks, and
    an error inside SDPA leaves no hooks behind either."""
    kinds = FIXED["laplacian"]
    qkv, coef = make(kinds, dtype=torch.float32)
    recompute(qkv, coef, kinds).sum().backward()
    assert hooks_refusal() is None
    calls = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: calls.append(t) or t, lambda t: t):
        F.scaled_dot_product_attention(*heads(qkv))
    assert calls and hooks_refusal() is None
    q, k, v = heads(qkv)
    with pytest.raises(RuntimeError):  # keys of another width: SDPA itself refuses
        laplacian_recompute(q, k[..., :8], v, coef[:, 0], coef[:, 1], HeadRuns.of(kinds))
    assert hooks_refusal() is None


def test_disabled_saved_tensor_hooks_and_checkpointing_are_named():
    kinds = FIXED["laplacian"]
    qkv, coef = make(kinds, dtype=torch.float32)
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(ConfigError, match="saved-tensor hooks are disabled here"):
            recompute(qkv, coef, kinds, is_causal=True)
    from torch.utils.checkpoint import checkpoint

    with pytest.raises(ConfigError, match="other saved-tensor hooks are active"):
        checkpoint(lambda t: recompute(t, coef, kinds, is_causal=True), qkv,
                   use_reentrant=False)


def test_under_autocast_it_matches_the_in_place_kernel():
    """bf16 autocast (what GPU training runs): q, k, v are cast copies, the output has
    SDPA's dtype, and values and gradients agree with the in_place kernel's."""
    from types import SimpleNamespace

    from tokengeo.nn.attention import MultiHeadAttention

    cfg = SimpleNamespace(d_model=32, n_heads=4, mlp_ratio=4.0, dropout=0.0,
                          attn_dropout=0.0, bias=True, norm_eps=1e-5, mixed_init="laplacian")
    torch.manual_seed(0)
    attn = MultiHeadAttention(cfg, FIXED["alternating"], causal=True)
    x = torch.randn(2, 13, 32, requires_grad=True)
    outs = {}
    for kernel in ("in_place", "recompute"):
        attn.set_kernel(kernel)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = attn(x)
        outs[kernel] = (y, *torch.autograd.grad(y.float().square().sum(), (x, attn.qkv.weight)))
    assert outs["recompute"][0].dtype == torch.bfloat16
    for got, want in zip(outs["recompute"], outs["in_place"], strict=True):
        assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
