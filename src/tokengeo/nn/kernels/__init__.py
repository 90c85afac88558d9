"""The attention kernels for heads of every kind, behind one door.

:data:`~tokengeo.nn.kernels.table.TABLE` (its module docstring is the map: what each
kernel saves, costs, and where it is the default) is the only place a kernel is chosen;
:func:`laplacian_attention` is the functional door, :class:`tokengeo.nn.attention.HeadAttention`
the modules' (planned once per input signature).
"""

from tokengeo.nn.heads import head_runs
from tokengeo.nn.kernels.compose import combine_runs, compose
from tokengeo.nn.kernels.functional import laplacian_attention
from tokengeo.nn.kernels.in_place import ROUTES, backward_route
from tokengeo.nn.kernels.table import (
    KERNELS,
    TABLE,
    Call,
    Kernel,
    Plan,
    autocast_inputs,
    check_kernel_name,
    plan_kernel,
)

__all__ = ["KERNELS", "ROUTES", "TABLE", "Call", "Kernel", "Plan", "autocast_inputs",
           "backward_route", "check_kernel_name", "combine_runs", "compose", "head_runs",
           "laplacian_attention", "plan_kernel"]
