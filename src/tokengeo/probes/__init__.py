"""tokengeo.probes: capture activations, token-geometry metrics, head-output similarity.

Imported lazily (``tokengeo.probes.head_output_similarity`` loads only what it needs)::

    probes.capture.capture(model, ["blocks.*.attn.hook_z"])  # context manager -> {name: x}
    head_output_similarity(model, input_ids)            # (L, H, B, T, T), diagonal zeroed
    analyze_windows(model, windows)                     # streaming corpus statistics
    variance_decomposition / neural_collapse / spectral_decay / next_token_separability
    head_smoothing(model, inputs)                       # per-head smoothing sign, rows
    smoothing_reading(model, inputs)                    # + per-sublayer shares before/after
    object_separation(tokens, patch_foreground(images, patch))  # object vs background η²
"""

from __future__ import annotations

import importlib

_LAZY = {
    "run_with_cache": "tokengeo.probes.capture",
    "run_with_hooks": "tokengeo.probes.hooked",
    "with_hooks": "tokengeo.probes.hooked",
    "reset_hooks": "tokengeo.probes.hooked",
    "ActivationCache": "tokengeo.probes.activation_cache",
    "hook_sites": "tokengeo.probes.capture",
    "hf_hook_sites": "tokengeo.probes.hf_sites",
    "head_output_similarity": "tokengeo.probes.similarity.pairs",
    "context_similarity": "tokengeo.probes.similarity.pairs",
    "HeadSimilarityAccumulator": "tokengeo.probes.similarity.stats",
    "HeadSimilarityResult": "tokengeo.probes.similarity.result",
    "SimilarityStream": "tokengeo.probes.similarity.run",
    "SimilarityConfig": "tokengeo.probes.similarity.run",
    "analyze_windows": "tokengeo.probes.similarity.run",
    "run_similarity": "tokengeo.probes.similarity.run",
    "make_windows": "tokengeo.probes.similarity.corpus",
    "read_corpus": "tokengeo.probes.similarity.corpus",
    "Windows": "tokengeo.probes.similarity.corpus",
    "head_smoothing": "tokengeo.probes.smoothing",
    "HeadSmoothing": "tokengeo.probes.smoothing",
    "smoothing_reading": "tokengeo.probes.smoothing",
    "SublayerSmoothing": "tokengeo.probes.smoothing",
    "variance_step": "tokengeo.probes.diffusion",
    "dirichlet_step": "tokengeo.probes.diffusion",
    "dirichlet_energy": "tokengeo.probes.diffusion",
    "patch_foreground": "tokengeo.probes.objects",
    "object_separation": "tokengeo.probes.objects",
}
_GEOMETRY = [
    "NeuralCollapse", "NeuralCollapseAccumulator", "neural_collapse",
    "neural_collapse_sequences", "neural_collapse_tokens", "NextTokenAccumulator",
    "NextTokenSeparability", "next_token_separability", "SpectralDecay",
    "SpectrumAccumulator", "spectral_decay", "per_item_components", "per_item_component_counts",
    "VarianceAccumulator", "VarianceDecomposition",
    "variance_decomposition",
]
_LAZY.update({name: "tokengeo.probes.geometry" for name in _GEOMETRY})

__all__ = list(_LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__} - {"annotations", "importlib"})


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tokengeo.probes' has no attribute {name!r}")
