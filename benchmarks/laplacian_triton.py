"""The fused Triton kernel vs torch's standard SDPA: forward + backward time and peak memory
(see tokengeo.bench.laplacian_triton).

Prints one JSON object; CUDA only.
"""

import sys

from tokengeo.bench.laplacian_triton import main

if __name__ == "__main__":
    sys.exit(main())
