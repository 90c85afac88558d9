"""Child processes die with their parent.

:func:`die_with_parent` asks Linux to SIGKILL the calling process when its parent dies
(``prctl(PR_SET_PDEATHSIG)``). The reproduce workers call it first thing; a helper process
started with ``subprocess.run(..., preexec_fn=die_with_parent)`` (a measurement in a fresh
interpreter, a torchrun launcher) calls it between fork and exec, so killing tokengeo never
leaves it running.
"""

from __future__ import annotations

import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Linux: SIGKILL this process when its parent dies; False where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
