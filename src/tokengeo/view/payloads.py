"""What the page receives for a :class:`~tokengeo.view.heads.HeadMaps`: metadata and
thumbnails inline (JSON), and one blob per head (``P`` then ``S``, uint8 codes, zlib, base64).
"""

from __future__ import annotations

import base64
import zlib

import torch

from tokengeo.errors import ConfigError
from tokengeo.view.encode import (
    LOG_DECADES,
    fit_decades,
    quantise,
    quantise_relative,
    thumbnail,
)
from tokengeo.view.heads import HeadMaps

THUMB = 40  # thumbnail side in cells (max-pooled when the text is longer)
# How P is coloured (and stored): "log" (default) spans the decades below each head's largest
# weight that the head's weights on this text fill (:func:`~tokengeo.view.encode.fit_decades`:
# one or two on a short sentence, up to LOG_DECADES beside an attention sink, where SmolLM2's
# first token takes most of every row), so both read; "linear" is 0 ... max P, where a sink
# flattens the rest; "row" scales each query row (linearly) to its own largest weight. Any of
# them can leave chosen key tokens (columns, e.g. an attention sink at 0) out of the scale:
# :func:`p_scales`.
COLOURS = ("log", "linear", "row")


def check_exclude(exclude, T: int) -> tuple[int, ...]:
    """The excluded key tokens as sorted distinct indices in ``0 .. T-1`` (not all of them)."""
    try:
        keys = tuple(sorted({int(j) for j in exclude}))
        whole = all(not isinstance(j, bool) and int(j) == j for j in exclude)
    except (TypeError, ValueError):
        raise ConfigError(f"exclude={exclude!r} must list token positions, e.g. [0]") from None
    if not whole or any(j < 0 or j >= T for j in keys):
        raise ConfigError(f"exclude={list(exclude)} must list token positions in 0..{T - 1} "
                          f"of this {T}-token text")
    if len(keys) >= T:
        raise ConfigError(f"exclude={list(exclude)} leaves no key token to scale the colours "
                          "by; exclude fewer")
    return keys


def p_scales(P: torch.Tensor, colour: str, exclude: tuple[int, ...] = ()) -> torch.Tensor:
    """The weight each head's ``P`` ``(L, H, T, T)`` is coloured against: the largest weight of
    the head ``(L, H, 1, 1)`` ("log", "linear") or of each query row ``(L, H, T, 1)`` ("row"),
    both over the key tokens not in ``exclude`` (excluded cells above it are clipped)."""
    ref = P
    if exclude:
        ref = P.clone()
        ref[..., list(exclude)] = 0  # (L, H, T, T): the excluded key columns
    return ref.amax(dim=-1, keepdim=True) if colour == "row" \
        else ref.amax(dim=(-2, -1), keepdim=True)


def head_blob(p_codes: torch.Tensor, s_codes: torch.Tensor) -> str:
    """base64 of zlib(P codes ++ S codes) of one head, each ``(T, T)`` uint8."""
    raw = p_codes.numpy().tobytes() + s_codes.numpy().tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def heads_payload(maps: HeadMaps, *, text_source: str = "", colour: str = "log",
                  exclude=()) -> tuple[dict, dict[str, str]]:
    """(JSON-able payload, {``"l-h"``: blob}) for the page; each head's ``P`` and ``S`` are
    quantised with their own scales (:mod:`tokengeo.view.encode`), ``S`` by max |S|, ``P`` on
    the ``colour`` scale (:data:`COLOURS`, :func:`p_scales`) with the key tokens ``exclude``
    left out of it; their exact weights go along (``p_excluded``) for the hover values."""
    if colour not in COLOURS:
        raise ConfigError(f"colour scale {colour!r} is not one of {list(COLOURS)}")
    L, H, T = maps.shape
    exclude = check_exclude(exclude, T)
    P = maps.P.detach().float()  # (L, H, T, T)
    scale = p_scales(P, colour, exclude)  # (L, H, 1, 1) or (L, H, T, 1)
    decades = _decades(P, scale, exclude) if colour == "log" else None  # (L, H): per head
    spans = 0 if decades is None else decades[:, :, None, None]  # (L, H, 1, 1)
    p_codes = quantise_relative(P, scale, decades=spans, masked_zero=True)  # (L, H, T, T)
    s_codes, s_scale = quantise(maps.S, signed=True, dims=2)
    chunks, heads = {}, []
    for l in range(L):
        for h in range(H):
            chunks[f"{l}-{h}"] = head_blob(p_codes[l, h], s_codes[l, h])
            heads.append({"l": l, "h": h, "kind": maps.kinds[l][h],
                          "p_scale": float(scale[l, h].max()), "s_scale": float(s_scale[l, h]),
                          **({} if decades is None else {"p_log": float(decades[l, h])}),
                          **_row_and_excluded(P[l, h], scale[l, h], colour, exclude)})
    peak = scale.clamp_min(1e-12)  # (L, H, 1, 1) or (L, H, T, 1)
    small = thumbnail((P / peak).clamp(0, 1), THUMB)  # (L, H, s, s), max 1
    if colour == "log":  # the page draws thumbnail codes linearly: log them here
        small = (torch.log10(small.clamp_min(1e-30)) / spans + 1).clamp(0, 1)
    thumbs, _ = quantise(small * 1.0, signed=False)
    size = thumbs.shape[-1]
    payload = {
        "kind": "heads", "model": maps.model, "source": text_source, "tokens": maps.tokens,
        "L": L, "H": H, "T": T, "heads": heads, "notes": maps.notes,
        "p_log": 0 if decades is None else float(decades.max()), "colour": colour,
        "p_exclude": list(exclude),
        "thumbs": {"size": size, "data": base64.b64encode(
            zlib.compress(thumbs.numpy().tobytes(), 6)).decode("ascii")},
    }
    return payload, chunks


def _decades(P: torch.Tensor, scale: torch.Tensor, exclude: tuple[int, ...]) -> torch.Tensor:
    """Each head's log-scale span on this text ``(L, H)``: fitted to its weights over its
    scale, the excluded key columns left out."""
    ratios = P / scale.clamp_min(1e-30)  # (L, H, T, T)
    if exclude:
        keep = [j for j in range(P.shape[-1]) if j not in exclude]
        ratios = ratios[..., keep]
    ratios = ratios.clamp(0, 1)
    L, H = P.shape[:2]
    return torch.tensor([[fit_decades(ratios[l, h], most=LOG_DECADES) for h in range(H)]
                         for l in range(L)])


def _row_and_excluded(P: torch.Tensor, scale: torch.Tensor, colour: str,
                      exclude: tuple[int, ...]) -> dict:
    """A head's row scales (``p_rows``, "row" only) and the exact weights of its excluded key
    columns (``p_excluded``: one list of T per excluded token), 6 significant digits."""
    out = {}
    if colour == "row":
        out["p_rows"] = [float(f"{v:.6g}") for v in scale[:, 0].tolist()]  # (T,)
    if exclude:
        out["p_excluded"] = [[float(f"{v:.6g}") for v in P[:, j].tolist()] for j in exclude]
    return out
