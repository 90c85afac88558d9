"""Laplacian heads in modern Hugging Face architectures (tokengeo.models.hf, hf_families).

The reference is independent of the hooks under test: a hand-written attention function,
registered under its own name (no built-in implementation is changed), computes
``P = softmax(scale * Q K^T (softcapped) + mask)`` from the kernel's own inputs, expands
grouped KV heads and writes ``V - P V`` on the Laplacian heads. It runs the whole sequence
without a cache, so the query tokens' own values are all rows of ``value``.
"""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
hf = pytest.importorskip("tokengeo.models.hf")
from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: E402

REFERENCE = "tokengeo_test_reference"
T, VOCAB = 7, 64
LAPLACIAN = {0: [1, 3], 1: [0]}  # heads 1 and 3 share KV head 1 (H=4, Hkv=2)


def reference_attention(module, query, key, value, attention_mask, scaling=None,
                        dropout=0.0, softcap=None, **kwargs):
    """query (B, H, T, Dh), key/value (B, Hkv, S, Dh) -> (B, T, H, Dh), P (B, H, T, S)."""
    groups = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(groups, dim=1)  # (B, H, S, Dh)
    v = value.repeat_interleave(groups, dim=1)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = query @ k.transpose(-1, -2) * scale  # (B, H, T, S)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask[..., : k.shape[-2]]
    p = scores.float().softmax(-1).to(query.dtype)
    out = p @ v  # (B, H, T, Dh)
    heads = getattr(module, "reference_laplacian", [])
    if heads:
        assert v.shape[-2] == query.shape[-2], "the reference runs without a cache"
        out[:, heads] = v[:, heads] - out[:, heads]
    return out.transpose(1, 2).contiguous(), p


transformers.AttentionInterface.register(REFERENCE, reference_attention)
AttentionMaskInterface.register(REFERENCE, eager_mask)

T_ = transformers
COMMON = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
              num_hidden_layers=2, vocab_size=VOCAB, max_position_embeddings=64,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
MHA = {**COMMON, "num_key_value_heads": 4}
# name -> (config class, model class, config fields, attention implementations)
DECODERS = {
    "llama": (T_.LlamaConfig, T_.LlamaForCausalLM, COMMON, ("eager", "sdpa")),
    "mistral-window": (T_.MistralConfig, T_.MistralForCausalLM,
                       {**COMMON, "sliding_window": 3}, ("eager", "sdpa")),
    "mixtral": (T_.MixtralConfig, T_.MixtralForCausalLM,
                {**COMMON, "num_local_experts": 2, "num_experts_per_tok": 1}, ("eager",)),
    "qwen2": (T_.Qwen2Config, T_.Qwen2ForCausalLM, COMMON, ("eager", "sdpa")),
    "qwen3-qknorm": (T_.Qwen3Config, T_.Qwen3ForCausalLM, {**COMMON, "head_dim": 8},
                     ("eager", "sdpa")),
    "gemma": (T_.GemmaConfig, T_.GemmaForCausalLM, {**COMMON, "head_dim": 8}, ("eager", "sdpa")),
    "gemma2-softcap": (T_.Gemma2Config, T_.Gemma2ForCausalLM,
                       {**COMMON, "head_dim": 8, "sliding_window": 3,
                        "attn_logit_softcapping": 2.0}, ("eager",)),
    "gemma3": (T_.Gemma3TextConfig, T_.Gemma3ForCausalLM,
               {**COMMON, "head_dim": 8, "sliding_window": 3}, ("eager", "sdpa")),
    "phi": (T_.PhiConfig, T_.PhiForCausalLM, COMMON, ("eager", "sdpa")),
    "phi3-fused": (T_.Phi3Config, T_.Phi3ForCausalLM, COMMON, ("eager", "sdpa")),
    "gpt-neox-fused": (T_.GPTNeoXConfig, T_.GPTNeoXForCausalLM, MHA, ("eager", "sdpa")),
    "gptj": (T_.GPTJConfig, T_.GPTJForCausalLM,
             dict(n_embd=32, n_head=4, n_layer=2, rotary_dim=4, vocab_size=VOCAB,
                  n_positions=64, bos_token_id=1, eos_token_id=2), ("eager", "sdpa")),
    "opt": (T_.OPTConfig, T_.OPTForCausalLM,
            {**MHA, "ffn_dim": 64, "word_embed_proj_dim": 32}, ("eager", "sdpa")),
    "olmo-clip": (T_.OlmoConfig, T_.OlmoForCausalLM, {**COMMON, "clip_qkv": 0.5},
                  ("eager", "sdpa")),
    "olmo2": (T_.Olmo2Config, T_.Olmo2ForCausalLM, COMMON, ("eager", "sdpa")),
    "starcoder2": (T_.Starcoder2Config, T_.Starcoder2ForCausalLM,
                   {**COMMON, "sliding_window": 3}, ("eager", "sdpa")),
    "granite": (T_.GraniteConfig, T_.GraniteForCausalLM, COMMON, ("eager", "sdpa")),
    "cohere": (T_.CohereConfig, T_.CohereForCausalLM, COMMON, ("eager", "sdpa")),
    "smollm3": (T_.SmolLM3Config, T_.SmolLM3ForCausalLM, COMMON, ("eager", "sdpa")),
}
ENCODERS = {
    "roberta": (T_.RobertaConfig, T_.RobertaModel, MHA, ("eager", "sdpa")),
    "electra": (T_.ElectraConfig, T_.ElectraModel, {**MHA, "embedding_size": 32},
                ("eager", "sdpa")),
    "distilbert": (T_.DistilBertConfig, T_.DistilBertModel,
                   dict(dim=32, n_heads=4, n_layers=2, hidden_dim=64, vocab_size=VOCAB,
                        max_position_embeddings=64, pad_token_id=0), ("eager", "sdpa")),
    "modernbert": (T_.ModernBertConfig, T_.ModernBertModel,
                   {**MHA, "cls_token_id": 1, "sep_token_id": 2, "local_attention": 4,
                    "global_attn_every_n_layers": 2}, ("eager", "sdpa")),
}
FAMILIES = {**DECODERS, **ENCODERS}
CASES = [pytest.param(name, impl, id=f"{name}-{impl}")
         for name, (*_, impls) in FAMILIES.items() for impl in impls]


