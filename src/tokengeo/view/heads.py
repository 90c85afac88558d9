"""Per layer x head matrices of one text, as the explorer shows them.

For layer ``l`` and head ``h`` of a model on one input of ``T`` tokens:

* ``P[l, h]``: the softmax attention matrix (``blocks.{l}.attn.hook_pattern``), row ``i``
  the weights token ``i`` gives every token ``j`` (rows sum to 1);
* ``I - P[l, h]`` for a Laplacian head, whose output is ``(I - P) V`` (Zhang & Papyan,
  arXiv 2602.09297, Eq. 2): the page computes it from ``P`` (it is not stored twice);
* ``S[l, h]``: the head-output (context) similarity ``S_ij = <z_i, z_j>``, ``S_ii = 0``,
  where ``z`` is the head's output before the output projection (``hook_z``), exactly as the
  similarity analysis defines it (Halevi et al., arXiv 2512.21956, Sec. 2):
  :func:`tokengeo.probes.similarity.pairs.context_similarity`. For a Laplacian head ``z`` is
  ``(I - P) V``.

Both come from one forward pass with :func:`tokengeo.probes.capture.capture`, on tokengeo
models and on Hugging Face models (:mod:`tokengeo.probes.hf_sites`; a model loaded with
another attention implementation runs that pass with eager attention, which forms ``P``,
and gets its own back: :func:`eager_attention`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import capture, is_hf_model, wrapped_hf_model
from tokengeo.probes.similarity.pairs import (
    Z_PATTERN,
    check_token_ids,
    context_similarity,
    forward_tokens,
    layer_index,
)

P_PATTERN = "blocks.*.attn.hook_pattern"


@dataclass
class HeadMaps:
    """The matrices of every head on one input; ``kinds[l][h]`` is ``"attention"``,
    ``"laplacian"`` or ``"mixed"``."""

    tokens: list[str]
    P: torch.Tensor  # (L, H, T, T) softmax attention
    S: torch.Tensor  # (L, H, T, T) head-output similarity, zero diagonal
    kinds: list[list[str]]
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int, int]:
        L, H, T, _ = self.P.shape
        return L, H, T


def head_kinds(model: nn.Module, n_layers: int, n_heads: int) -> list[list[str]]:
    """The kind of every head: tokengeo models from their attention modules' ``head_kinds``,
    Hugging Face models from the heads :func:`tokengeo.models.hf.laplacianize` chose."""
    inner = wrapped_hf_model(model)  # an ``hf:`` run: HFCausalLM holds the HF model
    if inner is not None:
        model = inner
    if is_hf_model(model) and not hasattr(model, "blocks"):
        from tokengeo.models.hf import laplacian_heads

        chosen = laplacian_heads(model)
        kind = getattr(model.config, "tokengeo_head_kind", "laplacian")
        return [[kind if h in chosen.get(l, ()) else "attention" for h in range(n_heads)]
                for l in range(n_layers)]
    from tokengeo.nn.heads import HeadMixer

    per_layer = [list(m.head_kinds) for m in model.modules() if isinstance(m, HeadMixer)]
    if len(per_layer) != n_layers or any(len(k) != n_heads for k in per_layer):
        raise ConfigError(f"{type(model).__name__} has {len(per_layer)} attention modules with "
                          f"head kinds, but its hooks show {n_layers} layers x {n_heads} heads; "
                          "the explorer cannot tell which heads are Laplacian")
    return per_layer


@contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """A Hugging Face model (or a tokengeo wrapper of one) runs with eager attention, the
    readable softmax that forms ``P`` (sdpa and flash kernels never do), and gets its own
    implementation back afterwards: the explorer shows any model as it is loaded, from the
    command line and from ``show()`` alike. The Laplacian heads do not depend on it."""
    inner = wrapped_hf_model(model) or model
    impl = getattr(getattr(inner, "config", None), "_attn_implementation", "eager")
    if not is_hf_model(inner) or impl == "eager":
        yield
        return
    inner.set_attn_implementation("eager")
    try:
        yield
    finally:
        inner.set_attn_implementation(impl)


def check_text_model(model: nn.Module) -> None:
    """Refuse a Hugging Face model that reads no token ids (ViT reads ``pixel_values``): the
    explorer shows the heads over a text."""
    inner = wrapped_hf_model(model) or model
    reads = getattr(inner, "main_input_name", "input_ids")
    if is_hf_model(inner) and reads != "input_ids":
        raise ConfigError(f"{type(inner).__name__} reads {reads!r}, not token ids: the explorer "
                          "views the heads of a text model over a text (capture the heads of "
                          "an image model with tokengeo.run_with_cache)")


# The per-head data a page may embed (P and S codes, one byte each, before compression): a
# browser holds all of it, and the forward pass keeps ~16 bytes per entry (P, z similarity,
# codes) on the way. 1 GiB is 4x what the largest named encoder (mpnet, 12 x 12 heads, 514
# positions: 76 MB) needs at its full length.
MAX_PAGE_DATA = 1 << 30
BYTES_PER_ENTRY = 16  # memory per (layer, head, i, j) while the maps are extracted


def model_heads(model: nn.Module) -> tuple[int, int] | None:
    """(layers, heads) from the model's config (Hugging Face or tokengeo spellings), or None
    where it does not say."""
    inner = wrapped_hf_model(model) or model
    cfg = getattr(inner, "config", None)
    sizes = []
    for keys in (("num_hidden_layers", "n_layer", "n_layers"),
                 ("num_attention_heads", "n_head", "n_heads")):
        value = next((getattr(cfg, k) for k in keys if isinstance(getattr(cfg, k, None), int)),
                     None)
        sizes.append(value)
    return None if None in sizes else (sizes[0], sizes[1])


def check_page_size(n_layers: int, n_heads: int, n_tokens: int) -> None:
    """Refuse, before the forward pass, a page whose per-head data (``2 L H T^2`` bytes of P
    and S codes) exceeds :data:`MAX_PAGE_DATA`, or whose extraction would not fit in memory;
    the message states the estimate and the longest text that fits (``--max-tokens``)."""
    from tokengeo.checks import check_memory

    entries = float(n_layers) * n_heads * n_tokens * n_tokens
    fits = int((MAX_PAGE_DATA / (2.0 * n_layers * n_heads)) ** 0.5)
    fix = f"give a shorter text (--max-tokens {fits} or less)"
    if 2 * entries > MAX_PAGE_DATA:
        raise ConfigError(f"{n_tokens} tokens x {n_layers} layers x {n_heads} heads: the page "
                          f"would embed {2 * entries / 2**20:,.0f} MB of per-head data "
                          f"(L H T^2 entries of P and S), more than the "
                          f"{MAX_PAGE_DATA >> 20:,} MB a page may hold; {fix}")
    check_memory(f"the maps of {n_tokens} tokens x {n_layers} layers x {n_heads} heads",
                 BYTES_PER_ENTRY * entries, fix)


@torch.no_grad()
def extract_heads(model: nn.Module, input_ids: torch.Tensor, tokens: list[str], *,
                  model_name: str = "") -> HeadMaps:
    """``P`` and ``S`` of every layer and head of ``model`` on ``input_ids`` ``(1, T)``."""
    check_text_model(model)
    check_token_ids(model, input_ids)
    if input_ids.shape[0] != 1:
        raise ConfigError(f"view one text at a time; input_ids is shaped {tuple(input_ids.shape)}")
    if len(tokens) != input_ids.shape[1]:
        raise ConfigError(f"{len(tokens)} token strings for {input_ids.shape[1]} token ids")
    device = next((p.device for p in model.parameters()), input_ids.device)
    with eager_attention(model), capture(model, [P_PATTERN, Z_PATTERN], device="cpu") as cache:
        forward_tokens(model, input_ids.to(device))
        p_names = sorted((n for n in cache if n.endswith("hook_pattern")), key=layer_index)
        z_names = sorted((n for n in cache if n.endswith("hook_z")), key=layer_index)
        P = torch.stack([cache[n][0] for n in p_names]).float()  # (L, H, T, T)
        z = torch.stack([cache[n] for n in z_names]).float()  # (L, 1, T, H, Dh)
    S = context_similarity(z)[:, :, 0]  # (L, H, T, T)
    L, H = P.shape[:2]
    if S.shape[:2] != (L, H):
        raise ConfigError(f"attention has {L} x {H} heads but the head outputs {S.shape[0]} x "
                          f"{S.shape[1]}; this model's hooks disagree")
    return HeadMaps(tokens=list(tokens), P=P, S=S, kinds=head_kinds(model, L, H),
                    model=model_name)
