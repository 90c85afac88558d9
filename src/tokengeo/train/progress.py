"""Progress reporting: a tqdm bar (loss, throughput, ETA) on a terminal, quiet otherwise.

The bar shows only when stderr is a TTY, ``CI`` is unset and this is rank 0. Messages
(evaluations, checkpoints, warnings) go through :meth:`Progress.write` either way, so a
log file still records them.
"""

from __future__ import annotations

import os
import sys
import time

from tqdm.auto import tqdm


def bar_wanted(is_main: bool = True) -> bool:
    return is_main and sys.stderr.isatty() and not os.environ.get("CI")


class Progress:
    """``update(step, loss, items)`` after each step; ``items`` counts examples or tokens."""

    def __init__(self, total: int, start: int = 0, unit: str = "it", *,
                 is_main: bool = True, enabled: bool | None = None) -> None:
        self.is_main = is_main
        show = bar_wanted(is_main) if enabled is None else enabled
        self.bar = (tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)
                    if show else None)
        self.unit = unit
        self._t0 = time.perf_counter()
        self._items = 0

    def update(self, loss: float, items: int) -> None:
        self._items += items
        if self.bar is None:
            return
        rate = self._items / max(time.perf_counter() - self._t0, 1e-9)
        postfix = {"loss": f"{loss:.4f}", f"{self.unit}/s": f"{rate:,.0f}"}
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def write(self, message: str) -> None:
        if not self.is_main:
            return
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
