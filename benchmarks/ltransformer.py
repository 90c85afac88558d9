"""L-Transformer (p = 4, batched and sequential slices) vs the standard encoder.

Forward+backward step time and peak memory at d in {128, 256, 768}, 4 layers, T = 128,
batch 32, and the encoder-parameter ratio; prints one JSON object.
Usage: python benchmarks/ltransformer.py [--quick] [--device cuda] [--widths 128 256]
"""

import argparse
import json

from tokengeo.bench.ltransformer import LTransformerBenchConfig, run
from tokengeo.bench.measure import ensure_precise_rss

HEADS = {128: 4, 256: 8, 768: 12}  # baseline heads: head width 32, 32, 64

if __name__ == "__main__":
    ensure_precise_rss()
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--widths", type=int, nargs="+", choices=sorted(HEADS),
                        default=sorted(HEADS))
    args = parser.parse_args()
    cfg = LTransformerBenchConfig(device=args.device, widths=tuple(args.widths),
                                  baseline_heads=tuple(HEADS[d] for d in args.widths))
    if args.quick:
        cfg.repeats = 3
    print(json.dumps(run(cfg), indent=2))
