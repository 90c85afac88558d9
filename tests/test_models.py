"""Every registered variant: shapes, finite outputs, gradients, head kinds, bad input."""

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.models.registry import get_entry, model_from_config
from tokengeo.probes.capture import capture, hook_sites

# Small overrides keep the parametrised registry test fast while exercising every family.
SMALL = {"vocab_size": 97}


def make_input(model, batch=2, T=12):
    cfg = model.config
    if model.family == "vit":
        return torch.randn(batch, cfg.in_chans, cfg.image_size, cfg.image_size), None
    ids = torch.randint(0, cfg.vocab_size, (batch, T))
    mask = torch.ones(batch, T, dtype=torch.long)
    mask[0, T // 2:] = 0
    return ids, mask


@pytest.mark.parametrize("name", tokengeo.list_models())
@pytest.mark.parametrize("n_laplacian", [0, 1])
def test_registered_model_forward_and_gradients(name, n_laplacian):
    overrides = dict(SMALL) if get_entry(name).family != "vit" else {}
    model = tokengeo.create_model(name, n_laplacian=n_laplacian, **overrides)
    x, mask = make_input(model)
    out = model(x, mask)
    cfg = model.config
    expected = {
        "vit": (2, cfg.__dict__.get("num_classes")),
        "gpt": (2, 12, cfg.__dict__.get("vocab_size")),
        "encoder": (2, cfg.__dict__.get("num_classes")),
        "ltransformer": (2, cfg.__dict__.get("num_classes")),
    }[model.family]
    assert tuple(out.shape) == expected
    assert torch.isfinite(out).all()
    out.float().pow(2).mean().backward()
    missing = [
        n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0
    ]
    assert not missing, f"parameters without gradient: {missing}"


def test_last_k_heads_are_laplacian_in_every_layer():
    model = tokengeo.create_model("vit-tiny", n_laplacian=3)
    for block in model.blocks:
        assert block.attn.head_kinds == ("attention", "laplacian", "laplacian", "laplacian")


def test_explicit_head_lists_and_mixed_kind():
    model = tokengeo.create_model("gpt-tiny", laplacian_heads={1: [0, 2]}, head_kind="mixed")
    kinds = [b.attn.head_kinds for b in model.blocks]
    assert kinds[0] == ("attention",) * 4
    assert kinds[1] == ("mixed", "attention", "mixed", "attention")
    assert model.blocks[1].attn.mix_coef.shape == (2, 2)


def test_laplacian_changes_output_without_adding_parameters():
    torch.manual_seed(0)
    base = tokengeo.create_model("vit-tiny")
    torch.manual_seed(0)
    lap = tokengeo.create_model("vit-tiny", n_laplacian=2)
    assert base.num_parameters() == lap.num_parameters()
    lap.load_state_dict(base.state_dict())
    x = torch.randn(2, 1, 28, 28)
    assert not torch.allclose(base(x), lap(x))


def test_model_from_config_round_trip():
    model = tokengeo.create_model("gpt-tiny", laplacian_heads={0: [3]}, vocab_size=50)
    import dataclasses
    import json

    saved = json.loads(json.dumps(dataclasses.asdict(model.config)))
    again = model_from_config("gpt-tiny", saved)
    assert again.config == model.config


def test_padding_does_not_leak_into_real_tokens():
    """Changing padded tokens must not change the encoder's prediction."""
    model = tokengeo.create_model("encoder-tiny", n_laplacian=2).eval()
    ids = torch.randint(1, 100, (1, 10))
    mask = torch.tensor([[1] * 6 + [0] * 4])
    other = ids.clone()
    other[0, 6:] = torch.randint(1, 100, (4,))
    assert torch.allclose(model(ids, mask), model(other, mask), atol=1e-6)


def test_hook_names_and_capture_removes_hooks_on_error():
    model = tokengeo.create_model("vit-tiny")
    names = set(hook_sites(model))
    for needed in ("hook_embed", "blocks.0.hook_resid_pre", "blocks.3.attn.hook_z",
                   "blocks.3.attn.hook_pattern", "blocks.0.hook_resid_post", "hook_final"):
        assert needed in names
    with pytest.raises(RuntimeError, match="boom"):
        with capture(model, ["blocks.*.attn.hook_z"]):
            raise RuntimeError("boom")
    assert not any(m._forward_hooks for m in model.modules())
    with capture(model, ["blocks.1.attn.hook_z", "blocks.1.hook_resid_post"]) as cache:
        model(torch.randn(2, 1, 28, 28))
    assert cache["blocks.1.attn.hook_z"].shape == (2, 50, 4, 16)
    assert cache["blocks.1.hook_resid_post"].shape == (2, 50, 64)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: tokengeo.create_model("vit-huge"), "unknown model 'vit-huge'"),
        (lambda: tokengeo.create_model("vit-tiny", n_laplacian=5), "exceeds n_heads=4"),
        (lambda: tokengeo.create_model("vit-tiny", n_laplacian=-2), ">= 0"),
        (lambda: tokengeo.create_model("vit-tiny", laplacian_heads={0: [9]}), "out of range"),
        (lambda: tokengeo.create_model("vit-tiny", n_lapalcian=1), "unknown vit-tiny option"),
        (lambda: tokengeo.create_model("vit-tiny", patch_size=5), "not divisible"),
        (lambda: tokengeo.create_model("gpt-tiny", pool="max"), "unknown gpt-tiny option"),
        (lambda: tokengeo.create_model("encoder-tiny", pool="max"), "pool='max'"),
    ],
)
def test_bad_model_input(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


def test_wrong_image_and_sequence_shapes():
    with pytest.raises(ConfigError, match="expects images"):
        tokengeo.create_model("vit-tiny")(torch.randn(2, 3, 28, 28))
    with pytest.raises(ConfigError, match="block_size"):
        tokengeo.create_model("gpt-tiny", block_size=8)(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.parametrize("name", tokengeo.list_models())
def test_models_build_on_the_meta_device_with_the_same_parameter_count(name):
    """Parameter counts of paper-sized variants need no memory (device="meta")."""
    meta = tokengeo.create_model(name, n_laplacian=1, device="meta")
    assert all(p.device.type == "meta" for p in meta.parameters())
    assert meta.num_parameters() == tokengeo.create_model(name, n_laplacian=1).num_parameters()
