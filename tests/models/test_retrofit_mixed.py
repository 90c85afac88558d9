"""A retrofit that starts where the pretrained model is: mixed heads initialised as attention,
(a, b) = (0, 1), give the pretrained logits bit for bit (0·V + 1·P V is exact in floating
point), so a fine-tune with learnable (a, b) starts at the pretrained perplexity."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
hf = pytest.importorskip("tokengeo.models.hf")


def _tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=24, num_attention_heads=6, num_key_value_heads=2, head_dim=4,
        num_hidden_layers=2, intermediate_size=32, vocab_size=50, attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(config).eval()


IDS = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("k", [1, 3, 6])
def test_mixed_heads_initialised_as_attention_keep_the_logits_bit_for_bit(k):
    model = _tiny_llama()
    with torch.no_grad():
        before = model(IDS).logits
        hf.laplacianize(model, n_laplacian=k, kind="mixed", mixed_init="attention")
        after = model(IDS).logits
    assert torch.equal(before, after)


def test_mixed_heads_initialised_as_attention_learn_their_coefficients():
    model = _tiny_llama()
    hf.laplacianize(model, n_laplacian=3, kind="mixed", mixed_init="attention")
    mixes = [p for n, p in model.named_parameters() if "mix" in n]
    assert mixes and all(torch.equal(m, torch.tensor([[0.0, 1.0]] * 3)) for m in mixes)
    loss = model(IDS, labels=IDS).loss
    loss.backward()
    assert all(m.grad is not None and m.grad.abs().sum() > 0 for m in mixes)


def test_laplacian_init_does_change_the_logits():
    # the control: the same heads as Laplacian heads give other logits
    model = _tiny_llama()
    with torch.no_grad():
        before = model(IDS).logits
        hf.laplacianize(model, n_laplacian=3, kind="mixed", mixed_init="laplacian")
        assert not torch.allclose(before, model(IDS).logits)


@pytest.mark.slow
def test_smollm2_mixed_attention_init_keeps_the_pretrained_logits():
    from tokengeo.models import pretrained

    model, tok = pretrained.load("smollm2-135m")
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        before = model(ids).logits
        hf.laplacianize(model, n_laplacian=3, kind="mixed", mixed_init="attention")
        after = model(ids).logits
    assert torch.equal(before, after)
