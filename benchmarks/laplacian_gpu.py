"""Laplacian heads on a GPU: operator and training-step cost against standard attention
(see tokengeo.bench.laplacian_gpu).

Prints one JSON object; CUDA only.
"""

import sys

from tokengeo.bench.laplacian_gpu import main

if __name__ == "__main__":
    sys.exit(main())
