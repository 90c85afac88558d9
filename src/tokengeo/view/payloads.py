"""What the page receives for a :class:`~tokengeo.view.heads.HeadMaps`: metadata and
thumbnails inline (JSON), and one blob per head (``P`` then ``S``, uint8 codes, zlib, base64).
"""

from __future__ import annotations

import base64
import zlib

import torch

from tokengeo.errors import ConfigError
from tokengeo.view.encode import LOG_DECADES, quantise, quantise_log, thumbnail
from tokengeo.view.heads import HeadMaps

THUMB = 40  # thumbnail side in cells (max-pooled when the text is longer)
# How P is coloured (and stored): "log" (default) spans LOG_DECADES decades below each head's
# largest weight, so an attention sink (SmolLM2's first token takes most of every row) leaves
# the other weights readable; "linear" is 0 ... max P, where a sink flattens the rest.
COLOURS = ("log", "linear")


def head_blob(p_codes: torch.Tensor, s_codes: torch.Tensor) -> str:
    """base64 of zlib(P codes ++ S codes) of one head, each ``(T, T)`` uint8."""
    raw = p_codes.numpy().tobytes() + s_codes.numpy().tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def heads_payload(maps: HeadMaps, *, text_source: str = "", colour: str = "log"
                  ) -> tuple[dict, dict[str, str]]:
    """(JSON-able payload, {``"l-h"``: blob}) for the page; each head's ``P`` and ``S`` are
    quantised with their own scales (max P, max |S|; :mod:`tokengeo.view.encode`), ``P`` on
    the ``colour`` scale (:data:`COLOURS`)."""
    if colour not in COLOURS:
        raise ConfigError(f"colour scale {colour!r} is not one of {list(COLOURS)}")
    L, H, T = maps.shape
    if colour == "log":
        p_codes, p_scale = quantise_log(maps.P, dims=2)  # (L, H, T, T), (L, H)
    else:
        p_codes, p_scale = quantise(maps.P, signed=False, dims=2)
    s_codes, s_scale = quantise(maps.S, signed=True, dims=2)
    chunks, heads = {}, []
    for l in range(L):
        for h in range(H):
            chunks[f"{l}-{h}"] = head_blob(p_codes[l, h], s_codes[l, h])
            heads.append({"l": l, "h": h, "kind": maps.kinds[l][h],
                          "p_scale": float(p_scale[l, h]), "s_scale": float(s_scale[l, h])})
    peak = maps.P.amax(dim=(-1, -2), keepdim=True).clamp_min(1e-12)  # (L, H, 1, 1)
    small = thumbnail(maps.P / peak, THUMB).clamp(0, 1)  # (L, H, s, s), max 1
    if colour == "log":  # the page draws thumbnail codes linearly: log them here
        small = (torch.log10(small.clamp_min(1e-30)) / LOG_DECADES + 1).clamp(0, 1)
    thumbs, _ = quantise(small * 1.0, signed=False)
    size = thumbs.shape[-1]
    payload = {
        "kind": "heads", "model": maps.model, "source": text_source, "tokens": maps.tokens,
        "L": L, "H": H, "T": T, "heads": heads, "notes": maps.notes,
        "p_log": LOG_DECADES if colour == "log" else 0,
        "thumbs": {"size": size, "data": base64.b64encode(
            zlib.compress(thumbs.numpy().tobytes(), 6)).decode("ascii")},
    }
    return payload, chunks
