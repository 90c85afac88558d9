"""``tokengeo view``: an offline, interactive HTML explorer of heads, flows and runs.

==============  ==========================================================================
``heads``       per layer x head: attention ``P``, ``I - P`` for Laplacian heads, head-output
                similarity ``S`` of one text (:func:`extract_heads` -> :class:`HeadMaps`)
``encode``      compact storage: uint8 / int8 quantisation, zlib, base64; thumbnails
``loading``     the one place a model name becomes ``(model, tokenizer)`` for the explorer
``flow``        a ``tokengeo flow`` run: its tokens over time, E(t), G^2(t)
``runs``        a ``tokengeo reproduce`` folder: each suite's tables and figures
``page``        assemble one self-contained HTML page (inline scripts and data)
``notebook``    :func:`show`: the page inline in Jupyter / VS Code (``_repr_html_``)
==============  ==========================================================================

The page needs no network: its JavaScript (``assets/viewer.js``, our own canvas and SVG
code) and data are inside it, or, for large models, in one folder beside it.
"""

from __future__ import annotations

import importlib

_LAZY = {"show": "tokengeo.view.notebook", "HeadsView": "tokengeo.view.notebook"}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tokengeo.view' has no attribute {name!r}")
