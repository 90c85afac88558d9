"""to_transformer_lens: every head kind exact inside TransformerLens' bridge.

Each case (tiny Llama with grouped KV heads, GPT-2 and BERT with random biases, tokengeo's
gpt-tiny with Laplacian, learnable mixed and fixed heads) is checked against what tokengeo
computes itself, and against the formula ``z_h = a_h V + b_h P V`` rebuilt from the
bridge's own ``hook_v`` and ``hook_pattern``."""

from __future__ import annotations

import pytest
import torch

from interop.cases import REASON

pytest.importorskip("transformer_lens", reason=REASON)

import tokengeo  # noqa: E402
from tokengeo.errors import ConfigError  # noqa: E402
from tokengeo.interop import to_transformer_lens  # noqa: E402
from tokengeo.interop.heads import installed  # noqa: E402
from tokengeo.models.hf.families import ungroup  # noqa: E402

TOL = 1e-5


def logits_of(out):
    return out.logits if hasattr(out, "logits") else out


def reference(case, tokens, names=("blocks.*.attn.hook_z",)):
    """tokengeo's own logits and cache on a second copy of the case's model."""
    out, cache = tokengeo.run_with_cache(case.build(), tokens, names=list(names))
    return logits_of(out).detach(), cache


def formula_z(case, bridge, cache, layer):
    """a V + b P V per head from the bridge's hook_v and hook_pattern: (B, T, H, Dh)."""
    v = ungroup(cache[f"blocks.{layer}.attn.hook_v"], case.n_heads // case.n_kv_heads)
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]  # (B, H, T, T)
    pv = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
    state = installed(bridge.hook_dict[f"blocks.{layer}.attn.hook_z"])
    if state is None:
        return pv
    a, b = state.mixer.head_coefficients()
    return a.view(-1, 1) * v + b.view(-1, 1) * pv


def per_head_w_o(bridge, case, layer):
    """W_O per head, (H, Dh, d), read from the wrapped output projection."""
    o = bridge.blocks[layer].attn.o.original_component
    weight = o.weight if type(o).__name__ == "Conv1D" else o.weight.t()  # (H*Dh, d)
    return weight.unflatten(0, (case.n_heads, case.head_dim))


def test_logits_and_z_equal_tokengeo(case):
    tokens = case.tokens()
    want, ref = reference(case, tokens)
    bridge = to_transformer_lens(case.build())
    out, cache = bridge.run_with_cache(tokens)
    assert torch.allclose(out, want, atol=TOL, rtol=0), (out - want).abs().max()
    for layer in range(2):
        z = cache[f"blocks.{layer}.attn.hook_z"]
        assert torch.allclose(z, ref[f"blocks.{layer}.attn.hook_z"], atol=TOL, rtol=0)


@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "grad"])
def test_every_head_result_is_its_formula_and_heads_sum_to_the_attention(case, grad):
    tokens = case.tokens(seed=1)
    bridge = to_transformer_lens(case.build())
    per_head = not case.name.startswith("bert")
    if per_head:
        bridge.set_use_attn_result(True)
    else:  # TransformerLens' BERT attention has no per-head results (its own limitation)
        with pytest.raises(NotImplementedError, match="use_attn_result"):
            bridge.set_use_attn_result(True)
    with torch.set_grad_enabled(grad):
        _, cache = bridge.run_with_cache(tokens)
    for layer in range(2):
        z = formula_z(case, bridge, cache, layer)
        assert torch.allclose(cache[f"blocks.{layer}.attn.hook_z"], z, atol=TOL, rtol=0)
        want = torch.einsum("bthe,hed->bthd", z, per_head_w_o(bridge, case, layer))
        result = cache[f"blocks.{layer}.attn.hook_result"] if per_head else want  # (B, T, H, d)
        assert torch.allclose(result, want, atol=TOL, rtol=0), (result - want).abs().max()
        bias = bridge.blocks[layer].attn.o.original_component.bias
        summed = result.sum(-2) + (0 if bias is None else bias)  # the heads and b_O
        # the attention's output: what it adds to the residual (BERT: before its post-LN)
        out = "hook_attn_out" if per_head else "attn.o.hook_out"
        assert torch.allclose(summed, cache[f"blocks.{layer}.{out}"], atol=TOL, rtol=0)
    if per_head:  # TransformerLens' own stacking: the same results, layer by layer
        stacked = cache.stack_head_results(layer=-1)  # (L*H, B, T, d)
        flat = torch.cat([cache[f"blocks.{layer}.attn.hook_result"] for layer in range(2)], -2)
        assert torch.equal(stacked, flat.permute(2, 0, 1, 3))


