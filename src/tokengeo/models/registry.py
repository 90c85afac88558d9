"""Registry of named model variants: ``create_model("vit-tiny", n_laplacian=2)``.

As in timm, a variant is a family plus default config values; any config field can be
overridden by keyword, and unknown names or keywords raise with the valid ones.

The registry imports no model family: families register into it (the built-in variants in
:mod:`tokengeo.models.zoo`, which ``import tokengeo.models`` loads), so importing this module
through the package always sees every built-in variant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tokengeo.checks import check_memory, replace_checked
from tokengeo.errors import ConfigError


@dataclass(frozen=True)
class ModelEntry:
    name: str
    family: str
    config_cls: type
    builder: Callable[[Any], nn.Module]
    defaults: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # a model that brings its own tokenizer (a pretrained LM): () -> the tokenizer its
    # text data must be encoded with (see tokengeo.train.tasks.data_options)
    tokenizer: Callable[[], Any] | None = None

    def config(self, **overrides: Any):
        """The validated config: the variant's defaults < ``overrides``. Built here once and
        then passed on (:func:`build_model`), never rebuilt."""
        cfg = replace_checked(self.config_cls(**self.defaults), overrides, what=f"{self.name}")
        cfg.validate()
        return cfg


def check_model_memory(name: str, cfg: Any, bytes_per_parameter: int, what: str) -> None:
    """Refuse a model whose ``bytes_per_parameter`` x parameters cannot be allocated (one
    check per model: its fp32 weights for :func:`create_model`, more to train it)."""
    if hasattr(cfg, "parameter_estimate"):  # a pretrained model's size is what it is
        n = cfg.parameter_estimate()
        check_memory(f"{what} {name} with {cfg.size_summary()} (~{n:.3g} parameters)",
                     bytes_per_parameter * n, "choose smaller sizes")


_REGISTRY: dict[str, ModelEntry] = {}
# name prefix -> (resolver of a full name to its entry, how the name is written)
_PREFIXES: dict[str, tuple[Callable[[str], ModelEntry], str]] = {}


def register_model(
    name: str, family: str, config_cls: type, builder: Callable[[Any], nn.Module],
    description: str = "", **defaults: Any,
) -> None:
    """Register a named variant (a family builder with default config values)."""
    if name in _REGISTRY:
        raise ConfigError(f"model {name!r} is already registered")
    _REGISTRY[name] = ModelEntry(name, family, config_cls, builder, defaults, description)


def register_prefix(prefix: str, resolve: Callable[[str], ModelEntry], usage: str) -> None:
    """Names starting with ``prefix`` resolve through ``resolve(name)`` (e.g. ``hf:<name>``:
    a pretrained model, :mod:`tokengeo.models.hf.lm`); ``usage`` shows the form in errors."""
    if prefix in _PREFIXES:
        raise ConfigError(f"model prefix {prefix!r} is already registered")
    _PREFIXES[prefix] = (resolve, usage)


def list_models(family: str | None = None) -> list[str]:
    """Names of the registered variants (optionally of one family), sorted."""
    return sorted(n for n, e in _REGISTRY.items() if family is None or e.family == family)


def get_entry(name: str) -> ModelEntry:
    if name in _REGISTRY:
        return _REGISTRY[name]
    for prefix, (resolve, _) in _PREFIXES.items():
        if isinstance(name, str) and name.startswith(prefix):
            return resolve(name)
    forms = "".join(f" or {usage}" for _, usage in _PREFIXES.values())
    raise ConfigError(f"unknown model {name!r}; registered models: {list_models()}{forms}")


def create_model(
    name: str,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    **overrides: Any,
) -> nn.Module:
    """Build the registered variant ``name`` with config ``overrides``.

    >>> model = create_model("vit-tiny", n_laplacian=2, num_classes=10)
    """
    cfg = get_entry(name).config(**overrides)
    check_model_memory(name, cfg, 4, "the fp32 weights of")
    return build_model(name, cfg, device=device, dtype=dtype)


def build_model(name: str, cfg: Any, *, device: torch.device | str | None = None,
                dtype: torch.dtype | None = None) -> nn.Module:
    """The model of variant ``name`` from its validated config ``cfg`` (from
    :meth:`ModelEntry.config`), which is used as it is: not copied, checked or rebuilt."""
    entry = get_entry(name)
    if not isinstance(cfg, entry.config_cls):
        raise ConfigError(f"{name} is built from a {entry.config_cls.__name__}, not a "
                          f"{type(cfg).__name__}; make it with get_entry({name!r}).config()")
    device, dtype = _check_device(device), _check_dtype(dtype)
    with torch.device(device or "cpu"):
        model = entry.builder(cfg)
    model.model_name = name
    return model.to(dtype=dtype) if dtype is not None else model


def _check_device(device: Any) -> torch.device | None:
    if device is None:
        return None
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device={device!r} is not a torch device; use 'cpu', 'cuda' or "
                          "'cuda:N'") from None


def _check_dtype(dtype: Any) -> torch.dtype | None:
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ConfigError(f"dtype={dtype!r} must be a floating torch.dtype, e.g. torch.float16")
    return dtype


def model_from_config(name: str, config: dict[str, Any], **kw: Any) -> nn.Module:
    """Rebuild a model from a saved (resolved) config dict, e.g. a checkpoint sidecar; a key
    that is not an option of the family is a ConfigError listing the valid ones."""
    cfg = dict(config)
    if cfg.get("laplacian_heads") is not None:  # JSON turns int keys into strings
        cfg["laplacian_heads"] = {int(k): v for k, v in cfg["laplacian_heads"].items()}
    return create_model(name, **kw, **cfg)


def describe_models(family: str | None = None) -> list[str]:
    """One line per variant: name, family, key sizes and description."""
    lines = []
    for name in list_models(family):
        e = _REGISTRY[name]
        cfg = e.config()
        sizes = f"d={cfg.d_model} L={cfg.n_layers} H={cfg.n_heads}"
        lines.append(f"{name:<20} {e.family:<8} {sizes:<18} {e.description}")
    return lines
