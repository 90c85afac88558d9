"""Pretrained Hugging Face causal LMs as tokengeo models: the ``hf:<source>`` model names.

``create_model("hf:smollm2-135m", n_laplacian=3)`` (and ``tokengeo train --model
hf:smollm2-135m``) loads a pretrained causal LM, converts the last ``n_laplacian`` heads of
every layer with :func:`tokengeo.models.hf.laplacianize` (Zhang & Papyan, arXiv 2602.09297:
``z_h = (I - P_h) V_h``) and wraps it in :class:`HFCausalLM`, which has the interface the
trainer expects (``model(ids, attention_mask=...) -> logits (B, T, V)``, a dataclass
``config``, ``family``, ``num_parameters``, a ``hook_final`` hook point). ``<source>`` is a
named pretrained model (:mod:`tokengeo.models.hf.pretrained`) or a local folder saved by
``save_pretrained`` (config.json, safetensors weights and the tokenizer).

The model brings its own tokenizer: the registry entry's ``tokenizer`` gives it (wrapped as
:class:`HFTokenizer`), and the trainer encodes the text data with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokengeo._deps import require
from tokengeo.checks import check_choice, check_int, check_positive
from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint, name_hook_points
from tokengeo.models.hf import pretrained
from tokengeo.models.registry import ModelEntry, register_prefix
from tokengeo.nn.heads import LAPLACIAN, MIXED_INITS, SELECTED_KINDS

PREFIX = "hf:"
FAMILY = "hf-lm"


@dataclass
class HFLMConfig:
    """A pretrained causal LM, possibly with Laplacian (or mixed) heads.

    ``source``: a pretrained name or a saved model folder; ``n_laplacian``: the last k heads
    of every layer (of the last ``last_layers`` layers only, when set) become ``head_kind``
    heads; ``vocab_size``: the tokenizer's size (set from
    the data; 0 = not checked), at most the model's embedding rows; ``block_size``: tokens
    per training window (at most the model's positions).
    """

    source: str = ""
    n_laplacian: int = 0
    head_kind: str = LAPLACIAN
    mixed_init: str = LAPLACIAN
    last_layers: int | None = None  # None: every layer
    vocab_size: int = 0
    block_size: int = 256
    attn_implementation: str = "sdpa"

    def validate(self) -> None:
        check_source(self.source)
        check_choice("head_kind", self.head_kind, SELECTED_KINDS)
        check_choice("mixed_init", self.mixed_init, MIXED_INITS)
        check_positive("n_laplacian", self.n_laplacian, allow_zero=True)  # ≤ H: once loaded
        if self.last_layers is not None:  # ≤ the number of layers: once loaded
            check_int("last_layers", self.last_layers, 1)
        check_positive("vocab_size", self.vocab_size, allow_zero=True)
        check_positive("block_size", self.block_size)
        _check_sizes(self, _saved_config(self.source))


def _check_sizes(cfg: HFLMConfig, saved: dict[str, Any]) -> None:
    """Refuse what the saved model cannot do, before its weights are loaded (``saved``'s
    sizes are whole numbers >= 1 or None: :func:`tokengeo.models.hf.names.sizes_of` refused
    any other when the source was resolved)."""
    heads = saved.get("num_attention_heads")
    if heads is not None and cfg.n_laplacian > heads:
        raise ConfigError(f"n_laplacian={cfg.n_laplacian} but {cfg.source} has {heads} heads "
                          f"per layer; use 0..{heads}")
    vocab = saved.get("vocab_size")
    if vocab is not None and cfg.vocab_size > vocab:
        raise ConfigError(f"the data's tokenizer has {cfg.vocab_size} tokens but {cfg.source} "
                          f"embeds {vocab}; encode the data with the model's own tokenizer")
    layers = saved.get("num_hidden_layers")
    if layers is not None and cfg.last_layers is not None and cfg.last_layers > layers:
        raise ConfigError(f"last_layers={cfg.last_layers} but {cfg.source} has {layers} "
                          f"layers; use 1..{layers}")
    positions = saved.get("max_position_embeddings")
    if positions is not None and cfg.block_size > positions:
        raise ConfigError(f"block_size={cfg.block_size} exceeds the {positions} positions of "
                          f"{cfg.source}; use --set model_overrides.block_size={positions}")


HF_LM_SOURCES = ("named", "folder")  # what hf:<source> takes (tokengeo.models.names)


def check_source(source: str):
    """The resolved ``source`` (:func:`tokengeo.models.names.resolve_model`), else a
    ConfigError naming the forms ``hf:<source>`` takes."""
    from tokengeo.models.names import resolve_model

    found = resolve_model(source, accept=HF_LM_SOURCES, what="Hugging Face model")
    if found.causal_lm is False:
        raise ConfigError(f"{source!r} is not a causal language model; hf:<source> takes "
                          "causal LMs only (tokengeo list-models --named)")
    if found.kind == "folder":
        require_tokenizer(found.path, source)
    return found


def require_tokenizer(folder: Path, source: str) -> None:
    """A model folder must bring its tokenizer (else its text would be all-unknown ids)."""
    if not any((folder / name).is_file() for name in pretrained.TOKENIZER_FILES):
        raise ConfigError(f"hf:{source}: the folder has no tokenizer (none of "
                          f"{list(pretrained.TOKENIZER_FILES)}); save it with "
                          "tokenizer.save_pretrained(folder)")


def _saved_config(source: str) -> dict[str, Any]:
    """The sizes of ``source`` under Hugging Face names, read before any weights load."""
    found = check_source(source)
    return {"num_attention_heads": found.n_heads, "vocab_size": found.vocab_size,
            "max_position_embeddings": found.max_positions, "num_hidden_layers": found.n_layers}


def source_folder(source: str) -> Path:
    """The folder holding the model and tokenizer (a named model: its cache folder)."""
    return check_source(source).folder()


# ---- the tokenizer ----------------------------------------------------------------------


class HFTokenizer:
    """A ``transformers`` tokenizer behind tokengeo's :class:`~tokengeo.data.tokenizer.Tokenizer`
    interface: plain text in, ids out, no special tokens added."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        self.hf = tokenizer
        self.name = name
        self.vocab_size: int = len(tokenizer)
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        backend = getattr(tokenizer, "backend_tokenizer", None)
        state = backend.to_str() if backend is not None else json.dumps(
            sorted(tokenizer.get_vocab().items()))
        # identifies the vocabulary and merges: keys caches of text encoded by it
        self.fingerprint = hashlib.sha256(state.encode()).hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is not None:  # no "sequence longer than the model" warning on whole works
            return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]
        return [self.hf.encode(t, add_special_tokens=False) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return self.hf.decode([int(i) for i in ids])


def load_tokenizer(source: str) -> HFTokenizer:
    """The tokenizer of ``source`` (a named model is dequantised and cached first if needed)."""
    transformers = require("transformers")
    folder = source_folder(source)
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    name = source if pretrained.is_pretrained(source) else Path(source).name
    return HFTokenizer(tok, f"hf-{name}")


# ---- the model --------------------------------------------------------------------------


class HFCausalLM(nn.Module):
    """A Hugging Face causal LM (``self.hf``) with tokengeo's model interface.

    ``forward(input_ids (B, T), attention_mask=None) -> logits (B, T, V)``. ``hook_final``
    sees (and may replace) the output of the final norm, (B, T, d); every other hook site is
    on ``self.hf`` (:func:`tokengeo.probes.capture.capture` works on it directly).
    """

    family = FAMILY

    def __init__(self, config: HFLMConfig) -> None:
        super().__init__()
        from tokengeo.models.hf.families import family_of
        from tokengeo.models.hf.patch import laplacianize

        model = _load_model(config)
        if config.n_laplacian:
            laplacianize(model, config.n_laplacian, kind=config.head_kind,
                         mixed_init=config.mixed_init, last_layers=config.last_layers)
        self.hf = model.to(torch.get_default_device())
        self.config = config
        self._family = family_of(model, "hf: models")
        self.hook_final = HookPoint()
        name_hook_points(self)
        if self._family.final is None:
            raise ConfigError(f"{config.source}: its family has no final norm to hook")
        final = self.hf.base_model.get_submodule(self._family.final)
        final.register_forward_hook(lambda module, args, out: self.hook_final(out))

    def forward(self, input_ids: torch.Tensor,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self.hf(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits  # (B, T, V)

    def encoder_modules(self) -> list[nn.Module]:
        """The transformer blocks (what ``num_parameters(only_blocks=True)`` counts)."""
        return [self.hf.base_model.get_submodule(self._family.blocks)]

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        modules = self.encoder_modules() if only_blocks else [self]
        return sum(p.numel() for m in modules for p in m.parameters())


def _load_model(config: HFLMConfig) -> Any:
    """The float32 causal LM of ``config.source``, its sizes checked against ``config``."""
    source = check_source(config.source)
    model, _ = source.load(causal_lm=True, attn_implementation=config.attn_implementation)
    _check_sizes(config, model.config.to_dict())
    return model.float()


# ---- registration -----------------------------------------------------------------------


def resolve(name: str) -> ModelEntry:
    """The registry entry of ``hf:<source>``."""
    source = name[len(PREFIX):]
    check_source(source)
    return ModelEntry(name, FAMILY, HFLMConfig, HFCausalLM, {"source": source},
                      f"pretrained causal LM {source}", tokenizer=lambda: load_tokenizer(source))


register_prefix(PREFIX, resolve, f"{PREFIX}<pretrained name {pretrained.names()} or folder>")
