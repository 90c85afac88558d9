"""Head kinds: which heads of which layer compute P·V, (I − P)·V, or a learnt mix.

Zhang & Papyan, "Laplacian Heads Improve Transformers by Smoothing Token Representations"
(arXiv 2602.09297): a Laplacian head replaces the attention matrix P by the random-walk
graph Laplacian I − P, so it outputs V − P·V. The authors make the *last* k of H heads
Laplacian in every layer; :func:`choose_heads` also accepts explicit ``{layer: [heads]}``.

This module is the one place for head choice (and its validation rules) and for the
per-head coefficients and ``combine(v, pv)``; tokengeo's attention, the L-Transformer's
attention and the Hugging Face adapter (:mod:`tokengeo.models.hf`) all use it.

Rules of a head choice: ``n_laplacian`` is an int in [0, H]; ``heads`` is a dict whose keys
are layer indices (ints, or strings of digits as JSON/TOML write them) in [0, L) and whose
values are lists of distinct int head indices in [0, H); not both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tokengeo.checks import check_choice, is_whole
from tokengeo.errors import ConfigError

HEAD_KINDS = ("attention", "laplacian", "mixed")
SELECTED_KINDS = ("laplacian", "mixed")  # what chosen heads may become

# Output of head h is a_h * V + b_h * (P V); these are the fixed (a, b) of each kind and the
# two initialisations offered for the learnable "mixed" kind.
KIND_COEFFICIENTS = {"attention": (0.0, 1.0), "laplacian": (1.0, -1.0)}
MIXED_INITS = ("attention", "laplacian")

HeadChoice = dict[int, list[int]]  # layer index -> sorted, distinct head indices


def check_n_laplacian(k: Any, n_heads: int) -> int:
    """``k`` if it is an int in [0, n_heads], else a :class:`ConfigError`."""
    allowed = f"choose 0 <= n_laplacian <= {n_heads}"
    if not is_whole(k):
        raise ConfigError(f"n_laplacian={k!r} must be an int; {allowed}")
    if k < 0:
        raise ConfigError(f"n_laplacian={k} must be >= 0; {allowed}")
    if k > n_heads:
        raise ConfigError(f"n_laplacian={k} exceeds n_heads={n_heads}; {allowed}")
    return k


def last_k_heads(n_heads: int, k: int) -> list[int]:
    """Indices of the last ``k`` of ``n_heads`` heads (the paper's choice)."""
    check_n_laplacian(k, n_heads)
    return list(range(n_heads - k, n_heads))


def _layer_index(key: Any, n_layers: int) -> int:
    layer = int(key) if isinstance(key, str) and key.isdigit() else key
    if not is_whole(layer):
        raise ConfigError(
            f"heads: layer index={key!r} must be an int in [0, {n_layers - 1}] (a dict "
            "{layer: [head indices]})"
        )
    if not 0 <= layer < n_layers:
        raise ConfigError(
            f"heads: layer index={layer} is out of range: the model has {n_layers} layers "
            f"(valid 0..{n_layers - 1})"
        )
    return layer


def _head_list(layer: int, indices: Any, n_heads: int) -> list[int]:
    if isinstance(indices, str | bytes) or not isinstance(indices, Sequence):
        raise ConfigError(f"heads[{layer}]={indices!r} must be a list of head indices")
    for head in indices:
        if not is_whole(head):
            raise ConfigError(
                f"heads[{layer}]: head index={head!r} must be an int in [0, {n_heads - 1}]"
            )
        if not 0 <= head < n_heads:
            raise ConfigError(
                f"heads[{layer}]: head index={head} is out of range: the model has {n_heads} "
                f"heads per layer (valid 0..{n_heads - 1})"
            )
    if len(set(indices)) != len(indices):
        raise ConfigError(f"heads[{layer}]={list(indices)} lists a head twice; list each once")
    return sorted(indices)


def check_head_lists(heads: Any, n_layers: int, n_heads: int) -> HeadChoice:
    """Validate ``{layer: [head indices]}`` (rules in the module docstring)."""
    if not isinstance(heads, Mapping):
        raise ConfigError(f"heads={heads!r} must be a dict {{layer: [head indices]}}")
    chosen: HeadChoice = {}
    for key, indices in heads.items():
        layer = _layer_index(key, n_layers)
        if layer in chosen:
            raise ConfigError(f"heads: layer {layer} is listed twice ({list(heads)})")
        chosen[layer] = _head_list(layer, indices, n_heads)
    return chosen


def choose_heads(
    n_layers: int, n_heads: int, *, n_laplacian: int | None = None, heads: Any = None
) -> HeadChoice:
    """The chosen heads per layer, ``{layer: [heads]}`` sorted, layers without any left out.

    ``n_laplacian=k``: the last k heads of every layer (Zhang & Papyan); ``heads``: explicit
    lists. ``n_laplacian`` of None or 0 with ``heads`` is fine; a positive k with it is not.
    """
    if heads is not None and n_laplacian:
        raise ConfigError(
            "pass either n_laplacian=k (the last k heads of every layer) or "
            "heads={layer: [head indices]}, not both"
        )
    if heads is None:
        k = last_k_heads(n_heads, 0 if n_laplacian is None else n_laplacian)
        chosen = {layer: k for layer in range(n_layers)}
    else:
        chosen = check_head_lists(heads, n_layers, n_heads)
    return {layer: idx for layer, idx in sorted(chosen.items()) if idx}


def resolve_head_kinds(
    n_layers: int,
    n_heads: int,
    *,
    n_laplacian: int | None = 0,
    heads: Any = None,
    kind: str = "laplacian",
) -> list[tuple[str, ...]]:
    """Per-layer tuples of head kinds: the chosen heads (:func:`choose_heads`) become
    ``kind`` (``"laplacian"`` or ``"mixed"``), the others stay ``"attention"``."""
    check_choice("kind", kind, SELECTED_KINDS)
    chosen = choose_heads(n_layers, n_heads, n_laplacian=n_laplacian, heads=heads)
    return [
        tuple(kind if h in chosen.get(layer, ()) else "attention" for h in range(n_heads))
        for layer in range(n_layers)
    ]


def check_head_kinds(kinds: Sequence[str], n_heads: int) -> tuple[str, ...]:
    kinds = tuple(kinds)
    if len(kinds) != n_heads:
        raise ConfigError(f"head_kinds has {len(kinds)} entries; expected one per head ({n_heads})")
    for k in kinds:
        if k not in HEAD_KINDS:
            raise ConfigError(f"head kind {k!r} is not valid; choose one of {list(HEAD_KINDS)}")
    return kinds


class HeadKinds(nn.Module):
    """The kinds of H heads as module state, and their output ``a_h V + b_h P V``.

    Head h outputs a_h V + b_h P V (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with P replaced
    by I − P for Laplacian heads): attention (a, b) = (0, 1), Laplacian (1, −1), mixed a
    learnt (a, b) initialised as ``mixed_init``.

    State: ``head_kinds``, ``n_laplacian``, buffers ``coef_fixed`` (H, 2),
    ``laplacian_mask`` (H,) and ``mixed_index``, and the parameter ``mix_coef``: (n_mixed, 2),
    or (p, n_mixed, 2) with ``slices=p`` (every slice's mixed heads learn their own (a, b));
    None without mixed heads. Attention modules subclass it, so their state-dict keys
    (``attn.mix_coef``) are those of the module itself.
    """

    def __init__(
        self,
        n_heads: int,
        kinds: Sequence[str] | None = None,
        mixed_init: str = "laplacian",
        *,
        slices: int | None = None,
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_kinds = check_head_kinds(kinds or ("attention",) * n_heads, n_heads)
        fixed = [KIND_COEFFICIENTS.get(k, (0.0, 0.0)) for k in self.head_kinds]
        self.register_buffer("coef_fixed", torch.tensor(fixed), persistent=False)  # (H, 2)
        lap = torch.tensor([k == "laplacian" for k in self.head_kinds])
        self.register_buffer("laplacian_mask", lap, persistent=False)  # (H,)
        self.n_laplacian = self.head_kinds.count("laplacian")
        mixed = [h for h, k in enumerate(self.head_kinds) if k == "mixed"]
        self.register_buffer("mixed_index", torch.tensor(mixed, dtype=torch.long),
                             persistent=False)
        self.mix_coef = None
        if mixed:
            check_choice("mixed_init", mixed_init, MIXED_INITS)
            init = torch.tensor([KIND_COEFFICIENTS[mixed_init]] * len(mixed))  # (n_mixed, 2)
            self.mix_coef = nn.Parameter(init if slices is None else init.repeat(slices, 1, 1))

    def head_coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b): head h (of slice k) outputs a_h V + b_h P V; each (H,), or (p, H) for
        per-slice mixed heads."""
        coef = self.coef_fixed  # (H, 2)
        if self.mix_coef is not None:
            coef = coef.expand(*self.mix_coef.shape[:-2], -1, -1).clone()  # ([p,] H, 2)
            coef[..., self.mixed_index, :] = self.mix_coef.to(coef.dtype)
        return coef[..., 0], coef[..., 1]

    def uses_values(self) -> bool:
        """Whether some head's output involves V itself (a Laplacian or mixed head)."""
        return self.n_laplacian > 0 or self.mix_coef is not None

    def combine(self, v: torch.Tensor, pv: torch.Tensor) -> torch.Tensor:
        """``a_h V + b_h P V`` from V and P V, both (N, T, H, Dh) (with p slices: N = p·B,
        slice-major). A Laplacian head costs one subtraction; I − P is never built."""
        if self.mix_coef is not None:
            a, b = self.head_coefficients()  # (H,) or (p, H)
            if a.dim() == 1:
                return a.view(-1, 1) * v + b.view(-1, 1) * pv
            P = a.shape[0]
            shape = (P,) + (1,) * (v.dim() - 2) + (-1, 1)  # (p, 1, 1, H, 1)
            out = a.view(shape) * v.unflatten(0, (P, -1)) + b.view(shape) * pv.unflatten(0, (P, -1))
            return out.flatten(0, 1)
        if self.n_laplacian == 0:
            return pv
        if self.n_laplacian == self.n_heads:
            return v - pv
        return torch.where(self.laplacian_mask.view(-1, 1), v - pv, pv)
