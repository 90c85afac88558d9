"""Token-geometry metrics, one module each; this module gathers them.

Every metric is a pure function of tensors returning a dataclass, with a streaming
accumulator (``update(batch)`` ... ``compute()``) that gives the same result:

- :mod:`~tokengeo.probes.variance`: ANOVA of token representations
  (within / between sequences, between classes of sequence means);
- :mod:`~tokengeo.probes.collapse`: neural collapse NC1-NC4 on sequence means and tokens;
- :mod:`~tokengeo.probes.spectrum`: singular spectrum, 99%-variance rank (pooled and per
  item), decay exponent;
- :mod:`~tokengeo.probes.separability`: next-token CDNV and nearest-mean accuracy.
"""

from tokengeo.probes.collapse import (
    NeuralCollapse,
    NeuralCollapseAccumulator,
    neural_collapse,
    neural_collapse_sequences,
    neural_collapse_tokens,
    sequence_features,
    token_features,
)
from tokengeo.probes.separability import (
    NextTokenAccumulator,
    NextTokenSeparability,
    frequent_classes,
    next_token_pairs,
    next_token_separability,
)
from tokengeo.probes.spectrum import (
    SpectralDecay,
    SpectrumAccumulator,
    per_item_component_counts,
    per_item_components,
    spectral_decay,
)
from tokengeo.probes.variance import (
    VarianceAccumulator,
    VarianceDecomposition,
    variance_decomposition,
)

__all__ = [
    "NeuralCollapse", "NeuralCollapseAccumulator", "neural_collapse",
    "neural_collapse_sequences", "neural_collapse_tokens", "sequence_features",
    "token_features", "NextTokenAccumulator", "NextTokenSeparability", "frequent_classes",
    "next_token_pairs", "next_token_separability", "SpectralDecay", "SpectrumAccumulator",
    "spectral_decay", "per_item_components", "per_item_component_counts", "VarianceAccumulator",
    "VarianceDecomposition", "variance_decomposition",
]
