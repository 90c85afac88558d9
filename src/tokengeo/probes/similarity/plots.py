"""PNG figures of a :class:`~tokengeo.probes.similarity.result.HeadSimilarityResult`.

``mean_similarity.png``: the mean context-similarity matrix of every layer (rows) and
head (columns). Almost every mean similarity is positive and their size grows with depth,
so one diverging scale centred at 0 paints most panels one flat colour: each layer gets
its own sequential scale (viridis) from the 1st to the 99th percentile of its off-diagonal
means, with its own colour bar in the data's units; the zeroed diagonal is grey.
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


def layer_limits(mean: torch.Tensor) -> tuple[float, float]:
    """(vmin, vmax) of one layer's mean matrices (H, T, T): the 1st and 99th percentiles of
    the off-diagonal entries (the diagonal is zero by definition)."""
    T = mean.shape[-1]
    off = mean[:, ~torch.eye(T, dtype=torch.bool)].flatten().to(torch.float64)
    if off.numel() == 0:
        return 0.0, 1.0
    lo, hi = torch.quantile(off, torch.tensor([0.01, 0.99], dtype=torch.float64)).tolist()
    return (lo, hi) if hi > lo else (lo, lo + (abs(lo) or 1.0))


def mean_similarity_figure(r):
    """Layers (rows) x heads (columns) of mean similarity matrices, each layer on its own
    sequential colour scale (:func:`layer_limits`) with its colour bar."""
    import matplotlib

    L, H = r.n_layers, r.n_heads
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgray")
    fig, axes = new_figure(1.0 * H + 1.6, 1.0 * L + 0.8, L, H)
    for l in range(L):
        vmin, vmax = layer_limits(r.mean_similarity[l])
        for h in range(H):
            ax = axes[l][h]
            panel = r.mean_similarity[l, h].clone().to(torch.float64)
            panel.fill_diagonal_(float("nan"))
            im = ax.imshow(panel.numpy(), cmap=cmap, vmin=vmin, vmax=vmax)
            ax.set_xticks([])
            ax.set_yticks([])
            if l == 0:
                ax.set_title(f"h{h}", fontsize=MIN_FONT_PT)
            if h == 0:
                ax.set_ylabel(f"layer {l}", fontsize=MIN_FONT_PT)
        bar = fig.colorbar(im, ax=list(axes[l]), shrink=0.9, pad=0.01)
        bar.ax.tick_params(labelsize=MIN_FONT_PT)
    fig.suptitle(f"mean head-output similarity <z_i, z_j> ({r.n_samples} inputs x "
                 f"{r.seq_len} tokens)\none sequential scale per layer (its 1st-99th "
                 "percentile); diagonal grey", fontsize=9)
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
