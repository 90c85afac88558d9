"""Trainer overhead (data, logging, checkpointing) as a fraction of step time
(see tokengeo.bench.trainer).

Prints one JSON object.
Usage: python benchmarks/trainer_overhead.py [--case vit|gpt|all] [--threads 1] [--steps 60]
"""

import json

from tokengeo.bench.cli import parse_config
from tokengeo.bench.trainer import TrainerBenchConfig, run

if __name__ == "__main__":
    print(json.dumps(run(parse_config(TrainerBenchConfig, __doc__))))
