"""Head-output similarity analysis vs the plain forward pass, and its memory
(see tokengeo.bench.similarity). Needs transformers and all-MiniLM-L6-v2 offline
(--model mpnet: all-mpnet-base-v2, installed by `make mpnet`).

Prints one JSON object.
Usage: python benchmarks/similarity.py [--model minilm|mpnet] [--batches 6] [--repeats 3]
       [--no-memory]
"""

import json

from tokengeo.bench.cli import parse_config
from tokengeo.bench.similarity import SimilarityBenchConfig, run

if __name__ == "__main__":
    print(json.dumps(run(parse_config(SimilarityBenchConfig, __doc__))))
