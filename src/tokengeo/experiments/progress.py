"""Progress over reproduce cells: a bar with an ETA on a terminal, log lines always."""

from __future__ import annotations

from collections.abc import Callable

from tqdm.auto import tqdm

from tokengeo.train.progress import bar_wanted


class CellProgress:
    """``done(message, log)`` after each finished cell; a context manager closing the bar."""

    def __init__(self, total: int, enabled: bool | None = None) -> None:
        show = bar_wanted() if enabled is None else enabled
        self.bar = (tqdm(total=total, unit="cell", dynamic_ncols=True, desc="cells")
                    if show and total else None)
        self.count, self.total = 0, total

    def done(self, message: str, log: Callable[[str], None]) -> None:
        self.count += 1
        line = f"({self.count}/{self.total}) {message}"
        if self.bar is None:
            log(line)
        else:
            self.bar.write(line)
            self.bar.update(1)

    def __enter__(self) -> CellProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
