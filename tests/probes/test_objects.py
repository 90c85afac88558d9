"""Object vs background tokens (tokengeo.probes.objects): the patch mask on hand-made images,
the correlation ratio η² against a loop, its bounds, and images without both kinds left out."""

import pytest
import torch

from tokengeo.probes.objects import object_separation, object_shares, patch_foreground

F64 = torch.float64


def test_patch_mask_on_a_hand_made_image():
    """8x8 images, 4x4 patches (2x2 grid, row-major): a pixel at (1, 5) lights patch 1, one
    at (6, 2) in the second channel patch 2; a pixel equal to the threshold does not."""
    images = torch.zeros(2, 2, 8, 8, dtype=torch.uint8)
    images[0, 0, 1, 5] = 3
    images[1, 1, 6, 2] = 200
    images[1, 0, 0, 0] = 10
    assert patch_foreground(images, 4).tolist() == [[False, True, False, False],
                                                    [True, False, True, False]]
    assert patch_foreground(images, 4, threshold=10).tolist() == [
        [False, False, False, False], [False, False, True, False]]


def _loop_share(x, fg) -> float:
    f = [t for t, m in zip(x, fg, strict=True) if m]
    b = [t for t, m in zip(x, fg, strict=True) if not m]
    mean = sum(x) / len(x)
    mu_f, mu_b = sum(f) / len(f), sum(b) / len(b)
    between = len(f) * float((mu_f - mean).pow(2).sum()) + len(b) * float(
        (mu_b - mean).pow(2).sum())
    return between / sum(float((t - mean).pow(2).sum()) for t in x)


def test_shares_match_a_loop_and_skip_images_without_both_kinds():
    torch.manual_seed(0)
    x = torch.randn(4, 9, 5, dtype=F64)
    fg = torch.rand(4, 9) > 0.5
    fg[0, 0], fg[0, 1] = True, False
    fg[2] = True  # all foreground: left out
    fg[1, 0], fg[1, 1] = True, False
    fg[3, 0], fg[3, 1] = True, False
    got = object_shares(x, fg)
    assert got.tolist() == pytest.approx([_loop_share(x[n], fg[n]) for n in (0, 1, 3)])
    assert bool(((got >= 0) & (got <= 1)).all())


def test_two_tight_clusters_give_one_and_a_cls_token_is_left_out():
    """Foreground tokens at one point, background at another: η² = 1; the cls token in
    front (prefix 1) is far from both and must not count."""
    fg = torch.tensor([[True, False, False, True]])
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([-3.0, 0.5])
    patches = torch.stack([a if m else b for m in fg[0]])[None]  # (1, 4, 2)
    tokens = torch.cat([torch.full((1, 1, 2), 100.0), patches], 1)
    out = object_separation(tokens, fg, prefix=1)
    assert out["object_share"] == pytest.approx(1.0)
    assert out["object_images"] == 1
    assert out["foreground_fraction"] == pytest.approx(0.5)


def test_patch_count_mismatch_is_refused():
    with pytest.raises(ValueError, match="patch tokens"):
        object_separation(torch.zeros(1, 5, 2), torch.zeros(1, 5, dtype=torch.bool), prefix=1)


def test_classification_geometry_records_objects_per_block():
    """A ViT on digits: every block's entry and the final one carry the measure, equal to
    object_separation of the model's own intermediates and the raw images' mask."""
    from tokengeo.data import load_dataset
    from tokengeo.models.registry import create_model
    from tokengeo.probes.run_geometry import classification_geometry
    from tokengeo.train.tasks import ImageClassification

    torch.manual_seed(0)
    data = load_dataset("digits")
    model = create_model("vit-tiny", d_model=16, n_layers=2, patch_size=2,
                         **ImageClassification.model_sizes(data))
    task = ImageClassification(data, model.config)
    geo = classification_geometry(model, task, "test", 40)
    idx = task.eval_indices("test", 40)
    images, _ = data.split("test")[idx]
    fg = patch_foreground(images, 2)
    b = task.batch("test", idx)
    with torch.no_grad():
        inter = model.forward_intermediates(b.inputs, b.attention_mask)
    for layer, h in enumerate(inter):
        want = object_separation(h.float(), fg, prefix=model.num_prefix)
        assert geo["layers"][layer]["object_share"] == pytest.approx(want["object_share"],
                                                                     rel=1e-5)
        assert geo["layers"][layer]["object_images"] == want["object_images"] > 0
    assert 0 < geo["object_share"] < 1
    assert 0 < geo["foreground_fraction"] < 1
