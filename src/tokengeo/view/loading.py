"""The one place where the explorer turns a ``--model`` into a model and a tokenizer.

Accepted today: ``"minilm"`` and the named pretrained models of
:mod:`tokengeo.models.hf.pretrained` (``"smollm2-135m"``), a Hugging Face folder (``hf:PATH``
or a plain folder with a Hugging Face ``config.json``), and a ``tokengeo train`` run folder
(``config.json`` and ``checkpoints/``). Everything else goes through
:func:`tokengeo.probes.similarity.run.load_hf_encoder` and
:func:`tokengeo.train.loading.load_run`: a shared resolver of model names can replace the
bodies of :func:`check_model` and :func:`load_for_view` without touching the rest of the
explorer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tokengeo.errors import ConfigError


@dataclass
class ViewModel:
    """A model in eval mode, how it encodes text, and how one id reads as text."""

    model: nn.Module
    encode: Callable[[str], list[int]]
    token_text: Callable[[int], str]
    positions: int | None
    name: str


def _is_run_folder(name: str) -> bool:
    return not name.startswith("hf:") and (Path(name).expanduser() / "checkpoints").is_dir()


def check_model(name: str) -> None:
    """Refuse a ``--model`` that names nothing :func:`load_for_view` can load; loads nothing."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("--model is empty; give 'minilm', 'mpnet', 'smollm2-135m', "
                          "hf:FOLDER or a tokengeo run folder")
    if not _is_run_folder(name):
        from tokengeo.probes.similarity.run import check_model_name

        check_model_name(name.removeprefix("hf:"))


def load_for_view(name: str) -> ViewModel:
    """The model named ``name`` (see the module docstring), ready for :func:`extract_heads`."""
    check_model(name)
    path = Path(name.removeprefix("hf:")).expanduser()
    if _is_run_folder(name):
        return _tokengeo_run(path)
    from tokengeo.probes.similarity.run import load_hf_encoder

    model, tokenizer = load_hf_encoder(str(path) if name.startswith("hf:") else name)
    return ViewModel(model=model, encode=_hf_encoder(tokenizer),
                     token_text=lambda i: tokenizer.decode([i]),
                     positions=_hf_positions(model), name=name)


def _hf_encoder(tokenizer) -> Callable[[str], list[int]]:
    def encode(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=True)["input_ids"])

    return encode


def _hf_positions(model) -> int | None:
    from tokengeo.probes.similarity.run import max_positions

    return max_positions(model)


def _tokengeo_run(path: Path) -> ViewModel:
    from tokengeo.train.loading import load_run

    loaded = load_run(path)
    tokenizer = getattr(loaded.task.data, "tokenizer", None)
    if tokenizer is None:
        raise ConfigError(f"run {str(path)!r} was trained on {loaded.config.data!r}, which has "
                          "no text tokenizer; the explorer views text models")
    model = getattr(loaded.model, "model", loaded.model)  # a task wrapper holds the backbone
    block = getattr(model.config, "block_size", None)
    return ViewModel(model=model.eval(), encode=tokenizer.encode,
                     token_text=lambda i: tokenizer.decode([i]), positions=block,
                     name=str(path))


def encode_text(vm: ViewModel, text: str, max_tokens: int | None = None
                ) -> tuple[torch.Tensor, list[str]]:
    """``(1, T)`` ids and the ``T`` token strings of ``text`` (its first ``max_tokens`` tokens
    when given); refuses an empty text and one longer than the model's positions."""
    if not text.strip():
        raise ConfigError("the text is empty; give --text 'some words' or --file notes.txt")
    ids = vm.encode(text)
    if max_tokens is not None:
        ids = ids[:max_tokens]
    if vm.positions is not None and len(ids) > vm.positions:
        raise ConfigError(f"the text is {len(ids)} tokens but {vm.name} has {vm.positions} "
                          f"positions; give a shorter text (or --max-tokens {vm.positions})")
    return torch.tensor([ids], dtype=torch.long), [vm.token_text(i) for i in ids]


def corpus_window(corpus: str, offset: int, chars: int = 20_000) -> str:
    """``chars`` characters of a corpus (:func:`tokengeo.probes.similarity.read_corpus`: a
    named corpus, a text file or folder) from character ``offset`` of its joined documents."""
    from tokengeo.probes.similarity.corpus import read_corpus

    text = "\n\n".join(read_corpus(corpus))
    if offset < 0 or offset >= len(text):
        raise ConfigError(f"--offset {offset} is outside the corpus {corpus!r} "
                          f"({len(text)} characters); use 0..{max(len(text) - 1, 0)}")
    return text[offset : offset + chars]
