"""Run the head-output similarity analysis over a corpus (library side of the CLI).

``analyze_windows(model, windows)`` streams fixed-length windows through any model with
``blocks.{l}.attn.hook_z`` sites (tokengeo models, Hugging Face BERT / GPT-2 / ViT
through :mod:`tokengeo.probes.hf_sites`) and accumulates
:class:`~tokengeo.probes.similarity.stats.HeadSimilarityAccumulator`; memory depends on
the batch size, the model and the vocabulary, never on the number of windows.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch import nn

from tokengeo.checks import check_int, check_positive, check_seed
from tokengeo.errors import ConfigError
from tokengeo.probes.capture import capture, hook_sites
from tokengeo.probes.similarity.corpus import Windows, make_windows, read_corpus, select_windows
from tokengeo.probes.similarity.pairs import Z_PATTERN, forward_tokens, layer_index
from tokengeo.probes.similarity.result import HeadSimilarityResult
from tokengeo.probes.similarity.stats import HeadSimilarityAccumulator

PATTERN_NAMES = "blocks.*.attn.hook_pattern"
SEPARATOR_TOKENS = (".", ",")  # the separators named by Halevi et al.


@dataclass
class SimilarityConfig:
    model: str = "minilm"  # a named model or a local Hugging Face folder (models.names)
    corpus: str = "shakespeare+python-docs"  # see tokengeo.probes.similarity.corpus
    samples: int = 2000
    seq_len: int = 128
    batch_size: int = 32
    top_k: int = 64
    short_range: int = 8
    seed: int = 0

    def validate(self) -> None:
        """Types and ranges of every field (no file is read, no model loaded)."""
        for name in ("model", "corpus"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name}={value!r} must be a non-empty name or path")
        if any(not part.strip() for part in self.corpus.split("+")):
            raise ConfigError(f"corpus={self.corpus!r} has an empty part; join corpus names "
                              "or paths with '+', e.g. shakespeare+python-docs")
        for name in ("samples", "seq_len", "batch_size", "top_k", "short_range"):
            check_int(name, getattr(self, name), lo=1)
        check_seed("seed", self.seed)
        if self.short_range >= self.seq_len:
            raise ConfigError(f"short_range={self.short_range} must be < seq_len="
                              f"{self.seq_len} (every pair would be short range)")


def similarity_operations(samples: int, seq_len: int, layers: int, width: int) -> float:
    """Elementary operations of analysing ``samples`` windows of ``seq_len`` tokens with an
    encoder of ``layers`` layers of width ``width``: per layer and window, the forward pass
    (~24 T d^2 for the projections and MLP, ~4 T^2 d for the attention) and the head-output
    similarities (~2 T^2 d, every head's (T, T) cosine matrix, Halevi et al. 2025)."""
    t, d = float(seq_len), float(width)
    return float(samples) * layers * (24.0 * t * d * d + 6.0 * t * t * d)


def check_similarity_time(cfg: SimilarityConfig, layers: int, width: int, *,
                          fix: str = "use fewer --samples, a shorter --seq-len or a smaller "
                                     "--model") -> None:
    """Refuse, before anything loads, an analysis that would run for more than the time
    limit of :func:`tokengeo.checks.check_time`, stating the estimate and ``fix``."""
    from tokengeo.checks import check_time

    check_time(f"similarity of samples={cfg.samples} windows of seq_len={cfg.seq_len} "
               f"through {layers} layers of width {width}",
               similarity_operations(cfg.samples, cfg.seq_len, layers, width),
               fix)


SIMILARITY_MODELS = ("named", "folder")  # what --model takes (tokengeo.models.names)


def check_model_name(name: str):
    """The source of ``name`` (a named model or a local Hugging Face folder, see
    :mod:`tokengeo.models.names`), or a ConfigError listing both; loads nothing. A folder
    must bring its tokenizer (the text is tokenised with it)."""
    from tokengeo.models.names import require_tokenizer, resolve_model

    return require_tokenizer(resolve_model(name, accept=SIMILARITY_MODELS))


def load_hf_encoder(name: str):
    """(model, tokenizer) of ``name`` (:func:`check_model_name`), eager attention (the
    hooks read the attention pattern), eval mode."""
    return check_model_name(name).load(attn_implementation="eager")


def max_positions(model: nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions"):
        if cfg is not None and getattr(cfg, attr, None) is not None:
            return int(getattr(cfg, attr))
    return None


def check_seq_len(model: nn.Module, seq_len: int) -> None:
    limit = max_positions(model)
    if limit is not None and seq_len > limit:
        raise ConfigError(f"seq_len={seq_len} exceeds the model's {limit} positions; use "
                          f"--seq-len <= {limit}")


class SimilarityStream:
    """Hooks a model and accumulates the statistics of the batches given to :meth:`add`.

    Use as a context manager (the hooks are removed on exit, also on error)::

        with SimilarityStream(model, seq_len=128, vocab_size=30522) as stream:
            for ids, sentence_ids in batches:
                stream.add(ids, sentence_ids)
        result = stream.result()
    """

    def __init__(self, model: nn.Module, *, seq_len: int, vocab_size: int, top_k: int = 64,
                 short_range: int = 8, separator_ids=(), special_ids=(),
                 attention: bool = True, keep_inputs: bool = False) -> None:
        check_seq_len(model, seq_len)
        sites = hook_sites(model)
        self.z_names = _layer_names(sites, "attn.hook_z")
        self.p_names = _layer_names(sites, "attn.hook_pattern") if attention else []
        if not self.z_names:
            raise ConfigError(f"{type(model).__name__} has no '{Z_PATTERN}' hook sites")
        self.model, self.seq_len, self.vocab_size = model, seq_len, vocab_size
        self.options = dict(top_k=top_k, short_range=short_range,
                            separator_ids=separator_ids, special_ids=special_ids,
                            keep_inputs=keep_inputs)
        self.acc: HeadSimilarityAccumulator | None = None
        self._capture = None

    def __enter__(self) -> SimilarityStream:
        self._capture = capture(self.model, self.z_names + self.p_names)
        self.cache = self._capture.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._capture.__exit__(*exc)

    @torch.no_grad()
    def add(self, input_ids: torch.Tensor, sentence_ids: torch.Tensor) -> None:
        """One forward pass of ``input_ids`` ``(B, T)`` on the model's device; accumulate
        its statistics (on the CPU)."""
        forward_tokens(self.model, input_ids.to(_device_of(self.model)))
        zs = [self.cache[n] for n in self.z_names]  # L x (B, T, H, Dh)
        if self.acc is None:
            self.acc = HeadSimilarityAccumulator(len(zs), zs[0].shape[2], self.seq_len,
                                                 self.vocab_size, **self.options)
        pats = [self.cache[n] for n in self.p_names] if self.p_names else None
        self.acc.update(zs, input_ids, sentence_ids, pats)

    def result(self) -> HeadSimilarityResult:
        if self.acc is None:
            raise ConfigError("no batches were added to the similarity analysis")
        return self.acc.compute()


def _device_of(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (the CPU for a model without any)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


def analyze_windows(model: nn.Module, windows: Windows, *, batch_size: int = 32,
                    top_k: int = 64, short_range: int = 8, separator_ids=(),
                    attention: bool = True, vocab_size: int | None = None,
                    progress: bool = False, keep_inputs: bool = False) -> HeadSimilarityResult:
    """Stream ``windows`` through ``model`` and return the similarity statistics
    (``keep_inputs``: with the per-input top-pair counts, ``result.input_counts``)."""
    check_positive("batch_size", batch_size)
    vocab = vocab_size or int(windows.input_ids.max()) + 1
    bar = _bar(len(windows)) if progress else None
    try:
        with SimilarityStream(model, seq_len=windows.seq_len, vocab_size=vocab, top_k=top_k,
                              short_range=short_range, separator_ids=separator_ids,
                              special_ids=windows.special_ids, attention=attention,
                              keep_inputs=keep_inputs) as stream:
            for s in range(0, len(windows), batch_size):
                batch = windows.input_ids[s : s + batch_size]
                stream.add(batch, windows.sentence_ids[s : s + batch_size])
                if bar is not None:
                    bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    return stream.result()


def _bar(total: int):
    """The tqdm bar over windows (rate and ETA) on stderr."""
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="window", desc="similarity", file=sys.stderr,
                dynamic_ncols=True, leave=False)


def _layer_names(sites, suffix: str) -> list[str]:
    return sorted((n for n in sites if _matches(n, suffix)), key=layer_index)


def _matches(name: str, suffix: str) -> bool:
    return name.startswith("blocks.") and name.endswith(suffix)


def check_shard(shard: int, shards: int) -> None:
    check_int("shards", shards, lo=1)
    check_int("shard", shard, lo=0)
    if shard >= shards:
        raise ConfigError(f"shard={shard} must be in 0..{shards - 1} (shards={shards})")


def shard_windows(windows: Windows, shard: int, shards: int) -> Windows:
    """Every ``shards``-th window from the ``shard``-th on: the shards of one draw are
    disjoint, and together they are the draw."""
    check_shard(shard, shards)
    return Windows(windows.input_ids[shard::shards], windows.sentence_ids[shard::shards],
                   windows.special_ids)


@dataclass
class Prepared:
    """A loaded encoder and the windows of one analysis (:func:`prepare`)."""

    model: nn.Module
    tokenizer: object
    windows: Windows
    separator_ids: list[int]


def prepare(cfg: SimilarityConfig, *, shard: int = 0, shards: int = 1,
            device: str | torch.device = "cpu") -> Prepared:
    """Load the model (onto ``device``) and corpus named by ``cfg`` and draw its windows.

    With ``shards = S``, ``S * cfg.samples`` windows are drawn (seed ``cfg.seed``) and shard
    ``s`` keeps every S-th of them from the s-th on: the shards of one draw are disjoint
    sets of ``cfg.samples`` inputs each, spread over the whole corpus."""
    cfg.validate()
    check_shard(shard, shards)
    docs = read_corpus(cfg.corpus)  # a bad corpus is found before the model loads
    model, tokenizer = load_hf_encoder(cfg.model)
    model.to(device)
    check_seq_len(model, cfg.seq_len)
    windows = make_windows(docs, tokenizer, cfg.seq_len)
    windows = shard_windows(select_windows(windows, cfg.samples * shards, seed=cfg.seed),
                            shard, shards)
    seps = [tokenizer.convert_tokens_to_ids(t) for t in SEPARATOR_TOKENS]
    return Prepared(model, tokenizer, windows, [i for i in seps if i is not None])


def analyze_prepared(cfg: SimilarityConfig, p: Prepared, *, progress: bool = False,
                     keep_inputs: bool = False) -> HeadSimilarityResult:
    """:func:`analyze_windows` of a :class:`Prepared` analysis with ``cfg``'s options; the
    dominant tokens decoded into ``result.token_names``."""
    result = analyze_windows(
        p.model, p.windows, batch_size=cfg.batch_size, top_k=cfg.top_k,
        short_range=cfg.short_range, separator_ids=p.separator_ids,
        vocab_size=len(p.tokenizer), progress=progress, keep_inputs=keep_inputs)
    result.token_names = [[p.tokenizer.convert_ids_to_tokens(int(t)) for t in row]
                          for row in result.dominant_token]
    return result


def run_similarity(cfg: SimilarityConfig, *, progress: bool = False,
                   device: str | torch.device = "cpu") -> HeadSimilarityResult:
    """Load the model and corpus named by ``cfg`` and analyse ``cfg.samples`` windows, the
    model on ``device`` (the statistics are accumulated on the CPU)."""
    return analyze_prepared(cfg, prepare(cfg, device=device), progress=progress)
