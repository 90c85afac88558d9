"""L-Transformer (p = 4, batched and sequential slices) vs the standard encoder.

The ``ltransformer`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench ltransformer`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("ltransformer"))
