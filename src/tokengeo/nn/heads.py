"""Head kinds: which heads of which layer compute P·V, (I − P)·V, or a learnt mix.

Zhang & Papyan, "Laplacian Heads Improve Transformers by Smoothing Token Representations"
(arXiv 2602.09297): a Laplacian head replaces the attention matrix P by the random-walk
graph Laplacian I − P, so it outputs V − P·V. The authors make the *last* k of H heads
Laplacian in every layer; :func:`resolve_head_kinds` also accepts explicit per-layer lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tokengeo.errors import ConfigError

HEAD_KINDS = ("attention", "laplacian", "mixed")

# Output of head h is a_h * V + b_h * (P V); these are the fixed (a, b) of each kind and the
# two initialisations offered for the learnable "mixed" kind.
KIND_COEFFICIENTS = {"attention": (0.0, 1.0), "laplacian": (1.0, -1.0)}
MIXED_INITS = ("attention", "laplacian")

HeadSpec = Mapping[int | str, Sequence[int]]


def last_k_heads(n_heads: int, k: int) -> list[int]:
    """Indices of the last ``k`` of ``n_heads`` heads (the paper's choice)."""
    check_n_laplacian(k, n_heads)
    return list(range(n_heads - k, n_heads))


def check_n_laplacian(k: int, n_heads: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise ConfigError(f"n_laplacian must be an integer, got {k!r}")
    if k < 0:
        raise ConfigError(f"n_laplacian={k} must be >= 0 (number of Laplacian heads per layer)")
    if k > n_heads:
        raise ConfigError(
            f"n_laplacian={k} exceeds n_heads={n_heads}; choose 0 <= n_laplacian <= {n_heads}"
        )


def resolve_head_kinds(
    n_layers: int,
    n_heads: int,
    *,
    n_laplacian: int = 0,
    heads: HeadSpec | None = None,
    kind: str = "laplacian",
) -> list[tuple[str, ...]]:
    """Per-layer tuples of head kinds.

    Either ``n_laplacian`` (the last k heads of every layer) or ``heads`` (``{layer: [head
    indices]}``, other layers all-attention) selects the non-attention heads; ``kind`` says
    what they become (``"laplacian"`` or ``"mixed"``).
    """
    if kind not in ("laplacian", "mixed"):
        raise ConfigError(f"head kind {kind!r} is not valid; choose 'laplacian' or 'mixed'")
    if heads is not None and n_laplacian:
        raise ConfigError("give either n_laplacian or heads={layer: [head indices]}, not both")
    if heads is None:
        chosen = {layer: last_k_heads(n_heads, n_laplacian) for layer in range(n_layers)}
    else:
        chosen = _check_head_lists(heads, n_layers, n_heads)
    return [
        tuple(kind if h in chosen.get(layer, ()) else "attention" for h in range(n_heads))
        for layer in range(n_layers)
    ]


def _check_head_lists(heads: HeadSpec, n_layers: int, n_heads: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for layer, idx in heads.items():
        try:
            layer_i = int(layer)
        except (TypeError, ValueError):
            raise ConfigError(f"layer key {layer!r} in heads is not an integer") from None
        if not 0 <= layer_i < n_layers:
            raise ConfigError(
                f"layer {layer_i} in heads is out of range; the model has layers 0..{n_layers - 1}"
            )
        bad = [h for h in idx if not (isinstance(h, int) and 0 <= h < n_heads)]
        if bad:
            raise ConfigError(
                f"head indices {bad} in layer {layer_i} are out of range; "
                f"valid head indices are 0..{n_heads - 1}"
            )
        out[layer_i] = sorted(set(idx))
    return out


def check_head_kinds(kinds: Sequence[str], n_heads: int) -> tuple[str, ...]:
    kinds = tuple(kinds)
    if len(kinds) != n_heads:
        raise ConfigError(f"head_kinds has {len(kinds)} entries; expected one per head ({n_heads})")
    for k in kinds:
        if k not in HEAD_KINDS:
            raise ConfigError(f"head kind {k!r} is not valid; choose one of {list(HEAD_KINDS)}")
    return kinds
