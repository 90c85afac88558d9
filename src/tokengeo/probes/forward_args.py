"""Keyword arguments of a model's ``forward``: the ones ``run_with_cache`` / ``run_with_hooks``
pass on, refused when the model does not take them.

A Hugging Face ``forward`` ends in ``**kwargs`` that swallows any name (a TransformerLens
argument such as ``names_filter=`` would vanish there and the run would go on as if it had
not been given). Its real names are its parameters and the keys of its ``TransformersKwargs``;
anything else is refused before the model runs.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

from tokengeo.errors import ConfigError


def _hf_extra_kwargs(model: nn.Module) -> set[str] | None:
    """The names a Hugging Face ``forward``'s ``**kwargs`` takes, or None when unknown."""
    if not (hasattr(model, "config") and hasattr(model.config, "model_type")):
        return None
    try:
        from transformers.utils.generic import TransformersKwargs
    except ImportError:
        return None
    return set(getattr(TransformersKwargs, "__annotations__", {}))


def forward_keywords(model: nn.Module) -> set[str] | None:
    """The keyword names ``model.forward`` accepts, or None when it takes any name."""
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    named = {p.name for p in params
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           inspect.Parameter.KEYWORD_ONLY)}
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return named
    extra = _hf_extra_kwargs(model)
    return None if extra is None else named | extra


def check_forward_kwargs(model: nn.Module, kwargs: dict[str, Any], caller: str,
                         own: tuple[str, ...]) -> None:
    """Refuse keyword arguments that neither ``caller`` (its ``own`` names) nor the model's
    ``forward`` takes, naming both lists."""
    allowed = forward_keywords(model)
    if allowed is None:
        return
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise ConfigError(
            f"{caller} got unknown keyword argument(s) {', '.join(unknown)}: it takes "
            f"{', '.join(own)}, and {type(model).__name__}.forward takes "
            f"{', '.join(sorted(allowed)) or 'no keywords'}")
