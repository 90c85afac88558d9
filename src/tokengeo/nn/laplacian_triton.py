"""Moved: the fused Triton kernel is :mod:`tokengeo.nn.kernels.triton`."""

raise ImportError("tokengeo.nn.laplacian_triton moved to tokengeo.nn.kernels.triton")
