"""Frozen-backbone evaluation: k-NN and linear-probe accuracy, patch-token spectra, collapse.

k-NN follows Caron et al. (2021, Sec. 4.1 and ``eval_knn.py``): cosine similarity of
L2-normalised features, the k nearest training features vote for their class with
weight exp(sim / T). The linear probe is multinomial logistic regression on standardised
frozen features, fitted by L-BFGS, its L2 strength chosen on the validation split.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tokengeo.data.splits import evenly_spaced
from tokengeo.errors import ConfigError

COLLAPSE_SPREAD = 1e-3  # mean distance of normalised features from their mean


@dataclass
class Features:
    pooled: Tensor  # (N, d) backbone output (cls token after the final norm)
    patches: Tensor | None  # (N, P, d) patch tokens, when asked for


@torch.no_grad()
def extract_features(backbone: nn.Module, images: Tensor, batch_size: int = 256,
                     patches: bool = False) -> Features:
    """Pooled features (and patch tokens) of normalised images (N, C, H, W), in eval mode,
    computed on the backbone's device and returned on the CPU."""
    was_training = backbone.training
    backbone.eval()
    device = next(backbone.parameters()).device
    pooled, tokens = [], []
    try:
        for chunk in torch.split(images, batch_size):
            feats = backbone.forward_features(chunk.to(device)).cpu()  # (b, prefix + P, d)
            pooled.append(feats[:, 0] if backbone.num_prefix else feats.mean(1))
            if patches:
                tokens.append(backbone.patch_tokens(feats))
    finally:
        backbone.train(was_training)
    return Features(torch.cat(pooled), torch.cat(tokens) if patches else None)


def knn_predict(train: Tensor, train_labels: Tensor, query: Tensor, num_classes: int,
                k: int = 20, temperature: float = 0.07, chunk: int = 1024) -> Tensor:
    """Weighted k-NN class predictions (Q,): score_c = sum over the k most cosine-similar
    training features of class c of exp(sim / T) (Caron et al. 2021, ``eval_knn.py``)."""
    if len(train) == 0:
        raise ConfigError("k-NN needs at least one training feature")
    k = min(k, len(train))
    bank = F.normalize(train.float(), dim=1)  # (N, d)
    preds = []
    for q in torch.split(F.normalize(query.float(), dim=1), chunk):
        sim, idx = (q @ bank.T).topk(k, dim=1)  # (q, k)
        votes = torch.zeros(len(q), num_classes)
        votes.scatter_add_(1, train_labels[idx], (sim / temperature).exp())
        preds.append(votes.argmax(1))
    return torch.cat(preds)


def knn_accuracy(train: Tensor, train_labels: Tensor, query: Tensor, query_labels: Tensor,
                 num_classes: int, k: int = 20, temperature: float = 0.07) -> float:
    pred = knn_predict(train, train_labels, query, num_classes, k, temperature)
    return float((pred == query_labels).float().mean())


def _fit_logistic(x: Tensor, y: Tensor, num_classes: int, l2: float, iters: int) -> nn.Linear:
    # a fixed start (zeros) that neither reads nor advances the caller's RNG
    linear = nn.utils.skip_init(nn.Linear, x.shape[1], num_classes)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    opt = torch.optim.LBFGS(linear.parameters(), lr=1.0, max_iter=iters,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(linear(x), y) + l2 * linear.weight.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return linear


@dataclass
class LinearProbe:
    accuracy: float  # on the query (test) split
    val_accuracy: float
    l2: float  # the chosen penalty


def linear_probe(train: Tensor, train_labels: Tensor, val: Tensor, val_labels: Tensor,
                 test: Tensor, test_labels: Tensor, num_classes: int,
                 l2_grid: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2),
                 iters: int = 200) -> LinearProbe:
    """Logistic regression on features standardised with the training mean and std; the
    penalty with the best validation accuracy is kept and scored on ``test``."""
    mu, sd = train.mean(0), train.std(0).clamp_min(1e-6)
    xs = [((t.float() - mu) / sd) for t in (train, val, test)]
    best = None
    for l2 in l2_grid:
        with torch.enable_grad():
            linear = _fit_logistic(xs[0], train_labels, num_classes, l2, iters)
        with torch.no_grad():
            val_acc = float((linear(xs[1]).argmax(1) == val_labels).float().mean())
            test_acc = float((linear(xs[2]).argmax(1) == test_labels).float().mean())
        if best is None or val_acc > best.val_accuracy:
            best = LinearProbe(test_acc, val_acc, l2)
    return best


