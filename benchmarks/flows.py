"""Chunked flow simulator vs a materialising reference (see tokengeo.bench.flows).

The ``flows`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench flows`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("flows"))
