"""Benchmark: head-output similarity analysis vs the plain forward pass, and its memory.

Claims (issue 5): the streaming analysis runs at >= 0.75 of the throughput of a plain
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
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def _setup(n_windows: int, seq_len: int):
    from tokengeo.probes.similarity.corpus import make_windows, read_corpus, select_windows
    from tokengeo.probes.similarity.run import load_hf_encoder

    model, tok = load_hf_encoder("minilm")
    docs = read_corpus("shakespeare")[:4]
    windows = select_windows(make_windows(docs, tok, seq_len), n_windows)
    seps = [tok.convert_tokens_to_ids(t) for t in (".", ",")]
    return model, tok, windows, seps


def _stream(model, tok, windows, seps):
    from tokengeo.probes.similarity.run import SimilarityStream

    return SimilarityStream(model, seq_len=windows.seq_len, vocab_size=len(tok),
                            separator_ids=seps, special_ids=windows.special_ids)


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of ``fn()``."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def throughput(args) -> dict:
    """Per batch: one plain forward, then the same batch through the analysis; medians."""
    model, tok, windows, seps = _setup(args.batches * args.batch_size, args.seq_len)
    B = args.batch_size
    batches = [(windows.input_ids[s : s + B], windows.sentence_ids[s : s + B])
               for s in range(0, len(windows), B)]
    plain, analysis = [], []
    with torch.no_grad(), _stream(model, tok, windows, seps) as stream:
        model(input_ids=batches[0][0])  # warm-up (also the hooked path, discarded)
        stream.add(*batches[0])
        for _ in range(args.repeats):
            for ids, sent in batches:
                plain.append(_timed(lambda ids=ids: model(input_ids=ids)))
                analysis.append(_timed(lambda ids=ids, sent=sent: stream.add(ids, sent)))
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


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def memory_child(n: int, args) -> dict:
    """Peak RSS during one plain forward batch, then during the analysis of ``n`` windows."""
    model, tok, windows, seps = _setup(n, args.seq_len)
    B = args.batch_size
    base = _status_mib("VmRSS")
    _reset_peak()
    with torch.no_grad():
        model(input_ids=windows.input_ids[:B])
    plain_peak = _status_mib("VmHWM")
    _reset_peak()
    with _stream(model, tok, windows, seps) as stream:
        for s in range(0, n, B):
            stream.add(windows.input_ids[s : s + B], windows.sentence_ids[s : s + B])
    stream.result()
    peak = _status_mib("VmHWM")
    return {"samples": n, "rss_before_mib": base, "peak_rss_plain_forward_mib": plain_peak,
            "peak_rss_analysis_mib": peak, "analysis_peak_minus_plain_peak_mib": peak - plain_peak}


def memory(args) -> list[dict]:
    out = []
    for n in args.memory_samples:
        cmd = [sys.executable, __file__, "--memory-child", str(n), "--batch-size",
               str(args.batch_size), "--seq-len", str(args.seq_len)]
        # a fixed mmap threshold returns freed blocks to the OS at once, so RSS tracks the
        # live tensors instead of the allocator's free lists
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
        res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-samples", type=int, nargs=2, default=[64, 512])
    parser.add_argument("--no-memory", action="store_true", help="skip the memory part")
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args)))
        return
    result = {"benchmark": "similarity", "model": "all-MiniLM-L6-v2 (eager attention)",
              "batch_size": args.batch_size, "seq_len": args.seq_len, "batches": args.batches,
              "repeats": args.repeats, "torch": torch.__version__,
              "threads": torch.get_num_threads(), "target_ratio": 0.75}
    result.update(throughput(args))
    if not args.no_memory:
        result["memory"] = memory(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
