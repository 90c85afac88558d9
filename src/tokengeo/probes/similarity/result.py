"""The result of the head-output similarity analysis: statistics, JSON, table.

Every ``(L, H)`` field is indexed ``[layer][head]``; definitions are in
:mod:`tokengeo.probes.similarity.stats`. Shares are fractions in [0, 1].
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from tokengeo.io import write_bytes, write_json

F64 = torch.float64


@dataclass
class HeadSimilarityResult:
    n_samples: int
    seq_len: int
    top_k: int
    short_range: int
    mean_similarity: torch.Tensor  # (L, H, T, T) E[S]; saved as .npy, not in the JSON
    distance_profile: torch.Tensor  # (L, H, T-1): mean S at distance d = 1..T-1
    short_range_mass: torch.Tensor  # (L, H) share of max(E[S], 0) at 1 <= |i-j| <= w
    short_range_chance: float  # share of off-diagonal pairs at |i-j| <= w
    top_short_range_share: torch.Tensor  # (L, H) share of top pairs at distance <= w
    top_mean_distance: torch.Tensor  # (L, H)
    top_distance_histogram: torch.Tensor  # (L, H, T) top pairs per distance (index = d)
    within_sentence_share: torch.Tensor  # (L, H) of top pairs
    within_sentence_chance: float  # share of all pairs in one sentence
    within_sentence_chance_distance_matched: torch.Tensor  # (L, H)
    sentence_contrast: torch.Tensor  # (L, H) distance-matched, in units of std(S)
    repeated_token_share: torch.Tensor  # (L, H) of top pairs
    repeated_token_share_std: torch.Tensor  # (L, H) std over inputs of the per-input share
    repeated_token_chance: float
    noise_share: torch.Tensor  # (L, H) top pairs with no sentence / repetition relation
    noise_chance: float
    snr: torch.Tensor  # (L, H) d' of related vs unrelated pairs (pooled std)
    special_endpoint_share: torch.Tensor  # (L, H) top-pair endpoints that are special tokens
    dominant_token: torch.Tensor  # (L, H) long: most frequent non-special top-pair endpoint
    dominant_token_share: torch.Tensor  # (L, H) its share of non-special endpoints
    dominant_token_lift: torch.Tensor  # (L, H) that share / its corpus frequency
    distinct_dominant_per_layer: torch.Tensor  # (L,) distinct dominant tokens / H
    distinct_dominant_overall: float  # distinct dominant tokens / (L * H)
    input_convergence: torch.Tensor  # (L, H) mean over inputs of max_t (top pairs with t) / k
    input_dominant_rate: torch.Tensor  # (L, H) share of inputs where the head has a dominant
    input_distinct_share: torch.Tensor  # (L,) per input: heads with a dominant of their own / H
    input_distinct_chance: torch.Tensor  # (L,) the same for independently shuffled heads
    input_distinct_share_by_id: torch.Tensor  # (L,) tokens compared by id, not position
    input_distinct_chance_by_id: torch.Tensor  # (L,)
    long_range: int  # top pairs at |i - j| >= long_range are long-range (T // 4)
    top_long_range_share: torch.Tensor  # (L, H) share of top pairs at distance >= long_range
    long_range_chance: float  # share of all pairs at distance >= long_range
    separator_attention: torch.Tensor | None  # (L, H); None without attention patterns
    separator_chance: float | None
    special_attention: torch.Tensor | None  # (L, H)
    special_chance: float | None
    top_attention_lift: torch.Tensor | None  # (L, H) T (P_ij + P_ji)/2 over top pairs
    all_attention_lift: torch.Tensor | None  # (L, H) the same over all pairs
    token_names: list[list[str]] | None = field(default=None)  # (L, H) decoded dominant tokens
    # per-input top-pair counts (stats.InputCounts) when kept; not in the JSON (N x L x H)
    input_counts: object | None = field(default=None)

    @property
    def n_layers(self) -> int:
        return int(self.mean_similarity.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.mean_similarity.shape[1])

    def to_dict(self) -> dict:
        """JSON-able: tensors become nested lists; ``mean_similarity`` is left out."""
        out = {}
        for f in fields(self):
            if f.name in ("mean_similarity", "input_counts"):
                continue
            v = getattr(self, f.name)
            out[f.name] = _jsonable(v.tolist() if isinstance(v, torch.Tensor) else v)
        out["layer_summary"] = self.layer_summary()
        return out

    def layer_summary(self) -> list[dict]:
        """Per-layer means over heads of the headline statistics."""
        rows = []
        for l in range(self.n_layers):
            row = {"layer": l}
            for name in _TABLE:
                v = getattr(self, name)
                row[name] = None if v is None else _jsonable(float(v[l].mean()))
            row["distinct_dominant"] = float(self.distinct_dominant_per_layer[l])
            row["input_distinct_share"] = float(self.input_distinct_share[l])
            row["input_distinct_chance"] = float(self.input_distinct_chance[l])
            rows.append(row)
        return rows

    def table(self) -> str:
        """A short fixed-width table, one line per layer (means over heads)."""
        cols = ["layer", *(_TABLE[n] for n in _TABLE), "distinct", "in_dist", "in_chance"]
        lines = [" ".join(f"{c:>9}" for c in cols)]
        for row in self.layer_summary():
            vals = [f"{row['layer']:>9d}"]
            vals += [f"{row[n]:>9.3f}" if row[n] is not None else f"{'-':>9}" for n in _TABLE]
            vals += [f"{row[n]:>9.2f}" for n in ("distinct_dominant", "input_distinct_share",
                                                  "input_distinct_chance")]
            lines.append(" ".join(vals))
        lines.append(
            f"chance: within-sentence {self.within_sentence_chance:.3f}, short-range "
            f"{self.short_range_chance:.3f}, repeated {self.repeated_token_chance:.3f}, "
            f"noise {self.noise_chance:.3f}"
            + (f", separator attention {self.separator_chance:.3f}"
               if self.separator_chance is not None else "")
        )
        return "\n".join(lines)

    def save(self, out_dir: str | Path) -> None:
        """Write ``similarity.json`` and ``mean_similarity.npy`` (atomically) to ``out_dir``."""
        import numpy as np

        out = Path(out_dir)
        write_json(out / "similarity.json", self.to_dict(), indent=1)
        buf = io.BytesIO()
        np.save(buf, self.mean_similarity.float().numpy())
        write_bytes(out / "mean_similarity.npy", buf.getvalue())


# column name -> table header
_TABLE = {
    "within_sentence_share": "within",
    "within_sentence_chance_distance_matched": "within_dm",
    "short_range_mass": "short",
    "top_short_range_share": "top_short",
    "sentence_contrast": "contrast",
    "repeated_token_share": "repeated",
    "top_long_range_share": "top_long",
    "input_convergence": "converge",
    "noise_share": "noise",
    "snr": "snr",
    "separator_attention": "sep_attn",
    "special_attention": "spec_attn",
}


def _jsonable(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


@dataclass(frozen=True)
class SimilaritySums:
    """Sums over inputs that :class:`HeadSimilarityResult` is computed from.

    Produced by :meth:`HeadSimilarityAccumulator.sums` (definitions in
    :mod:`tokengeo.probes.similarity.stats`); ``P = T (T - 1) / 2`` pairs ``i < j``,
    ``V`` = vocabulary size. Sums over pairs/tokens are per input unless said otherwise.
    """

    n_samples: int
    top_k: int
    short_range: int
    pairs: torch.Tensor  # (2, P) long: (i, j) with i < j
    special_ids: torch.Tensor  # (S,) long
    sum_s: torch.Tensor  # (L, H, P) sum of S_ij
    top_codes: torch.Tensor  # (L, H, 4) long: top pairs per code 1*same sentence + 2*same token
    top_dist: torch.Tensor  # (L, H, T) long: top pairs per distance
    top_dm_chance: torch.Tensor  # (L, H) sum over top pairs of p_b(d)
    same_by_d: torch.Tensor  # (L, H, T) sum of S over same-sentence pairs at distance d
    cross_by_d: torch.Tensor  # (L, H, T) ... over cross-sentence (non-special) pairs
    same_n_d: torch.Tensor  # (T,) number of same-sentence pairs at distance d
    cross_n_d: torch.Tensor  # (T,)
    rel_sum: torch.Tensor  # (L, H) sum of S over related non-special pairs
    plain_sum: torch.Tensor  # (L, H) sum of S over non-special pairs
    plain_sq: torch.Tensor  # (L, H) sum of S^2 over non-special pairs
    rel_n: float  # number of related non-special pairs
    plain_n: float  # number of non-special pairs
    chance_within: float  # sum over inputs of the share of pairs in one sentence
    chance_repeat: float  # ... of pairs of one token id
    chance_unrelated: float  # ... of unrelated pairs
    endpoint_counts: torch.Tensor  # (L, H, V) long: top-pair endpoints per token id
    token_counts: torch.Tensor  # (V,) long: corpus token frequencies
    n_pattern: torch.Tensor  # (L,) inputs whose attention patterns were added
    sep_mass: torch.Tensor  # (L, H) attention mass on separator keys
    special_mass: torch.Tensor  # (L, H) attention mass on special keys
    top_lift: torch.Tensor  # (L, H) sum over top pairs of T (P_ij + P_ji) / 2
    all_lift: torch.Tensor  # (L, H) the same, mean over all pairs, summed over inputs
    chance_sep: float  # sum over inputs of the share of separator keys
    chance_special: float  # ... of special keys
    repeat_sq: torch.Tensor  # (L, H) sum over inputs of (per-input repeated-token share)^2
    convergence: torch.Tensor  # (L, H) sum over inputs of max_t (top pairs with token t) / k
    dominant_at: torch.Tensor  # (L, H, T) long: inputs whose dominant token is at position t
    dominant_id: torch.Tensor  # (L, H, V) long: ... has id v
    distinct_position: torch.Tensor  # (L,) sum over inputs of the distinct-head share
    distinct_id: torch.Tensor  # (L,) ... with tokens compared by id

    @property
    def shape(self) -> tuple[int, int, int]:
        """(L, H, T)."""
        L, H, T = self.top_dist.shape
        return L, H, T


def result_from_sums(s: SimilaritySums) -> HeadSimilarityResult:
    """Turn the sums of a :class:`HeadSimilarityAccumulator` into means and shares."""
    L, H, T = s.shape
    n, k, w = s.n_samples, s.top_k, s.short_range
    n_top = n * k
    mean = _full_matrix(s.sum_s / n, s.pairs, T)  # (L, H, T, T)
    pos = mean.clamp_min(0)
    off = ~torch.eye(T, dtype=torch.bool)
    near = ((torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() <= w) & off
    codes = s.top_codes.to(F64)  # (L, H, 4)
    hist = s.top_dist.to(F64)  # (L, H, T)
    return HeadSimilarityResult(
        n_samples=n, seq_len=T, top_k=k, short_range=w,
        mean_similarity=mean.float(),
        distance_profile=_distance_profile(mean),
        short_range_mass=(pos * near).sum((-1, -2)) / (pos * off).sum((-1, -2)),
        short_range_chance=float(near.sum() / off.sum()),
        top_short_range_share=hist[..., : w + 1].sum(-1) / n_top,
        top_mean_distance=(hist * torch.arange(T)).sum(-1) / n_top,
        top_distance_histogram=hist,
        within_sentence_share=(codes[..., 1] + codes[..., 3]) / n_top,
        within_sentence_chance=s.chance_within / n,
        within_sentence_chance_distance_matched=s.top_dm_chance / n_top,
        sentence_contrast=_sentence_contrast(s),
        repeated_token_share=(codes[..., 2] + codes[..., 3]) / n_top,
        repeated_token_share_std=_std_over_inputs((codes[..., 2] + codes[..., 3]) / n_top,
                                                  s.repeat_sq, n),
        repeated_token_chance=s.chance_repeat / n,
        noise_share=codes[..., 0] / n_top,
        noise_chance=s.chance_unrelated / n,
        snr=_snr(s),
        **_dominant_tokens(s),
        **_per_input(s),
        **_long_range(s),
        **_attention_fields(s),
    )


def _full_matrix(upper: torch.Tensor, iu: torch.Tensor, T: int) -> torch.Tensor:
    """(..., P) values at i < j -> symmetric (..., T, T) with a zero diagonal."""
    full = upper.new_zeros(*upper.shape[:-1], T, T)
    full[..., iu[0], iu[1]] = upper
    full[..., iu[1], iu[0]] = upper
    return full


def _distance_profile(mean: torch.Tensor) -> torch.Tensor:
    T = mean.shape[-1]
    return torch.stack([mean.diagonal(d, -2, -1).mean(-1) for d in range(1, T)], dim=-1)


def _sentence_contrast(s: SimilaritySums) -> torch.Tensor:
    same = s.same_by_d / s.same_n_d.clamp_min(1)  # (L, H, T) mean S per distance
    cross = s.cross_by_d / s.cross_n_d.clamp_min(1)
    weight = torch.minimum(s.same_n_d, s.cross_n_d)  # (T,)
    if float(weight.sum()) == 0:
        return torch.full(s.shape[:2], float("nan"), dtype=F64)
    diff = ((same - cross) * weight).sum(-1) / weight.sum()
    return diff / _plain_std(s)


def _plain_std(s: SimilaritySums) -> torch.Tensor:
    """std of S over non-special pairs (L, H)."""
    mu = s.plain_sum / s.plain_n
    return (s.plain_sq / s.plain_n - mu.square()).clamp_min(0).sqrt()


def _snr(s: SimilaritySums) -> torch.Tensor:
    unrel_n = s.plain_n - s.rel_n
    if s.rel_n == 0 or unrel_n == 0:
        return torch.full(s.shape[:2], float("nan"), dtype=F64)
    unrel_mean = (s.plain_sum - s.rel_sum) / unrel_n
    return (s.rel_sum / s.rel_n - unrel_mean) / _plain_std(s)


def _dominant_tokens(s: SimilaritySums) -> dict:
    L, H, _ = s.shape
    counts = s.endpoint_counts.to(F64)  # (L, H, V), a copy
    special = counts[..., s.special_ids].sum(-1)
    all_ends = counts.sum(-1)
    counts[..., s.special_ids] = 0
    total = counts.sum(-1).clamp_min(1)
    best = counts.argmax(-1)  # (L, H)
    share = counts.gather(-1, best[..., None])[..., 0] / total
    freq = s.token_counts.to(F64) / s.token_counts.sum()
    per_layer = torch.tensor([len(set(best[l].tolist())) / H for l in range(L)], dtype=F64)
    return {
        "special_endpoint_share": special / all_ends.clamp_min(1),
        "dominant_token": best,
        "dominant_token_share": share,
        "dominant_token_lift": share / freq[best].clamp_min(1e-12),
        "distinct_dominant_per_layer": per_layer,
        "distinct_dominant_overall": len(set(best.flatten().tolist())) / (L * H),
    }


def _std_over_inputs(mean: torch.Tensor, sum_sq: torch.Tensor, n: int) -> torch.Tensor:
    """Sample std over ``n`` inputs from the mean and the sum of squares."""
    if n < 2:
        return torch.full_like(mean, float("nan"))
    return ((sum_sq - n * mean.square()) / (n - 1)).clamp_min(0).sqrt()


def _per_input(s: SimilaritySums) -> dict:
    n = s.n_samples
    return {
        "input_convergence": s.convergence / n,
        "input_dominant_rate": s.dominant_at.sum(-1).to(F64) / n,
        "input_distinct_share": s.distinct_position / n,
        "input_distinct_chance": distinct_chance(s.dominant_at, n),
        "input_distinct_share_by_id": s.distinct_id / n,
        "input_distinct_chance_by_id": distinct_chance(s.dominant_id, n),
    }


def distinct_chance(counts: torch.Tensor, n: int) -> torch.Tensor:
    """Distinct-head share of heads that pick independently: ``(L, H, X)`` counts -> ``(L,)``.

    ``q_h(x) = counts[l, h, x] / n`` (inputs whose dominant is ``x``; the rest have none);
    ``E[D] = (1/H) sum_h sum_x q_h(x) prod_{h' != h} (1 - q_h'(x))``.
    """
    support = counts.sum((0, 1)) > 0
    q = counts[..., support].to(F64) / n  # (L, H, X')
    H = q.shape[1]
    alone = [(q[:, h] * (1 - torch.cat([q[:, :h], q[:, h + 1 :]], 1)).prod(1)).sum(-1)
             for h in range(H)]  # H x (L,)
    return torch.stack(alone, 1).mean(1)


def _long_range(s: SimilaritySums) -> dict:
    """Top pairs at ``|i - j| >= T // 4`` against the share of all pairs there."""
    L, H, T = s.shape
    far = max(1, T // 4)
    n_at_d = torch.arange(T, 0, -1, dtype=F64)  # pairs at distance d: T - d (d = 0 unused)
    n_at_d[0] = 0
    hist = s.top_dist.to(F64)
    return {
        "long_range": far,
        "top_long_range_share": hist[..., far:].sum(-1) / (s.n_samples * s.top_k),
        "long_range_chance": float(n_at_d[far:].sum() / n_at_d.sum()),
    }


def _attention_fields(s: SimilaritySums) -> dict:
    if float(s.n_pattern.min()) == 0:
        return {k: None for k in ("separator_attention", "separator_chance",
                                  "special_attention", "special_chance",
                                  "top_attention_lift", "all_attention_lift")}
    n_p = s.n_pattern[:, None]
    n_first = float(s.n_pattern[0])
    return {
        "separator_attention": s.sep_mass / n_p,
        "separator_chance": s.chance_sep / n_first,
        "special_attention": s.special_mass / n_p,
        "special_chance": s.chance_special / n_first,
        "top_attention_lift": s.top_lift / (n_p * s.top_k),
        "all_attention_lift": s.all_lift / n_p,
    }
