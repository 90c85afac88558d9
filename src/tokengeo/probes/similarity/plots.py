"""PNG figures of a :class:`~tokengeo.probes.similarity.result.HeadSimilarityResult`.

``mean_similarity.png``: the mean context-similarity matrix of every layer (rows) and
head (columns), on one colour scale (``±`` the largest absolute value) with a colour bar.
``distance_profiles.png``: mean similarity against token distance, one panel per layer,
one line per head (colour-map colours and a colour bar when there are more than 10 heads).
``within_sentence.png``: per layer, each head's share of top pairs inside one sentence,
with the uniform and distance-matched chance levels.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tokengeo.plotting import (
    MAX_CYCLE_HEADS,
    MIN_FONT_PT,
    curve_colors,
    head_colorbar,
    integer_ticks,
    new_figure,
    save_figure,
)


def save_figures(result, out_dir: str | Path) -> list[Path]:
    """Write the three figures into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    return [save_figure(mean_similarity_figure(result), out / "mean_similarity.png"),
            save_figure(distance_profiles_figure(result), out / "distance_profiles.png"),
            save_figure(within_sentence_figure(result), out / "within_sentence.png")]


def mean_similarity_figure(r):
    """Layers (rows) x heads (columns) of mean similarity matrices on one colour scale,
    symmetric about 0 (``±max |E[S]|`` over the figure), with its colour bar."""
    L, H = r.n_layers, r.n_heads
    lim = float(r.mean_similarity.abs().max()) or 1.0
    fig, axes = new_figure(1.0 * H + 1.2, 1.0 * L + 0.8, L, H)
    for l in range(L):
        for h in range(H):
            ax = axes[l][h]
            im = ax.imshow(r.mean_similarity[l, h].numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if l == 0:
                ax.set_title(f"h{h}", fontsize=MIN_FONT_PT)
            if h == 0:
                ax.set_ylabel(f"layer {l}", fontsize=MIN_FONT_PT)
    bar = fig.colorbar(im, ax=axes, shrink=0.8, label="mean similarity <z_i, z_j>")
    bar.ax.tick_params(labelsize=MIN_FONT_PT)
    fig.suptitle(f"mean head-output similarity ({r.n_samples} inputs x {r.seq_len} tokens, "
                 "one colour scale)", fontsize=10)
    return fig


def distance_profiles_figure(r):
    """Mean similarity against token distance, one panel per layer, one curve per head
    (more than 10 heads: viridis colours and a colour bar; else a legend)."""
    L, H = r.n_layers, r.n_heads
    cols = min(L, 3)
    rows = (L + cols - 1) // cols
    fig, axes = new_figure(3.2 * cols + 1.0, 2.6 * rows, rows, cols)
    colors = curve_colors(H)
    d = torch.arange(1, r.seq_len)
    for l in range(L):
        ax = axes[l // cols][l % cols]
        for h in range(H):
            ax.plot(d.numpy(), r.distance_profile[l, h].numpy(), lw=0.8, color=colors[h],
                    label=f"h{h}")
        ax.set_xscale("log")
        ax.set_title(f"layer {l}", fontsize=10)
        ax.set_xlabel("token distance |i - j|")
        ax.set_ylabel("mean similarity")
    for k in range(L, rows * cols):
        axes[k // cols][k % cols].axis("off")
    if H > MAX_CYCLE_HEADS:
        head_colorbar(fig, axes, H)
    else:
        axes[0][0].legend(fontsize=MIN_FONT_PT, ncol=2, title="head", title_fontsize=MIN_FONT_PT)
    fig.suptitle(f"distance profiles (mean over {r.n_samples} inputs)", fontsize=10)
    return fig


def within_sentence_figure(r):
    """Per layer, each head's share of top pairs inside one sentence (dots), their mean
    over heads, and the uniform and distance-matched chance levels."""
    fig, axes = new_figure(6.0, 4.0)
    ax = axes[0, 0]
    L = r.n_layers
    for l in range(L):
        shares = r.within_sentence_share[l].numpy()
        ax.scatter([l] * len(shares), shares, s=12, color="C0", alpha=0.6,
                   label="one head" if l == 0 else None)
    ax.plot(range(L), r.within_sentence_share.mean(1).numpy(), "o-", color="C0",
            label="mean over heads")
    ax.plot(range(L), r.within_sentence_chance_distance_matched.mean(1).numpy(), "s--",
            color="C1", label="chance, distance-matched (mean over heads)")
    ax.axhline(r.within_sentence_chance, color="gray", ls=":", label="chance, uniform")
    integer_ticks(ax.xaxis)
    ax.set_xlabel("layer")
    ax.set_ylabel("share of top pairs in one sentence")
    ax.legend(fontsize=MIN_FONT_PT)
    return fig
