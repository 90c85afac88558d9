"""Edits through tokengeo's hook sites reach every head kind of a laplacianized Hugging Face
model: the Laplacian and mixed heads read ``V`` as ``hook_v`` left it (``z = a V + b P V`` with
the edited ``V`` on both sides), on a tiny model of every supported family."""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tokengeo.probes.hooked import run_with_hooks

pytest.importorskip("transformers", reason="needs the 'hf' extra")
from tests.helpers.tiny_hf import SPECS, build, inputs  # noqa: E402
from tokengeo.probes.capture import capture  # noqa: E402

HEADS = {0: [3], 1: [0, 2]}


def _z_under(model, batch, edit):
    """hook_z of each layer while ``edit`` replaces hook_v of that layer only."""
    out = []
    for l in range(2):
        with capture(model, [f"blocks.{l}.attn.hook_z"]) as cache:
            run_with_hooks(model, **batch, fwd_hooks=[(f"blocks.{l}.attn.hook_v", edit)])
        out.append(cache[f"blocks.{l}.attn.hook_z"])  # (B, T, H, Dh)
    return out


MIXED = ["bert", "gpt2", "llama", "phi3", "gpt_neox"]  # one of each layout of V
CASES = [(f, "laplacian") for f in SPECS] + [(f, "mixed") for f in MIXED]


@pytest.mark.parametrize("family, kind", CASES)
def test_a_value_edit_reaches_every_head_kind(family, kind):
    model = tokengeo.laplacianize(build(family), heads=HEADS, kind=kind)
    if kind == "mixed":  # coefficients away from (1, -1), so that both a and b matter
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("tokengeo_mix_coef"):
                    p.copy_(torch.tensor([[0.7, -0.4]]).expand_as(p))
    batch = inputs(model)
    with torch.no_grad():
        zeroed = _z_under(model, batch, lambda v, hook: torch.zeros_like(v))
        plain = _z_under(model, batch, lambda v, hook: None)
        doubled = _z_under(model, batch, lambda v, hook: 2 * v)
        in_place = _z_under(model, batch, lambda v, hook: [v.mul_(2), None][1])  # returns None
    for l in range(2):
        assert zeroed[l].abs().max() == 0, f"layer {l}: z = {zeroed[l].abs().max():.3g}"
        torch.testing.assert_close(doubled[l], 2 * plain[l], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(in_place[l], 2 * plain[l], atol=1e-5, rtol=1e-5)
