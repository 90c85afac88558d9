"""What every tokengeo figure shares: pyplot on the Agg backend, a size that fits the report,
constrained layout (no clipped labels), integer ticks, per-head colours, a stated band, and
an atomic PNG write. Bands and error bars are named in the legend or the title.

Each figure is built by a function that returns the matplotlib ``Figure`` (tests inspect
it) and is written by :func:`save_figure`. matplotlib is imported only here, inside
:func:`pyplot`; a missing install raises ``MissingDependencyError`` naming
``pip install 'tokengeo[plot]'``.
"""

from __future__ import annotations

import io
from pathlib import Path

from tokengeo._deps import require
from tokengeo.io import write_bytes

DPI = 110
# the report's text column: body max-width 1100 px (experiments/report.py CSS) less padding.
# A figure at most this wide is shown at its own size, so its fonts keep their point size.
REPORT_WIDTH_PX = 1050
MAX_WIDTH_IN = REPORT_WIDTH_PX / DPI
MIN_FONT_PT = 8  # smallest text size in a figure, readable in print and in the report
MAX_CYCLE_HEADS = 10  # more curves than this: colours from a colour map, not the cycle


def pyplot():
    """``matplotlib.pyplot`` with the non-interactive Agg backend."""
    require("matplotlib").use("Agg")
    return require("matplotlib.pyplot")


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **subplot_kw):
    """``(fig, axes)`` with constrained layout, ``axes`` a 2-D array; the width is capped at
    the report's column (:data:`MAX_WIDTH_IN`) with the aspect kept."""
    plt = pyplot()
    if width > MAX_WIDTH_IN:
        width, height = MAX_WIDTH_IN, height * MAX_WIDTH_IN / width
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False,
                        layout="constrained", subplot_kw=subplot_kw or None)


def save_figure(fig, path: str | Path) -> Path:
    """Write ``fig`` as PNG at :data:`DPI` (atomically) and close it; returns the path."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    pyplot().close(fig)
    write_bytes(path, buf.getvalue())
    return Path(path)


def integer_ticks(axis, values=None) -> None:
    """Ticks only at integers (k, H, layer): at ``values`` when given (log axes),
    else wherever ``MaxNLocator(integer=True)`` puts them."""
    ticker = require("matplotlib.ticker")
    if values is not None:
        axis.set_major_locator(ticker.FixedLocator(sorted({int(v) for v in values})))
        axis.set_major_formatter(ticker.ScalarFormatter())
        axis.set_minor_locator(ticker.NullLocator())
    else:
        axis.set_major_locator(ticker.MaxNLocator(integer=True))


def curve_colors(n: int) -> list:
    """Colours of ``n`` curves (one per head): the default cycle up to
    :data:`MAX_CYCLE_HEADS`, else evenly spaced over viridis (so no colour repeats)."""
    if n <= MAX_CYCLE_HEADS:
        return [f"C{i}" for i in range(n)]
    cmap = require("matplotlib").colormaps["viridis"]
    return [cmap(i / (n - 1)) for i in range(n)]


def head_colorbar(fig, ax, n: int, label: str = "head") -> None:
    """A discrete colour bar naming the heads' colours of :func:`curve_colors` (n > 10)."""
    mpl = require("matplotlib")
    norm = mpl.colors.BoundaryNorm([i - 0.5 for i in range(n + 1)], n)
    sm = mpl.cm.ScalarMappable(norm=norm, cmap=mpl.colormaps["viridis"].resampled(n))
    bar = fig.colorbar(sm, ax=ax, label=label, ticks=range(0, n, max(1, n // 6)))
    bar.ax.tick_params(labelsize=MIN_FONT_PT)
