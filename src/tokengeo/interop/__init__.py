"""tokengeo's models in TransformerLens and nnsight (the ``interp`` extra).

:func:`to_transformer_lens` gives a tokengeo GPT or a (laplacianized) Hugging Face model
as a TransformerLens ``TransformerBridge`` whose per-head results are exact for every head
kind. nnsight needs nothing: trace a tokengeo model and read its hook points
(``model.blocks[0].attn.hook_z.output``). docs/interop.md shows both.
"""

from tokengeo.interop.bridge import to_transformer_lens

__all__ = ["to_transformer_lens"]
