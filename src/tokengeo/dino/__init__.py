"""tokengeo.dino: DINO self-supervised pre-training (Caron et al. 2021) and the evaluation of
frozen backbones (k-NN, linear probe, patch spectra, PCA foreground IoU).

    tokengeo train --task dino --model vit-tiny --data fashion-mnist --out runs/dino
"""

from tokengeo.dino.augment import CropConfig, multi_crop
from tokengeo.dino.evaluate import BackboneEval, evaluate_backbone, knn_accuracy, linear_probe
from tokengeo.dino.head import DINOHead
from tokengeo.dino.model import DINO, DINOConfig, dino_loss
from tokengeo.dino.task import DINOTask  # registers --task dino

__all__ = [
    "DINO", "BackboneEval", "CropConfig", "DINOConfig", "DINOHead", "DINOTask", "dino_loss",
    "evaluate_backbone", "knn_accuracy", "linear_probe", "multi_crop",
]  # fmt: skip
