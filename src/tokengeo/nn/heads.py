"""Head kinds: which heads of which layer compute P·V, (I − P)·V, or a learnt mix.

Zhang & Papyan, "Laplacian Heads Improve Transformers by Smoothing Token Representations"
(arXiv 2602.09297): a Laplacian head replaces the attention matrix P by the random-walk
graph Laplacian I − P, so it outputs V − P·V. The authors make the *last* k of H heads
Laplacian in every layer.

This module is the one home of the head vocabulary (:data:`ATTENTION`, :data:`LAPLACIAN`,
:data:`MIXED`, :data:`FIXED`), of each kind's coefficients (a, b) in ``z = a·V + b·P V``, of
the head choice and its rules (:class:`HeadSpec`), and of the per-head module state and its fast
``combine(v, pv)`` (:class:`HeadMixer`). tokengeo's attention, the L-Transformer's attention,
the Hugging Face adapter (:mod:`tokengeo.models.hf`) and the kernels
(:mod:`tokengeo.nn.kernels`) all read them from here. The readable formula
``z = a·V + b·P V`` is :func:`tokengeo.nn.reference.mix_heads`.

Rules of a head choice (:meth:`HeadSpec.parse`): ``n_laplacian`` is an int in [0, H] (the
last k heads of every layer); ``heads`` is a dict whose keys are layer indices (ints, or
strings of digits as JSON/TOML write them) in [0, L) and whose values are lists of distinct
int head indices in [0, H), or a list of L such lists (one per layer, as nanochat's
``laplacian_heads``); not both. ``kind="fixed"`` makes the chosen heads compute a given,
fixed ``coefficients=(a, b)`` (any pair of finite numbers, e.g. a point ``(t, 1 − 2t)`` of the
path from attention to the Laplacian); ``coefficients`` goes with that kind only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from tokengeo.checks import check_choice, is_whole
from tokengeo.errors import ConfigError

ATTENTION, LAPLACIAN, MIXED = "attention", "laplacian", "mixed"
FIXED = "fixed"  # a head with given, fixed coefficients (a, b) (HeadSpec.coefficients)
HEAD_KINDS = (ATTENTION, LAPLACIAN, MIXED, FIXED)
SELECTED_KINDS = (LAPLACIAN, MIXED)  # what chosen heads may become by name alone
SPEC_KINDS = (*SELECTED_KINDS, FIXED)  # ... and with the coefficients of a fixed kind

# Output of head h is a_h * V + b_h * (P V); these are the fixed (a, b) of each kind and the
# two initialisations offered for the learnable "mixed" kind.
KIND_COEFFICIENTS = {ATTENTION: (0.0, 1.0), LAPLACIAN: (1.0, -1.0)}
MIXED_INITS = (ATTENTION, LAPLACIAN)

HeadChoice = dict[int, list[int]]  # layer index -> sorted, distinct head indices


def kind_coefficients(kind: str) -> tuple[float, float]:
    """(a, b) of a fixed kind (``attention`` or ``laplacian``): head output a·V + b·P V."""
    check_choice("head kind", kind, tuple(KIND_COEFFICIENTS))
    return KIND_COEFFICIENTS[kind]


def kind_of(a: float, b: float) -> str:
    """The kind whose fixed coefficients are exactly (a, b); ``mixed`` for any other pair."""
    return next((k for k, ab in KIND_COEFFICIENTS.items() if ab == (a, b)), MIXED)


def check_coefficients(coefficients: Any, field: str = "head_coefficients"
                       ) -> tuple[float, float]:
    """``(a, b)`` as two floats if ``coefficients`` is a pair of finite real numbers, else a
    :class:`ConfigError` naming ``field`` and the fix."""
    import math

    shape = f"{field}={coefficients!r} must be a pair (a, b) of finite numbers: a·V + b·P V"
    if not _is_list(coefficients) or len(coefficients) != 2:
        raise ConfigError(shape)
    for x in coefficients:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise ConfigError(shape)
    return float(coefficients[0]), float(coefficients[1])


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


def _layer_index(key: Any, n_layers: int, field: str = "heads") -> int:
    layer = int(key) if isinstance(key, str) and key.isdigit() else key
    if not is_whole(layer):
        raise ConfigError(
            f"{field}: layer index={key!r} must be an int in [0, {n_layers - 1}] (a dict "
            "{layer: [head indices]})"
        )
    if not 0 <= layer < n_layers:
        raise ConfigError(
            f"{field}: layer index={layer} is out of range: the model has {n_layers} layers "
            f"(valid 0..{n_layers - 1})"
        )
    return layer


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _head_list(layer: int, indices: Any, n_heads: int, field: str = "heads") -> list[int]:
    if not _is_list(indices):
        raise ConfigError(f"{field}[{layer}]={indices!r} must be a list of head indices")
    for head in indices:
        if not is_whole(head):
            raise ConfigError(
                f"{field}[{layer}]: head index={head!r} must be an int in [0, {n_heads - 1}]"
            )
        if not 0 <= head < n_heads:
            raise ConfigError(
                f"{field}[{layer}]: head index={head} is out of range: the model has {n_heads} "
                f"heads per layer (valid 0..{n_heads - 1})"
            )
    if len(set(indices)) != len(indices):
        raise ConfigError(f"{field}[{layer}]={list(indices)} lists a head twice; list each once")
    return sorted(indices)


def check_head_lists(heads: Any, n_layers: int, n_heads: int, field: str = "heads"
                     ) -> HeadChoice:
    """Validate ``{layer: [head indices]}`` or one list per layer (module docstring rules)."""
    shape = "a dict {layer: [head indices]} or one list of head indices per layer"
    if _is_list(heads) and not all(_is_list(indices) for indices in heads):
        raise ConfigError(f"{field}={heads!r} must be {shape}")
    if _is_list(heads):
        if len(heads) != n_layers:
            raise ConfigError(
                f"{field} has {len(heads)} per-layer lists but the model has {n_layers} layers; "
                "give one list per layer or a dict {layer: [head indices]}")
        heads = dict(enumerate(heads))
    if not isinstance(heads, Mapping):
        raise ConfigError(f"{field}={heads!r} must be {shape}")
    chosen: HeadChoice = {}
    for key, indices in heads.items():
        layer = _layer_index(key, n_layers, field)
        if layer in chosen:
            raise ConfigError(f"{field}: layer {layer} is listed twice ({list(heads)})")
        chosen[layer] = _head_list(layer, indices, n_heads, field)
    return chosen


@dataclass(frozen=True)
class HeadSpec:
    """Which heads of an ``n_layers`` × ``n_heads`` model are of which kind, parsed once.

    ``chosen[layer]``: the sorted chosen heads of that layer, which are ``kind``
    (``laplacian``; ``mixed`` with learnt (a, b) initialised as the kind ``mixed_init``; or
    ``fixed`` with the given ``coefficients`` (a, b)); every other head is ``attention``.
    Build it with :meth:`parse` (the rules in the module
    docstring); tokengeo's models, the L-Transformer and :func:`tokengeo.models.hf.laplacianize`
    all do.
    """

    n_layers: int
    n_heads: int
    chosen: tuple[tuple[int, ...], ...]  # (L,) tuples of head indices
    kind: str = LAPLACIAN
    mixed_init: str = LAPLACIAN
    coefficients: tuple[float, float] | None = None  # (a, b) of the chosen heads: kind fixed

    @classmethod
    def parse(
        cls, n_layers: int, n_heads: int, *, n_laplacian: Any = None, heads: Any = None,
        kind: str = LAPLACIAN, mixed_init: str = LAPLACIAN, field: str = "heads",
        coefficients: Any = None,
    ) -> HeadSpec:
        """The spec of ``n_laplacian`` (last k per layer) or ``heads`` (explicit lists).

        ``n_laplacian`` of None or 0 with ``heads`` is fine; a positive k with it is not.
        ``kind="fixed"`` needs ``coefficients=(a, b)``, and ``coefficients`` needs that kind.
        Raises :class:`~tokengeo.errors.ConfigError` naming the bad entry (as ``field``, the
        caller's name for ``heads``) and the fix.
        """
        check_choice("head_kind", kind, SPEC_KINDS)
        check_choice("mixed_init", mixed_init, MIXED_INITS)
        coefficients = _spec_coefficients(kind, coefficients)
        if heads is not None and n_laplacian is not None and n_laplacian != 0:
            raise ConfigError(
                "pass either n_laplacian=k (the last k heads of every layer) or "
                "heads={layer: [head indices]}, not both"
            )
        if heads is None:
            k = last_k_heads(n_heads, 0 if n_laplacian is None else n_laplacian)
            by_layer = dict.fromkeys(range(n_layers), k)
        else:
            by_layer = check_head_lists(heads, n_layers, n_heads, field)
        chosen = tuple(tuple(by_layer.get(layer, ())) for layer in range(n_layers))
        return cls(n_layers, n_heads, chosen, kind, mixed_init, coefficients)

    def layer_kinds(self, layer: int) -> tuple[str, ...]:
        """The (H,) kinds of one layer's heads."""
        chosen = self.chosen[layer]
        return tuple(self.kind if h in chosen else ATTENTION for h in range(self.n_heads))

    def kinds(self) -> list[tuple[str, ...]]:
        """Per-layer tuples of head kinds."""
        return [self.layer_kinds(layer) for layer in range(self.n_layers)]

    def choice(self) -> HeadChoice:
        """``{layer: [heads]}`` of the layers with chosen heads (sorted; others left out)."""
        return {layer: list(idx) for layer, idx in enumerate(self.chosen) if idx}

    @property
    def n_chosen(self) -> int:
        return sum(len(idx) for idx in self.chosen)


def _spec_coefficients(kind: str, coefficients: Any) -> tuple[float, float] | None:
    """The checked (a, b) of a ``fixed`` spec; None for the other kinds, which take none."""
    if kind != FIXED:
        if coefficients is not None:
            raise ConfigError(
                f"head_coefficients={coefficients!r} is read only by head_kind='fixed' (heads "
                f"with given a·V + b·P V); set head_kind='fixed' or drop head_coefficients")
        return None
    if coefficients is None:
        raise ConfigError("head_kind='fixed' needs head_coefficients=(a, b), the chosen heads' "
                          "fixed a·V + b·P V, e.g. (0.5, 0.0); or choose head_kind 'laplacian' "
                          "or 'mixed'")
    return check_coefficients(coefficients)


def choose_heads(
    n_layers: int, n_heads: int, *, n_laplacian: Any = None, heads: Any = None
) -> HeadChoice:
    """The chosen heads per layer, ``{layer: [heads]}`` sorted, layers without any left out
    (:meth:`HeadSpec.parse`'s rules)."""
    return HeadSpec.parse(n_layers, n_heads, n_laplacian=n_laplacian, heads=heads).choice()


def resolve_head_kinds(
    n_layers: int, n_heads: int, *, n_laplacian: Any = 0, heads: Any = None,
    kind: str = LAPLACIAN,
) -> list[tuple[str, ...]]:
    """Per-layer tuples of head kinds (:meth:`HeadSpec.parse`, then :meth:`HeadSpec.kinds`)."""
    return HeadSpec.parse(n_layers, n_heads, n_laplacian=n_laplacian, heads=heads,
                          kind=kind).kinds()


def check_head_kinds(kinds: Sequence[str], n_heads: int) -> tuple[str, ...]:
    kinds = tuple(kinds)
    if len(kinds) != n_heads:
        raise ConfigError(f"head_kinds has {len(kinds)} entries; expected one per head ({n_heads})")
    for k in kinds:
        if k not in HEAD_KINDS:
            raise ConfigError(f"head kind {k!r} is not valid; choose one of {list(HEAD_KINDS)}")
    return kinds


@dataclass(frozen=True)
class HeadRuns:
    """Maximal runs of consecutive heads of one kind: ``((start, stop, kind), ...)``; the
    kernels work run by run (one op per run, not per head), or on whole tensors when the
    runs are of several fixed kinds (:mod:`tokengeo.nn.kernels.in_place`)."""

    runs: tuple[tuple[int, int, str], ...]
    # derived once here, not cached on first use: a lazily cached property takes a lock,
    # which torch.compile cannot trace
    mixed: tuple[tuple[int, int], ...] = field(init=False, compare=False, repr=False)
    all_attention: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        mixed = tuple((h0, h1) for h0, h1, kind in self.runs if kind == MIXED)
        object.__setattr__(self, "mixed", mixed)
        object.__setattr__(self, "all_attention",
                           all(kind == ATTENTION for *_, kind in self.runs))

    @classmethod
    def of(cls, head_kinds: Sequence[str]) -> HeadRuns:
        return _runs_of(tuple(head_kinds))

    @property
    def n_heads(self) -> int:
        return self.runs[-1][1] if self.runs else 0

    def mixed_position(self, h: int) -> int:
        """Index of mixed head ``h`` among the mixed heads."""
        return sum(min(h1, h) - h0 for h0, h1 in self.mixed if h0 < h)

    @property
    def uses_values(self) -> bool:
        """Whether some head's output involves V itself (a Laplacian or mixed head)."""
        return not self.all_attention


@lru_cache(maxsize=1024)
def _runs_of(head_kinds: tuple[str, ...]) -> HeadRuns:
    """The runs of ``head_kinds``, built once per tuple of kinds (``laplacian_attention``
    asks at every call)."""
    runs: list[tuple[int, int, str]] = []
    for h, kind in enumerate(head_kinds):
        if runs and runs[-1][2] == kind:
            runs[-1] = (runs[-1][0], h + 1, kind)
        else:
            runs.append((h, h + 1, kind))
    return HeadRuns(tuple(runs))


def head_runs(
    coef_a: torch.Tensor, coef_b: torch.Tensor, head_kinds: Sequence[str] | None = None
) -> HeadRuns:
    """Group heads into runs of one kind, from ``head_kinds`` or else from the values.

    With ``head_kinds`` the caller promises that ``attention`` / ``laplacian`` heads have
    the fixed (a, b) of their kind (no host read); without it the (H,) coefficients are
    read (one small device-to-host copy) and a head is attention / Laplacian when its
    values are exactly (0, 1) / (1, −1), mixed otherwise (:func:`kind_of`).
    """
    if head_kinds is None:
        pairs = zip(coef_a.tolist(), coef_b.tolist(), strict=True)
        head_kinds = [kind_of(a, b) for a, b in pairs]
    elif len(head_kinds) != coef_a.shape[0] or set(head_kinds) - set(HEAD_KINDS):
        raise ConfigError(
            f"head_kinds={tuple(head_kinds)!r} must give one of {list(HEAD_KINDS)} for each "
            f"of the {coef_a.shape[0]} heads")
    return HeadRuns.of(head_kinds)


def _fixed_coefficients(kinds: Sequence[str], coefficients: Any) -> tuple[float, float]:
    """The checked (a, b) of the ``fixed`` heads among ``kinds``; (0, 0) when there are none
    (then ``coefficients`` must be None: given coefficients no head reads are a mistake)."""
    if FIXED not in kinds:
        if coefficients is not None:
            raise ConfigError(f"coefficients={coefficients!r} given but no head is 'fixed' "
                              f"(kinds {tuple(kinds)!r}); make the heads 'fixed' or drop them")
        return 0.0, 0.0
    if coefficients is None:
        raise ConfigError("'fixed' heads need coefficients=(a, b): their fixed a·V + b·P V")
    return check_coefficients(coefficients, "coefficients")


def freeze_mixed_heads(module: nn.Module, coefficients: Any) -> int:
    """Set every mixed head under ``module`` to the given (a, b) and stop it learning.

    A frozen mixed head computes exactly what a ``fixed`` head with those coefficients
    computes (``a V + b P V``, no gradient to (a, b); tested against it): the way to run a
    fixed (a, b) in a model whose config can only name the ``mixed`` kind. The values
    live in ``mix_coef``, so a checkpoint keeps them; ``requires_grad`` does not travel
    with a checkpoint, so call this again after loading one. Returns the number of heads
    set (a :class:`ConfigError` when ``module`` has no mixed head).
    """
    a, b = check_coefficients(coefficients, "coefficients")
    count = 0
    for m in module.modules():
        if isinstance(m, HeadMixer) and m.mix_coef is not None:
            with torch.no_grad():
                m.mix_coef[..., 0].fill_(a)
                m.mix_coef[..., 1].fill_(b)
            m.mix_coef.requires_grad_(False)
            count += m.mix_coef[..., 0].numel()
    if count == 0:
        raise ConfigError(f"{type(module).__name__} has no mixed heads to freeze; build it "
                          "with head_kind='mixed'")
    return count


class HeadMixer(nn.Module):
    """The kinds of H heads as module state, and their output ``a_h V + b_h P V``.

    Head h outputs a_h V + b_h P V (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with P replaced
    by I − P for Laplacian heads): attention (a, b) = (0, 1), Laplacian (1, −1), mixed a
    learnt (a, b) initialised as ``mixed_init``, fixed the given ``coefficients`` (a, b)
    (a buffer, no gradient; the kernels treat it as a mixed head whose (a, b) is a
    constant, or as attention / Laplacian when it is exactly (0, 1) / (1, −1)).

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
        mixed_init: str = LAPLACIAN,
        *,
        slices: int | None = None,
        coefficients: tuple[float, float] | None = None,
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_kinds = check_head_kinds(kinds or (ATTENTION,) * n_heads, n_heads)
        given = _fixed_coefficients(self.head_kinds, coefficients)
        fixed = [given if k == FIXED else KIND_COEFFICIENTS.get(k, (0.0, 0.0))
                 for k in self.head_kinds]
        self.register_buffer("coef_fixed", torch.tensor(fixed), persistent=False)  # (H, 2)
        # the same split per coefficient: what the kernels read at every call
        self.register_buffer("fixed_a", self.coef_fixed[:, 0].clone(), persistent=False)  # (H,)
        self.register_buffer("fixed_b", self.coef_fixed[:, 1].clone(), persistent=False)  # (H,)
        self.n_fixed = self.head_kinds.count(FIXED)
        # the kernels' vocabulary: a fixed head is attention, Laplacian or a constant mix
        self.head_runs = HeadRuns.of([kind_of(*ab) if k == FIXED else k
                                      for k, ab in zip(self.head_kinds, fixed, strict=True)])
        lap = torch.tensor([k == LAPLACIAN for k in self.head_kinds])
        self.register_buffer("laplacian_mask", lap, persistent=False)  # (H,)
        self.n_laplacian = self.head_kinds.count(LAPLACIAN)
        mixed = [h for h, k in enumerate(self.head_kinds) if k == MIXED]
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
        if self.mix_coef is None:
            return self.fixed_a, self.fixed_b
        coef = self.coef_fixed.expand(*self.mix_coef.shape[:-2], -1, -1).clone()  # ([p,] H, 2)
        coef[..., self.mixed_index, :] = self.mix_coef.to(coef.dtype)
        return coef[..., 0], coef[..., 1]

    def uses_values(self) -> bool:
        """Whether some head's output involves V itself (a Laplacian, mixed or fixed head)."""
        return self.n_laplacian > 0 or self.mix_coef is not None or self.n_fixed > 0

    def combine(self, v: torch.Tensor, pv: torch.Tensor) -> torch.Tensor:
        """``a_h V + b_h P V`` from V and P V, both (N, T, H, Dh) (with p slices: N = p·B,
        slice-major). A Laplacian head costs one subtraction; I − P is never built.

        A fast path of :func:`tokengeo.nn.reference.mix_heads` (tested against it)."""
        if self.mix_coef is not None:
            a, b = self.head_coefficients()  # (H,) or (p, H)
            if a.dim() == 1:
                return a.view(-1, 1) * v + b.view(-1, 1) * pv
            P = a.shape[0]
            shape = (P,) + (1,) * (v.dim() - 2) + (-1, 1)  # (p, 1, 1, H, 1)
            out = a.view(shape) * v.unflatten(0, (P, -1)) + b.view(shape) * pv.unflatten(0, (P, -1))
            return out.flatten(0, 1)
        if self.n_fixed:  # given constants: the general formula, (H,) buffers
            return self.fixed_a.view(-1, 1) * v + self.fixed_b.view(-1, 1) * pv
        if self.n_laplacian == 0:
            return pv
        if self.n_laplacian == self.n_heads:
            return v - pv
        return torch.where(self.laplacian_mask.view(-1, 1), v - pv, pv)

