"""The learned segmentation probe: exact pieces on hand-made cases, the probe on synthetic
patch tokens that carry the mask (high mIoU) and on noise (chance)."""

import pytest
import torch

from tokengeo.dino.seg_probe import constant_miou, fit_seg_probe, miou
from tokengeo.dino.segmentation import foreground_share
from tokengeo.errors import ConfigError


def _blob_images(n: int, gen: torch.Generator, size: int = 28) -> torch.Tensor:
    """(n, 1, size, size) uint8: a bright rectangle of random extent on black."""
    imgs = torch.zeros(n, 1, size, size, dtype=torch.uint8)
    for i in range(n):
        r0, c0 = torch.randint(0, size // 2, (2,), generator=gen).tolist()
        h, w = torch.randint(6, size // 2, (2,), generator=gen).tolist()
        imgs[i, 0, r0:r0 + h, c0:c0 + w] = 200
    return imgs


def test_foreground_share_matches_a_loop():
    gen = torch.Generator().manual_seed(0)
    imgs = _blob_images(3, gen)
    share = foreground_share(imgs, 4)  # (3, 49)
    for i in range(3):
        for p in range(49):
            r, c = divmod(p, 7)
            block = imgs[i, 0, 4 * r:4 * r + 4, 4 * c:4 * c + 4]
            assert share[i, p].item() == pytest.approx((block > 0).float().mean().item())


def test_miou_by_hand():
    pred = torch.tensor([True, True, False, False])
    truth = torch.tensor([True, False, False, False])
    m, fg, bg = miou(pred, truth)
    assert fg == pytest.approx(1 / 2) and bg == pytest.approx(2 / 3)
    assert m == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert miou(truth, truth)[0] == 1.0


def test_constant_miou_predicts_the_majority():
    train = torch.tensor([[0.0, 0.0, 0.9]])  # background majority
    test = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    # all background: IoU_bg = 3/4, IoU_fg = 0
    assert constant_miou(train, test) == pytest.approx(3 / 8)


def _tokens(share: torch.Tensor, signal: float, gen: torch.Generator, d: int = 8):
    """(N, P, d) tokens: noise, plus ``signal`` · share along one fixed direction."""
    u = torch.ones(d) / d**0.5
    noise = torch.randn(*share.shape, d, generator=gen)
    return noise + signal * share.float().unsqueeze(-1) * u


def test_probe_finds_the_mask_in_tokens_that_carry_it_and_not_in_noise():
    gen = torch.Generator().manual_seed(1)
    train_share = foreground_share(_blob_images(40, gen), 4)
    test_share = foreground_share(_blob_images(20, gen), 4)
    carried = fit_seg_probe(_tokens(train_share, 8.0, gen), train_share,
                            _tokens(test_share, 8.0, gen), test_share)
    noise = fit_seg_probe(_tokens(train_share, 0.0, gen), train_share,
                          _tokens(test_share, 0.0, gen), test_share)
    assert carried.miou > 0.8  # patches near a half share are ambiguous by nature
    assert abs(noise.miou - noise.chance_miou) < 0.08
    assert carried.miou > noise.miou + 0.3


def test_bad_shapes_are_refused():
    with pytest.raises(ConfigError, match="must be"):
        fit_seg_probe(torch.zeros(4, 49, 8), torch.zeros(4, 50), torch.zeros(2, 49, 8),
                      torch.zeros(2, 49))
    with pytest.raises(ConfigError, match="at least 3"):
        fit_seg_probe(torch.zeros(2, 49, 8), torch.zeros(2, 49), torch.zeros(2, 49, 8),
                      torch.zeros(2, 49))
    with pytest.raises(ConfigError, match="tile"):
        foreground_share(torch.zeros(1, 1, 30, 30), 4)
