"""TransformerLens' ``attn.hook_attn_scores`` and the norms' ``hook_scale`` /
``hook_normalized`` on every supported Hugging Face family (tiny offline models,
laplacianized): the scores are the tensor eager attention takes the softmax of (P is their
softmax, bit for bit), the norm parts rebuild the norm, reading changes nothing, an edit
flows on, and what cannot be shown exactly is refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tokengeo

pytest.importorskip("transformers", reason="needs the 'hf' extra")
from tests.helpers.tiny_hf import SPECS, build, inputs  # noqa: E402
from tokengeo.errors import ConfigError  # noqa: E402
from tokengeo.models.hf.families import FAMILIES, norm_paths  # noqa: E402
from tokengeo.probes.capture import hook_sites, run_with_cache  # noqa: E402
from tokengeo.probes.hf_norms import norm_sites  # noqa: E402
from tokengeo.probes.hf_scores import ScoresSite  # noqa: E402
from tokengeo.probes.hooked import run_with_hooks  # noqa: E402

HEADS = {0: [3], 1: [0, 2]}
SCORES, PATTERN = "blocks.1.attn.hook_attn_scores", "blocks.1.attn.hook_pattern"


def model_of(family, attn="eager"):
    return tokengeo.laplacianize(build(family, attn), heads=HEADS)


def main_output(out) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out.last_hidden_state


@pytest.mark.parametrize("family", list(SPECS))
def test_the_pattern_is_the_softmax_of_the_scores(family):
    model = model_of(family)
    batch = inputs(model)
    with torch.no_grad():
        _, cache = run_with_cache(model, **batch, names=[SCORES, PATTERN])
    scores, pattern = cache[SCORES], cache[PATTERN]
    assert scores.shape == pattern.shape and scores.shape[1] == 4  # (B, H, T, T)
    assert torch.equal(torch.softmax(scores.float(), -1).to(pattern.dtype), pattern)


def _sharpen(x, hook):
    return x * 8.0


def _sharpen_in_place(x, hook):
    x.mul_(8.0)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert", "gemma2", "mpnet"])
def test_an_edit_of_the_scores_is_the_pattern_the_model_applies(family):
    model = model_of(family)
    batch = inputs(model)
    with torch.no_grad():
        plain, cache = run_with_cache(model, **batch, names=[SCORES])
        outs, seen = [], {}
        for edit in (_sharpen, _sharpen_in_place):
            outs.append(run_with_hooks(model, **batch, fwd_hooks=[
                (SCORES, edit), (PATTERN, lambda p, hook: seen.update(p=p.clone()))]))
            want = torch.softmax(cache[SCORES].float() * 8.0, -1).to(seen["p"].dtype)
            assert torch.equal(seen["p"], want)
    assert torch.equal(main_output(outs[0]), main_output(outs[1]))
    assert not torch.allclose(main_output(outs[0]), main_output(plain), atol=1e-4)


def test_the_scores_need_eager_attention():
    model = model_of("llama", "sdpa")
    batch = inputs(model)
    with pytest.raises(ConfigError, match="eager"):
        run_with_cache(model, **batch, names=[SCORES])
    _, cache = run_with_cache(model, **batch, names="blocks.1.attn.*")
    assert SCORES not in cache and "blocks.1.attn.hook_z" in cache


class _TwoSoftmaxes(nn.Module):
    def forward(self, x):  # (B, H, T, T)
        return x.softmax(-1).softmax(-1)


def test_an_attention_with_a_second_softmax_is_refused():
    module = _TwoSoftmaxes()
    model = nn.Module()
    model.config = type("Config", (), {"_attn_implementation": "eager"})()
    handle = ScoresSite(module, model, n_heads=2, where="under test").attach(lambda s: None)
    with pytest.raises(ConfigError, match="call 2"):
        module(torch.randn(1, 2, 3, 3))
    handle.remove()
    assert torch.equal(module(torch.ones(1, 2, 3, 3)), torch.full((1, 2, 3, 3), 1 / 3))


def _norms(model, family, layer=1):
    block = model.base_model.get_submodule(FAMILIES[family].blocks)[layer]
    return {name: block.get_submodule(path) for name, path
            in zip(("ln1", "ln2"), norm_paths(FAMILIES[family]), strict=True)
            if f"blocks.{layer}.{name}.hook_scale" in hook_sites(model)}


def test_olmo2_has_no_norm_before_attention_or_mlp():
    names = hook_sites(model_of("olmo2"))  # it normalises their outputs instead
    assert "ln_final.hook_scale" in names and not any(".ln1." in n or ".ln2." in n
                                                        for n in names)


@pytest.mark.parametrize("family", [f for f in SPECS if f != "olmo2"])
def test_the_norm_parts_rebuild_the_norm_and_reading_them_changes_nothing(family):
    model = model_of(family)
    batch = inputs(model)
    norms = _norms(model, family)
    seen = {}
    handles = [m.register_forward_hook(lambda m, a, o, n=n: seen.update({n: (a[0], o)}))
               for n, m in norms.items()]
    with torch.no_grad():
        plain = run_with_hooks(model, **batch)
        out, cache = run_with_cache(model, **batch, names="blocks.1.ln*")
    for h in handles:
        h.remove()
    assert torch.equal(main_output(out), main_output(plain))  # read only: untouched
    assert norms
    for name, module in norms.items():
        x, y = seen[name]
        scale, normalized = cache[f"blocks.1.{name}.hook_scale"], cache[f"blocks.1.{name}.hook_normalized"]
        assert scale.shape == (*x.shape[:-1], 1) and normalized.shape == x.shape
        centred = x - x.mean(-1, keepdim=True) if "RMS" not in type(module).__name__ else x
        torch.testing.assert_close(normalized * scale, centred, atol=1e-5, rtol=1e-5)
        weight = getattr(module, "weight", None)
        w = 1.0 if weight is None else weight + (1.0 if type(module).__name__.startswith(
            "Gemma") else 0.0)
        bias = getattr(module, "bias", None)
        torch.testing.assert_close(normalized * w + (0 if bias is None else bias), y,
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert", "gemma", "opt"])
def test_a_norm_edit_flows_on(family):
    """Doubling s is halving x̂: the norm's output is (x̂ / 2)·w (+ b) either way."""
    model = model_of(family)
    batch = inputs(model)
    module = _norms(model, family)["ln1"]
    seen = []
    module.register_forward_hook(lambda m, a, o: seen.append(o))
    with torch.no_grad():
        plain = run_with_hooks(model, **batch)
        doubled = run_with_hooks(model, **batch, fwd_hooks=[
            ("blocks.1.ln1.hook_scale", lambda s, hook: s * 2)])
        halved = run_with_hooks(model, **batch, fwd_hooks=[
            ("blocks.1.ln1.hook_normalized", lambda x, hook: x * 0.5)])
    y_plain, y_doubled, y_halved = seen
    bias = getattr(module, "bias", None)
    bias = 0 if bias is None else bias
    torch.testing.assert_close(y_doubled, (y_plain - bias) / 2 + bias, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(y_doubled, y_halved, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(main_output(doubled), main_output(halved), atol=1e-5,
                               rtol=1e-5)
    assert not torch.allclose(main_output(doubled), main_output(plain), atol=1e-4)


class _NotALayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x):  # a LayerNorm by name, not by formula
        return x * self.weight


_NotALayerNorm.__name__ = "OddLayerNorm"


def test_a_norm_whose_formula_is_not_a_norm_is_refused():
    module = _NotALayerNorm()
    sites = norm_sites(module, "ln1.", "the norm under test")
    handle = sites["ln1.hook_scale"].attach(lambda s: None)
    with pytest.raises(ConfigError, match="does not rebuild its output"):
        module(torch.randn(2, 3, 4))
    handle.remove()
    assert not module._forward_hooks
