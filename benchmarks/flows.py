"""Chunked flow simulator vs a materialising reference (see tokengeo.bench.flows).

Prints one JSON object.
Usage: python benchmarks/flows.py [--steps 5] [--repeats 3] [--n 200] [--heads 100] [--paths 10]
"""

import json

from tokengeo.bench.cli import parse_config
from tokengeo.bench.flows import FlowsBenchConfig, run

if __name__ == "__main__":
    print(json.dumps(run(parse_config(FlowsBenchConfig, __doc__))))
