"""Tiny offline models of every kind to_transformer_lens takes, each built twice alike (one
to wrap, one as the reference: a Hugging Face model is wrapped in place), with tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

import tokengeo
from tokengeo.nn.attention import MultiHeadAttention
from tokengeo.nn.heads import ATTENTION, FIXED

REASON = "the interp extra (transformer-lens, nnsight) is not installed: pip install 'tokengeo[interp]'"


@dataclass
class Case:
    name: str
    build: Callable[[], torch.nn.Module]  # the same model at every call
    vocab: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    chosen: dict[int, list[int]]  # the non-attention heads, {layer: heads}

    def tokens(self, seed: int = 0, batch: int = 2, length: int = 9) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(1, self.vocab, (batch, length), generator=gen)


def _randomise(model: torch.nn.Module, names: tuple[str, ...], seed: int) -> None:
    """Random values for the parameters whose name ends with one of ``names`` (biases,
    mixed coefficients: zero or (1, -1) at init would hide a wrong formula)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(names):
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)


def llama(folder: Path, kind: str) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers

        model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
        tokengeo.laplacianize(model, heads={0: [1, 3], 1: [0, 1, 2, 3]}, kind=kind)
        _randomise(model, ("tokengeo_mix_coef",), 1)
        return model
    return build


def gpt2() -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2,
                                     n_head=4, bos_token_id=None, eos_token_id=None,
                                     initializer_range=0.2)
    model = transformers.GPT2LMHeadModel(config).eval()
    _randomise(model, ("bias",), 2)
    return tokengeo.laplacianize(model, n_laplacian=2)


def bert() -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=32, initializer_range=0.2)
    # sdpa by default: to_transformer_lens switches it to eager (else no hook_pattern)
    model = transformers.BertForMaskedLM(config).eval()
    _randomise(model, ("bias",), 3)
    return tokengeo.laplacianize(model, n_laplacian=2)


def gpt_tiny(kind: str) -> Callable[[], torch.nn.Module]:
    def build():
        torch.manual_seed(0)
        if kind == FIXED:  # heads 1 and 3 of every layer: given (a, b) = (0.5, 0.25)
            model = tokengeo.create_model("gpt-tiny", n_layers=2, d_model=32)
            for block in model.blocks:
                old = block.attn
                block.attn = MultiHeadAttention(model.config, [ATTENTION, FIXED] * 2,
                                                causal=True, coefficients=(0.5, 0.25))
                block.attn.load_state_dict(old.state_dict())
            from tokengeo.hooks import name_hook_points

            name_hook_points(model)
        else:
            model = tokengeo.create_model("gpt-tiny", n_layers=2, d_model=32, n_laplacian=2,
                                          head_kind=kind)
        _randomise(model, ("bias", "mix_coef"), 4)
        with torch.no_grad():  # weights ~N(0, 0.2): head edits show in the logits
            for name, param in model.named_parameters():
                if name.endswith("weight") and "ln" not in name:
                    param.mul_(10.0)
        return model.eval()
    return build


def all_cases(folder: Path) -> list[Case]:
    both = {0: [2, 3], 1: [2, 3]}
    return [
        Case("llama-laplacian", llama(folder, "laplacian"), 300, 4, 2, 8, {0: [1, 3], 1: [0, 1, 2, 3]}),
        Case("llama-mixed", llama(folder, "mixed"), 300, 4, 2, 8, {0: [1, 3], 1: [0, 1, 2, 3]}),
        Case("gpt2-laplacian", gpt2, 64, 4, 4, 8, both),
        Case("bert-laplacian", bert, 64, 4, 4, 8, both),
        Case("gpt-tiny-laplacian", gpt_tiny("laplacian"), 256, 4, 4, 8, both),
        Case("gpt-tiny-mixed", gpt_tiny("mixed"), 256, 4, 4, 8, both),
        Case("gpt-tiny-fixed", gpt_tiny(FIXED), 256, 4, 4, 8, {0: [1, 3], 1: [1, 3]}),
    ]


CASE_NAMES = ["llama-laplacian", "llama-mixed", "gpt2-laplacian", "bert-laplacian",
              "gpt-tiny-laplacian", "gpt-tiny-mixed", "gpt-tiny-fixed"]