def embedding_spread(features: Tensor) -> float:
    """Mean distance of L2-normalised features from their mean: 0 when all are equal
    (collapse), about sqrt(2) for spread-out features."""
    f = F.normalize(features.float(), dim=1)
    return float((f - f.mean(0)).norm(dim=1).mean())


def collapse_warning(spread: float) -> str | None:
    """A warning when the features have (nearly) collapsed to one point (``spread`` from
    :func:`embedding_spread` below ``COLLAPSE_SPREAD``)."""
    if spread < COLLAPSE_SPREAD or not math.isfinite(spread):
        return (f"representation collapse: the backbone's normalised features are all equal "
                f"(spread {spread:.2e} < {COLLAPSE_SPREAD}); try a lower teacher temperature, "
                "a higher centre momentum or a lower learning rate")
    return None


@dataclass
class BackboneEval:
    knn_accuracy: float
    linear_accuracy: float
    linear_val_accuracy: float
    patch_components_99: int
    patch_decay_alpha: float
    iou: float
    seg_miou: float  # learned linear probe on frozen patch tokens (dino.seg_probe)
    seg_chance_miou: float
    embedding_spread: float
    n_train: int
    n_test: int

    def to_dict(self) -> dict:
        return asdict(self)


def _split_features(backbone: nn.Module, data, split: str, limit: int,
                    patches: bool = False) -> tuple[Features, Tensor, Tensor]:
    """Features of ``limit`` evenly spaced examples of ``split`` (all when 0), their labels
    and their raw images."""
    part = data.split(split)
    images, labels = part[evenly_spaced(len(part), limit)]  # (N, C, H, W) uint8, (N,)
    return extract_features(backbone, data.normalize(images), patches=patches), labels, images


def evaluate_backbone(backbone: nn.Module, data, n_train: int = 10000, n_test: int = 2000,
                      knn_k: int = 20, knn_temperature: float = 0.07,
                      n_seg_train: int = 2000) -> BackboneEval:
    """k-NN and linear-probe accuracy on ``n_test`` test images with ``n_train`` training
    images as the bank / probe training set (``n_test`` validation images pick the probe's
    penalty), the spectrum and PCA-foreground IoU of the test images' patch tokens, and the
    mIoU of a linear segmentation probe fitted on ``n_seg_train`` training images' patch
    tokens (:mod:`tokengeo.dino.seg_probe`)."""
    from tokengeo.dino.seg_probe import fit_seg_probe
    from tokengeo.dino.segmentation import foreground_masks, foreground_share, pca_iou
    from tokengeo.probes.spectrum import spectral_decay

    train, y_train, _ = _split_features(backbone, data, "train", n_train)
    val, y_val, _ = _split_features(backbone, data, "val", n_test)
    test, y_test, images = _split_features(backbone, data, "test", n_test, patches=True)
    knn = knn_accuracy(train.pooled, y_train, test.pooled, y_test, data.num_classes, knn_k,
                       knn_temperature)
    probe = linear_probe(train.pooled, y_train, val.pooled, y_val, test.pooled, y_test,
                         data.num_classes)
    spectrum = spectral_decay(test.patches)  # all patch tokens of the test images
    patch = backbone.config.patch_size
    masks = foreground_masks(images, patch)
    seg_train, _, seg_images = _split_features(backbone, data, "train", n_seg_train,
                                               patches=True)
    seg = fit_seg_probe(seg_train.patches, foreground_share(seg_images, patch), test.patches,
                        foreground_share(images, patch))
    return BackboneEval(
        knn_accuracy=knn, linear_accuracy=probe.accuracy,
        linear_val_accuracy=probe.val_accuracy,
        patch_components_99=spectrum.n_components_99, patch_decay_alpha=spectrum.decay_alpha,
        iou=float(pca_iou(test.patches, masks).mean()),
        seg_miou=seg.miou, seg_chance_miou=seg.chance_miou,
        embedding_spread=embedding_spread(test.pooled), n_train=len(y_train),
        n_test=len(y_test),
    )
