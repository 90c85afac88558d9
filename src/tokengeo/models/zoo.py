"""The built-in variants. Sizes are chosen to train in minutes on a 2-core CPU."""

from __future__ import annotations

from tokengeo.models.config import GPTConfig, TextEncoderConfig, ViTConfig
from tokengeo.models.encoder import TextEncoder
from tokengeo.models.gpt import GPT
from tokengeo.models.ltransformer import LTransformer, LTransformerConfig
from tokengeo.models.registry import register_model
from tokengeo.models.vit import ViT

register_model(
    "vit-tiny", "vit", ViTConfig, ViT, "28x28 images, 4x4 patches (49 + cls tokens)",
    d_model=64, n_layers=4, n_heads=4, mlp_ratio=2.0, image_size=28, patch_size=4,
)
register_model(
    "vit-small", "vit", ViTConfig, ViT, "ViT-S/4 widths on 28x28 images",
    d_model=192, n_layers=6, n_heads=6, mlp_ratio=4.0, image_size=28, patch_size=4,
)
register_model(
    "gpt-tiny", "gpt", GPTConfig, GPT, "char-level scale causal LM",
    d_model=128, n_layers=4, n_heads=4, vocab_size=256, block_size=256,
)
register_model(
    "gpt-small", "gpt", GPTConfig, GPT, "BPE-scale causal LM",
    d_model=384, n_layers=6, n_heads=6, vocab_size=50257, block_size=256,
)
register_model(
    "encoder-tiny", "encoder", TextEncoderConfig, TextEncoder, "text classifier, mean pooling",
    d_model=128, n_layers=2, n_heads=4, vocab_size=8192, max_len=128, num_classes=2,
)
register_model(
    "encoder-small", "encoder", TextEncoderConfig, TextEncoder, "text classifier, mean pooling",
    d_model=256, n_layers=4, n_heads=8, vocab_size=8192, max_len=256, num_classes=2,
)

# L-Transformer (El Ichi et al., arXiv 2603.05727): the width split into p = 4 spectral slices;
# n_heads counts heads per slice. Same sizes as encoder-tiny / encoder-small otherwise.
register_model(
    "ltransformer-tiny", "ltransformer", LTransformerConfig, LTransformer,
    "L-Transformer text classifier, 4 DCT slices of width 32, 2 heads each",
    d_model=128, n_layers=2, n_heads=2, p=4, vocab_size=8192, max_len=128, num_classes=2,
)
register_model(
    "ltransformer-small", "ltransformer", LTransformerConfig, LTransformer,
    "L-Transformer text classifier, 4 DCT slices of width 64, 2 heads each",
    d_model=256, n_layers=4, n_heads=2, p=4, vocab_size=8192, max_len=256, num_classes=2,
)
