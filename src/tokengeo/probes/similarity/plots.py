"""PNG figures of a :class:`~tokengeo.probes.similarity.result.HeadSimilarityResult`.

``mean_similarity.png``: the mean context-similarity matrix of every layer (rows) and
head (columns), each scaled to its own largest absolute value. ``distance_profiles.png``:
mean similarity against token distance, one panel per layer, one line per head.
``within_sentence.png``: per layer, each head's share of top pairs inside one sentence,
with the uniform and distance-matched chance levels.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from tokengeo._deps import require
from tokengeo.io import write_bytes


def _pyplot():
    matplotlib = require("matplotlib")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot")


def save_figures(result, out_dir: str | Path) -> list[Path]:
    """Write the three figures into ``out_dir``; returns their paths."""
    plt = _pyplot()
    out = Path(out_dir)
    paths = [_mean_matrices(plt, result, out / "mean_similarity.png"),
             _distance_profiles(plt, result, out / "distance_profiles.png"),
             _within_sentence(plt, result, out / "within_sentence.png")]
    return paths


def _mean_matrices(plt, r, path: Path) -> Path:
    L, H = r.n_layers, r.n_heads
    fig, axes = plt.subplots(L, H, figsize=(1.2 * H, 1.25 * L), squeeze=False)
    for l in range(L):
        for h in range(H):
            m = r.mean_similarity[l, h]
            lim = float(m.abs().max()) or 1.0
            ax = axes[l][h]
            ax.imshow(m.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if l == 0:
                ax.set_title(f"h{h}", fontsize=7)
            if h == 0:
                ax.set_ylabel(f"layer {l}", fontsize=7)
    fig.suptitle(f"mean head-output similarity ({r.n_samples} inputs x {r.seq_len} tokens)")
    return _save(plt, fig, path)


def _distance_profiles(plt, r, path: Path) -> Path:
    L = r.n_layers
    cols = min(L, 3)
    rows = (L + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    d = torch.arange(1, r.seq_len)
    for l in range(L):
        ax = axes[l // cols][l % cols]
        for h in range(r.n_heads):
            ax.plot(d.numpy(), r.distance_profile[l, h].numpy(), lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"layer {l}", fontsize=9)
        ax.set_xlabel("token distance")
        ax.set_ylabel("mean similarity")
    for k in range(L, rows * cols):
        axes[k // cols][k % cols].axis("off")
    return _save(plt, fig, path)


def _within_sentence(plt, r, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    L = r.n_layers
    for l in range(L):
        shares = r.within_sentence_share[l].numpy()
        ax.scatter([l] * len(shares), shares, s=12, color="C0", alpha=0.6)
    ax.plot(range(L), r.within_sentence_share.mean(1).numpy(), "o-", color="C0",
            label="top pairs in one sentence (mean over heads)")
    ax.plot(range(L), r.within_sentence_chance_distance_matched.mean(1).numpy(), "s--",
            color="C1", label="chance, distance-matched")
    ax.axhline(r.within_sentence_chance, color="gray", ls=":", label="chance, uniform")
    ax.set_xlabel("layer")
    ax.set_ylabel("share of top similarity pairs")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_bytes(path, buf.getvalue())
    return path