def build(name: str, impl: str, seed: int = 0):
    config_cls, model_cls, fields, _ = FAMILIES[name]
    torch.manual_seed(seed)
    return model_cls(config_cls(**fields, attn_implementation=impl)).eval()


def inputs(name: str, batch: int = 2, pad: int = 3) -> dict[str, torch.Tensor]:
    """Random ids and a padding mask; decoders pad on the right, encoders anywhere."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (batch, T), generator=gen)
    mask = torch.ones(batch, T, dtype=torch.long)
    mask[-1, T - pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def output(model, batch) -> torch.Tensor:
    out = model(**batch)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def reference_of(model, name: str, heads: dict[int, list[int]]):
    """Same weights, the hand-written attention, Laplacian heads set on its modules."""
    ref = build(name, REFERENCE)
    ref.load_state_dict(model.state_dict(), strict=False)
    for layer, site in enumerate(hf.attention_sites(ref)):
        site.attention.reference_laplacian = heads.get(layer, [])
    return ref


def real(batch) -> torch.Tensor:
    return batch["attention_mask"].bool()  # (B, T): compare real tokens only


@pytest.mark.parametrize("name, impl", CASES)
def test_laplacian_heads_match_the_hand_reference(name, impl):
    model = build(name, impl)
    batch = inputs(name)
    with torch.no_grad():
        plain = output(model, batch)
        ref_plain = output(reference_of(model, name, {}), batch)
        torch.testing.assert_close(ref_plain[real(batch)], plain[real(batch)],
                                   atol=1e-5, rtol=1e-4)  # the reference is faithful
        tokengeo.laplacianize(model, heads=LAPLACIAN)
        patched = output(model, batch)
        expected = output(reference_of(model, name, LAPLACIAN), batch)
    torch.testing.assert_close(patched[real(batch)], expected[real(batch)], atol=1e-5, rtol=1e-4)
    assert (patched - plain).abs().max() > 1e-3


@pytest.mark.parametrize("name, impl", CASES)
def test_zero_laplacian_heads_is_bit_identical(name, impl):
    model = build(name, impl)
    batch = inputs(name)
    with torch.no_grad():
        before = output(model, batch)
        tokengeo.laplacianize(model, n_laplacian=0)
        assert torch.equal(output(model, batch), before)
    assert hf.laplacian_heads(model) == {}


@pytest.mark.parametrize("name", list(DECODERS))
def test_right_padding_leaves_real_tokens_as_alone(name):
    """Causal + padding mask: a padded row's real tokens equal the unpadded sequence's."""
    model = tokengeo.laplacianize(build(name, DECODERS[name][3][-1]), heads=LAPLACIAN)
    batch = inputs(name, pad=3)
    with torch.no_grad():
        padded = output(model, batch)[-1, : T - 3]
        alone = output(model, {"input_ids": batch["input_ids"][-1:, : T - 3]})[0]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=1e-4)


def greedy_recomputed(model, ids: torch.Tensor, steps: int) -> torch.Tensor:
    """Greedy decoding recomputing the whole sequence at every step (no cache), no EOS."""
    for _ in range(steps):
        with torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits[:, -1]
        logits[:, model.generation_config.eos_token_id] = float("-inf")  # as min_new_tokens
        ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    return ids


@pytest.mark.parametrize("name", list(DECODERS))
def test_generate_with_dynamic_and_static_cache_equals_recomputation(name):
    model = tokengeo.laplacianize(build(name, DECODERS[name][3][-1]), n_laplacian=2)
    ids = inputs(name)["input_ids"][:1, :3]
    expected = greedy_recomputed(model, ids, 5)
    options = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        dynamic = model.generate(ids, **options)
        static = model.generate(ids, cache_implementation="static", **options)
    assert torch.equal(dynamic, expected)
    assert torch.equal(static, expected)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_save_pretrained_round_trip(name, tmp_path):
    model = tokengeo.laplacianize(build(name, "eager"), heads=LAPLACIAN)
    batch = inputs(name)
    model.save_pretrained(tmp_path)
    reloaded = hf.from_pretrained(tmp_path, attn_implementation="eager")
    assert hf.laplacian_heads(reloaded) == LAPLACIAN
    with torch.no_grad():
        assert torch.equal(output(reloaded, batch), output(model, batch))


# --- mixed heads -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama", "phi3-fused", "gpt-neox-fused"])
def test_mixed_heads_start_as_their_init_and_learn(name):
    model = build(name, "sdpa")
    batch = inputs(name)
    with torch.no_grad():
        plain = output(model, batch)
        lap = output(tokengeo.laplacianize(model, heads=LAPLACIAN), batch)
        as_attention = output(tokengeo.laplacianize(model, heads=LAPLACIAN, kind="mixed",
                                                    mixed_init="attention"), batch)
        assert torch.equal(as_attention, plain)
    tokengeo.laplacianize(model, heads=LAPLACIAN, kind="mixed")
    coef = [p for n, p in model.named_parameters() if n.endswith(hf.MIX_NAME)]
    assert [tuple(c.shape) for c in coef] == [(2, 2), (1, 2)]
    mixed = output(model, batch)
    torch.testing.assert_close(mixed, lap, atol=1e-6, rtol=1e-5)
    mixed.square().sum().backward()
    assert all(c.grad is not None and c.grad.abs().sum() > 0 for c in coef)
    hf.unlaplacianize(model)
    assert not any(n.endswith(hf.MIX_NAME) for n, _ in model.named_parameters())


def test_mixed_coefficients_are_saved_and_reloaded(tmp_path):
    model = tokengeo.laplacianize(build("llama", "eager"), heads=LAPLACIAN, kind="mixed")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(hf.MIX_NAME):
                param.uniform_(-2, 2)
    batch = inputs("llama")
    model.save_pretrained(tmp_path)
    reloaded = hf.from_pretrained(tmp_path, attn_implementation="eager")
    saved = {n: p for n, p in model.named_parameters() if n.endswith(hf.MIX_NAME)}
    loaded = {n: p for n, p in reloaded.named_parameters() if n.endswith(hf.MIX_NAME)}
    assert saved.keys() == loaded.keys() and len(saved) == 2
    for key in saved:
        assert torch.equal(saved[key], loaded[key])
    with torch.no_grad():
        assert torch.equal(output(reloaded, batch), output(model, batch))


# --- what is refused, and why ----------------------------------------------------------


def tiny_gpt_oss():
    config = T_.GptOssConfig(**{**COMMON, "head_dim": 8, "num_local_experts": 2,
                                "num_experts_per_tok": 1})
    return T_.GptOssForCausalLM(config)


def tiny_t5():
    return T_.T5Model(T_.T5Config(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=32, num_layers=1,
                                  num_heads=4))


@pytest.mark.parametrize("builder, reason", [
    (tiny_gpt_oss, "attention sinks"),
    (tiny_t5, "cross-attention"),
])
def test_refused_families_name_the_reason(builder, reason):
    model = builder()
    with pytest.raises(ConfigError, match=reason):
        tokengeo.laplacianize(model, n_laplacian=1)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


# --- capture: TransformerLens names on the same families ---------------------------------

from tokengeo.probes.capture import capture, run_with_cache  # noqa: E402
from tokengeo.probes.similarity import head_output_similarity  # noqa: E402


def _shape(model):
    return hf.attention_sites(model)[0].shape


@pytest.mark.parametrize("name", list(FAMILIES))
def test_captured_z_is_pattern_times_ungrouped_values(name):
    """z_h = P_h V_{h // (H/Hkv)} with P from hook_pattern and V from hook_v (eager)."""
    model = build(name, "eager")
    shape = _shape(model)
    batch = inputs(name, pad=0)
    with capture(model, ["*"], ungroup_kv=True) as cache:
        with torch.no_grad():
            model(**batch)
    for layer in range(2):
        p = f"blocks.{layer}."
        z, v = cache[p + "attn.hook_z"], cache[p + "attn.hook_v"]  # (B, T, H, Dh)
        pattern = cache[p + "attn.hook_pattern"]  # (B, H, T, T)
        assert z.shape == v.shape == (2, T, shape.n_heads, shape.head_dim)
        assert cache[p + "attn.hook_q"].shape == z.shape
        torch.testing.assert_close(pattern.sum(-1), torch.ones(2, shape.n_heads, T))
        if name in DECODERS:
            assert torch.all(pattern.triu(1) == 0)  # causal
        torch.testing.assert_close((pattern @ v.transpose(1, 2)).transpose(1, 2), z,
                                   atol=1e-5, rtol=1e-4)
        out_proj = hf.attention_sites(model)[layer].out_proj
        torch.testing.assert_close(out_proj(z.flatten(-2)), cache[p + "hook_attn_out"])
    torch.testing.assert_close(cache["blocks.0.hook_resid_post"], cache["blocks.1.hook_resid_pre"])


def test_grouped_and_ungrouped_keys():
    model = build("llama", "sdpa")
    batch = inputs("llama")
    _, grouped = run_with_cache(model, **batch, names=["blocks.0.attn.hook_k"])
    with capture(model, ["blocks.0.attn.hook_k"], ungroup_kv=True) as cache:
        with torch.no_grad():
            model(**batch)
    assert grouped["blocks.0.attn.hook_k"].shape == (2, T, 2, 8)
    torch.testing.assert_close(cache["blocks.0.attn.hook_k"],
                               grouped["blocks.0.attn.hook_k"].repeat_interleave(2, dim=2))


@pytest.mark.parametrize("name", ["phi3-fused", "gpt-neox-fused", "llama"])
def test_zeroing_captured_values_zeroes_z_through_fused_projections(name):
    model = build(name, "sdpa")
    handle = __import__("tokengeo.probes.hf_sites", fromlist=["x"]).hf_hook_sites(model)[
        "blocks.1.attn.hook_v"].attach(torch.zeros_like)
    try:
        with torch.no_grad():
            _, cache = run_with_cache(model, **inputs(name, pad=0),
                                      names=["blocks.1.attn.hook_z", "blocks.1.attn.hook_q"])
    finally:
        handle.remove()
    assert torch.all(cache["blocks.1.attn.hook_z"] == 0)  # P 0 = 0
    assert cache["blocks.1.attn.hook_q"].abs().max() > 0  # Q untouched by the V write


@pytest.mark.parametrize("name", ["llama", "gemma2-softcap", "phi3-fused"])
def test_similarity_of_a_right_padded_causal_row_equals_the_unpadded_sequence(name):
    """Decoders: z_i depends on tokens <= i only, so right padding changes no real pair."""
    model = build(name, DECODERS[name][3][-1])
    batch = inputs(name, pad=3)
    sim = head_output_similarity(model, batch["input_ids"], batch["attention_mask"])
    alone = head_output_similarity(model, batch["input_ids"][-1:, : T - 3])
    assert sim.shape == (2, 4, 2, T, T)
    torch.testing.assert_close(sim[:, :, -1, : T - 3, : T - 3], alone[:, :, 0],
                               atol=1e-5, rtol=1e-4)
    assert torch.all(sim[:, :, -1, T - 3:] == 0)


def test_refused_family_has_no_hook_sites():
    with pytest.raises(ConfigError, match="hook sites refuses.*attention sinks"):
        capture(tiny_gpt_oss(), ["*"]).__enter__()
