"""DINO self-distillation: student and EMA teacher, centering, sharpening, multi-crop loss.

Caron et al., "Emerging Properties in Self-Supervised Vision Transformers" (ICCV 2021),
Algorithm 1. With teacher outputs t = g_t(x) on the global views and student outputs
s = g_s(x') on every view,

    P_t = softmax((t - c) / tau_t),   log P_s = log_softmax(s / tau_s),
    L   = mean over pairs (global view a, any view b != a) of  - sum_k P_t(a)_k log P_s(b)_k,
    c  <- m_c c + (1 - m_c) mean_batch(t)                        (centering, after the loss),
    theta_t <- lambda theta_t + (1 - lambda) theta_s             (after each optimiser step),

with lambda following a cosine schedule from ``teacher_momentum`` to 1 and tau_t warmed up
linearly from ``teacher_temp_start`` to ``teacher_temp``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from tokengeo.checks import check_positive, check_range
from tokengeo.dino.augment import CropConfig
from tokengeo.dino.head import DINOHead
from tokengeo.errors import ConfigError


@dataclass
class DINOConfig:
    """DINO's settings (``tokengeo train --task dino --set task_options.<name>=...``).

    Defaults follow Caron et al. (2021) where they transfer (student temperature 0.1, centre
    momentum 0.9, weight-normalised last layer, cosine teacher momentum -> 1) and are sized
    for 28 x 28 images and runs of a few thousand steps otherwise. With the paper's
    teacher momentum 0.996, teacher temperature 0.04, K = 1024 and six local crops, a
    vit-tiny on Fashion-MNIST reached test k-NN 0.657 in 2,500 steps (19 minutes on one
    core); with teacher momentum 0.99, teacher temperature 0.02 (sharper targets), K = 256
    and the milder crops of ``CropConfig``, 0.694 in 14 minutes (README, "Self-supervised
    DINO").
    Evaluation: weighted k-NN (k = ``knn_k``, temperature ``knn_temperature``) of the
    teacher backbone's features against ``knn_bank`` training images (0 = all of them).
    """

    out_dim: int = 256
    hidden_dim: int = 512
    bottleneck_dim: int = 128
    head_layers: int = 3
    norm_last_layer: bool = True
    student_temp: float = 0.1
    teacher_temp_start: float = 0.02
    teacher_temp: float = 0.02
    teacher_temp_warmup: int = 0  # steps
    center_momentum: float = 0.9
    teacher_momentum: float = 0.99
    freeze_last_layer: int = 0  # steps with the last head layer frozen
    crops: CropConfig = field(default_factory=CropConfig)
    knn_k: int = 20
    knn_temperature: float = 0.07
    knn_bank: int = 10000

    @classmethod
    def from_options(cls, options: dict) -> DINOConfig:
        """From ``task_options`` (crop settings nested under ``crops``); unknown keys raise."""
        options = dict(options)
        crops = options.pop("crops", {})
        known = {f.name for f in fields(cls)}
        crop_known = {f.name for f in fields(CropConfig)}
        bad = sorted(set(options) - known) + [f"crops.{k}" for k in sorted(set(crops) - crop_known)]
        if bad:
            raise ConfigError(f"unknown DINO task option(s) {bad}; known: "
                              f"{sorted(known)} and crops.{sorted(crop_known)}")
        crops = {k: tuple(v) if isinstance(v, list) else v for k, v in crops.items()}
        return cls(**options, crops=CropConfig(**crops)).validate()

    def validate(self) -> DINOConfig:
        for name in ("out_dim", "hidden_dim", "bottleneck_dim", "student_temp",
                     "teacher_temp_start", "teacher_temp", "knn_k", "knn_temperature"):
            check_positive(name, getattr(self, name))
        if self.head_layers < 1:
            raise ConfigError(f"head_layers={self.head_layers} must be >= 1")
        for name in ("teacher_temp_warmup", "freeze_last_layer", "knn_bank"):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_range("center_momentum", self.center_momentum, 0.0, 1.0)
        check_range("teacher_momentum", self.teacher_momentum, 0.0, 1.0)
        self.crops.validate()
        return self


def dino_loss(student_out: Tensor, teacher_out: Tensor, center: Tensor, n_global: int,
              student_temp: float, teacher_temp: float) -> Tensor:
    """The multi-crop cross-entropy of Caron et al. (2021), Eq. (1) and Algorithm 1.

    student_out (V B, K) holds all V views view-major, the first ``n_global`` being the
    global views the teacher saw; teacher_out (n_global B, K). Pairs of the same view are
    skipped; the loss is the mean over the remaining pairs and the batch.
    """
    student_logp = F.log_softmax(student_out.float() / student_temp, dim=-1).chunk(
        student_out.shape[0] // (teacher_out.shape[0] // n_global))
    teacher_p = F.softmax((teacher_out.float() - center) / teacher_temp, dim=-1).chunk(n_global)
    total, pairs = student_out.new_zeros((), dtype=torch.float32), 0
    for a, p_t in enumerate(teacher_p):
        for b, logp_s in enumerate(student_logp):
            if a == b:
                continue
            total = total - (p_t * logp_s).sum(-1).mean()
            pairs += 1
    return total / pairs


def cosine_momentum(step: int, total: int, base: float) -> float:
    """lambda(step) = 1 - (1 - base) (cos(pi step / total) + 1) / 2 (Caron et al., Sec. 3.1)."""
    return 1 - (1 - base) * (math.cos(math.pi * min(step, total) / max(total, 1)) + 1) / 2


def warmup_temperature(step: int, warmup: int, start: float, end: float) -> float:
    """tau_t: linear from ``start`` to ``end`` over ``warmup`` steps, then ``end``."""
    if step >= warmup:
        return end
    return start + (end - start) * step / warmup


class DINO(nn.Module):
    """Student (trained) and teacher (EMA) backbones with projection heads.

    ``backbone`` is a tokengeo ViT; its classification head is replaced by the identity, so
    ``backbone(images)`` is the pooled feature (the cls token after the final norm). The
    teacher is a copy without gradients. Buffers ``center`` and ``updates`` (the number of
    teacher updates so far) travel with the checkpoint, so a resumed run continues exactly.
    """

    def __init__(self, backbone: nn.Module, cfg: DINOConfig, total_steps: int) -> None:
        super().__init__()
        self.cfg, self.total_steps = cfg, total_steps
        backbone.head = nn.Identity()
        d = backbone.config.d_model
        self.student = backbone
        self.student_head = DINOHead(d, cfg.out_dim, cfg.hidden_dim, cfg.bottleneck_dim,
                                     cfg.head_layers, cfg.norm_last_layer)
        self.teacher = copy.deepcopy(self.student).requires_grad_(False)
        self.teacher_head = copy.deepcopy(self.student_head).requires_grad_(False)
        self.register_buffer("center", torch.zeros(1, cfg.out_dim))
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))

    # what the trainer reads of a model
    @property
    def config(self):
        return self.student.config

    @property
    def family(self) -> str:
        return self.student.family

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        """Parameters of the student backbone (what DINO pre-trains)."""
        return self.student.num_parameters(only_blocks=only_blocks)

    def teacher_temperature(self) -> float:
        c = self.cfg
        return warmup_temperature(int(self.updates), c.teacher_temp_warmup,
                                  c.teacher_temp_start, c.teacher_temp)

    def forward(self, views: tuple[Tensor, Tensor | None], attention_mask=None) -> Tensor:
        """The DINO loss of the global (2 B, C, G, G) and local (L B, C, S, S) views; in
        training mode also updates the centre with the teacher's batch mean."""
        globals_, locals_ = views
        with torch.no_grad():
            teacher_out = self.teacher_head(self.teacher(globals_))  # (2 B, K)
        student_feats = [self.student(globals_)]
        if locals_ is not None:
            student_feats.append(self.student(locals_))
        student_out = self.student_head(torch.cat(student_feats))  # ((2 + L) B, K)
        loss = dino_loss(student_out, teacher_out, self.center, 2, self.cfg.student_temp,
                         self.teacher_temperature())
        if self.training:
            self.update_center(teacher_out)
        return loss

    @torch.no_grad()
    def update_center(self, teacher_out: Tensor) -> None:
        """c <- m c + (1 - m) mean(teacher_out), the mean over every rank's batch."""
        batch_sum = teacher_out.float().sum(0, keepdim=True)
        count = torch.tensor(float(teacher_out.shape[0]), device=teacher_out.device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(batch_sum)
            dist.all_reduce(count)
        m = self.cfg.center_momentum
        self.center.mul_(m).add_(batch_sum / count, alpha=1 - m)

    @torch.no_grad()
    def update_teacher(self) -> float:
        """theta_t <- lambda theta_t + (1 - lambda) theta_s with lambda = cosine_momentum at
        the current update count; returns lambda."""
        lam = cosine_momentum(int(self.updates), self.total_steps, self.cfg.teacher_momentum)
        student = list(self.student.parameters()) + list(self.student_head.parameters())
        teacher = list(self.teacher.parameters()) + list(self.teacher_head.parameters())
        torch._foreach_mul_(teacher, lam)
        torch._foreach_add_(teacher, student, alpha=1 - lam)
        self.updates += 1
        return lam

    def cancel_last_layer_gradients(self) -> None:
        """During the first ``freeze_last_layer`` steps the output layer is not updated."""
        if int(self.updates) < self.cfg.freeze_last_layer:
            self.student_head.last_direction.grad = None
            self.student_head.last_gain.grad = None
