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


def test_ridge_matches_least_squares_on_the_augmented_system():
    """argmin ||y − Xw||² + λ||w_{1:}||² is the least-squares solution of [X; √λ·[0 | I]] w =
    [y; 0]: the intercept (column 0) is not penalised."""
    from tokengeo.dino.seg_probe import _ridge

    gen = torch.Generator().manual_seed(2)
    X = torch.cat([torch.ones(50, 1), torch.randn(50, 4, generator=gen)], 1).double()
    y = torch.randn(50, generator=gen).double() + 3.0
    for lam in (0.0, 0.5, 40.0):
        penalty = torch.cat([torch.zeros(4, 1), torch.eye(4)], 1).double() * lam ** 0.5
        ref = torch.linalg.lstsq(torch.cat([X, penalty]), torch.cat([y, torch.zeros(4)]).double()
                                 [:, None]).solution.squeeze(1)
        assert torch.allclose(_ridge(X, y, lam), ref, atol=1e-9)
    # a huge penalty leaves only the intercept: the mean of y
    w = _ridge(X, y, 1e12)
    assert w[0].item() == pytest.approx(y.mean().item(), abs=1e-6)
    assert w[1:].abs().max().item() < 1e-8


def test_probe_is_unchanged_by_a_rescaled_token_axis():
    """Tokens are standardised per dimension before the fit, so scaling one axis of every token
    (train and test alike) leaves the predictions, hence the mIoU, unchanged."""
    gen = torch.Generator().manual_seed(3)
    train_share = foreground_share(_blob_images(30, gen), 4)
    test_share = foreground_share(_blob_images(10, gen), 4)
    train, test = _tokens(train_share, 3.0, gen), _tokens(test_share, 3.0, gen)
    scale = torch.ones(train.shape[-1])
    scale[2] = 1e3
    a = fit_seg_probe(train, train_share, test, test_share)
    b = fit_seg_probe(train * scale, train_share, test * scale, test_share)
    assert a.miou == pytest.approx(b.miou, abs=1e-9) and a.penalty == b.penalty
