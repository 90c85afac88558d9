"""Deterministic, seeded, stratified splits of labelled examples, and index helpers."""

from __future__ import annotations

import torch

from tokengeo.checks import check_range
from tokengeo.errors import ConfigError


def stratified_split(
    labels: torch.Tensor, fractions: tuple[float, ...], seed: int
) -> list[torch.Tensor]:
    """Split indices of ``labels`` (N,) into ``len(fractions) + 1`` disjoint parts.

    Each class is shuffled with a generator seeded by ``seed`` and cut so that part k
    holds ``round(fractions[k] * n_c)`` of its ``n_c`` examples; the rest form the first
    part. Returns sorted int64 index tensors ``[rest, part_1, ..., part_K]``.
    """
    for i, frac in enumerate(fractions):
        check_range(f"fractions[{i}]", frac, 0.0, 1.0)
    if sum(fractions) >= 1.0:
        raise ConfigError(f"split fractions {fractions} must sum to less than 1")
    gen = torch.Generator().manual_seed(seed)
    parts: list[list[torch.Tensor]] = [[] for _ in range(len(fractions) + 1)]
    for c in torch.unique(labels).tolist():
        idx = torch.nonzero(labels == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        start = 0
        for k, frac in enumerate(fractions, start=1):
            n = round(frac * len(idx))
            parts[k].append(idx[start : start + n])
            start += n
        parts[0].append(idx[start:])
    return [torch.sort(torch.cat(p)).values for p in parts]


def grouped_stratified_split(
    labels: torch.Tensor, groups: torch.Tensor, fractions: tuple[float, ...], seed: int
) -> list[torch.Tensor]:
    """:func:`stratified_split` whose unit is a group (e.g. identical texts): every member
    of a group lands in the split of the group's first member, stratified by that
    member's label, so duplicates never straddle train and test."""
    _, inverse = torch.unique(groups, return_inverse=True)  # (N,) dense group ids
    n = labels.shape[0]
    first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(n), reduce="amin")  # (G,)
    parts = stratified_split(labels[first], fractions, seed)  # indices into groups
    owner = torch.empty_like(first)
    for k, part in enumerate(parts):
        owner[part] = k
    member_part = owner[inverse]  # (N,)
    return [torch.nonzero(member_part == k).flatten() for k in range(len(parts))]


def evenly_spaced(n: int, limit: int) -> torch.Tensor:
    """``min(n, limit)`` indices spread evenly over ``range(n)`` (all of them if limit=0).

    ``round(linspace(0, n - 1, limit))``: fixed, seed-free subsets (evaluation examples,
    k-NN banks) that cover the whole split.
    """
    if limit <= 0 or limit >= n:
        return torch.arange(n)
    return torch.linspace(0, n - 1, limit).round().long()
