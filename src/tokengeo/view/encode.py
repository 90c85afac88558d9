"""Compact storage of matrices for the HTML explorer.

A ``T x T`` matrix is quantised to one byte per cell, compressed with zlib and base64
encoded; the page inflates it with the browser's own ``DecompressionStream("deflate")``.

* non-negative matrices (attention ``P``): ``q = round(255 * x / max(x))``, stored with
  ``max(x)``; the error of a cell is at most ``max(x) / 510``;
* signed matrices (similarity ``S``): ``q = round(127 * x / max|x|) + 128``, stored with
  ``max|x|``; the error is at most ``max|x| / 254``;
* non-negative matrices on a log scale (:func:`quantise_log`, attention ``P`` by default, so
  that an attention sink, one column near 1, leaves the other weights readable):
  ``q = 1 + round(254 * (1 + log10(x / max(x)) / D))`` for ``x >= max(x) 10^-D``, ``q = 0``
  below; the relative error of a cell above the floor is at most ``10^(D / 508) - 1`` (0.9 %
  for ``D = 2``... 1.8 % for ``D = 4``).
"""

from __future__ import annotations

import base64
import math
import zlib
from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError


@dataclass(frozen=True)
class Packed:
    """One quantised matrix: base64 of zlib(uint8 cells), its scale and its kind."""

    data: str
    scale: float  # max(x) (unsigned) or max|x| (signed)
    signed: bool
    shape: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"data": self.data, "scale": self.scale, "signed": self.signed,
                "shape": list(self.shape)}


def quantise(x: torch.Tensor, *, signed: bool, dims: int = 0) -> tuple[torch.Tensor, object]:
    """(uint8 codes, scale) of ``x`` as described in the module docstring.

    ``dims=2`` quantises each trailing ``(T, T)`` matrix with its own scale (a tensor of the
    leading shape); ``dims=0`` uses one scale for all of ``x`` (a float)."""
    x = x.detach().float()
    if not bool(torch.isfinite(x).all()):
        raise ConfigError("the matrix to view holds NaN or infinite values; the model's "
                          "activations overflowed (try float32 weights or a shorter text)")
    if not signed and x.numel() and float(x.min()) < 0:
        raise ConfigError("an unsigned matrix holds negative values; store it signed")
    reduce = tuple(range(x.ndim - dims, x.ndim)) if dims else tuple(range(x.ndim))
    mag = x.abs() if signed else x
    scale = mag.amax(dim=reduce, keepdim=True) if x.numel() else torch.zeros(())
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.round(x / safe * 127) + 128 if signed else torch.round(x / safe * 255)
    scale = scale.squeeze(reduce) if dims else float(scale.squeeze())
    return codes.to(torch.uint8), scale


LOG_DECADES = 4  # the log scale spans max(x) 10^-4 ... max(x)


def quantise_log(x: torch.Tensor, *, decades: float = LOG_DECADES, dims: int = 0
                 ) -> tuple[torch.Tensor, object]:
    """(uint8 codes, scale) of a non-negative ``x`` on a log scale (module docstring); ``dims``
    as in :func:`quantise`."""
    x = x.detach().float()
    if not bool(torch.isfinite(x).all()):
        raise ConfigError("the matrix to view holds NaN or infinite values; the model's "
                          "activations overflowed (try float32 weights or a shorter text)")
    if x.numel() and float(x.min()) < 0:
        raise ConfigError("a log-scaled matrix holds negative values; store it signed")
    reduce = tuple(range(x.ndim - dims, x.ndim)) if dims else tuple(range(x.ndim))
    scale = x.amax(dim=reduce, keepdim=True) if x.numel() else torch.zeros(())
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    rel = torch.log10((x / safe).clamp_min(1e-30)) / decades + 1  # 0 at the floor, 1 at max
    codes = torch.where(rel >= 0, 1 + torch.round(rel.clamp(0, 1) * 254), torch.zeros_like(x))
    scale = scale.squeeze(reduce) if dims else float(scale.squeeze())
    return codes.to(torch.uint8), scale


