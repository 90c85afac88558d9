"""The host's cost per call of each Laplacian kernel, measured on the CPU at sizes where

The ``laplacian_host`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench laplacian_host`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("laplacian_host"))
