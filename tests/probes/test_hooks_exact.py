"""tokengeo's own hooks never silently lie: each ``with_hooks`` context removes only its own
hooks (any exit order, nested, other threads); a replacement of the wrong shape is refused,
never reshaped or broadcast; an edit in place is honoured or refused, never ignored."""

from __future__ import annotations

import threading

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.probes.hooked import add_hooks, reset_hooks, run_with_hooks, with_hooks


def tiny_gpt():
    torch.manual_seed(0)
    model = tokengeo.create_model("gpt-tiny", vocab_size=31, n_layers=2, n_laplacian=1).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model


def tiny_llama(impl: str = "eager"):
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.LlamaConfig(vocab_size=31, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, attn_implementation=impl)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


IDS = torch.randint(0, 31, (2, 6), generator=torch.Generator().manual_seed(1))


def counting(seen: list, tag: str):
    return lambda x, hook: seen.append(tag)


def test_leaving_the_outer_context_keeps_the_inner_ones_hooks():
    model, seen = tiny_gpt(), []
    outer = with_hooks(model, fwd_hooks=[("blocks.0.hook_resid_post", counting(seen, "outer"))])
    inner = with_hooks(model, fwd_hooks=[("blocks.1.hook_resid_post", counting(seen, "inner"))])
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # the outer one leaves first
    model(IDS)
    assert seen == ["inner"]
    inner.__exit__(None, None, None)
    seen.clear()
    model(IDS)
    assert seen == [] and not any(m._forward_hooks for m in model.modules())


def test_a_nested_context_keeps_the_outer_ones_backward_hooks():
    model, grads = tiny_gpt(), []
    name = "blocks.0.hook_resid_post"
    with with_hooks(model, bwd_hooks=[(name, lambda g, hook: grads.append(hook.name))]):
        out = model(IDS)  # the outer backward hook is registered on this pass's tensor
        with with_hooks(model, fwd_hooks=[("blocks.1.hook_resid_post", lambda x, hook: None)]):
            model(IDS)
        out.sum().backward()  # after the inner context left
    assert grads == [name]


def test_one_threads_exit_leaves_another_threads_hooks():
    model, seen = tiny_gpt(), []
    attached, leave = threading.Event(), threading.Event()

    def other():
        with with_hooks(model, fwd_hooks=[("blocks.0.hook_resid_post",
                                           counting(seen, "other"))]):
            attached.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    attached.wait(10)
    with with_hooks(model, fwd_hooks=[("blocks.1.hook_resid_post", counting(seen, "mine"))]):
        pass  # this thread's context enters and exits while the other's is open
    model(IDS)
    leave.set()
    thread.join()
    assert seen == ["other"]


def test_reset_hooks_removes_every_group_and_add_hooks_returns_its_own():
    model, seen = tiny_gpt(), []
    group = add_hooks(model, fwd_hooks=[("blocks.0.hook_resid_post", counting(seen, "a"))])
    add_hooks(model, fwd_hooks=[("blocks.1.hook_resid_post", counting(seen, "b"))])
    group.remove()
    model(IDS)
    assert seen == ["b"]
    reset_hooks(model)
    model(IDS)
    assert seen == ["b"] and not any(m._forward_hooks for m in model.modules())


def swap_last_axes(x, hook):
    return x.reshape(*x.shape[:-2], x.shape[-1], x.shape[-2])  # same size, other shape


def drop_batch(p, hook):
    return p[0]  # (H, T, T): would broadcast over the batch


@pytest.mark.parametrize("which", ["gpt", "llama"])
@pytest.mark.parametrize("site, fn", [("blocks.0.attn.hook_z", swap_last_axes),
                                      ("blocks.0.hook_resid_mid", drop_batch)])
def test_a_replacement_of_another_shape_is_refused(which, site, fn):
    model = tiny_gpt() if which == "gpt" else tiny_llama()
    with pytest.raises(ConfigError, match="same shape"):
        run_with_hooks(model, IDS, fwd_hooks=[(site, fn)])
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_a_pattern_without_its_batch_axis_is_refused():
    with pytest.raises(ConfigError, match=r"shaped \(4, 6, 6\).*\(2, 4, 6, 6\)"):
        run_with_hooks(tiny_gpt(), IDS, fwd_hooks=[("blocks.0.attn.hook_pattern", drop_batch)])


def zero_head_1_in_place(x, hook):
    x[:, :, 1] = 0  # (B, T, H, Dh): no return


def zero_head_1(x, hook):
    x = x.clone()
    x[:, :, 1] = 0
    return x


@pytest.mark.parametrize("which", ["gpt", "llama"])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_an_edit_in_place_equals_the_replacement(which, mode):
    model = tiny_gpt() if which == "gpt" else tiny_llama()
    ctx = torch.no_grad if mode == "no_grad" else torch.inference_mode
    with ctx():
        plain = run_with_hooks(model, IDS)
        replaced = run_with_hooks(model, IDS, fwd_hooks=[("*.hook_[qkvz]", zero_head_1)])
        in_place = run_with_hooks(model, IDS, fwd_hooks=[("*.hook_[qkvz]", zero_head_1_in_place)])
    torch.testing.assert_close(logits(in_place), logits(replaced), rtol=0, atol=0)
    assert not torch.allclose(logits(plain), logits(replaced), atol=1e-4)


def logits(out):
    return getattr(out, "logits", out)


def test_a_gpt_pattern_edited_in_place_is_honoured():
    model = tiny_gpt()

    def uniform(p, hook):
        return torch.full_like(p, 1 / p.shape[-1]).tril()

    def uniform_in_place(p, hook):
        p.copy_(uniform(p, hook))

    with torch.no_grad():
        a = run_with_hooks(model, IDS, fwd_hooks=[("blocks.0.attn.hook_pattern", uniform)])
        b = run_with_hooks(model, IDS, fwd_hooks=[("blocks.0.attn.hook_pattern",
                                                    uniform_in_place)])
    torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("site", ["blocks.0.attn.hook_pattern", "blocks.0.attn.hook_v"])
def test_an_hf_read_only_site_edited_in_place_is_refused(site):
    """The pattern was applied before the hook runs; an ungrouped V is a copy."""
    model = tiny_llama()

    def scale_in_place(x, hook):
        x.mul_(0.5)

    with pytest.raises(ConfigError, match="read-only"):
        run_with_hooks(model, IDS, fwd_hooks=[(site, scale_in_place)], ungroup_kv=True)
    assert not any(m._forward_hooks for m in model.modules())
