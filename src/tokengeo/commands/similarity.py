"""``tokengeo similarity``: head-output similarity analysis of a pretrained encoder.

Writes ``similarity.json`` (statistics per layer and head), ``mean_similarity.npy``
(the ``(L, H, T, T)`` mean matrices), ``config.json`` and three PNG figures to ``--out``,
and prints a per-layer table. The output folder is filled in a temporary sibling and
renamed at the end, so an interrupted run leaves no partial results. It also holds a marker
(``.tokengeo-output.json``): ``--overwrite`` replaces only a folder with that marker, so a
mistyped ``--out`` never deletes an unrelated folder. One run at a time per ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.io import write_json
from tokengeo.outfolder import check_folder, output_folder

# what the printed table's columns mean (one row per layer, means over its heads; "top
# pairs": each input's top-k token pairs by head-output similarity S; shares in [0, 1])
TABLE_LEGEND = """\
columns (per layer, mean over heads; top pairs = each window's --top-k most similar pairs):
  within     share of top pairs inside one sentence     within_dm  its chance, distance-matched
  short      share of positive mean S at distance <= --short-range
  top_short  share of top pairs at distance <= --short-range
  contrast   same- minus cross-sentence S at equal distance, in std(S) of unrelated pairs
  repeated   share of top pairs joining two copies of one token
  top_long   share of top pairs at distance >= seq_len/4
  converge   per window, the largest share of top pairs that meet on one token
  noise      share of top pairs with no sentence or repetition relation
  snr        d' of related against unrelated pairs
  sep_attn   attention mass on '.' and ','         spec_attn  attention mass on special tokens
  distinct   distinct dominant tokens / heads
  in_dist    per window, heads with a dominant token of their own / heads
  in_chance  the same for independently shuffled heads
  '-': not measured for this model (no attention patterns)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tokengeo.commands import flags

    flags.add_legend(parser, TABLE_LEGEND)

    parser.add_argument("--model", default="minilm",
                        help="'minilm' (all-MiniLM-L6-v2), 'mpnet' (all-mpnet-base-v2, after "
                             "make mpnet), 'smollm2-135m' (tokengeo list-models --named) or a "
                             "local Hugging Face model folder")
    parser.add_argument("--corpus", default="shakespeare+python-docs",
                        help="shakespeare, austen, python-docs, a text file or folder, or "
                             "a+b (e.g. shakespeare+austen)")
    parser.add_argument("--samples", type=int, default=2000, help="number of windows")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per window")
    parser.add_argument("--batch-size", type=int, default=32, help="windows per forward pass")
    parser.add_argument("--top-k", type=int, default=64, help="top pairs per input and head")
    parser.add_argument("--short-range", type=int, default=8,
                        help="largest token distance counted as short range")
    parser.add_argument("--seed", type=int, default=0, help="seed of the window sample")
    parser.add_argument("--out", required=True, help="output folder (must be new or empty)")
    flags.add_overwrite(parser, "similarity")
    flags.add_no_figures(parser)
    flags.add_quiet(parser)
    flags.add_threads(parser)
    flags.add_device(parser, help="where the encoder runs (auto: cuda when available; the "
                                  "statistics are summed on the CPU)")


def run(args: argparse.Namespace) -> int:
    from tokengeo.commands.flags import apply_threads, resolve_device
    from tokengeo.probes.similarity.run import SimilarityConfig, run_similarity
    from tokengeo.train.progress import bar_wanted

    apply_threads(args.threads)
    device = resolve_device(args.device)  # a missing CUDA is refused before --out is touched
    out = check_folder(args.out, "similarity", overwrite=args.overwrite)
    cfg = SimilarityConfig(model=args.model, corpus=args.corpus, samples=args.samples,
                           seq_len=args.seq_len, batch_size=args.batch_size, top_k=args.top_k,
                           short_range=args.short_range, seed=args.seed)
    check_arguments(cfg)  # before the model loads (seconds) and the corpus is tokenised
    with output_folder(out, "similarity", overwrite=args.overwrite, aside=True) as work:
        start = time.perf_counter()
        result = run_similarity(cfg, progress=not args.quiet and bar_wanted(), device=device)
        seconds = time.perf_counter() - start
        _write(work, result, cfg, seconds, figures=not args.no_figures, device=device)
    print(result.table())
    print(TABLE_LEGEND)
    print(f"{result.n_samples} windows in {seconds:.0f} s; results in {out}")
    return 0


def check_arguments(cfg) -> None:
    """Refuse bad sizes, an unknown model and an unknown corpus without loading anything."""
    from tokengeo.probes.similarity.corpus import NAMED_CORPORA as CORPORA
    from tokengeo.probes.similarity.run import check_model_name

    if cfg.seq_len == 1:
        raise ConfigError(f"--seq-len {cfg.seq_len} leaves no token pairs; use >= 2")
    cfg.validate()
    from tokengeo.probes.similarity.corpus import user_corpus_files

    source = check_model_name(cfg.model)  # its sizes come from its config, not its weights
    corpus_bytes = 0
    for part in (p.strip() for p in cfg.corpus.split("+")):
        if part in CORPORA:
            continue
        files = user_corpus_files(Path(part).expanduser())
        if files is None:
            raise ConfigError(f"--corpus part {part!r} is neither a known corpus {list(CORPORA)} "
                              "nor an existing text file or folder")
        for f in files:  # every file of a folder too: a binary one is never analysed
            _check_text_file(f)
            corpus_bytes += f.stat().st_size
    _check_sizes(cfg, source, corpus_bytes)


def _check_text_file(path: Path) -> None:
    """The first 64 KiB of a corpus file decode as UTF-8 text (no NUL bytes); a FIFO or
    device is refused, never waited on."""
    from tokengeo.io import open_binary

    try:
        with open_binary(path) as f:
            head = f.read(1 << 16)
    except ConfigError as exc:
        raise ConfigError(f"--corpus: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"--corpus file {path} cannot be read ({exc.strerror})") from None
    try:
        head.decode("utf-8") if len(head) < 1 << 16 else head[:-4].decode("utf-8")
        ok = b"\0" not in head
    except UnicodeDecodeError:
        ok = False
    if not ok:
        raise ConfigError(f"--corpus file {path} is not UTF-8 text; give a .txt/.md/.rst file")


# bytes of memory per byte of a user's corpus while it is read, tokenised and cut into
# windows (a 47 MB corpus was measured at 8.2 GB, ~175 per byte)
CORPUS_BYTES_FACTOR = 200


def _check_sizes(cfg, source, corpus_bytes: int = 0) -> None:
    """seq_len within the model's positions; the analysis ends within the time limit; the
    windows, one batch and the tokenised user corpus fit in memory (12 layers and heads,
    width 64 per head, assumed where the source does not say)."""
    from tokengeo.checks import check_memory

    limit = source.max_positions
    if limit is not None and cfg.seq_len > limit:
        raise ConfigError(f"seq_len={cfg.seq_len} exceeds the model's {limit} positions; use "
                          f"--seq-len <= {limit}")
    layers, heads = source.n_layers or 12, source.n_heads or 12
    from tokengeo.probes.similarity.run import check_similarity_time

    check_similarity_time(cfg, layers, source.width or 64 * heads)
    windows = 16.0 * cfg.samples * cfg.seq_len  # input and sentence ids, int64
    batch = 4.0 * 4 * cfg.batch_size * heads * cfg.seq_len**2 * layers  # (L, H, B, T, T) x 4
    check_memory(f"samples={cfg.samples}, batch_size={cfg.batch_size}, seq_len={cfg.seq_len}",
                 windows + batch, "use fewer samples or a smaller --batch-size")
    check_memory(f"tokenising the {corpus_bytes / 2**20:.0f} MB --corpus",
                 float(CORPUS_BYTES_FACTOR) * corpus_bytes + windows + batch,
                 "give a smaller --corpus (a part of its files)")


def _write(work: Path, result, cfg, seconds: float, *, figures: bool,
           device: str = "cpu") -> None:
    result.save(work)
    meta = {"config": dataclasses.asdict(cfg), "seconds": seconds, "device": device}
    write_json(work / "config.json", meta, indent=1)
    if figures:
        from tokengeo.probes.similarity.plots import save_figures

        save_figures(result, work)
