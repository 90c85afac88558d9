"""The explorer on every family ``laplacianize`` supports: ``tokengeo.view.show`` on a tiny
random-init model of each (offline configs, :mod:`tests.helpers.tiny_hf`), laplacianized,
shows the heads ``laplacianize`` chose as Laplacian, softmax rows that sum to 1 and the
head-output similarity of ``hook_z``."""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError

pytest.importorskip("transformers", reason="needs the 'hf' extra")
from tests.helpers.tiny_hf import SPECS, TEXT_FAMILIES, build  # noqa: E402
from tokengeo.probes.capture import capture  # noqa: E402
from tokengeo.probes.similarity.pairs import context_similarity  # noqa: E402
from tokengeo.view import show  # noqa: E402

HEADS = {0: [3], 1: [0, 2]}  # 4 heads per layer in every tiny model


def test_every_supported_family_has_a_tiny_model():
    from tokengeo.models.hf.families import FAMILIES

    assert set(SPECS) == set(FAMILIES)


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_show_on_every_text_family(family):
    model = tokengeo.laplacianize(build(family), heads=HEADS)
    ids = torch.arange(3, 12)[None]  # (1, 9)
    view = show(model, ids)
    maps = view.maps
    assert maps.kinds == [["attention"] * 3 + ["laplacian"],
                          ["laplacian", "attention", "laplacian", "attention"]]
    L, H, T = maps.shape
    assert (L, H, T) == (2, 4, 9)
    torch.testing.assert_close(maps.P.sum(-1), torch.ones(L, H, T))
    with torch.no_grad(), capture(model, ["blocks.*.attn.hook_z"]) as cache:
        model(input_ids=ids)
        z = torch.stack([cache[f"blocks.{l}.attn.hook_z"] for l in range(L)])  # (L,1,T,H,Dh)
    torch.testing.assert_close(maps.S, context_similarity(z.float())[:, :, 0])
    assert "<iframe" in view._repr_html_()


def test_show_refuses_an_image_model_in_one_line():
    with pytest.raises(ConfigError, match="text"):
        show(tokengeo.laplacianize(build("vit"), heads=HEADS), torch.arange(3, 12))
