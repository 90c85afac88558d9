"""Head-output similarity analysis vs the plain forward pass, and its memory

The ``similarity`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench similarity`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("similarity"))
