"""Tiny random-init Hugging Face models, one per family :func:`tokengeo.laplacianize` supports
(``tokengeo.models.hf.families.FAMILIES``), built offline from configs: d=32, 4 heads
(2 KV heads where the family has grouped-query attention), 2 layers, 64 ids.

``build(model_type)`` returns the model in eval mode; ``TEXT_FAMILIES`` are those that read
token ids (all but ViT, which reads pixels).
"""

from __future__ import annotations

from typing import Any

VOCAB = 64
_COMMON = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=64, num_hidden_layers=2, vocab_size=VOCAB,
               max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
_MHA = {**_COMMON, "num_key_value_heads": 4}
_BERT = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
             vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=0)

# model_type -> (config class, model class, config fields), by transformers' class names
SPECS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bert": ("BertConfig", "BertModel", _BERT),
    "roberta": ("RobertaConfig", "RobertaModel", _BERT),
    "electra": ("ElectraConfig", "ElectraModel", {**_BERT, "embedding_size": 32}),
    "mpnet": ("MPNetConfig", "MPNetModel", _BERT),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   dict(dim=32, n_heads=4, n_layers=2, hidden_dim=64, vocab_size=VOCAB,
                        max_position_embeddings=64, pad_token_id=0)),
    "modernbert": ("ModernBertConfig", "ModernBertModel",
                   {**_MHA, "cls_token_id": 1, "sep_token_id": 2, "local_attention": 4,
                    "global_attn_every_n_layers": 2}),
    "vit": ("ViTConfig", "ViTModel",
            dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                 num_hidden_layers=2, image_size=8, patch_size=4, num_channels=3)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_embd=32, n_head=4, n_layer=2, vocab_size=VOCAB, n_positions=64,
                  bos_token_id=1, eos_token_id=2)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", _COMMON),
    "mistral": ("MistralConfig", "MistralForCausalLM", {**_COMMON, "sliding_window": 3}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {**_COMMON, "num_local_experts": 2, "num_experts_per_tok": 1}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", _COMMON),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**_COMMON, "head_dim": 8}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {**_COMMON, "head_dim": 8, "num_experts": 2, "num_experts_per_tok": 1,
                   "moe_intermediate_size": 32}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**_COMMON, "head_dim": 8}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               {**_COMMON, "head_dim": 8, "sliding_window": 3, "attn_logit_softcapping": 2.0}),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    {**_COMMON, "head_dim": 8, "sliding_window": 3}),
    "granite": ("GraniteConfig", "GraniteForCausalLM", _COMMON),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", _COMMON),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM",
                   {**_COMMON, "sliding_window": 3}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", _COMMON),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", _COMMON),
    "cohere": ("CohereConfig", "CohereForCausalLM", _COMMON),
    "phi": ("PhiConfig", "PhiForCausalLM", _COMMON),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", _COMMON),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _MHA),
    "gptj": ("GPTJConfig", "GPTJForCausalLM",
             dict(n_embd=32, n_head=4, n_layer=2, rotary_dim=4, vocab_size=VOCAB,
                  n_positions=64, bos_token_id=1, eos_token_id=2)),
    "opt": ("OPTConfig", "OPTForCausalLM", {**_MHA, "ffn_dim": 64, "word_embed_proj_dim": 32}),
}
TEXT_FAMILIES = [name for name in SPECS if name != "vit"]


def build(model_type: str, attn_implementation: str = "eager", seed: int = 0):
    """The tiny ``model_type`` model (random weights from ``seed``), in eval mode."""
    import torch
    import transformers

    config_cls, model_cls, fields = SPECS[model_type]
    config = getattr(transformers, config_cls)(**fields,
                                               attn_implementation=attn_implementation)
    torch.manual_seed(seed)
    return getattr(transformers, model_cls)(config).eval()


def inputs(model, batch: int = 2, tokens: int = 7, seed: int = 1) -> dict:
    """Keyword inputs of a tiny model: random ids (or pixels for ViT), no padding."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    if model.config.model_type == "vit":
        return {"pixel_values": torch.randn(batch, 3, 8, 8, generator=gen)}
    return {"input_ids": torch.randint(3, VOCAB, (batch, tokens), generator=gen)}
