"""Where tokengeo computes: the one decision behind every ``--device``.

Every command takes ``--device auto|cpu|cuda`` (default ``auto``), and so do a training
config's ``device`` and a reproduce run's cells. ``auto`` means CUDA when this machine has
a CUDA device, else the CPU; ``cuda`` without one is refused with one line. The choice is
made here and nowhere else::

    kind("auto", gpus=0)        # 'cpu'   (the rule, given how many GPUs are visible)
    resolve("auto")             # 'cuda' or 'cpu' for this machine; ConfigError for a
                                #  'cuda' it lacks
    torch_device("auto", 1)     # torch.device('cuda', 1) for local rank 1 under torchrun

One GPU of several is chosen with ``CUDA_VISIBLE_DEVICES``, as torchrun and Ray do.
"""

from __future__ import annotations

from tokengeo.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")
DEFAULT = "auto"


def check(device: object, what: str = "--device") -> str:
    """``device`` if it is one of :data:`DEVICES`; else one line naming the choices."""
    if not isinstance(device, str) or device not in DEVICES:
        raise ConfigError(f"{what} {device!r} is not a device; choose one of {list(DEVICES)} "
                          "(one GPU of several: CUDA_VISIBLE_DEVICES=N)")
    return device


def kind(device: str | None, gpus: int, *, lenient: bool = False,
         what: str = "--device") -> str:
    """``cpu`` or ``cuda`` for ``device`` on a node with ``gpus`` visible CUDA devices
    (``None`` is ``auto``). ``cuda`` with none is refused unless ``lenient`` (a plan that
    runs nowhere, or GPUs that are checked elsewhere, a Ray cluster's on connect)."""
    device = check(DEFAULT if device is None else device, what)
    if device == "auto":
        return "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus == 0 and not lenient:
        raise ConfigError(f"{what} cuda, but torch sees no CUDA device; use --device cpu, "
                          "or --device auto to use a GPU where there is one")
    return device


def visible_count() -> int:
    """How many CUDA devices this process sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve(device: str | None, what: str = "--device") -> str:
    """:func:`kind` on this machine: ``cpu`` or ``cuda``."""
    return kind(device, visible_count(), what=what)


def torch_device(device: str | None, local_rank: int = 0, what: str = "--device"):
    """The ``torch.device`` of :func:`resolve`: ``cuda:<local_rank>`` on CUDA."""
    import torch

    if resolve(device, what) == "cuda":
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
