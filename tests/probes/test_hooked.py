"""run_with_hooks, with_hooks() and ActivationCache: one API on a tokengeo GPT and a tiny HF Llama.

A head ablation through a hook (zero head h of ``hook_z``) must equal the same ablation done
on the weights (zero the output projection's columns of head h): the reference is computed
without any hook."""

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.probes.activation_cache import ActivationCache, act_name
from tokengeo.probes.capture import capture, hook_sites, run_with_cache
from tokengeo.probes.hooked import reset_hooks, run_with_hooks, with_hooks


def tiny_gpt():
    torch.manual_seed(0)
    model = tokengeo.create_model("gpt-tiny", vocab_size=31, n_layers=2, n_laplacian=1).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")
    from helpers.tiny_llama import save_tiny_llama

    folder = save_tiny_llama(tmp_path_factory.mktemp("llama"))
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager").eval()


def ablate(head: int):
    def fn(z, hook):  # z: (B, T, H, Dh)
        z = z.clone()
        z[:, :, head] = 0
        return z
    return fn


def gpt_out_proj(model, layer):
    return model.blocks[layer].attn.proj


def llama_out_proj(model, layer):
    return model.model.layers[layer].self_attn.o_proj


def logits_of(model, ids):
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


def weight_ablation(model, ids, layer, head, n_heads, out_proj):
    """The reference: head ``head`` of ``layer`` removed by zeroing its o-proj columns."""
    proj = out_proj(model, layer)
    dh = proj.weight.shape[1] // n_heads
    saved = proj.weight.detach().clone()
    with torch.no_grad():
        proj.weight[:, head * dh:(head + 1) * dh] = 0
        try:
            return logits_of(model, ids)
        finally:
            proj.weight.copy_(saved)


@pytest.mark.parametrize("which", ["gpt", "llama"])
def test_same_edit_through_run_with_hooks_and_with_hooks(which, request):
    if which == "gpt":
        model, n_heads, out_proj = tiny_gpt(), 4, gpt_out_proj
        ids = torch.randint(0, 31, (2, 9), generator=torch.Generator().manual_seed(1))
    else:
        model = request.getfixturevalue("llama")
        n_heads, out_proj = model.config.num_attention_heads, llama_out_proj
        ids = torch.randint(0, model.config.vocab_size, (2, 9),
                            generator=torch.Generator().manual_seed(1))
    edit = [("blocks.1.attn.hook_z", ablate(2))]
    with torch.no_grad():
        plain = logits_of(model, ids)
        via_run = logits_of_output(run_with_hooks(model, ids, fwd_hooks=edit))
        with with_hooks(model, fwd_hooks=edit):
            via_ctx = logits_of(model, ids)
        after = logits_of(model, ids)
    reference = weight_ablation(model, ids, 1, 2, n_heads, out_proj)
    torch.testing.assert_close(via_run, via_ctx, rtol=0, atol=0)
    torch.testing.assert_close(via_run, reference, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(via_run, plain, atol=1e-3)  # the edit mattered
    torch.testing.assert_close(after, plain, rtol=0, atol=0)  # and is gone


def logits_of_output(out):
    return out.logits if hasattr(out, "logits") else out


def test_hooks_removed_on_error_and_patterns_and_predicates():
    model = tiny_gpt()
    ids = torch.randint(0, 31, (1, 5))
    seen = []
    with pytest.raises(RuntimeError, match="boom"):
        with with_hooks(model, fwd_hooks=[("blocks.*.hook_resid_post", lambda x, hook: None)]):
            raise RuntimeError("boom")
    assert not any(p._forward_hooks for p in model.modules())
    run_with_hooks(model, ids, fwd_hooks=[(lambda n: n.endswith("hook_z"),
                                            lambda x, hook: seen.append((hook.name, hook.layer())))])
    assert seen == [("blocks.0.attn.hook_z", 0), ("blocks.1.attn.hook_z", 1)]
    with pytest.raises(ConfigError, match="no hook point matches 'blocks.9.hook_z'"):
        run_with_hooks(model, ids, fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, h: None),
                                              ("blocks.9.hook_z", lambda x, h: None)])
    assert not any(p._forward_hooks for p in model.modules())  # nothing half-attached


def test_pattern_edit_on_tokengeo_gpt_equals_uniform_attention():
    """Replacing P by the causal uniform pattern gives the same logits either way, and
    the pattern cached afterwards is the uniform one."""
    model = tiny_gpt()
    ids = torch.randint(0, 31, (1, 6))

    def uniform(p, hook):  # (B, H, T, T)
        T = p.shape[-1]
        u = torch.tril(torch.ones(T, T))
        return (u / u.sum(-1, keepdim=True)).expand_as(p).clone()

    edit = [("blocks.0.attn.hook_pattern", uniform)]
    with torch.no_grad():
        a = run_with_hooks(model, ids, fwd_hooks=edit)
        with with_hooks(model, fwd_hooks=edit):
            b, cache = run_with_cache(model, ids, names=["blocks.0.attn.hook_pattern"])
    torch.testing.assert_close(a, b)
    row = cache["pattern", 0][0, 0, 3]
    torch.testing.assert_close(row, torch.tensor([0.25] * 4 + [0, 0]))


