"""SmolLM2-135M with k Laplacian heads per layer vs plain: forward and generate tokens/s.

Prints one JSON object (see tokengeo.bench.laplacian_hf for the method and the claim).
Usage: python benchmarks/laplacian_hf.py [--quick] [--plain-only] [--threads N] [--device cuda]
"""

import argparse
import json

import torch

from tokengeo.bench.laplacian_hf import VARIANTS, HFBenchConfig, run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=HFBenchConfig.model)
    parser.add_argument("--k", type=int, default=HFBenchConfig.n_laplacian,
                        help="Laplacian heads per layer (the last k)")
    parser.add_argument("--repeats", type=int, default=HFBenchConfig.repeats)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--plain-only", action="store_true",
                        help="time the plain model only (no laplacianize)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = HFBenchConfig(model=args.model, n_laplacian=args.k, device=args.device,
                        repeats=3 if args.quick else args.repeats)
    print(json.dumps(run(cfg, ("plain",) if args.plain_only else VARIANTS), indent=2))
