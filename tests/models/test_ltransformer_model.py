"""L-Transformer classifier: registered variants, hook points, padding, clear errors."""

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.nn.lattention import heads_to_tokens, tokens_to_heads
from tokengeo.nn.lblock import slice_block
from tokengeo.nn.lproduct import tokens_to_slices
from tokengeo.probes.capture import capture, hook_sites

VARIANTS = tokengeo.list_models("ltransformer")


def inputs(vocab: int, B: int = 2, T: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, vocab, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, T // 2:] = 0
    return ids, mask


def assert_every_parameter_gets_a_gradient(model, out):
    out.float().pow(2).mean().backward()
    missing = [n for n, p in model.named_parameters()
               if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"parameters without gradient: {missing}"


def test_variants_are_registered():
    assert VARIANTS == ["ltransformer-small", "ltransformer-tiny"]
    cfg = tokengeo.create_model("ltransformer-tiny").config
    assert (cfg.d_model, cfg.p, cfg.d_slice, cfg.n_heads, cfg.n_layers) == (128, 4, 32, 2, 2)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("n_laplacian", [0, 1])
def test_variant_forward_shape_finite_and_gradients(name, n_laplacian):
    model = tokengeo.create_model(name, vocab_size=97, num_classes=3, n_laplacian=n_laplacian)
    ids, mask = inputs(97)
    out = model(ids, mask)
    assert out.shape == (2, 3)
    assert torch.isfinite(out).all()
    assert_every_parameter_gets_a_gradient(model, out)


@pytest.mark.parametrize("options", [
    dict(transform="learnable", alpha="learnable"),
    dict(transform="learnable-cayley", alpha="harmonic", pool="cls"),
    dict(transform="hadamard", alpha="linear", head_kind="mixed", n_laplacian=2),
])
def test_learnable_and_optional_parts_get_gradients(options):
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=97, **options)
    ids, mask = inputs(97)
    assert_every_parameter_gets_a_gradient(model, model(ids, mask))


def test_issue_example_and_laplacian_heads_within_each_slice():
    model = tokengeo.create_model("ltransformer-tiny", p=4, transform="dct", alpha="linear",
                                  n_laplacian=1)
    assert model.family == "ltransformer"
    for block in model.blocks:
        assert block.attn.head_kinds == ("attention", "laplacian")
    base = tokengeo.create_model("ltransformer-tiny", alpha="linear")
    base.load_state_dict(model.state_dict())
    ids, mask = inputs(8192)
    assert not torch.allclose(model(ids, mask), base(ids, mask))


def test_padding_does_not_leak_into_real_tokens():
    model = tokengeo.create_model("ltransformer-tiny", n_laplacian=1).eval()
    ids = torch.randint(1, 100, (1, 10))
    mask = torch.tensor([[1] * 6 + [0] * 4])
    other = ids.clone()
    other[0, 6:] = torch.randint(1, 100, (4,))
    assert torch.allclose(model(ids, mask), model(other, mask), atol=1e-6)


def test_hook_names_shapes_and_slice_major_head_layout():
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=50, n_laplacian=1).eval()
    names = set(hook_sites(model))
    for needed in ("hook_embed", "blocks.0.hook_resid_pre", "blocks.1.attn.hook_z",
                   "blocks.1.attn.hook_pattern", "blocks.0.hook_resid_post", "hook_final"):
        assert needed in names
    ids, mask = inputs(50, T=9)
    plain = model(ids, mask)
    with capture(model, ["blocks.0.*", "blocks.0.attn.*", "hook_final"]) as cache:
        hooked = model(ids, mask)
    assert torch.allclose(plain, hooked, atol=1e-6)  # reference path (pattern hooked) == fused
    p, H, Dh, d = 4, 2, 16, 128
    assert cache["blocks.0.attn.hook_z"].shape == (2, 9, p * H, Dh)
    assert cache["blocks.0.attn.hook_pattern"].shape == (2, p * H, 9, 9)
    assert torch.allclose(cache["blocks.0.attn.hook_pattern"].sum(-1), torch.ones(2, p * H, 9))
    assert cache["blocks.0.hook_resid_post"].shape == (2, 9, d)
    assert cache["hook_final"].shape == (2, 9, d)
    # head k·H + h of hook_z is head h of slice k's standard block
    x_hat = tokens_to_slices(cache["blocks.0.hook_resid_pre"], p)
    for k in range(p):
        ref = slice_block(model.blocks[0], k)
        with capture(ref, ["attn.hook_z"]) as ref_cache:
            ref(x_hat[k], mask)
        assert torch.allclose(cache["blocks.0.attn.hook_z"][:, :, k * H:(k + 1) * H],
                              ref_cache["attn.hook_z"], atol=1e-6)


