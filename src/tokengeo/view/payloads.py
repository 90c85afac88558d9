"""What the page receives for a :class:`~tokengeo.view.heads.HeadMaps`: metadata and
thumbnails inline (JSON), and one blob per head (``P`` then ``S``, uint8 codes, zlib, base64).
"""

from __future__ import annotations

import base64
import zlib

import torch

from tokengeo.view.encode import quantise, thumbnail
from tokengeo.view.heads import HeadMaps

THUMB = 40  # thumbnail side in cells (max-pooled when the text is longer)


def head_blob(p_codes: torch.Tensor, s_codes: torch.Tensor) -> str:
    """base64 of zlib(P codes ++ S codes) of one head, each ``(T, T)`` uint8."""
    raw = p_codes.numpy().tobytes() + s_codes.numpy().tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def heads_payload(maps: HeadMaps, *, text_source: str = "") -> tuple[dict, dict[str, str]]:
    """(JSON-able payload, {``"l-h"``: blob}) for the page; each head's ``P`` and ``S`` are
    quantised with their own scales (max P, max |S|; :mod:`tokengeo.view.encode`)."""
    L, H, T = maps.shape
    p_codes, p_scale = quantise(maps.P, signed=False, dims=2)  # (L, H, T, T), (L, H)
    s_codes, s_scale = quantise(maps.S, signed=True, dims=2)
    chunks, heads = {}, []
    for l in range(L):
        for h in range(H):
            chunks[f"{l}-{h}"] = head_blob(p_codes[l, h], s_codes[l, h])
            heads.append({"l": l, "h": h, "kind": maps.kinds[l][h],
                          "p_scale": float(p_scale[l, h]), "s_scale": float(s_scale[l, h])})
    peak = maps.P.amax(dim=(-1, -2), keepdim=True).clamp_min(1e-12)  # (L, H, 1, 1)
    thumbs, _ = quantise(thumbnail(maps.P / peak, THUMB).clamp(0, 1) * 1.0, signed=False)
    size = thumbs.shape[-1]
    payload = {
        "kind": "heads", "model": maps.model, "source": text_source, "tokens": maps.tokens,
        "L": L, "H": H, "T": T, "heads": heads, "notes": maps.notes,
        "thumbs": {"size": size, "data": base64.b64encode(
            zlib.compress(thumbs.numpy().tobytes(), 6)).decode("ascii")},
    }
    return payload, chunks
