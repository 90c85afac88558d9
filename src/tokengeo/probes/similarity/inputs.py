"""Per-input statistics of the similarity analysis, pooled over shards and bootstrapped over
inputs (Halevi et al., arXiv 2512.21956; the unit of replication is the input).

A shard of the analysis (:func:`~tokengeo.probes.similarity.run.prepare`) returns, per input
``b`` and layer ``l``, counts over the ``k`` top pairs of each head
(:class:`~tokengeo.probes.similarity.stats.InputCounts`). :func:`input_payload` keeps them
JSON-small: per input and layer the sums over heads of the counts (``within``, ``short``,
``long``, ``dm_chance``) and, per head, the repeated-token counts. :func:`attention_payload`
keeps the per-input, per-layer means over heads of the similarity-vs-attention statistics
(:mod:`~tokengeo.probes.similarity.vs_attention`).

From pooled payloads (:func:`pool`):

* :func:`layer_share` ``x_b(G) = (1 / (|G| H k)) sum_{l in G} sum_h c_{b,l,h}``: the share of
  the top pairs of the heads of layers ``G`` in input ``b`` with a property;
* :func:`contrast` ``x_b(A) - x_b(B)`` per input, bootstrapped over inputs;
* the within-sentence **excess** ``(within - dm_chance) / k``: the share of top pairs in one
  sentence minus its distance-matched chance ``E[p_b(d)]``;
* :func:`repetition_head`: the head with the largest mean repeated-token share, chosen on the
  even-numbered inputs and measured on the odd-numbered ones (choosing and measuring on the
  same inputs would bias the maximum upward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.ranks import Bootstrap, bootstrap_mean

F64 = torch.float64
LAYER_COUNTS = ("within", "short", "long", "dm_chance")  # summed over heads per layer
ATTENTION_STATS = ("auc_similarity", "auc_attention", "auc_conditional", "delta",
                   "auc_conditional_distance")
DIGITS = 5  # rounding of floats in a payload (shares and AUCs; far below their noise)


def input_payload(counts) -> dict:
    """JSON-able per-input counts of an :class:`~tokengeo.probes.similarity.stats.InputCounts`
    (see the module docstring)."""
    out = {"top_k": counts.top_k, "short_range": counts.short_range,
           "long_range": counts.long_range, "n_heads": int(counts.within.shape[-1])}
    for name in LAYER_COUNTS:
        per_layer = getattr(counts, name).sum(-1)  # (N, L)
        out[name] = _rounded(per_layer)
    out["repeated"] = counts.repeated.round().long().tolist()  # (N, L, H) integers
    return out


def attention_payload(comparison) -> dict:
    """Per input and layer, means over heads of ρ and, per relation, AUC_S, AUC_A, the
    conditional AUC (within attention strata; ``auc_conditional_distance``: within joint
    strata of attention and token distance) and ΔAUC = AUC_S − AUC_A (NaN heads skipped;
    ``None`` where no head
    has a value)."""
    out = {"rho": _rounded(_heads_mean(comparison.rho)), "relations": {}}
    for name in comparison.relations:
        out["relations"][name] = {
            "auc_similarity": _rounded(_heads_mean(comparison.auc_similarity[name])),
            "auc_attention": _rounded(_heads_mean(comparison.auc_attention[name])),
            "auc_conditional": _rounded(_heads_mean(comparison.auc_conditional[name])),
            "delta": _rounded(_heads_mean(comparison.delta(name))),
        }
        if name in comparison.auc_conditional_distance:
            out["relations"][name]["auc_conditional_distance"] = _rounded(
                _heads_mean(comparison.auc_conditional_distance[name]))
    return out


def head_payload(comparison) -> dict:
    """Per relation, ΔAUC of every head on every input: (N, L, H) nested lists."""
    return {name: [[_row(layer) for layer in per_input] for per_input in
                   comparison.delta(name).permute(2, 0, 1).to(F64).tolist()]
            for name in comparison.relations}


def _row(values: list[float]) -> list:
    return [None if math.isnan(v) else round(v, DIGITS) for v in values]


def _heads_mean(x: torch.Tensor) -> torch.Tensor:
    """(L, H, N) -> (N, L): mean over the heads with a value."""
    return x.nanmean(1).T


def _rounded(x: torch.Tensor) -> list:
    return [[None if math.isnan(v) else round(v, DIGITS) for v in row]
            for row in x.to(F64).tolist()]


def _tensor(rows: list) -> torch.Tensor:
    return torch.tensor([[math.nan if v is None else v for v in row] for row in rows],
                        dtype=F64)


@dataclass
class PooledInputs:
    """Per-input counts of several shards, concatenated over inputs: (N, L) and (N, L, H)."""

    top_k: int
    n_heads: int
    within: torch.Tensor
    short: torch.Tensor
    long: torch.Tensor
    dm_chance: torch.Tensor
    repeated: torch.Tensor

    @property
    def n_inputs(self) -> int:
        return int(self.within.shape[0])

    @property
    def n_layers(self) -> int:
        return int(self.within.shape[1])


def pool(payloads: list[dict]) -> PooledInputs:
    """Concatenate the :func:`input_payload` of several shards of one analysis."""
    if not payloads:
        raise ConfigError("no shards to pool")
    k, h = payloads[0]["top_k"], payloads[0]["n_heads"]
    if any((p["top_k"], p["n_heads"]) != (k, h) for p in payloads):
        raise ConfigError("shards of one analysis must share top_k and the model's heads")
    cat = lambda name: torch.cat([_tensor(p[name]) for p in payloads])  # noqa: E731
    repeated = torch.cat([torch.tensor(p["repeated"], dtype=F64) for p in payloads])
    return PooledInputs(k, h, cat("within"), cat("short"), cat("long"), cat("dm_chance"),
                        repeated)


def layer_share(p: PooledInputs, name: str, layers) -> torch.Tensor:
    """Per input, the share of the top pairs of the heads of ``layers`` counted in ``name``
    (``"excess"``: within-sentence share minus its distance-matched chance): (N,)."""
    layers = list(layers)
    if not layers:
        raise ConfigError("a layer group is empty; the model needs at least 3 layers for "
                          "early / middle / final groups")
    if name == "excess":
        counts = p.within - p.dm_chance
    elif name == "repeated":
        counts = p.repeated.sum(-1)  # (N, L): over heads, as the other counts
    else:
        counts = getattr(p, name)
    return counts[:, layers].sum(1) / (len(layers) * p.n_heads * p.top_k)


def contrast(p: PooledInputs, name: str, a, b, *, n_boot: int = 2000,
             seed: int = 0) -> Bootstrap:
    """Bootstrap over inputs of ``layer_share(a) - layer_share(b)`` (per input)."""
    return bootstrap_mean(layer_share(p, name, a) - layer_share(p, name, b), n_boot=n_boot,
                          seed=seed)


@dataclass
class RepetitionHead:
    layer: int
    head: int
    selection_share: float  # its mean share on the inputs it was chosen on
    share: Bootstrap  # its per-input share on the held-out inputs, bootstrapped


def repetition_head(p: PooledInputs, *, n_boot: int = 2000, seed: int = 0) -> RepetitionHead:
    """The head whose top pairs most often repeat a token: chosen on inputs 0, 2, 4, ...,
    measured (share of its top pairs that repeat a token, per input) on inputs 1, 3, ..."""
    if p.n_inputs < 2:
        raise ConfigError("the repetition head needs at least 2 inputs (one to choose it, "
                          "one to measure it)")
    shares = p.repeated / p.top_k  # (N, L, H)
    choose, measure = shares[0::2].mean(0), shares[1::2]  # (L, H), (N', L, H)
    flat = int(choose.argmax())
    layer, head = divmod(flat, p.n_heads)
    return RepetitionHead(layer, head, float(choose[layer, head]),
                          bootstrap_mean(measure[:, layer, head], n_boot=n_boot, seed=seed))


@dataclass
class PooledAttention:
    """Per input and layer (N, L): ρ and, per relation, AUC_S, AUC_A, conditional AUC and
    ΔAUC; ``heads``: per relation, ΔAUC per input and head (N, L, H), where kept."""

    rho: torch.Tensor
    relations: dict[str, dict[str, torch.Tensor]]
    heads: dict[str, torch.Tensor] | None = None

    @property
    def n_inputs(self) -> int:
        return int(self.rho.shape[0])

    def per_input(self, relation: str, stat: str) -> torch.Tensor:
        """(N,) mean over layers (each a mean over heads) of ``stat`` (``auc_similarity``,
        ``auc_attention``, ``auc_conditional``, ``auc_conditional_distance`` or ``delta``);
        NaN where an input has no
        value (no related pair)."""
        return self.relations[relation][stat].nanmean(1)

    def layer_means(self, relation: str, stat: str) -> torch.Tensor:
        """(L,) means over inputs."""
        return self.relations[relation][stat].nanmean(0)


def pool_attention(payloads: list[dict]) -> PooledAttention:
    """Concatenate the :func:`attention_payload` of several shards."""
    if not payloads:
        raise ConfigError("no shards to pool")
    names = list(payloads[0]["relations"])
    # a statistic every shard has (cells computed before the distance strata lack them)
    stats = [s for s in ATTENTION_STATS
             if all(s in p["relations"][n] for p in payloads for n in names)]
    rel = {n: {s: torch.cat([_tensor(p["relations"][n][s]) for p in payloads])
               for s in stats}
           for n in names}
    heads = None
    if all("heads" in p for p in payloads):
        heads = {n: torch.cat([torch.tensor([[[math.nan if v is None else v for v in row]
                                              for row in x] for x in p["heads"][n]],
                                            dtype=F64) for p in payloads]) for n in names}
    return PooledAttention(torch.cat([_tensor(p["rho"]) for p in payloads]), rel, heads)


@dataclass
class HeadIntervals:
    """Per head (L, H): the mean over inputs of a per-input statistic and its percentile
    bootstrap interval (inputs resampled, the same resamples for every head)."""

    mean: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    n: int

    def count_above(self, null: float = 0.0) -> int:
        return int((self.low > null).sum())

    def count_below(self, null: float = 0.0) -> int:
        return int((self.high < null).sum())

    def best(self) -> tuple[int, int]:
        """(layer, head) with the largest mean."""
        flat = int(torch.nan_to_num(self.mean, nan=-math.inf).argmax())
        return divmod(flat, int(self.mean.shape[1]))


def head_intervals(values: torch.Tensor, *, n_boot: int = 1000, seed: int = 0,
                   chunk: int = 100) -> HeadIntervals:
    """:class:`HeadIntervals` of ``values`` (N, L, H); inputs where every head is NaN (no
    related pair) are dropped, a NaN head of a kept input is skipped in its mean."""
    x = values[~torch.isnan(values).all(-1).all(-1)].to(F64)  # (N', L, H)
    n = int(x.shape[0])
    if n == 0:
        nan = torch.full(values.shape[1:], math.nan, dtype=F64)
        return HeadIntervals(nan, nan, nan, 0)
    g = torch.Generator().manual_seed(seed)
    means = []
    for start in range(0, n_boot, chunk):  # (chunk, N', L, H) at a time: memory stays small
        idx = torch.randint(0, n, (min(chunk, n_boot - start), n), generator=g)
        means.append(x[idx].nanmean(1))
    q = torch.quantile(torch.cat(means), torch.tensor([0.025, 0.975], dtype=F64), dim=0)
    return HeadIntervals(x.nanmean(0), q[0], q[1], n)