def test_hooks_can_replace_activations():
    model = tokengeo.create_model("ltransformer-tiny", vocab_size=50).eval()
    ids, mask = inputs(50)
    plain = model(ids, mask)
    z_hook = model.blocks[0].attn.hook_z
    handle = z_hook.add_hook(lambda z, hp: z.clone())  # a replacement equal to the original
    try:
        assert torch.allclose(model(ids, mask), plain, atol=1e-6)
    finally:
        handle.remove()
    handle = z_hook.add_hook(lambda z, hp: torch.zeros_like(z))
    try:
        assert not torch.allclose(model(ids, mask), plain, atol=1e-4)
    finally:
        handle.remove()


def test_head_layout_round_trip():
    z = torch.randn(3 * 2, 5, 4, 7)  # (p·B, T, H, Dh), p = 3
    tokens = heads_to_tokens(z, 3)
    assert tokens.shape == (2, 5, 12, 7)
    assert torch.equal(tokens[1, :, 4:8], z[1 * 2 + 1])  # slice 1, batch 1
    assert torch.equal(tokens_to_heads(tokens, 3), z)


def test_a_saved_config_with_an_unknown_field_is_refused_naming_it():
    """A saved config is rebuilt as written: a key that is no option of the family is a
    ConfigError naming it and the valid options, never silently dropped."""
    import dataclasses

    from tokengeo.models.registry import model_from_config

    model = tokengeo.create_model("ltransformer-tiny", vocab_size=50)
    saved = {**dataclasses.asdict(model.config), "slice_mode": "sequential"}
    with pytest.raises(ConfigError, match=r"unknown ltransformer-tiny option\(s\) "
                                          r"\['slice_mode'\]; valid options are \[.*'p'"):
        model_from_config("ltransformer-tiny", saved)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(d_model=130), "d_model=130 is not divisible by p=4"),
        (dict(p=0), "p=0 must be an integer >= 1"),
        (dict(p=-2), "p=-2 must be an integer >= 1"),
        (dict(n_heads=3), "n_heads=3 .* does not divide the slice width d_model / p = 32"),
        (dict(transform="fft"), "transform='fft' is not valid; choose one of"),
        (dict(alpha="cubic"), "alpha='cubic' is not valid; choose one of"),
        (dict(transform="hadamard", p=3, d_model=96), "power of 2"),
        (dict(transform="haar", p=6, d_model=96), "power of 2"),
        (dict(n_laplacian=3), "exceeds n_heads=2"),
        (dict(q=4), "unknown ltransformer-tiny option"),
    ],
)
def test_clear_config_errors(overrides, match):
    with pytest.raises(ConfigError, match=match):
        tokengeo.create_model("ltransformer-tiny", **overrides)


def test_too_long_sequence_is_a_clear_error():
    model = tokengeo.create_model("ltransformer-tiny", max_len=8)
    with pytest.raises(ConfigError, match="max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_config_round_trips_through_json():
    import dataclasses
    import json

    from tokengeo.models.registry import model_from_config

    model = tokengeo.create_model("ltransformer-tiny", laplacian_heads={1: [1]}, alpha="harmonic",
                                  transform="haar", vocab_size=50)
    saved = json.loads(json.dumps(dataclasses.asdict(model.config)))
    again = model_from_config("ltransformer-tiny", saved)
    assert again.config == model.config
    again.load_state_dict(model.state_dict())
    ids, mask = inputs(50)
    assert torch.allclose(again(ids, mask), model(ids, mask))
