"""Cells that train a model with :mod:`tokengeo.train` and measure its token geometry.

A cell trains in its own run directory (resuming from its last checkpoint if an earlier
``reproduce`` was interrupted), then captures the final-layer tokens (``hook_final``) of
fixed evaluation examples and reduces them with :mod:`tokengeo.probes.geometry`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch


def _trainer(run_dir: Path, config: dict[str, Any]):
    from tokengeo.train import TrainConfig, Trainer, latest_checkpoint

    run_dir = Path(run_dir)
    ckpts = run_dir / "checkpoints"
    resume = run_dir.exists() and latest_checkpoint(ckpts) is not None
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # a run that died before its first checkpoint
    cfg = TrainConfig(**config, out=str(run_dir), device="cpu")
    return Trainer(cfg, resume=resume, progress=False)


@torch.no_grad()
def final_tokens(model, task, split: str, max_examples: int, batch_size: int = 256):
    """Final-layer tokens (N, T, d), inputs and targets of fixed examples of ``split``."""
    from tokengeo.probes.capture import capture

    model.eval()
    idx = task.eval_indices(split, max_examples)
    feats, inputs, targets = [], [], []
    with capture(model, ["hook_final"]) as cache:
        for chunk in idx.split(batch_size):
            b = task.batch(split, chunk)
            model(b.inputs, b.attention_mask)
            feats.append(cache["hook_final"].float().cpu())
            inputs.append(b.inputs)
            targets.append(b.targets)
    return torch.cat(feats), torch.cat(inputs), torch.cat(targets)


def classification_geometry(model, task, split: str, max_examples: int) -> dict[str, float]:
    """Variance shares, neural collapse of sequence means, spectrum of tokens (arXiv 2602.09297,
    Sec. 4: Laplacian heads lower within-sequence variance and raise between-class variance)."""
    from tokengeo.probes.geometry import (
        neural_collapse_sequences,
        spectral_decay,
        variance_decomposition,
    )

    h, _, y = final_tokens(model, task, split, max_examples)  # (N, T, d), (N,)
    var = variance_decomposition(h, y)
    nc = neural_collapse_sequences(h, y)
    spec = spectral_decay(h)
    return {
        "within_sequence_share": var.within_sequence / var.total,
        "between_class_share": var.between_class / var.total,
        "nc1": nc.nc1, "nc2_etf_error": nc.nc2_etf_error, "ncc_accuracy": nc.ncc_accuracy,
        "components_99": spec.n_components_99, "decay_alpha": spec.decay_alpha,
        "n_examples": int(h.shape[0]),
    }


def language_geometry(model, task, split: str, max_examples: int) -> dict[str, float]:
    """Spectrum of token representations and next-token separability (arXiv 2602.09297,
    Sec. 5: fewer components for 99% variance with Laplacian heads)."""
    from tokengeo.probes.geometry import (
        next_token_separability,
        spectral_decay,
        variance_decomposition,
    )

    h, x, _ = final_tokens(model, task, split, max_examples, batch_size=32)  # (N, T, d)
    spec = spectral_decay(h)
    sep = next_token_separability(h, x)
    var = variance_decomposition(h)
    return {
        "components_99": spec.n_components_99, "decay_alpha": spec.decay_alpha,
        "cdnv_mean": sep.cdnv_mean, "next_token_nm_accuracy": sep.nearest_mean_accuracy,
        "within_sequence_share": var.within_sequence / var.total,
        "n_sequences": int(h.shape[0]),
    }


GEOMETRY = {"classification": classification_geometry, "language": language_geometry}


def train_cell(run_dir: str, config: dict[str, Any], geometry: str | None = None,
               geometry_split: str = "test", geometry_examples: int = 1000) -> dict:
    """Train ``config`` in ``run_dir`` and return its final metrics (and geometry)."""
    trainer = _trainer(Path(run_dir), config)
    summary = trainer.fit()
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"]}
    if geometry is not None:
        out["geometry"] = GEOMETRY[geometry](trainer.model, trainer.task, geometry_split,
                                             geometry_examples)
    return out
