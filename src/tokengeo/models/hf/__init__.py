"""tokengeo.models.hf: the bridge to Hugging Face ``transformers`` models.

=================  ======================================================================
module             what it holds
=================  ======================================================================
``patch``          Laplacian (and mixed) heads patched into a loaded model
                   (:func:`laplacianize`, :func:`unlaplacianize`), and a saved one
                   reloaded with its heads (:func:`from_pretrained`)
``families``       the supported architectures: where each keeps its attention and sizes
``lm``             ``hf:<source>`` causal LMs trained by ``tokengeo train``
``pretrained``     named pretrained LMs read from their GGUF, cached as safetensors
``gguf_header``    a GGUF file's key/value header, read without its tensors
``mpnet``          the all-mpnet-base-v2 encoder, unpacked from its pip parts
``names``          what a Hugging Face folder says before loading, and the built-in names
                   (the resolver itself is :mod:`tokengeo.models.names`)
=================  ======================================================================

The names of ``patch`` are importable from here (``from tokengeo.models.hf import
laplacianize``). Nothing else in :mod:`tokengeo.models` imports this package except the
resolver and the package's ``__init__`` (which registers the ``hf:`` names).
"""

from tokengeo.models.hf.patch import (
    CONFIG_KEY,
    KIND_KEY,
    KINDS,
    MIX_NAME,
    SUPPORTED,
    AttentionSite,
    LaplacianSwap,
    attention_sites,
    from_pretrained,
    head_blocks,
    laplacian_heads,
    laplacianize,
    last_layers_heads,
    mixed_coefficients,
    recorded_heads,
    resolve_heads,
    unlaplacianize,
)

__all__ = [
    "CONFIG_KEY", "KIND_KEY", "KINDS", "MIX_NAME", "SUPPORTED", "AttentionSite",
    "LaplacianSwap", "attention_sites", "from_pretrained", "head_blocks", "laplacian_heads",
    "laplacianize", "last_layers_heads", "mixed_coefficients", "recorded_heads",
    "resolve_heads", "unlaplacianize",
]
