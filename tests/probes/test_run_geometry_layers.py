"""Per-layer token geometry of a training cell: one dict per block, each equal to the same
numbers computed from the model's own ``forward_intermediates`` (the residual stream after
every block), so the hooks read the layer they name."""

import pytest
import torch

from tokengeo.probes.geometry import next_token_separability, variance_decomposition
from tokengeo.probes.spectrum import per_item_components


def _image_model(n_layers: int):
    from tokengeo.data import load_dataset
    from tokengeo.models.registry import create_model
    from tokengeo.train.tasks import ImageClassification

    torch.manual_seed(0)
    data = load_dataset("digits")
    model = create_model("vit-tiny", d_model=16, n_layers=n_layers, patch_size=2,
                         **ImageClassification.model_sizes(data))
    return model, ImageClassification(data, model.config)


def test_classification_geometry_has_one_entry_per_block_matching_the_intermediates():
    from tokengeo.probes.run_geometry import classification_geometry

    model, task = _image_model(3)
    geo = classification_geometry(model, task, "test", 48)
    assert len(geo["layers"]) == 3
    b = task.batch("test", task.eval_indices("test", 48))
    with torch.no_grad():
        inter = model.forward_intermediates(b.inputs, b.attention_mask)  # 3 × (N, T, d)
    for layer, h in enumerate(inter):
        var = variance_decomposition(h.float(), b.targets)
        assert geo["layers"][layer]["within_sequence_share"] == pytest.approx(
            var.within_sequence / var.total, rel=1e-5)
        assert geo["layers"][layer]["components_99_per_image"] == pytest.approx(
            per_item_components(h.float(), 0.99))
    # the final entry reads the tokens after the final norm: not the last block's output
    assert set(geo["layers"][-1]) == set(geo) - {"layers"}


def test_language_geometry_has_one_entry_per_block_matching_the_intermediates():
    from tokengeo.data import load_dataset
    from tokengeo.models.registry import create_model
    from tokengeo.probes.run_geometry import language_geometry
    from tokengeo.train.tasks import LanguageModeling

    torch.manual_seed(0)
    data = load_dataset("shakespeare-char")
    model = create_model("gpt-tiny", d_model=32, n_layers=2, block_size=32,
                         **LanguageModeling.model_sizes(data))
    task = LanguageModeling(data, model.config)
    geo = language_geometry(model, task, "val", 8)
    assert len(geo["layers"]) == 2
    b = task.batch("val", task.eval_indices("val", 8))
    with torch.no_grad():
        inter = model.forward_intermediates(b.inputs, b.attention_mask)
    for layer, h in enumerate(inter):
        sep = next_token_separability(h.float(), b.inputs)
        assert geo["layers"][layer]["cdnv_mean"] == pytest.approx(sep.cdnv_mean, rel=1e-5)