def test_zero_ablating_a_laplacian_head_is_tokengeos_ablation(case):
    layer, head = 1, case.chosen[1][-1]

    def ablate(z, hook=None):  # TransformerLens passes hook=, tokengeo does not
        z = z.clone()
        z[:, :, head] = 0.0
        return z

    tokens = case.tokens(seed=2)
    want = logits_of(tokengeo.run_with_hooks(
        case.build(), tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", ablate)])).detach()
    bridge = to_transformer_lens(case.build())
    got = bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", ablate)])
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    assert (got - bridge(tokens)).abs().max() > 1e-3  # the ablation did something


def test_a_hook_v_edit_reaches_every_head_kind(case):
    tokens = case.tokens(seed=3)
    bridge = to_transformer_lens(case.build())
    hooks = [("blocks.1.attn.hook_v", lambda v, hook: 2.0 * v)]
    with bridge.hooks(fwd_hooks=hooks):
        _, doubled = bridge.run_with_cache(tokens)
    _, plain = bridge.run_with_cache(tokens)
    # z is linear in V for fixed P (V does not change P): every head, Laplacian or not, doubles
    assert torch.allclose(doubled["blocks.1.attn.hook_z"], 2 * plain["blocks.1.attn.hook_z"],
                          atol=TOL, rtol=0)


def test_gradients_reach_the_learnable_coefficients():
    from interop.cases import all_cases

    pytest.importorskip("transformers")
    for case in all_cases(pytest.llama_folder):  # set by the fixture below
        if "mixed" not in case.name:
            continue
        tokens = case.tokens(seed=4)
        ref = case.build()
        logits_of(ref(tokens)).square().mean().backward()
        want = {n: p.grad for n, p in ref.named_parameters() if n.endswith("mix_coef")}
        bridge = to_transformer_lens(case.build())
        bridge(tokens).square().mean().backward()
        got = {n: p.grad for n, p in bridge.named_parameters() if n.endswith("mix_coef")}
        assert len(got) == len(want) == 2, case.name
        for g, w in zip(got.values(), want.values(), strict=True):
            assert g is not None and torch.allclose(g, w, atol=1e-6, rtol=1e-4), case.name


@pytest.fixture(autouse=True)
def _share_llama_folder(llama_folder):
    pytest.llama_folder = llama_folder


def test_transformer_lens_patching_is_tokengeos_patching(llama_folder):
    from transformer_lens import patching

    from interop.cases import all_cases

    case = {c.name: c for c in all_cases(llama_folder)}["llama-mixed"]
    clean, corrupted = case.tokens(seed=5, batch=1), case.tokens(seed=6, batch=1)
    target = int(clean[0, -1])

    def metric(logits):
        return logits[0, -1, target] - logits[0, -1].mean()

    bridge = to_transformer_lens(case.build())
    _, clean_cache = bridge.run_with_cache(clean)
    table = patching.get_act_patch_attn_head_out_all_pos(bridge, corrupted, clean_cache, metric)
    ref = case.build()
    _, ref_clean = tokengeo.run_with_cache(ref, clean, names=["blocks.*.attn.hook_z"])
    want = torch.zeros(2, case.n_heads)
    for layer in range(2):
        name = f"blocks.{layer}.attn.hook_z"
        for head in range(case.n_heads):
            def patch(z, hook=None, *, head=head, name=name):
                z = z.clone()
                z[:, :, head] = ref_clean[name][:, :, head]
                return z
            out = tokengeo.run_with_hooks(ref, corrupted, fwd_hooks=[(name, patch)])
            want[layer, head] = metric(logits_of(out)).detach()
    assert torch.allclose(table, want, atol=1e-4, rtol=0), (table - want).abs().max()


@pytest.mark.parametrize("name", ["llama-laplacian", "gpt2-laplacian", "gpt-tiny-mixed"])
def test_compatibility_mode_keeps_every_head_exact(llama_folder, name):
    from interop.cases import all_cases

    case = {c.name: c for c in all_cases(llama_folder)}[name]
    tokens = case.tokens(seed=7)
    want, _ = reference(case, tokens)
    bridge = to_transformer_lens(case.build(), compat=True)
    bridge.set_use_attn_result(True)
    out, cache = bridge.run_with_cache(tokens)
    # centering the unembedding shifts every logit of a position alike
    assert torch.allclose(out.log_softmax(-1), want.log_softmax(-1), atol=1e-4, rtol=0)
    for layer in range(2):
        z = formula_z(case, bridge, cache, layer)
        assert torch.allclose(cache[f"blocks.{layer}.attn.hook_z"], z, atol=TOL, rtol=0)
        want_result = torch.einsum("bthe,hed->bthd", z, per_head_w_o(bridge, case, layer))
        assert torch.allclose(cache[f"blocks.{layer}.attn.hook_result"], want_result,
                              atol=TOL, rtol=0)


def test_folding_value_biases_into_laplacian_heads_is_refused(llama_folder):
    from interop.cases import gpt2

    with pytest.raises(ConfigError, match="fold_value_biases=True is exact only"):
        to_transformer_lens(gpt2(), compat=True, fold_value_biases=True)


def test_what_it_cannot_take_is_refused_clearly():
    import transformers

    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=64)
    with pytest.raises(ConfigError, match="no adapter for BertModel: load it as BertForMaskedLM"):
        to_transformer_lens(transformers.BertModel(config))
    with pytest.raises(ConfigError, match="post-LN"):
        to_transformer_lens(transformers.BertForMaskedLM(config), compat=True)
    with pytest.raises(ConfigError, match="GPT models .* and Hugging Face models"):
        to_transformer_lens(tokengeo.create_model("encoder-tiny"))
    with pytest.raises(ConfigError, match="compat=True"):
        to_transformer_lens(tokengeo.create_model("gpt-tiny"), fold_ln=False)


def test_a_wrapped_model_is_refused_by_laplacianize_and_by_a_second_wrap(llama_folder):
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(llama_folder).eval()
    bridge = to_transformer_lens(model)
    for target in (bridge, model):
        with pytest.raises(ConfigError, match="wrapped by TransformerLens"):
            tokengeo.laplacianize(target, n_laplacian=1)
        with pytest.raises(ConfigError, match="already wrapped by TransformerLens"):
            to_transformer_lens(target)


@pytest.mark.parametrize("kv_cache", [True, False], ids=["kv-cache", "no-cache"])
def test_generate_is_the_laplacianized_models(llama_folder, kv_cache):
    from interop.cases import all_cases

    case = {c.name: c for c in all_cases(llama_folder)}["llama-mixed"]
    tokens = case.tokens(seed=10, batch=1, length=5)
    want = case.build().generate(tokens, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    bridge = to_transformer_lens(case.build())
    got = bridge.generate(tokens, max_new_tokens=6, do_sample=False, stop_at_eos=False,
                          use_past_kv_cache=kv_cache, verbose=False)
    assert torch.equal(got, want)


def test_the_wrapped_model_records_its_heads_and_still_computes_them(llama_folder):
    from interop.cases import all_cases
    from tokengeo.models.hf import laplacian_heads, recorded_heads

    case = {c.name: c for c in all_cases(llama_folder)}["llama-laplacian"]
    tokens = case.tokens(seed=11)
    want, _ = reference(case, tokens)
    model = case.build()
    bridge = to_transformer_lens(model)
    assert laplacian_heads(model) == {}  # tokengeo's patch is gone: the bridge computes them
    assert recorded_heads(bridge.original_model.config) == case.chosen
    # the model itself now runs through the bridge's components, heads included
    assert torch.allclose(model(tokens).logits, want, atol=TOL, rtol=0)
