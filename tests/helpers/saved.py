"""Comparisons against numbers saved on disk.

A saved array was computed on one CPU; another CPU (another ATen kernel set, another BLAS
path) may round differently in the last bit. So saved references are compared at a tolerance
fit for their dtype, never bit for bit. Bit-identity is asserted only between two
computations made in the same process (see CONTRIBUTING.md, "Numbers saved on disk").
"""

from __future__ import annotations

import torch

# relative tolerance per dtype: a few hundred ulps of float64, a few ulps of float32
RTOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def assert_close_to_saved(got: torch.Tensor, saved: torch.Tensor, name: str = "",
                          computed_in: torch.dtype | None = None,
                          scale: float | None = None) -> None:
    """``got`` equals the saved ``saved`` within the dtype's tolerance.

    rtol = RTOL[dtype], or the looser RTOL[computed_in] when the values were computed in a
    lower precision than they are stored in (a float64 energy of a float32 run); atol
    = rtol * ``scale`` where given (a difference of larger terms, such as a residual, carries
    the rounding of those terms), otherwise = rtol * max|saved| (entries near zero in a series of order one
    carry the absolute rounding of that series, not a relative one). Integers and booleans
    compare exactly: they do not round.
    """
    assert got.dtype == saved.dtype, f"{name}: dtype {got.dtype} != saved {saved.dtype}"
    if not (got.dtype.is_floating_point or got.dtype.is_complex):
        torch.testing.assert_close(got, saved, rtol=0, atol=0, msg=name or None)
        return
    rtol = max(RTOL[got.dtype], RTOL.get(computed_in, 0.0))
    if scale is None:
        finite = saved[torch.isfinite(saved)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
    torch.testing.assert_close(got, saved, rtol=rtol, atol=rtol * max(scale, 1e-300),
                               equal_nan=True, msg=lambda m: f"{name}: {m}")