def quantise_relative(x: torch.Tensor, scale: torch.Tensor, *,
                      decades: float | torch.Tensor = 0, masked_zero: bool = False
                      ) -> torch.Tensor:
    """uint8 codes of a non-negative ``x`` relative to a given ``scale`` (broadcastable, e.g.
    one per head ``(L, H, 1, 1)`` or per row ``(L, H, T, 1)``), cells above it clipped to the
    top code: ``round(255 r)`` with ``r = min(x / scale, 1)``, or with ``decades > 0`` the
    log codes of :func:`quantise_log` (``q = 1 + round(254 (1 + log10(r) / D))``, 0 below the
    floor; ``decades`` a number or, like ``scale``, one per head). A zero scale counts as 1.
    With ``scale = max(x)`` these are the codes of
    :func:`quantise` / :func:`quantise_log`. ``masked_zero``: code 0 means exactly 0 (a
    masked cell of P), a positive weight below the first step gets code 1."""
    x = x.detach().float()
    if not bool(torch.isfinite(x).all()):
        raise ConfigError("the matrix to view holds NaN or infinite values; the model's "
                          "activations overflowed (try float32 weights or a shorter text)")
    if x.numel() and float(x.min()) < 0:
        raise ConfigError("a colour-scaled matrix holds negative values; store it signed")
    scale = scale.float()
    r = (x / torch.where(scale > 0, scale, torch.ones_like(scale))).clamp(0, 1)
    if not isinstance(decades, torch.Tensor) and not decades:
        codes = torch.round(r * 255)
    else:
        rel = torch.log10(r.clamp_min(1e-30)) / decades + 1  # 0 at the floor, 1 at the scale
        codes = torch.where(rel >= 0, 1 + torch.round(rel.clamp(0, 1) * 254),
                            torch.zeros_like(r))
    if masked_zero:  # code 0 only for an exact 0 (a masked cell): small weights get code 1
        codes = torch.where((x > 0) & (codes == 0), torch.ones_like(codes), codes)
    return codes.to(torch.uint8)


def fit_decades(ratios: torch.Tensor, *, most: float = LOG_DECADES, quantile: float = 0.05,
                sample: int = 1 << 20) -> float:
    """How many decades a log colour scale needs for these ``ratios`` (weights over their
    scale, in (0, 1]): ``-log10`` of their ``quantile``, rounded up to a half decade, between
    1 and ``most``. A short text's weights span a decade or two, and a scale of ``most``
    decades would crowd them into its bright end; a sink's tail gets all ``most``."""
    r = ratios[ratios > 0].flatten().float()
    if r.numel() == 0:
        return 1.0
    if r.numel() > sample:  # torch.quantile takes at most 2^24 values: an even subsample
        r = r[torch.linspace(0, r.numel() - 1, sample).long()]
    low = float(torch.quantile(r, quantile).clamp_min(10.0 ** -most))
    return float(min(most, max(1.0, math.ceil(-math.log10(low) * 2) / 2)))


def dequantise_log(codes: torch.Tensor, scale, *, decades: float = LOG_DECADES
                   ) -> torch.Tensor:
    """The inverse of :func:`quantise_log` (what the page computes); code 0 reads as 0."""
    c = codes.to(torch.float64)
    scale = torch.as_tensor(scale, dtype=torch.float64)
    scale = scale.reshape(scale.shape + (1,) * (c.ndim - scale.ndim)) if scale.ndim else scale
    value = scale * torch.pow(10.0, decades * ((c - 1) / 254 - 1))
    return torch.where(c > 0, value, torch.zeros_like(value))


def dequantise(codes: torch.Tensor, scale: float, *, signed: bool) -> torch.Tensor:
    """The inverse of :func:`quantise` (what the page computes)."""
    c = codes.to(torch.float64)
    scale = torch.as_tensor(scale, dtype=torch.float64)
    scale = scale.reshape(scale.shape + (1,) * (c.ndim - scale.ndim)) if scale.ndim else scale
    return (c - 128) / 127 * scale if signed else c / 255 * scale


def pack(x: torch.Tensor, *, signed: bool) -> Packed:
    codes, scale = quantise(x, signed=signed)
    raw = codes.contiguous().numpy().tobytes()
    data = base64.b64encode(zlib.compress(raw, 6)).decode("ascii")
    return Packed(data, scale, signed, tuple(x.shape))


def unpack(p: Packed) -> torch.Tensor:
    raw = zlib.decompress(base64.b64decode(p.data))
    codes = torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(p.shape)
    return dequantise(codes, p.scale, signed=p.signed)


def thumbnail(x: torch.Tensor, size: int) -> torch.Tensor:
    """``(..., T, T)`` -> ``(..., s, s)`` with ``s = min(T, size)``: the max over each block
    (a thin diagonal stays visible when 1,024 tokens shrink to a few dozen pixels)."""
    T = x.shape[-1]
    if T <= size:
        return x
    flat = x.reshape(-1, 1, T, T)
    out = torch.nn.functional.adaptive_max_pool2d(flat, size)
    return out.reshape(*x.shape[:-2], size, size)
