"""The kernel table (tokengeo.nn.kernels.TABLE): every name resolves through it, every entry
computes the reference's values and gradients, auto takes the first entry that does not
refuse, a named entry that refuses says why in one line, and an unknown name lists the
table's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.nn.attention import MultiHeadAttention
from tokengeo.nn.heads import HeadRuns
from tokengeo.nn.kernels import KERNELS, TABLE, Call, laplacian_attention, plan_kernel
from tokengeo.nn.kernels import table as T
from tokengeo.nn.reference import attention_reference

pytestmark = pytest.mark.usefixtures("one_thread")

CFG = SimpleNamespace(d_model=32, n_heads=4, mlp_ratio=4.0, dropout=0.0, attn_dropout=0.0,
                      bias=True, norm_eps=1e-5, mixed_init="laplacian", kernel="auto")
COEF = {"attention": (0.0, 1.0), "laplacian": (1.0, -1.0), "mixed": (0.7, -0.3)}
# heads each kernel can run, and whether its coefficients may learn
HEADS = {
    "sdpa": (("attention",) * 4, False),
}
ANY_HEADS = (("laplacian", "mixed", "attention", "mixed"), True)


def inputs(kinds, coef_grad, dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, len(kinds), 9, 8, generator=gen, dtype=dtype).requires_grad_()
               for _ in range(3))
    coef = torch.tensor([COEF[kind] for kind in kinds], dtype=dtype)
    a, b = (c.clone().requires_grad_(coef_grad) for c in coef.unbind(1))
    return q, k, v, a, b


def test_every_public_kernel_name_resolves_through_the_table():
    assert KERNELS == ("auto", *(kernel.name for kernel in TABLE))
    assert len(set(KERNELS)) == len(KERNELS)
    q = torch.randn(2, 4, 9, 8)
    for kernel in TABLE:
        MultiHeadAttention(CFG, kernel=kernel.name)  # accepted by the modules
        kinds, coef_grad = HEADS.get(kernel.name, ANY_HEADS)
        call = Call(q=q, k=q, v=q, runs=HeadRuns.of(kinds), is_causal=True,
                    coef_grad=coef_grad)
        why = kernel.refusal(call)
        if why is None:
            assert plan_kernel(call, kernel.name).kernel is kernel
        else:  # refuses here (e.g. checkpointed_compose in eager mode): one line, why
            with pytest.raises(ConfigError) as err:
                plan_kernel(call, kernel.name)
            assert str(err.value) == f"kernel={kernel.name!r} cannot run: {why}; use kernel='auto'"
            assert "\n" not in str(err.value)


def test_auto_takes_the_first_entry_that_does_not_refuse():
    q = torch.randn(2, 4, 9, 8)
    for kinds, want in ((("attention",) * 4, "sdpa"), (("laplacian",) * 4, "in_place")):
        call = Call(q=q, k=q, v=q, runs=HeadRuns.of(kinds), is_causal=True)
        first = next(k for k in TABLE if k.refusal(call) is None)
        assert plan_kernel(call).kernel is first and first.name == want
    call = Call(q=q, k=q, v=q, runs=HeadRuns.of(("laplacian",) * 4), dropout_p=0.1)
    assert plan_kernel(call).kernel.name == "compose"  # the fused kernels refuse dropout


@pytest.mark.parametrize("name", [k.name for k in TABLE])
def test_each_kernel_matches_the_reference_values_and_gradients(name, monkeypatch):
    if name == "checkpointed_compose":  # as while torch.compile traces
        monkeypatch.setattr(T, "compiling", lambda: True)
    kinds, coef_grad = HEADS.get(name, ANY_HEADS)
    q, k, v, a, b = inputs(kinds, coef_grad)
    z = laplacian_attention(q, k, v, a, b, is_causal=True, head_kinds=kinds, kernel=name)
    ref = attention_reference(q, k, v, a, b, is_causal=True)[0].transpose(1, 2)
    assert torch.allclose(z, ref, atol=1e-12)
    wrt = (q, k, v, a, b) if coef_grad else (q, k, v)
    g = torch.randn_like(z)
    for got, want in zip(torch.autograd.grad(z, wrt, g), torch.autograd.grad(ref, wrt, g),
                         strict=True):
        assert torch.allclose(got, want, atol=1e-10)


def test_checkpointed_compose_module_path_matches_eager(monkeypatch):
    """The module wraps attention and projection in selective checkpointing when the plan
    says so; run eagerly (compiling patched) it gives eager's values and gradients."""
    from tokengeo.nn import attention as A

    torch.manual_seed(0)
    module = MultiHeadAttention(CFG, ("attention", "laplacian") * 2, causal=True).double()
    x = torch.randn(2, 9, 32, dtype=torch.float64, requires_grad=True)
    want = module(x)
    want_grad, = torch.autograd.grad(want.square().sum(), x)
    monkeypatch.setattr(T, "compiling", lambda: True)
    monkeypatch.setattr(A, "compiling", lambda: True)
    used = []
    wrap = A.keep_only_attention
    monkeypatch.setattr(A, "keep_only_attention", lambda *a: used.append(1) or wrap(*a))
    got = module(x)
    got_grad, = torch.autograd.grad(got.square().sum(), x)
    assert used and torch.allclose(got, want, atol=1e-12)
    assert torch.allclose(got_grad, want_grad, atol=1e-10)


@pytest.mark.parametrize("bad", ["lean", "triton", "recompute", "", 3])
def test_an_unknown_kernel_name_lists_the_tables_in_one_line(bad):
    want = f"kernel={bad!r} is not valid; choose one of {list(KERNELS)}"
    with pytest.raises(ConfigError) as err:
        MultiHeadAttention(CFG, kernel=bad)
    assert str(err.value) == want
    q, k, v, a, b = inputs(("laplacian",) * 4, False)
    with pytest.raises(ConfigError) as err:
        laplacian_attention(q, k, v, a, b, kernel=bad)
    assert str(err.value) == want


def test_the_planning_record_takes_keywords_only():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError):
        Call(q, q, q, HeadRuns.of(("laplacian",) * 2))  # the positional form is gone
