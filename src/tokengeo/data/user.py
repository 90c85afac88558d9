"""The user's own data: a text file or folder (LM), an image folder or ``.npz`` (image
classification), a CSV of texts and labels (text classification)."""

from __future__ import annotations

import csv
import math
import os
import zipfile
from pathlib import Path

import numpy as np
import torch

from tokengeo.checks import check_choice, check_range
from tokengeo.data.bpe import gpt2_tokenizer, train_bpe
from tokengeo.data.bundles import (
    ImageClassificationData,
    ImageSplit,
    LanguageModelData,
    TextClassificationData,
)
from tokengeo.data.images import image_bundle
from tokengeo.data.text_classification import build_text_classification
from tokengeo.data.tokenizer import (
    CharTokenizer,
    Tokenizer,
    count_characters,
    encode_documents,
)
from tokengeo.errors import ConfigError, DataNotFoundError, MissingDependencyError

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


def _exists(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise DataNotFoundError(f"no such file or folder: {path}")
    return path


def read_text(path: Path) -> str:
    """A text file's text (UTF-8, else Latin-1); a binary file (NUL bytes, as no text file
    holds) or something that is not a regular file is refused with one line naming it."""
    from tokengeo.io import open_regular

    try:
        fd = open_regular(path)  # a FIFO or a device never blocks the read
    except ConfigError as exc:
        raise ConfigError(f"{exc} (in the text data)") from None
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise DataNotFoundError(f"cannot read {path}: {exc.strerror}") from None
    refuse_binary(path, raw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def refuse_binary(path: Path, raw: bytes) -> None:
    """A file with NUL bytes is binary (no text encoding tokengeo reads has them)."""
    if b"\x00" in raw:
        raise ConfigError(f"{path} is a binary file, not text (it holds NUL bytes); remove it "
                          "from the text folder or rename it without a text suffix")


def text_files(folder: Path) -> list[Path]:
    """Text files (``TEXT_SUFFIXES``) under ``folder``, recursively, in sorted order."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)


def _split_documents(docs: dict[str, str], val_fraction: float, seed: int):
    """(train docs, val docs). One document: its last ``val_fraction`` of characters is
    val. Several: ``ceil(val_fraction * n)`` whole documents, chosen by ``seed``, are val."""
    check_range("val_fraction", val_fraction, 0.01, 0.9)  # an LM always needs a val stream
    names = list(docs)
    if len(names) == 1:
        text = docs[names[0]]
        cut = len(text) - math.ceil(val_fraction * len(text))
        return {f"{names[0]}[:{cut}]": text[:cut]}, {f"{names[0]}[{cut}:]": text[cut:]}
    n_val = max(1, math.ceil(val_fraction * len(names)))
    perm = torch.randperm(len(names), generator=torch.Generator().manual_seed(seed)).tolist()
    val = {names[i] for i in perm[:n_val]}
    return {k: v for k, v in docs.items() if k not in val}, {k: docs[k] for k in names if k in val}


def load_text(
    path: str | Path, tokenizer: str | Tokenizer = "char", val_fraction: float = 0.1,
    seed: int = 0, bpe_vocab_size: int = 4096,
) -> LanguageModelData:  # fmt: skip
    """A text file or a folder of text files as a causal-LM dataset, split without overlap.
    ``tokenizer``: ``char``, ``gpt2``, ``bpe`` or a :class:`Tokenizer` object."""
    if isinstance(tokenizer, str):
        check_choice("tokenizer", tokenizer, ["char", "gpt2", "bpe"])
    root = _exists(path)
    files = [root] if root.is_file() else text_files(root)
    if not files:
        raise DataNotFoundError(f"{root} holds no text files ({', '.join(TEXT_SUFFIXES)})")
    docs = {str(f.relative_to(root) if root.is_dir() else f.name): read_text(f) for f in files}
    if not any(docs.values()):
        raise ConfigError(f"{root} holds no text: its {len(docs)} text file(s) are empty")
    train, val = _split_documents(docs, val_fraction, seed)
    if not isinstance(tokenizer, str):
        tok = tokenizer
    elif tokenizer == "char":
        tok = CharTokenizer.from_texts([*docs.values(), "\n\n"])  # + the separator
    elif tokenizer == "gpt2":
        tok = gpt2_tokenizer()
    else:
        tok = train_bpe(list(train.values()), bpe_vocab_size, name="user")
    train_texts, val_texts = list(train.values()), list(val.values())
    return LanguageModelData(
        name=root.name, train_tokens=encode_documents(tok, train_texts),
        val_tokens=encode_documents(tok, val_texts), vocab_size=tok.vocab_size,
        tokenizer=tok, train_documents=list(train), val_documents=list(val),
        train_characters=count_characters(train_texts),
        val_characters=count_characters(val_texts),
    )  # fmt: skip


def _to_nchw_uint8(x: np.ndarray, what: str) -> torch.Tensor:
    """(N, H, W), (N, C, H, W) or (N, H, W, C) with C in {1, 3}; uint8, or floats in
    [0, 1] (scaled by 255) -> uint8 (N, C, H, W)."""
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[1] not in (1, 3) and x.shape[3] in (1, 3):
        x = x.transpose(0, 3, 1, 2)
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ConfigError(f"{what}: images must be (N,H,W), (N,C,H,W) or (N,H,W,C), C in 1|3")
    if len(x) == 0:
        raise ConfigError(f"{what} holds no images (x has shape {x.shape})")
    if x.dtype != np.uint8:
        floats = np.issubdtype(x.dtype, np.floating)
        if not floats or not np.isfinite(x).all() or x.min() < 0 or x.max() > 1:
            detail = f"{x.dtype}" if not floats else f"{x.dtype} from {x.min()} to {x.max()}"
            raise ConfigError(f"{what}: images must be uint8 or floats in [0, 1], got {detail}")
        x = np.rint(x * 255.0).astype(np.uint8)
    return torch.from_numpy(np.ascontiguousarray(x))


def _labels(y: np.ndarray, what: str) -> tuple[torch.Tensor, list[str]]:
    """Any 1-D labels -> int64 ids into the sorted distinct values, and their names."""
    if y.ndim != 1:
        raise ConfigError(f"{what}: labels must be 1-D, got shape {y.shape}")
    values, ids = np.unique(y, return_inverse=True)
    return torch.from_numpy(ids.astype(np.int64)), [str(v) for v in values]


def load_npz(
    path: str | Path, val_fraction: float = 0.1, test_fraction: float = 0.2, seed: int = 0
) -> ImageClassificationData:
    """An ``.npz`` with arrays ``x`` (images) and ``y`` (labels), optionally ``class_names``."""
    p = _exists(path)
    x, y, class_names = _read_npz(p)
    images, (labels, names) = _to_nchw_uint8(x, str(p)), _labels(y, str(p))
    if class_names is not None:
        labels, names = _named_labels(y, class_names, p)
    if len(images) != len(labels):
        raise ConfigError(f"{p}: {len(images)} images but {len(labels)} labels")
    return image_bundle(p.stem, images, labels, names, (val_fraction, test_fraction), seed)


def _named_labels(y: np.ndarray, class_names: np.ndarray,
                  p: Path) -> tuple[torch.Tensor, list[str]]:
    """Labels and names when the file names its classes: whole-number labels index
    ``class_names`` directly (each in ``0..len - 1``); other labels, sorted, must be as many
    as the names. Counts are checked together, before anything indexes a name."""
    if class_names.ndim != 1:
        raise ConfigError(f"{p}: class_names must be 1-D, got shape {class_names.shape}")
    names = [str(n) for n in class_names]
    if np.issubdtype(y.dtype, np.integer):
        lo, hi = (int(y.min()), int(y.max())) if y.size else (0, -1)
        if lo < 0 or hi >= len(names):
            raise ConfigError(f"{p}: labels run from {lo} to {hi} but class_names has "
                              f"{len(names)} names; labels must lie in 0..{len(names) - 1}")
        return torch.from_numpy(y.astype(np.int64)), names
    distinct = np.unique(y)
    if len(distinct) != len(names):
        raise ConfigError(f"{p}: {len(distinct)} distinct labels but class_names has "
                          f"{len(names)} names; give one name per label")
    return _labels(y, str(p))[0], names


NPY_MEMBERS = ("x.npy", "y.npy", "class_names.npy")


def _check_npz_headers(p: Path) -> None:
    """Each array's header against its stored size and this machine's memory, before any
    array is allocated (a header may declare any shape)."""
    from tokengeo.checks import check_memory

    with zipfile.ZipFile(p) as zf:
        for info in zf.infolist():
            if info.filename not in NPY_MEMBERS:
                continue
            with zf.open(info) as f:
                try:
                    fmt = np.lib.format
                    version = fmt.read_magic(f)
                    read = fmt.read_array_header_1_0 if version == (1, 0) else \
                        fmt.read_array_header_2_0
                    shape, _, dtype = read(f)
                except (ValueError, OSError, EOFError, SyntaxError) as exc:
                    raise ConfigError(f"{p}: {info.filename} has no readable .npy header "
                                      f"({_first_line(exc)})") from None
            if dtype.hasobject:
                continue  # refused as a pickle when loaded
            need = math.prod(shape) * dtype.itemsize
            if need > info.file_size:
                raise ConfigError(f"{p}: {info.filename} declares shape {shape} of {dtype} "
                                  f"({need:,} bytes) but stores {info.file_size:,} bytes; the "
                                  "file is damaged: write it again with numpy.savez")
            check_memory(f"{p}: {info.filename} of shape {shape}", need,
                         "use a smaller data set")


def _read_npz(p: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Arrays ``x``, ``y`` (and ``class_names`` if present) of an ``.npz``, never unpickled;
    an unreadable file (a FIFO or device: refused, never waited on) is refused with one line
    naming it."""
    from tokengeo.io import open_regular

    os.close(open_regular(p))
    if not zipfile.is_zipfile(p):
        raise ConfigError(f"{p} is not a readable .npz (not a zip archive); write it with "
                          "numpy.savez(path, x=images, y=labels)")
    try:
        _check_npz_headers(p)
        with np.load(p, allow_pickle=False) as z:  # never unpickle
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ConfigError(f"{p} is a single .npy array, not a .npz with 'x' and 'y'")
            if "x" not in z or "y" not in z:
                raise ConfigError(f"{p} must hold arrays 'x' and 'y'; it has {sorted(z.files)}")
            return z["x"], z["y"], z["class_names"] if "class_names" in z else None
    except ConfigError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc) or "Object arrays" in str(exc):
            raise ConfigError(f"{p} holds Python objects (an object array); tokengeo never "
                              "unpickles: save numeric arrays") from None
        raise ConfigError(f"{p} is not a readable .npz ({_first_line(exc)})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ConfigError(f"{p} is not a readable .npz ({_first_line(exc)}); write it with "
                          "numpy.savez(path, x=images, y=labels)") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _read_image_classes(folder: Path, classes: list[str], mode: str):
    Image = _pil()
    images, labels = [], []
    for k, cls in enumerate(classes):
        for f in sorted((folder / cls).iterdir()):
            if f.suffix.lower() in IMAGE_SUFFIXES and not f.is_dir():  # FIFOs: refused on read
                images.append(_read_image(Image, f, mode))
                labels.append(k)
    if not images:
        raise DataNotFoundError(f"{folder} holds no image files ({', '.join(IMAGE_SUFFIXES)}) "
                                f"in its class subfolders {classes}")
    shapes = {a.shape for a in images}
    if len(shapes) != 1:
        raise ConfigError(f"{folder}: images have different sizes {sorted(shapes)}; resize them")
    return _to_nchw_uint8(np.stack(images), str(folder)), torch.tensor(labels, dtype=torch.long)


def _read_image(Image, path: Path, mode: str) -> np.ndarray:
    """One image file as an array; a corrupt or unreadable file, a FIFO or a decompression
    bomb is refused naming it (:func:`tokengeo.data.bounded.load_image`)."""
    from tokengeo.data.bounded import load_image

    return np.asarray(load_image(Image, path, mode))


def _pil():
    try:
        from PIL import Image
    except ImportError as exc:
        msg = "reading image folders needs Pillow; install it with: pip install pillow"
        raise MissingDependencyError(msg) from exc
    return Image


def _classes(folder: Path) -> list[str]:
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise DataNotFoundError(f"{folder} has no class subfolders (<folder>/<class>/*.png)")
    return classes


def load_image_folder(
    path: str | Path, val_fraction: float = 0.1, test_fraction: float = 0.2, seed: int = 0,
    grayscale: bool = False,
) -> ImageClassificationData:  # fmt: skip
    """``<path>/<class>/*.png|jpg`` (or ``<path>/{train,test}/<class>/...`` to keep a given
    test set). Images are read with Pillow as RGB (``grayscale=True``: one channel)."""
    root = _exists(path)
    mode = "L" if grayscale else "RGB"
    if (root / "train").is_dir() and (root / "test").is_dir():
        classes = _classes(root / "train")
        x, y = _read_image_classes(root / "train", classes, mode)
        test = ImageSplit(*_read_image_classes(root / "test", classes, mode))
        return image_bundle(root.name, x, y, classes, (val_fraction,), seed, test)
    classes = _classes(root)
    x, y = _read_image_classes(root, classes, mode)
    return image_bundle(root.name, x, y, classes, (val_fraction, test_fraction), seed)


def load_csv(
    path: str | Path, text_column: str = "text", label_column: str = "label",
    tokenizer: str = "gpt2", max_len: int = 64, val_fraction: float = 0.1,
    test_fraction: float = 0.1, seed: int = 0, bpe_vocab_size: int = 4096,
) -> TextClassificationData:  # fmt: skip
    """A CSV (UTF-8, header row) of texts and labels as a text classification dataset."""
    import io

    from tokengeo.io import open_binary

    p = _exists(path)
    try:  # a FIFO or device named like a CSV is refused (ConfigError), never waited on
        with io.TextIOWrapper(open_binary(p), encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p} is not UTF-8 text (byte {exc.start}); save the CSV as "
                          "UTF-8") from None
    except (OSError, csv.Error) as exc:
        raise ConfigError(f"cannot read the CSV {p} ({_first_line(exc)})") from None
    missing = {text_column, label_column} - set(rows[0] if rows else {})
    if missing:
        raise ConfigError(f"{p} lacks column(s) {sorted(missing)} (set text_column/label_column)")
    names = sorted({r[label_column] for r in rows})
    ids = {n: i for i, n in enumerate(names)}
    return build_text_classification(
        p.stem, [r[text_column] for r in rows], [ids[r[label_column]] for r in rows], names,
        tokenizer, max_len, val_fraction, test_fraction, seed, bpe_vocab_size,
    )  # fmt: skip
