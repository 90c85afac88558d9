"""Head-output similarity (Halevi et al., arXiv 2512.21956): one module per step.

================  ==========================================================================
``corpus``        fixed-length token windows of a text corpus, with sentence ids
``pairs``         per-head context-similarity matrices ``S_ij = <z_i, z_j>`` of one batch
``stats``         :class:`HeadSimilarityAccumulator`: streaming sums over a corpus
``result``        :class:`HeadSimilarityResult` (means and shares from the sums), JSON, table
``run``           the pipeline: load an encoder, stream windows, accumulate (``run_similarity``)
``plots``         PNG figures of a result (matplotlib)
``ranks``         rank statistics over masked rows: AUC, Spearman, stratified AUC, bootstrap
``vs_attention``  output similarity vs attention maps: ρ, AUC per token relation, verdict
================  ==========================================================================

The names below are also importable from this package (loaded on first use).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "head_output_similarity": "pairs",
    "context_similarity": "pairs",
    "HeadSimilarityAccumulator": "stats",
    "HeadSimilarityResult": "result",
    "SimilaritySums": "result",
    "SimilarityStream": "run",
    "SimilarityConfig": "run",
    "analyze_windows": "run",
    "run_similarity": "run",
    "make_windows": "corpus",
    "read_corpus": "corpus",
    "Windows": "corpus",
    "AttentionComparison": "vs_attention",
    "AttentionComparisonAccumulator": "vs_attention",
    "compare_windows": "vs_attention",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
