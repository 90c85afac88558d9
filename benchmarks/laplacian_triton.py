"""The fused Triton kernel vs torch's standard SDPA: forward + backward time and peak memory

The ``laplacian_triton`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench laplacian_triton`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("laplacian_triton"))
