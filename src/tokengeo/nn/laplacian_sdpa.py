"""Moved: the kernels and their table are :mod:`tokengeo.nn.kernels`."""

raise ImportError("tokengeo.nn.laplacian_sdpa moved to tokengeo.nn.kernels "
                  "(laplacian_attention, plan_kernel, KERNELS)")
