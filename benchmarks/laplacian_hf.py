"""SmolLM2-135M with k Laplacian heads per layer vs plain: forward and generate tokens/s.

The ``laplacian_hf`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench laplacian_hf`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("laplacian_hf"))
