"""The explorer inline in a notebook: ``tokengeo.view.show(model, text | ids)``.

``show`` runs the model once (:func:`~tokengeo.view.heads.extract_heads`) and returns a
:class:`HeadsView`, whose ``_repr_html_`` Jupyter, JupyterLab and VS Code's notebooks display:
the same page ``tokengeo view`` writes, inside an ``<iframe srcdoc>`` (its scripts and data
inline; no server, no network, no file)::

    from tokengeo.view import show
    show("smollm2-135m", "The capital of France is Paris.")       # a named model
    show(model, ids, tokenizer=tok)                                # any supported model

``.save("page.html")`` writes the page itself; ``.maps`` holds the matrices
(:class:`~tokengeo.view.heads.HeadMaps`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.view.heads import HeadMaps, extract_heads
from tokengeo.view.page import render, write_page
from tokengeo.view.payloads import heads_payload

NO_FOLDER = 2**62  # inline limit of a notebook page: everything inside the iframe
FIRST_HEIGHT = 480  # pixels of a self-sizing frame before its page has laid out
# the frame's onload: follow the height of its document (srcdoc frames share the notebook's
# origin, so the parent may read it); a ResizeObserver keeps it when panels redraw
FIT_FRAME = ("var f=this,d=f.contentWindow.document.documentElement;"
             "var fit=function(){f.style.height=(d.scrollHeight+4)+'px'};fit();"
             "if(window.ResizeObserver){new ResizeObserver(fit).observe(d)}")


@dataclass
class HeadsView:
    """Every head of one text, ready to display (``_repr_html_``) or save."""

    maps: HeadMaps
    colour: str = "log"
    height: int | None = None  # pixels of the notebook frame; None: sized to the page
    exclude: tuple[int, ...] = ()  # key tokens left out of the colour scale

    def page(self) -> str:
        """The explorer's self-contained HTML page."""
        payload, chunks = heads_payload(self.maps, text_source="notebook", colour=self.colour,
                                        exclude=self.exclude)
        text, _ = render(payload, chunks, title=f"tokengeo view: {self.maps.model}",
                         out=Path("notebook.html"), inline_limit=NO_FOLDER)
        return text  # every chunk inline: the page has no folder of files

    def _repr_html_(self) -> str:
        """The page in an ``<iframe srcdoc>``; without a fixed ``height`` the frame takes the
        height of its content once loaded (and again when the page grows)."""
        fit = "" if self.height is not None else f' onload="{html.escape(FIT_FRAME, quote=True)}"'
        height = self.height if self.height is not None else FIRST_HEIGHT
        return (f'<iframe srcdoc="{html.escape(self.page(), quote=True)}" '
                f'style="width:100%;height:{int(height)}px;border:1px solid #ddd"{fit} '
                f'title="tokengeo view: {html.escape(self.maps.model)}"></iframe>')

    def save(self, out: str | Path) -> Path:
        """Write the page to ``out`` (an .html file, atomically)."""
        payload, chunks = heads_payload(self.maps, text_source="notebook", colour=self.colour,
                                        exclude=self.exclude)
        return write_page(out, payload, chunks, title=f"tokengeo view: {self.maps.model}")


def show(model: nn.Module | str, text_or_ids: str | torch.Tensor | list[int], *,
         tokenizer: Any = None, colour: str = "log", exclude=(),
         max_tokens: int | None = None, height: int | None = None) -> HeadsView:
    """The explorer of ``model`` on one text (or ``(T,)`` / ``(1, T)`` token ids).

    ``model``: a tokengeo or supported Hugging Face model (whatever its attention
    implementation: the pass that forms ``P`` runs with eager attention, as ``tokengeo view``
    does), or a name ``tokengeo view --model`` takes ('minilm',
    'smollm2-135m', hf:FOLDER, a train run folder). ``tokenizer`` (for a model object):
    anything with ``encode``/``decode`` (tokengeo's, Hugging Face's); it encodes a text and
    labels the tokens. ``colour``: ``"log"`` (default: as many decades as the text's weights
    span, so that a short sentence and an attention sink both read), ``"linear"`` or
    ``"row"`` (each query row to its own largest weight). ``exclude``: key token positions
    left out of the colour scale (``exclude=[0]`` for SmolLM2's sink on the first token);
    their cells are clipped, the hover shows their exact weights.
    ``max_tokens``: keep the first that many tokens (a positive int). ``height``: the frame's
    height in pixels (a positive int); default: the height of the page.

    Example::

        import tokengeo.view
        tokengeo.view.show("smollm2-135m", "The cat sat on the mat.", colour="row",
                           exclude=[0])
    """
    from tokengeo.view.payloads import COLOURS, check_exclude

    if colour not in COLOURS:  # refused before the model loads
        raise ConfigError(f"colour scale {colour!r} is not one of {list(COLOURS)}")
    _check_positive("max_tokens", max_tokens, "the number of tokens to keep")
    _check_positive("height", height, "the frame's height in pixels")
    if isinstance(model, str):
        from tokengeo.view.loading import load_for_view

        vm = load_for_view(model)
        model, encode, token_text, name = vm.model, vm.encode, vm.token_text, vm.name
    else:
        encode, token_text, name = _codec(tokenizer), _labeller(tokenizer), type(model).__name__
    ids = _ids(text_or_ids, encode, max_tokens)
    maps = extract_heads(model.eval(), ids, [token_text(int(i)) for i in ids[0]],
                         model_name=name)
    exclude = check_exclude(exclude, maps.shape[2])
    return HeadsView(maps, colour=colour, height=height, exclude=exclude)


def _check_positive(name: str, value: Any, what: str) -> None:
    """None, or a positive whole number (not a bool)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be a positive whole number ({what}), or None")


def _codec(tokenizer: Any):
    """``text -> ids``: ``tokenizer.encode`` (tokengeo's and Hugging Face's, which adds the
    model's special tokens as the model was trained with)."""
    return None if tokenizer is None else tokenizer.encode


def _labeller(tokenizer: Any):
    if tokenizer is None:
        return str
    return lambda i: tokenizer.decode([i])


def _ids(text_or_ids, encode, max_tokens: int | None) -> torch.Tensor:
    if isinstance(text_or_ids, str):
        if encode is None:
            raise ConfigError("show(model, text) needs tokenizer= for a model object; or pass "
                              "token ids")
        if not text_or_ids.strip():
            raise ConfigError("the text is empty; give a few words")
        ids = torch.tensor([encode(text_or_ids)], dtype=torch.long)
    else:
        ids = torch.as_tensor(text_or_ids)
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ConfigError(f"token ids must be integers; got {ids.dtype} (convert with "
                              ".long() only if they are whole ids)")
        ids = ids.long()
        ids = ids[None] if ids.ndim == 1 else ids
    if max_tokens is not None:
        ids = ids[:, :max_tokens]
    return ids
