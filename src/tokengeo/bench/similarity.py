"""Benchmark: head-output similarity analysis vs the plain forward pass, and its memory.

``--model``: ``minilm`` (all-MiniLM-L6-v2, 6 x 12, the default) or ``mpnet``
(all-mpnet-base-v2, 12 x 12; ``make mpnet``) or any name :mod:`tokengeo.models.names` knows.

Claims: the streaming analysis runs at >= 0.75 of the throughput of a plain
eager forward pass of the same model on the same batches, and its peak memory does not
grow with the number of samples.

Throughput: every batch goes through ``model(input_ids=...)`` (eager attention, no hooks)
and then through :class:`tokengeo.probes.similarity.run.SimilarityStream` (hooks on
``hook_z`` and ``hook_pattern``, forward, every statistic), interleaved, ``--repeats``
times; ratio = median plain batch time / median analysis batch time, in wall time and in
process CPU time (the machines are shared: CPU time is less disturbed by other jobs).
Memory: two child processes each run one plain batch (peak RSS A), then analyse
``--memory-samples`` windows (peak RSS B); the peak mark is reset before each part
(``/proc/self/clear_refs``), so B is the analysis' own peak, not the process lifetime's;
the children run with ``MALLOC_MMAP_THRESHOLD_`` fixed so RSS follows live memory.
:func:`run` returns one JSON-able dict.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import torch

from tokengeo.bench.measure import reset_peak_rss, status_bytes, timed
from tokengeo.io import parse_json


@dataclass
class SimilarityBenchConfig:
    model: str = "minilm"
    batch_size: int = 32
    batches: int = 6
    seq_len: int = 128
    repeats: int = 3
    memory_samples: tuple[int, ...] = (64, 512)  # windows analysed by each memory child
    memory: bool = True  # run the memory part


def _setup(model_name: str, n_windows: int, seq_len: int):
    from tokengeo.probes.similarity.corpus import make_windows, read_corpus, select_windows
    from tokengeo.probes.similarity.run import load_hf_encoder

    model, tok = load_hf_encoder(model_name)
    docs = read_corpus("shakespeare")[:4]
    windows = select_windows(make_windows(docs, tok, seq_len), n_windows)
    seps = [tok.convert_tokens_to_ids(t) for t in (".", ",")]
    return model, tok, windows, seps


def _stream(model, tok, windows, seps):
    from tokengeo.probes.similarity.run import SimilarityStream

    return SimilarityStream(model, seq_len=windows.seq_len, vocab_size=len(tok),
                            separator_ids=seps, special_ids=windows.special_ids)


def throughput(args: SimilarityBenchConfig) -> dict:
    """Per batch: one plain forward, then the same batch through the analysis; medians."""
    model, tok, windows, seps = _setup(args.model, args.batches * args.batch_size,
                                       args.seq_len)
    B = args.batch_size
    batches = [(windows.input_ids[s : s + B], windows.sentence_ids[s : s + B])
               for s in range(0, len(windows), B)]
    plain, analysis = [], []
    with torch.no_grad(), _stream(model, tok, windows, seps) as stream:
        model(input_ids=batches[0][0])  # warm-up (also the hooked path, discarded)
        stream.add(*batches[0])
        for _ in range(args.repeats):
            for ids, sent in batches:
                plain.append(timed(lambda ids=ids: model(input_ids=ids)))
                analysis.append(timed(lambda ids=ids, sent=sent: stream.add(ids, sent)))
    t = time.perf_counter()
    stream.result()
    compute_s = time.perf_counter() - t
    med = {k: statistics.median(x[i] for x in v) for k, v in (("plain", plain),
           ("analysis", analysis)) for i, k in ((0, k + "_wall"), (1, k + "_cpu"))}
    return {"ratio_wall": med["plain_wall"] / med["analysis_wall"],
            "ratio_cpu": med["plain_cpu"] / med["analysis_cpu"],
            "plain_batch_median_wall_s": med["plain_wall"],
            "analysis_batch_median_wall_s": med["analysis_wall"],
            "plain_batch_median_cpu_s": med["plain_cpu"],
            "analysis_batch_median_cpu_s": med["analysis_cpu"],
            "n_timed_batches": len(plain), "result_compute_s": compute_s}


def _status_mib(key: str) -> float:
    return status_bytes(key) / 2**20


def memory_child(n: int, args: SimilarityBenchConfig) -> dict:
    """Peak RSS during one plain forward batch, then during the analysis of ``n`` windows."""
    model, tok, windows, seps = _setup(args.model, n, args.seq_len)
    B = args.batch_size
    base = _status_mib("VmRSS")
    reset_peak_rss()
    with torch.no_grad():
        model(input_ids=windows.input_ids[:B])
    plain_peak = _status_mib("VmHWM")
    reset_peak_rss()
    with _stream(model, tok, windows, seps) as stream:
        for s in range(0, n, B):
            stream.add(windows.input_ids[s : s + B], windows.sentence_ids[s : s + B])
    stream.result()
    peak = _status_mib("VmHWM")
    return {"samples": n, "rss_before_mib": base, "peak_rss_plain_forward_mib": plain_peak,
            "peak_rss_analysis_mib": peak, "analysis_peak_minus_plain_peak_mib": peak - plain_peak}


def memory(args: SimilarityBenchConfig) -> list[dict]:
    """:func:`memory_child` in a fresh process per sample count (``python -m`` this module)."""
    out = []
    for n in args.memory_samples:
        cmd = [sys.executable, "-m", __name__, str(n), json.dumps(asdict(args))]
        # a fixed mmap threshold returns freed blocks to the OS at once, so RSS tracks the
        # live tensors instead of the allocator's free lists
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
        from tokengeo.lifetime import die_with_parent

        res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env,
                             preexec_fn=die_with_parent)  # dies with this process
        out.append(parse_json(res.stdout.strip().splitlines()[-1] if res.stdout.strip()
                              else "", "the memory child's output line", dict))
    return out


def run(cfg: SimilarityBenchConfig) -> dict:
    """Throughput ratio and (unless ``cfg.memory`` is off) peak memory per sample count."""
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    result = {"benchmark": "similarity", "model": f"{cfg.model} (eager attention)",
              "batch_size": cfg.batch_size, "seq_len": cfg.seq_len, "batches": cfg.batches,
              "repeats": cfg.repeats, "torch": torch.__version__,
              "threads": torch.get_num_threads(), "target_ratio": 0.75}
    result.update(throughput(cfg))
    if cfg.memory:
        result["memory"] = memory(cfg)
    return result


if __name__ == "__main__":  # the memory child: python -m tokengeo.bench.similarity N CONFIG
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    child_cfg = SimilarityBenchConfig(**parse_json(sys.argv[2], "the child's config", dict))
    print(json.dumps(memory_child(int(sys.argv[1]), child_cfg)))
