"""Laplacian heads: fused vs standard vs naive operator, training-step ratio, peak memory.

The ``laplacian`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench laplacian`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("laplacian"))
