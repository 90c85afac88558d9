"""Laplacian heads: fused vs standard vs naive operator, training-step ratio, peak memory.

Prints one JSON object. Usage:
python benchmarks/laplacian_heads.py [--quick] [--device cuda] [--compile]
    [--kernel auto|lean|recompute|compose|triton]
(on cuda the sizes are a GPU's: see tokengeo.bench.laplacian.DEFAULTS).
"""

import argparse
import json

from tokengeo.bench.laplacian import LaplacianBenchConfig, run
from tokengeo.bench.measure import ensure_precise_rss
from tokengeo.nn.kernels import KERNELS

if __name__ == "__main__":
    ensure_precise_rss()
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kernel", default="auto", choices=KERNELS,
                        help="the Laplacian kernel measured (auto: what training uses)")
    parser.add_argument("--compile", action="store_true",
                        help="train steps through torch.compile")
    args = parser.parse_args()
    cfg = LaplacianBenchConfig(device=args.device, kernel=args.kernel, compile=args.compile)
    if args.quick:
        cfg.op_repeats, cfg.train_repeats = 5, 5
    print(json.dumps(run(cfg), indent=2))
