"""The host's cost per call of each Laplacian kernel, measured on the CPU at sizes where
arithmetic is negligible: what short sequences on a GPU pay (see
tokengeo.bench.laplacian_host).

Prints one JSON object.
"""

import sys

from tokengeo.bench.laplacian_host import main

if __name__ == "__main__":
    sys.exit(main())
