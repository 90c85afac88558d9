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
    from tokengeo.models.hf import pretrained

    model, tok = pretrained.load("smollm2-135m")
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        before = model(ids).logits
        for k, last in [(3, None), (9, None), (3, 10)]:  # the suite's rows, and every head
            hf.laplacianize(model, n_laplacian=k, kind="mixed", mixed_init="attention",
                            last_layers=last)
            assert torch.equal(before, model(ids).logits), (k, last)
        hf.laplacianize(model, n_laplacian=3, last_layers=10)  # the control: Laplacian heads
        assert hf.laplacian_heads(model) == {layer: [6, 7, 8] for layer in range(20, 30)}
        assert not torch.allclose(before, model(ids).logits)


# ---- through tokengeo's hf: model on the shared tiny Llama folder ------------------------


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    pytest.importorskip("tokenizers")
    from helpers.tiny_llama import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.mark.parametrize("k, last_layers", [(4, None), (2, None), (2, 1)])
def test_hf_model_with_mixed_heads_at_attention_gives_the_pretrained_logits(
        tiny_folder, k, last_layers):
    from tokengeo.models.registry import create_model

    ids = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = transformers.AutoModelForCausalLM.from_pretrained(tiny_folder).eval()
        want = plain(input_ids=ids).logits
        model = create_model(f"hf:{tiny_folder}", n_laplacian=k, head_kind="mixed",
                             mixed_init="attention", last_layers=last_layers,
                             block_size=16).eval()
        got = model(ids)
    assert torch.equal(got, want)
    layers = [0, 1] if last_layers is None else [1]
    assert hf.laplacian_heads(model.hf) == {layer: list(range(4 - k, 4)) for layer in layers}


# ---- the last L layers -------------------------------------------------------------------


@pytest.mark.parametrize("n_layers, k, L", [(2, 3, 1), (2, 3, 2), (5, 2, 3), (30, 3, 10)])
def test_last_layers_choose_the_last_k_heads_of_the_last_L_layers(n_layers, k, L):
    choice = hf.last_layers_heads(k, L, n_layers, 9)
    assert sorted(choice) == list(range(n_layers - L, n_layers))
    assert all(heads == list(range(9 - k, 9)) for heads in choice.values())
    spec = hf.resolve_heads(k, None, n_layers, 9, last_layers=L)
    assert spec.choice() == choice and spec.n_chosen == k * L


def test_last_layers_leave_the_lower_layers_untouched():
    model = _tiny_llama()
    with torch.no_grad():
        before = model(IDS, output_hidden_states=True)
        hf.laplacianize(model, n_laplacian=3, last_layers=1)
        after = model(IDS, output_hidden_states=True)
    assert hf.laplacian_heads(model) == {1: [3, 4, 5]}
    # hidden_states[1] is the output of layer 0: unchanged; layer 1's output is not
    assert torch.equal(before.hidden_states[1], after.hidden_states[1])
    assert not torch.allclose(before.logits, after.logits)
    explicit = _tiny_llama()
    with torch.no_grad():
        hf.laplacianize(explicit, heads={1: [3, 4, 5]})
        assert torch.equal(explicit(IDS).logits, after.logits)


@pytest.mark.parametrize("change, message", [
    ({"last_layers": 0}, "last_layers=0 is out of range; choose 1 <= last_layers <= 2"),
    ({"last_layers": 3}, "last_layers=3 is out of range"),
    ({"last_layers": 1.5}, "last_layers=1.5 must be an int"),
    ({"last_layers": 1, "heads": {0: [1]}, "n_laplacian": None}, "last_layers=L goes with"),
])
def test_bad_last_layers_are_refused(change, message):
    from tokengeo.errors import ConfigError

    model = _tiny_llama()
    with pytest.raises(ConfigError, match=message):
        hf.laplacianize(model, **{"n_laplacian": 2, **change})
    assert hf.laplacian_heads(model) == {}  # nothing installed


def test_mixed_coefficients_report_each_head_and_follow_training():
    model = _tiny_llama()
    assert hf.mixed_coefficients(model) == {}
    hf.laplacianize(model, n_laplacian=2, kind="mixed", mixed_init="attention", last_layers=1)
    assert hf.mixed_coefficients(model) == {1: {4: (0.0, 1.0), 5: (0.0, 1.0)}}
    opt = torch.optim.SGD([p for n, p in model.named_parameters() if "mix" in n], lr=0.1)
    model(IDS, labels=IDS).loss.backward()
    opt.step()
    mix = next(p for n, p in model.named_parameters() if "mix" in n)
    coef = hf.mixed_coefficients(model)[1]
    assert [coef[4], coef[5]] == [tuple(row) for row in mix.detach().tolist()]
    assert coef[4] != (0.0, 1.0)
    hf.laplacianize(model, n_laplacian=2)  # Laplacian heads: no coefficients to report
    assert hf.mixed_coefficients(model) == {}
