"""A tiny random Llama causal LM and its byte-level BPE tokenizer, saved like a pretrained
model folder (config.json, safetensors, tokenizer): a stand-in for SmolLM2 in fast tests."""

from pathlib import Path

TEXT = (
    "Shall I compare thee to a summer's day? Thou art more lovely and more temperate.\n"
    "Rough winds do shake the darling buds of May, and summer's lease hath all too short "
    "a date.\n\ndef add(a, b):\n    return a + b\n\nThe quick brown fox jumps over the lazy "
    "dog. To be, or not to be, that is the question.\n"
)


def write_text_folder(folder: Path, n_docs: int = 6) -> Path:
    """A folder of small text documents (a language-modelling data set by path)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        (folder / f"doc{i}.txt").write_text(TEXT * (3 + i))
    return folder


def save_tiny_llama(folder: Path, heads: int = 4, kv_heads: int = 2, layers: int = 2) -> Path:
    """A Llama of ``layers`` layers (d=32, H=4, Hkv=2, tied embeddings) and a 300-token BPE
    in ``folder``."""
    import tokenizers
    import torch
    import transformers

    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator([TEXT] * 4, vocab_size=300, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer,
                                               eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    config = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=64,
        tie_word_embeddings=True, eos_token_id=0, bos_token_id=0, pad_token_id=0,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    return folder
