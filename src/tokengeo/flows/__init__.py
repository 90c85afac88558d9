"""tokengeo.flows: tokens as particles on the sphere under multi-head attention.

The simulator of Massucco et al., "Multi-Headed Transformer Architectures as Time-dependent
Wasserstein Gradient Flows" (arXiv 2605.18870): n tokens on S^{d-1}, H heads whose weights
D_h(t) evolve in depth (Ornstein-Uhlenbeck, oscillating, frozen, or a trained model's layers),
the energy-dissipation balance along each run, clustering diagnostics and the H-scaling of the
strong gradient. Modules: ``dynamics`` (field, energy, G^2), ``integrators`` and ``simulate``,
``graph`` (the Euler steps as CUDA graphs), ``weights`` (drifts, layer schedules), ``presets``,
``diagnostics`` (clusters, settling, words), ``fits`` (power laws, local slopes), ``scaling``
(the H sweep), ``theory`` (energy balance as dt -> 0, Grönwall, weight-path shifts), ``plots``.

    from tokengeo.flows import simulate
    from tokengeo.flows.presets import get_preset
    preset = get_preset("s2-ou", n_paths=4, T=2.0)
    x0, D0 = preset.initial_state()
    result = simulate(x0, D0, preset.flow_config())  # or FlowConfig(drift="ou", T=2.0, ...)
"""

from tokengeo.flows.dynamics import FieldEval, evaluate_field, interaction_energy, tangent_project
from tokengeo.flows.simulate import FlowConfig, FlowResult, simulate
from tokengeo.flows.weights import (
    LayerSchedule,
    heads_from_model,
    oscillating_target,
    resolve_drift,
)

__all__ = [
    "FieldEval",
    "FlowConfig",
    "FlowResult",
    "LayerSchedule",
    "evaluate_field",
    "heads_from_model",
    "interaction_energy",
    "oscillating_target",
    "resolve_drift",
    "simulate",
    "tangent_project",
]