def test_backward_hook_sees_the_gradient_and_can_replace_it():
    model = tiny_gpt()
    ids = torch.randint(0, 31, (2, 5))
    grads = {}

    def keep(g, hook):
        grads[hook.name] = g.clone()

    name = "blocks.0.hook_resid_post"
    with capture(model, [name], detach=False) as acts:
        with with_hooks(model, bwd_hooks=[(name, keep)]):
            out = model(ids)
            expected, = torch.autograd.grad(out.square().sum(), acts[name], retain_graph=True)
            out.square().sum().backward()
    torch.testing.assert_close(grads[name], expected)
    # a backward hook that returns zeros cuts every gradient flowing through that activation
    model.zero_grad()
    with with_hooks(model, bwd_hooks=[(name, lambda g, hook: torch.zeros_like(g))]):
        model(ids).sum().backward()
    assert model.blocks[0].attn.qkv.weight.grad.abs().max() == 0
    assert model.blocks[1].attn.qkv.weight.grad.abs().max() > 0
    with pytest.raises(ConfigError, match="reset_hooks_end=False"):
        run_with_hooks(model, ids, bwd_hooks=[(name, keep)])
    out = run_with_hooks(model, ids, bwd_hooks=[(name, keep)], reset_hooks_end=False)
    grads.clear()
    out.sum().backward()
    assert name in grads
    reset_hooks(model)
    grads.clear()
    model(ids).sum().backward()
    assert grads == {}


def test_cache_stacks_like_a_manual_stack():
    model = tiny_gpt()
    ids = torch.randint(0, 31, (2, 7))
    _, cache = run_with_cache(model, ids)
    assert isinstance(cache, ActivationCache)
    L, H = 2, 4
    resid = cache.stack_layers("resid_post")
    torch.testing.assert_close(resid, torch.stack([cache[f"blocks.{l}.hook_resid_post"]
                                                   for l in range(L)]))
    z, labels = cache.stack_by_head("z", return_labels=True)
    manual = torch.stack([cache[f"blocks.{l}.attn.hook_z"][:, :, h]
                          for l in range(L) for h in range(H)])  # (L*H, B, T, Dh)
    torch.testing.assert_close(z, manual)
    assert labels[:5] == ["L0H0", "L0H1", "L0H2", "L0H3", "L1H0"]
    pattern = cache.stack_by_head("pattern")
    manual = torch.stack([cache["pattern", l][:, h] for l in range(L) for h in range(H)])
    torch.testing.assert_close(pattern, manual)  # (L*H, B, T, T)
    assert cache["z", 1] is cache["blocks.1.attn.hook_z"]
    assert act_name("embed") == "hook_embed" and act_name("mlp_out", 3) == "blocks.3.hook_mlp_out"
    with pytest.raises(ConfigError, match="no head axis"):
        cache.stack_by_head("resid_post")
    with pytest.raises(ConfigError, match="knows no tokenizer"):
        cache.to_str_tokens(ids[0])


def test_llama_cache_heads_and_tokens(llama, tmp_path):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(llama.name_or_path)
    ids = torch.tensor([tok("Shall I compare thee")["input_ids"]])
    _, cache = run_with_cache(llama, ids, names=["blocks.*.attn.hook_pattern",
                                                 "blocks.*.attn.hook_z"], tokenizer=tok)
    assert "".join(cache.to_str_tokens(ids)) == "Shall I compare thee"
    z = cache.stack_by_head("z")
    assert z.shape == (2 * 4, 1, ids.shape[1], 8)
    torch.testing.assert_close(z[5], cache["z", 1][:, :, 1])
    torch.testing.assert_close(cache.stack_by_head("pattern")[6], cache["pattern", 1][:, 2])


def test_hf_pattern_is_read_only_with_a_clear_error(llama):
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ConfigError, match="read-only"):
        run_with_hooks(llama, ids, fwd_hooks=[("blocks.0.attn.hook_pattern",
                                               lambda p, hook: p * 0)])
    assert not any(m._forward_hooks for m in llama.modules())


def test_hf_wrapper_exposes_the_hf_sites(tmp_path):
    """``hf:`` models (HFCausalLM) have a hook point of their own (hook_final) and every HF
    site: ``blocks.*.attn.hook_pattern`` is found (the `view --model <hf: run>` bug)."""
    pytest.importorskip("transformers")
    from helpers.tiny_llama import save_tiny_llama

    folder = save_tiny_llama(tmp_path / "llama")
    model = tokengeo.create_model(f"hf:{folder}", n_laplacian=1, block_size=16).eval()
    sites = hook_sites(model)
    assert "blocks.1.attn.hook_pattern" in sites and "hook_final" in sites
    ids = torch.randint(0, 100, (1, 6))
    edit = [("blocks.0.attn.hook_z", ablate(1))]
    with torch.no_grad():
        a = run_with_hooks(model, ids, fwd_hooks=edit)
        with with_hooks(model, fwd_hooks=edit):
            b = model(ids)
        plain = model(ids)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.allclose(a, plain, atol=1e-4)
