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


def test_l_transformer_shares_the_common_skeleton():
    """LTransformer subclasses the common base and overrides only what differs."""
    from tokengeo.models.ltransformer import LTransformer
    from tokengeo.models.transformer import TokengeoModel

    assert issubclass(LTransformer, TokengeoModel)
    for name in ("forward", "forward_features", "forward_head", "forward_intermediates",
                 "num_parameters", "pool"):
        assert name not in vars(LTransformer), f"LTransformer re-implements {name}"


def test_registry_imports_no_model_family():
    """No models circle: the registry imports neither the zoo nor a family module."""
    import ast
    from pathlib import Path

    import tokengeo.models.registry as registry

    tree = ast.parse(Path(registry.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for a in node.names}
    assert not {m for m in imported if m and m.startswith("tokengeo.models")}, imported


def test_registry_alone_sees_every_variant_in_a_fresh_process():
    import subprocess
    import sys

    code = ("from tokengeo.models.registry import list_models; "
            "print(','.join(list_models()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out.split(",") == tokengeo.list_models()
    assert {"vit-tiny", "gpt-tiny", "encoder-tiny", "ltransformer-tiny"} <= set(out.split(","))


@pytest.mark.parametrize("name", ["encoder-tiny", "vit-tiny"])
def test_pooled_head_is_cls_or_masked_mean(name):
    """The shared forward_head: the cls token, else the mean over real tokens."""
    for pool in ("cls", "mean"):
        model = tokengeo.create_model(name, pool=pool, **({} if name == "vit-tiny" else SMALL))
        features = torch.randn(2, 6, model.config.d_model)
        mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6])
        pooled = features[:, 0] if pool == "cls" else torch.stack(
            [features[0, :3].mean(0), features[1].mean(0)])
        assert torch.allclose(model.forward_head(features, mask), model.head(pooled), atol=1e-6)
