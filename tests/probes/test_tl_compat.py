"""What a TransformerLens user types works on tokengeo and Hugging Face models:
``names_filter`` (a name, a list, a predicate), no keyword swallowed by an HF ``forward``,
``ungroup_kv``, negative layers, ``hook.name`` / ``hook.layer()``, ``dir(tokengeo)``, lazy
``tokengeo.view``, and an sdpa model cached without its patterns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.probes.capture import run_with_cache
from tokengeo.probes.hooked import run_with_hooks


def tiny_gpt():
    torch.manual_seed(0)
    return tokengeo.create_model("gpt-tiny", vocab_size=31, n_layers=2, n_laplacian=1).eval()


def tiny_llama(impl: str = "eager"):
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.LlamaConfig(vocab_size=31, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, attn_implementation=impl)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


IDS = torch.randint(0, 31, (1, 6), generator=torch.Generator().manual_seed(1))
MODELS = ["gpt", "llama"]


def build(which):
    return tiny_gpt() if which == "gpt" else tiny_llama()


@pytest.mark.parametrize("which", MODELS)
def test_names_filter_takes_a_name_a_list_or_a_predicate(which):
    model = build(which)
    name = "blocks.1.hook_resid_post"
    for spelling in ("names", "names_filter"):
        _, one = run_with_cache(model, IDS, **{spelling: name})  # a string: one name
        assert list(one) == [name]
        _, several = run_with_cache(model, IDS, **{spelling: [name, "blocks.0.attn.hook_z"]})
        assert set(several) == {name, "blocks.0.attn.hook_z"}
        _, chosen = run_with_cache(model, IDS, **{spelling: lambda n: n.endswith("hook_z")})
        assert sorted(chosen) == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    torch.testing.assert_close(one[name], several[name])
    with pytest.raises(ConfigError, match="not both"):
        run_with_cache(model, IDS, names=name, names_filter=name)


@pytest.mark.parametrize("which", MODELS)
def test_unknown_keywords_are_refused_not_swallowed(which):
    model = build(which)
    with pytest.raises(ConfigError, match="unknown keyword.*names_fliter"):
        run_with_cache(model, IDS, names_fliter="blocks.0.hook_resid_post")
    with pytest.raises(ConfigError, match="unknown keyword.*clear_contexts"):
        run_with_hooks(model, IDS, fwd_hooks=[], clear_contexts=True)


def test_hf_forward_keywords_still_pass():
    model = tiny_llama()
    mask = torch.ones_like(IDS)
    out, cache = run_with_cache(model, input_ids=IDS, attention_mask=mask, use_cache=False,
                                names="hook_embed")
    assert out.logits.shape == (1, 6, 31) and list(cache) == ["hook_embed"]


def test_ungroup_kv_is_honoured_by_run_with_cache():
    model = tiny_llama()  # H = 4 query heads, 2 KV heads
    _, grouped = run_with_cache(model, IDS, names="blocks.0.attn.hook_k")
    _, ungrouped = run_with_cache(model, IDS, names="blocks.0.attn.hook_k", ungroup_kv=True)
    k, k4 = grouped["k", 0], ungrouped["k", 0]
    assert k.shape[2] == 2 and k4.shape[2] == 4
    torch.testing.assert_close(k4, k.repeat_interleave(2, dim=2))


@pytest.mark.parametrize("which", MODELS)
def test_negative_layers_count_from_the_last_block(which):
    model = build(which)
    _, cache = run_with_cache(model, IDS, names="blocks.*.hook_resid_post")
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["resid_post", -2] is cache["blocks.0.hook_resid_post"]
    _, partial = run_with_cache(model, IDS, names="blocks.0.hook_resid_post")
    with pytest.raises(KeyError, match="blocks.1.hook_resid_post"):
        partial["resid_post", -1]  # the model's last block, not the last one cached
    with pytest.raises(KeyError, match="layer -3"):
        cache["resid_post", -3]


@pytest.mark.parametrize("which", MODELS)
def test_the_hook_object_is_the_one_transformer_lens_code_reads(which):
    model, seen = build(which), []
    run_with_hooks(model, IDS, fwd_hooks=[
        ("blocks.1.attn.hook_z", lambda z, hook: seen.append((hook.name, hook.layer()))),
        ("hook_embed", lambda z, hook: seen.append((hook.name, hook.layer())))])
    assert sorted(seen, key=str) == [("blocks.1.attn.hook_z", 1), ("hook_embed", None)]
    if which == "gpt":
        assert model.blocks[1].attn.hook_z.layer() == 1 and model.hook_embed.layer() is None


def test_a_default_sdpa_model_is_cached_without_its_patterns():
    model = tiny_llama("sdpa")
    _, cache = run_with_cache(model, IDS)
    assert "blocks.0.attn.hook_z" in cache and not any("pattern" in n for n in cache)
    with pytest.raises(ConfigError, match="eager"):
        run_with_cache(model, IDS, names="blocks.0.attn.hook_pattern")
    with pytest.raises(ConfigError, match="eager"):
        run_with_cache(model, IDS, names="blocks.*.attn.hook_pattern")


def test_show_treats_an_sdpa_model_as_the_cli_does():
    from tokengeo.view import show

    model = tiny_llama("sdpa")
    view = show(model, IDS)
    eager = show(tiny_llama("eager"), IDS)
    torch.testing.assert_close(view.maps.P, eager.maps.P)
    assert model.config._attn_implementation == "sdpa"  # given back as it was


def test_tab_completion_and_lazy_view():
    listed = dir(tokengeo)
    for name in ("run_with_cache", "run_with_hooks", "with_hooks", "laplacianize", "view",
                 "create_model", "HookPoint"):
        assert name in listed
    code = ("import sys, tokengeo; assert 'torch' not in sys.modules; "
            "assert callable(tokengeo.view.show); assert 'view' in dir(tokengeo); "
            "assert callable(tokengeo.with_hooks)")
    src = str(Path(tokengeo.__file__).parents[1])  # this checkout's tokengeo
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert done.returncode == 0, done.stderr
