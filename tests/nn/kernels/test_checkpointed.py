"""Laplacian heads under torch.compile (tokengeo.nn.kernels.checkpointed): one graph, the same values and
gradients as eager mode, and what standard attention saves for the backward."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.nn import attention as A
from tokengeo.nn.attention import MultiHeadAttention

pytestmark = pytest.mark.usefixtures("one_thread")

CFG = SimpleNamespace(d_model=64, n_heads=4, mlp_ratio=4.0, dropout=0.0, attn_dropout=0.0,
                      bias=True, norm_eps=1e-5, mixed_init="laplacian")
KINDS = {
    "attention": ("attention",) * 4,
    "laplacian": ("laplacian",) * 4,
    "half": ("attention", "attention", "laplacian", "laplacian"),
    "mixed": ("laplacian", "mixed", "attention", "mixed"),
}


def saved_bytes(fn, x) -> int:
    """Bytes of distinct storages saved for the backward of ``fn(x)``."""
    storages: dict[int, int] = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(x)
    y.sum().backward()
    return sum(storages.values())


def attention(kinds, kernel="auto"):
    torch.manual_seed(0)
    return MultiHeadAttention(CFG, kinds, causal=True, kernel=kernel)


def compiled(module, x):
    torch._dynamo.reset()
    fn = torch.compile(module)
    fn(x).sum().backward()  # compiled here, outside any saved-tensor hooks
    return fn


def one_graph(module, x):
    """(compiled module, its output, the eager output), after checking it is one graph."""
    explained = torch._dynamo.explain(module)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    fn = compiled(module, x)
    return fn, fn(x), module(x)


@pytest.mark.parametrize("layer", ["laplacian", "half"])
def test_one_graph_same_values_and_standard_attentions_saved_tensors(layer):
    x = torch.randn(2, 16, 64, requires_grad=True)
    module = attention(KINDS[layer])
    fn, y, want = one_graph(module, x)
    got_grad, want_grad = (torch.autograd.grad(t.square().sum(), x)[0] for t in (y, want))
    assert torch.allclose(y, want, atol=1e-5) and torch.allclose(got_grad, want_grad, atol=1e-5)

    standard = saved_bytes(compiled(attention(KINDS["attention"]), x), x)
    assert saved_bytes(fn, x) <= standard + 64  # the (H,) coefficients at most
    plain = saved_bytes(compiled(attention(KINDS[layer], kernel="compose"), x), x)
    assert plain >= standard + x.numel() * 4  # the positive control keeps z besides P V


@pytest.mark.slow  # compiles four more graphs (~20 s)
@pytest.mark.parametrize("layer", ["mixed", "attention"])
def test_mixed_and_attention_heads_compile_to_one_graph_with_the_same_values(layer):
    x = torch.randn(2, 16, 64, requires_grad=True)
    module = attention(KINDS[layer])
    fn, y, want = one_graph(module, x)
    params = [p for p in module.parameters() if p.requires_grad]
    got = torch.autograd.grad(y.square().sum(), [x, *params])
    ref = torch.autograd.grad(want.square().sum(), [x, *params])
    assert torch.allclose(y, want, atol=1e-5)
    assert all(torch.allclose(g, r, atol=1e-5) for g, r in zip(got, ref, strict=True))


def test_only_auto_with_values_grad_and_no_hooks_is_checkpointed(monkeypatch):
    """Under compile, a hook on z (it sees what the checkpointing would drop), a kernel
    named by the user, attention-only heads and no-grad code keep their own paths; the
    eager kernels refuse."""
    from tokengeo.nn.kernels import table

    def chosen(module, hooked=False):
        q = torch.randn(2, 4, 16, 16)
        return module.plan(q, q, q, attn_mask=None, is_causal=True, dropout_p=0.0,
                           hooked=hooked).kernel.name

    module = attention(KINDS["half"])
    assert chosen(module) == "in_place"  # eager: never checkpointed
    monkeypatch.setattr(table, "compiling", lambda: True)
    monkeypatch.setattr(A, "compiling", lambda: True)
    assert chosen(module) == "checkpointed_compose"
    assert chosen(module, hooked=True) == "compose"
    with torch.no_grad():
        assert chosen(module) == "compose"
    assert chosen(attention(KINDS["attention"])) == "sdpa"
    assert chosen(attention(KINDS["half"], "compose")) == "compose"
    module = attention(KINDS["half"], "in_place")  # where it would break the graph: why
    with pytest.raises(ConfigError, match="kernel='in_place' cannot run: torch.compile is tra"):
        chosen(module)


@pytest.mark.slow  # compiles three models (~15 s)
@pytest.mark.parametrize("name", ["gpt-tiny", "vit-tiny", "ltransformer-tiny"])
def test_each_model_family_with_laplacian_heads_compiles_to_one_graph(name):
    from tokengeo.models.registry import create_model

    torch.manual_seed(0)
    model = create_model(name, n_laplacian=2)
    cfg = model.config
    if hasattr(cfg, "image_size"):
        x = torch.randn(2, cfg.in_chans, cfg.image_size, cfg.image_size)
    else:
        x = torch.randint(0, cfg.vocab_size, (2, 16))
    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, \
        [str(r.reason)[:200] for r in explained.break_reasons]
    torch._dynamo.reset()
    assert torch.allclose(torch.compile(model)(x), model(x), atol=1e-5)
