"""TransformerLens' per-head results, MLP hidden layers and position embeddings on every
supported Hugging Face family (tiny offline models, laplacianized): each read against the
tensor computed by hand, each edit shown to flow on."""

from __future__ import annotations

import pytest
import torch

import tokengeo

pytest.importorskip("transformers", reason="needs the 'hf' extra")
from tests.helpers.tiny_hf import SPECS, build, inputs  # noqa: E402
from tokengeo.models.hf.families import FAMILIES  # noqa: E402
from tokengeo.probes.capture import hook_sites, run_with_cache  # noqa: E402
from tokengeo.probes.hooked import run_with_hooks, with_hooks  # noqa: E402

HEADS = {0: [3], 1: [0, 2]}


def model_of(family):
    return tokengeo.laplacianize(build(family), heads=HEADS)


def zero_head_1(x, hook):
    x = x.clone()
    x[:, :, 1] = 0
    return x


@pytest.mark.parametrize("family", list(SPECS))
def test_head_results_sum_to_the_attention_output(family):
    model = model_of(family)
    batch = inputs(model)
    with torch.no_grad():
        _, cache = run_with_cache(model, **batch, names=["blocks.0.attn.hook_[zr]*",
                                                         "blocks.0.hook_attn_out"])
        a = run_with_hooks(model, **batch, fwd_hooks=[("blocks.1.attn.hook_result",
                                                       zero_head_1)])
        b = run_with_hooks(model, **batch, fwd_hooks=[("blocks.1.attn.hook_z", zero_head_1)])
    out_proj = model.base_model.get_submodule(FAMILIES[family].blocks)[0].get_submodule(
        FAMILIES[family].out_proj)
    bias = out_proj.bias if out_proj.bias is not None else 0
    z, result = cache["z", 0], cache["result", 0]  # (B, T, H, Dh), (B, T, H, D)
    torch.testing.assert_close(result.sum(2) + bias, cache["attn_out", 0], atol=1e-5, rtol=1e-4)
    conv1d = any(c.__name__ == "Conv1D" for c in type(out_proj).__mro__)
    w = out_proj.weight.T if conv1d else out_proj.weight  # (D, H*Dh)
    Dh = z.shape[-1]
    torch.testing.assert_close(result[:, :, 1], z[:, :, 1] @ w[:, Dh:2 * Dh].T,
                               atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(main_output(a), main_output(b), atol=1e-5, rtol=1e-4)


def main_output(out) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


@pytest.mark.parametrize("family", [f for f in SPECS if FAMILIES[f].mlp_post is not None])
def test_mlp_hidden_layers(family):
    model = model_of(family)
    batch = inputs(model)
    fam = FAMILIES[family]
    block = model.base_model.get_submodule(fam.blocks)[1]
    down = block.get_submodule(fam.mlp_post)
    with torch.no_grad():
        _, cache = run_with_cache(model, **batch, names="blocks.1.mlp.*")
        with with_hooks(model, fwd_hooks=[("blocks.1.mlp.hook_post",
                                           lambda x, hook: torch.zeros_like(x))]):
            _, zeroed = run_with_cache(model, **batch, names="blocks.1.hook_mlp_out")
    post = cache["post", 1]
    assert post.shape[-1] == (down.weight.shape[0] if type(down).__name__ == "Conv1D"
                              else down.weight.shape[1])
    if fam.mlp_pre is not None:
        pre = cache["pre", 1]
        gated = fam.mlp_pre.endswith("gate_proj")
        assert pre.shape == post.shape
        if not gated:  # the activation alone maps pre to post: same sign pattern where large
            big = pre.abs() > 1.0
            assert torch.equal((post[big] > 0), (pre[big] > 0))
    # the MLP output with the hidden layer zeroed: the down projection's bias alone
    out = zeroed["mlp_out", 1]
    bias = getattr(down, "bias", None)
    expected = torch.zeros_like(out) if bias is None else bias.expand_as(out)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_mlp_post_is_the_activation_of_pre(family):
    model = model_of(family)
    batch = inputs(model)
    fam = FAMILIES[family]
    mlp_block = model.base_model.get_submodule(fam.blocks)[0]
    with torch.no_grad():
        _, cache = run_with_cache(model, **batch, names=["blocks.0.mlp.*",
                                                         "blocks.0.hook_resid_mid"])
    pre, post = cache["pre", 0], cache["post", 0]
    if family == "llama":
        mlp = mlp_block.mlp
        x = mlp_block.post_attention_layernorm(cache["resid_mid", 0])
        torch.testing.assert_close(post, mlp.act_fn(pre) * mlp.up_proj(x))
    elif family == "gpt2":
        torch.testing.assert_close(post, mlp_block.mlp.act(pre))
    else:
        torch.testing.assert_close(post, mlp_block.intermediate.intermediate_act_fn(pre))


@pytest.mark.parametrize("family", [f for f in SPECS if FAMILIES[f].pos_embed is not None])
def test_position_embeddings(family):
    model = model_of(family)
    batch = inputs(model)
    T = batch["input_ids"].shape[1]
    emb = model.base_model.get_submodule(FAMILIES[family].pos_embed)
    with torch.no_grad():
        _, cache = run_with_cache(model, **batch, names="hook_pos_embed")
        plain = run_with_hooks(model, **batch)
        edited = run_with_hooks(model, **batch, fwd_hooks=[("hook_pos_embed",
                                                            lambda x, hook: x * 0)])
    pos = cache["hook_pos_embed"]
    assert pos.shape[-2:] == (T, emb.weight.shape[1])
    rows = {tuple(r.tolist()) for r in emb.weight}
    assert all(tuple(r.tolist()) in rows for r in pos.reshape(-1, pos.shape[-1]))
    assert not torch.allclose(main_output(plain), main_output(edited), atol=1e-4)


def test_site_tables_name_the_new_sites():
    names = set(hook_sites(build("gpt2")))
    assert {"hook_pos_embed", "blocks.0.attn.hook_result", "blocks.0.mlp.hook_pre",
            "blocks.0.mlp.hook_post"} <= names
    assert "blocks.0.mlp.hook_pre" not in hook_sites(build("phi3"))
