"""Streaming corpus statistics of per-head context-similarity matrices.

Halevi et al. ("Self-attention vector output similarities reveal how machines pay
attention", arXiv 2512.21956) study ``S^{l,h}_{ij} = <z_i, z_j>`` (diagonal zeroed, see
:mod:`tokengeo.probes.similarity.pairs`) over 20,000 fixed-length inputs. The
:class:`HeadSimilarityAccumulator` keeps only sums whose size depends on (L, H, T, V),
never on the number of samples; :meth:`~HeadSimilarityAccumulator.sums` hands them out as a
:class:`~tokengeo.probes.similarity.result.SimilaritySums` and :meth:`compute` turns them into a
:class:`~tokengeo.probes.similarity.result.HeadSimilarityResult`. Per layer l and head h:

* **mean matrix** ``M = E[S]`` by position (kept as its upper triangle: S is symmetric);
  **distance profile** ``m(d) = mean_i M_{i, i+d}``;
* **short-range mass** ``sum_{1<=|i-j|<=w} M+_ij / sum_{i!=j} M+_ij`` with
  ``M+ = max(M, 0)`` (the positive part of the mean matrix), against its chance
  level (the share of off-diagonal pairs with ``|i-j| <= w``);
* **top pairs**: in every input the ``k`` pairs ``i < j`` with the largest ``S_ij``. Of these:
  the share in the same sentence, against two chance levels (the share of all pairs in the
  same sentence, given that input's sentence lengths; and the *distance-matched* level
  ``E[p_b(d)]``, ``p_b(d)`` = share of pairs at distance ``d`` of input ``b`` in one
  sentence); the share of repeated tokens (same id) against the share among all pairs;
  the share at distance ``<= w`` and their mean distance;
* **dominant token** (over the corpus): the (non-special) token id most often an endpoint of
  a top pair, counted over all inputs;
* **per input** (the paper's "each head converges on a distinct token" is a statement about
  one input; :meth:`HeadSimilarityAccumulator._update_inputs`): in input ``b`` let
  ``c_h(t)`` be the number of head ``h``'s top pairs that contain the non-special token at
  position ``t``. The head's *convergence* is ``max_t c_h(t) / k``; its *dominant token*
  ``d_h(b)`` is that position when it is the only maximum and ``c_h >= 2`` (otherwise the
  head has none in that input). The **distinct-head share** of a layer in input ``b`` is
  ``D_b = (1/H) #{h : d_h(b) exists and d_h(b) != d_h'(b) for every other head h'}``,
  averaged over inputs; it is also given with tokens compared by id instead of position.
  Chance (a permutation baseline, computed exactly): heads pick their dominant tokens
  independently, each from its own distribution over inputs ``q_h(x)`` (share of inputs
  whose dominant is ``x``; "none" is not a value) — as if every head's input were shuffled
  against the others' — so ``E[D] = (1/H) sum_h sum_x q_h(x) prod_{h' != h} (1 - q_h'(x))``.
  ``D`` above chance means that within one input heads pick different tokens more often
  than their habits alone (e.g. a fixed position) explain;
* **repeated-token share per input**: its spread over inputs (``std``), for an interval of
  one head's share (repetition heads);
* **per-input top-pair counts** (``keep_inputs=True``; the unit of replication is the
  input, so the suite bootstraps its layer contrasts over these): for every input, layer
  and head, how many of the ``k`` top pairs lie in one sentence, repeat a token, lie at
  distance ``<= w`` and at distance ``>= T // 4``, and the sum over the top pairs of the
  distance-matched chance ``p_b(d)`` (:class:`InputCounts`); memory grows with the number
  of inputs (5 floats per input, layer and head), so it is off by default;
* **attention lift** (the paper locates high-similarity regions with high attention): the
  mean of ``T (P_ij + P_ji) / 2`` over the top pairs, against its mean over all pairs;
* **separator attention**: attention mass ``mean_i sum_{j: x_j in seps} P_ij`` on the
  separator tokens ('.' and ',') and, separately, on the special tokens, against the
  share of those tokens among the keys (the mass of uniform attention);
* **sentence contrast** (distance-matched): ``sum_d n_d (E[S|same, d] - E[S|cross, d]) /
  sum_d n_d`` with ``n_d = min(#same, #cross)`` pairs at distance d, divided by
  ``std(S | unrelated)`` (below);
* **signal-to-noise** (tokengeo's measure, the paper gives none): a pair is *related*
  when both tokens are in one sentence or are the same token, otherwise *unrelated*
  ("noise": high similarity without a linguistic relation). ``noise_share`` is the share
  of top pairs that are unrelated (against the unrelated share among all pairs), and
  ``snr = (E[S|related] - E[S|unrelated]) / std(S)``, a d' over non-special pairs (the std
  pools both groups; its sum of squares comes from ``Dh x Dh`` Gram matrices, see
  :func:`_pair_square_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokengeo.checks import check_positive
from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.result import HeadSimilarityResult, SimilaritySums, result_from_sums

F64 = torch.float64


@dataclass
class _Batch:
    """Per-batch quantities shared by every layer; ``P`` = upper-triangle pairs i < j.

    Pair masks are float (0/1) so they multiply and gather without conversions.
    """

    ids: torch.Tensor  # (B, T)
    plain_t: torch.Tensor  # (B, T) 1 on non-special tokens
    plain_u: torch.Tensor  # (B, P) both tokens non-special
    same_u: torch.Tensor  # (B, P) same sentence, both non-special
    code: torch.Tensor  # (B, P) long: 1 * same sentence + 2 * same token
    rel_flat: torch.Tensor  # (B*P,) related and non-special
    p_dist: torch.Tensor  # (B, T) share of pairs at distance d in one sentence
    keys: torch.Tensor  # (B, T, 2) separator tokens, special tokens


INPUT_COUNTS = ("within", "repeated", "short", "long", "dm_chance")


@dataclass
class InputCounts:
    """Per input, layer and head, counts over that head's ``top_k`` top pairs of the input:
    ``within`` (same sentence), ``repeated`` (same token id), ``short`` (distance
    ``<= short_range``), ``long`` (distance ``>= long_range``), and ``dm_chance``, the sum
    over the top pairs of ``p_b(d)`` (share of the input's pairs at that distance inside one
    sentence), so ``(within - dm_chance) / top_k`` is the within-sentence share's excess
    over its distance-matched chance. Each tensor is (N, L, H), float64."""

    top_k: int
    short_range: int
    long_range: int
    within: torch.Tensor
    repeated: torch.Tensor
    short: torch.Tensor
    long: torch.Tensor
    dm_chance: torch.Tensor


class HeadSimilarityAccumulator:
    """Sums over inputs of every statistic listed in the module docstring."""

    def __init__(self, n_layers: int, n_heads: int, seq_len: int, vocab_size: int, *,
                 top_k: int = 64, short_range: int = 8, separator_ids=(), special_ids=(),
                 keep_inputs: bool = False):
        for field, value in [("n_layers", n_layers), ("n_heads", n_heads),
                             ("top_k", top_k), ("short_range", short_range)]:
            check_positive(field, value)
        n_pairs = seq_len * (seq_len - 1) // 2
        if top_k > n_pairs:
            raise ConfigError(f"top_k={top_k} exceeds the {n_pairs} token pairs of seq_len="
                              f"{seq_len}")
        L, H, T = n_layers, n_heads, seq_len
        self.shape = (L, H, T)
        self.vocab_size, self.top_k, self.short_range = vocab_size, top_k, short_range
        self.separator_ids = torch.tensor(sorted(separator_ids), dtype=torch.long)
        self.special_ids = torch.tensor(sorted(special_ids), dtype=torch.long)
        iu = torch.triu_indices(T, T, 1)  # (2, P)
        self.iu, self.dist = iu, iu[1] - iu[0]  # (2, P), (P,)
        self.flat_iu = iu[0] * T + iu[1]  # (P,) positions in a flattened (T, T)
        self._workspace: dict[str, torch.Tensor] = {}
        z = lambda *s: torch.zeros(*s, dtype=F64)  # noqa: E731
        self.n_samples = 0
        self.n_pattern = z(L)
        self.sum_s = z(L, H, self.iu.shape[1])  # (L, H, P) sums of S_ij, i < j
        self.top = {k: z(L, H) for k in ("dm_chance", "lift")}
        self.top_codes = torch.zeros(L, H, 4, dtype=torch.long)  # relation code counts
        self.top_dist = torch.zeros(L, H, T, dtype=torch.long)  # distance histogram
        self.lift_all, self.sep_mass, self.special_mass = z(L, H), z(L, H), z(L, H)
        self.same_by_d, self.cross_by_d = z(L, H, T), z(L, H, T)
        self.same_n_d, self.cross_n_d = z(T), z(T)
        self.rel_sum, self.plain_sum, self.plain_sq = z(L, H), z(L, H), z(L, H)
        self.rel_n, self.plain_n = z(()), z(())
        self.chance = {k: z(()) for k in ("within", "repeat", "unrelated", "sep", "special")}
        self.endpoint_counts = torch.zeros(L, H * vocab_size, dtype=torch.long)
        self.dominant_at = torch.zeros(L, H * T, dtype=torch.long)  # inputs per position
        self.dominant_id = torch.zeros(L, H * vocab_size, dtype=torch.long)  # ... per id
        self.convergence, self.repeat_sq = z(L, H), z(L, H)
        self.distinct = {k: z(L) for k in ("position", "id")}
        self.token_counts = torch.zeros(vocab_size, dtype=torch.long)
        self.long_range = max(1, T // 4)  # as in result._long_range
        self.keep_inputs = keep_inputs
        self._inputs: list[torch.Tensor] = []  # per batch (B, L, H, 5), INPUT_COUNTS order
        self._batch_inputs: torch.Tensor | None = None

    # ----------------------------------------------------------------- updates
    def update(self, z: list[torch.Tensor], input_ids: torch.Tensor,
               sentence_ids: torch.Tensor, patterns: list[torch.Tensor] | None = None):
        """Add a batch: ``z[l]`` ``(B, T, H, Dh)``, ids and sentence ids ``(B, T)``,
        ``patterns[l]`` ``(B, H, T, T)`` (optional: without them the attention statistics
        stay empty)."""
        L, H, T = self.shape
        if len(z) != L or tuple(input_ids.shape[1:]) != (T,):
            raise ConfigError(f"expected {L} layers and windows of {T} tokens, got "
                              f"{len(z)} layers and input shape {tuple(input_ids.shape)}")
        batch = self._batch(input_ids.cpu(), sentence_ids.cpu())
        if self.keep_inputs:
            self._batch_inputs = torch.zeros(input_ids.shape[0], L, H, len(INPUT_COUNTS),
                                             dtype=F64)
            self._inputs.append(self._batch_inputs)
        for l in range(L):
            top_i = self._update_layer(l, z[l].float().cpu(), batch)
            if patterns is not None:
                self._update_attention(l, top_i, patterns[l].float().cpu(), batch)
        self.n_samples += int(input_ids.shape[0])

    def _batch(self, ids: torch.Tensor, sent: torch.Tensor) -> _Batch:
        i, j = self.iu
        T = self.shape[2]
        B = ids.shape[0]
        special = torch.isin(ids, self.special_ids)  # (B, T)
        plain = ~special
        plain_u = plain.index_select(1, i) & plain.index_select(1, j)  # (B, P)
        sent_i = sent.index_select(1, i)
        same_u = (sent_i == sent.index_select(1, j)) & (sent_i >= 0) & plain_u
        rep_u = ids.index_select(1, i) == ids.index_select(1, j)
        cross_u = plain_u & ~same_u
        unrelated_u = ~(same_u | rep_u)
        rel_u = plain_u & ~unrelated_u
        same_f = same_u.float()
        n_at_d = torch.bincount(self.dist, minlength=T).float()  # (T,)
        same_at_d = torch.zeros(B, T).index_add_(1, self.dist, same_f)  # (B, T)
        self.same_n_d += same_at_d.sum(0)
        self.cross_n_d.index_add_(0, self.dist, cross_u.sum(0).to(F64))
        n_pairs = i.shape[0]
        self.chance["within"] += float(same_at_d.sum()) / n_pairs
        self.chance["repeat"] += float(rep_u.sum()) / n_pairs
        self.chance["unrelated"] += float(unrelated_u.sum()) / n_pairs
        self.rel_n += rel_u.sum()
        self.plain_n += plain_u.sum()
        self.token_counts += torch.bincount(ids.flatten(), minlength=self.vocab_size)
        keys = torch.stack([torch.isin(ids, self.separator_ids), special], -1).float()
        return _Batch(
            ids=ids, plain_t=plain.float(), plain_u=plain_u.float(), same_u=same_f,
            code=same_u.long() + 2 * rep_u.long(), rel_flat=rel_u.reshape(-1).float(),
            p_dist=same_at_d / n_at_d.clamp_min(1), keys=keys)

    def _update_layer(self, l: int, z: torch.Tensor, b: _Batch):
        """``z``: (B, T, H, Dh). Returns the top-k pair indices ``(H, B, k)``.

        Large temporaries live in reused buffers: fresh multi-MB allocations page-fault
        on every batch and cost as much as the arithmetic.
        """
        B, T, H, _ = z.shape
        zh = z.permute(2, 0, 1, 3).contiguous()  # (H, B, T, Dh)
        su = self._pair_similarities(zh)  # (H, B, P)
        # sums over the batch by pair (reductions of su: far cheaper than more matmuls)
        self.sum_s[l].add_(su.sum(1))
        plain_sum = self._weighted_batch_sum(su, b.plain_u)  # (H, P) both non-special
        self.plain_sum[l].add_(plain_sum.sum(1))
        zp = zh * b.plain_t[None, :, :, None]  # special tokens zeroed
        self.plain_sq[l].add_(_pair_square_sum(zp))
        same = self._weighted_batch_sum(su, b.same_u)
        self.same_by_d[l].add_(torch.zeros(H, T).index_add_(1, self.dist, same))
        self.cross_by_d[l].add_(torch.zeros(H, T).index_add_(1, self.dist, plain_sum - same))
        self.rel_sum[l].add_(su.view(H, -1) @ b.rel_flat)
        k = self.top_k
        top = torch.topk(su, k, dim=-1, sorted=False,
                         out=(self._buf("top_v", (H, B, k)),
                              self._buf("top_i", (H, B, k), torch.long)))
        self._update_top(l, top.indices, b)
        self._update_inputs(l, top.indices, b)
        return top.indices

    def _pair_similarities(self, zh: torch.Tensor) -> torch.Tensor:
        """``S_ij = <z_i, z_j>`` for pairs i < j: ``(H, B, T, Dh)`` -> ``(H, B, P)``, one head
        at a time so that each (B, T, T) block is still in cache when its triangle is read."""
        H, B, T, _ = zh.shape
        su = self._buf("su", (H, B, self.iu.shape[1]))
        s = self._buf("s", (B, T, T))
        for h in range(H):
            torch.matmul(zh[h], zh[h].transpose(-1, -2), out=s)
            torch.index_select(s.view(B, T * T), 1, self.flat_iu, out=su[h])
        return su

    def _weighted_batch_sum(self, su: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``sum_b su[h, b, p] * weight[b, p]``: ``(H, B, P)``, ``(B, P)`` -> ``(H, P)``."""
        return torch.mul(su, weight, out=self._buf("weighted", su.shape)).sum(1)

    def _buf(self, name: str, shape, dtype=torch.float32) -> torch.Tensor:
        """A reusable workspace tensor (its size depends on the batch, never on the corpus)."""
        buf = self._workspace.get(name)
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dtype:
            buf = self._workspace[name] = torch.empty(shape, dtype=dtype)
        return buf

    def _update_top(self, l: int, top_i: torch.Tensor, b: _Batch) -> None:
        """Few, fused ops: relation codes and distances are counted with one bincount each."""
        H, B, k = top_i.shape
        T = self.shape[2]
        idx = top_i.permute(1, 0, 2).reshape(B, H * k)  # (B, H*k) pair indices
        head = torch.arange(H).repeat_interleave(k)  # (H*k,) head of each column
        code = b.code.gather(1, idx)  # (B, H*k): 1 same sentence + 2 same token
        self.top_codes[l] += torch.bincount((head * 4 + code).flatten(), minlength=4 * H).view(
            H, 4)
        d_top = self.dist.take(idx)  # (B, H*k)
        self.top_dist[l] += torch.bincount((head * T + d_top).flatten(), minlength=H * T).view(
            H, T)
        self.top["dm_chance"][l].add_(b.p_dist.gather(1, d_top).view(B, H, k).sum((0, 2)))
        ends = torch.stack([b.ids.gather(1, self.iu[0].take(idx)),
                            b.ids.gather(1, self.iu[1].take(idx))])
        flat = (ends + head * self.vocab_size).flatten()  # (2*B*H*k,)
        self.endpoint_counts[l] += torch.bincount(flat, minlength=H * self.vocab_size)
        repeated = (code >= 2).view(B, H, k).to(F64).mean(-1)  # (B, H) per-input share
        self.repeat_sq[l] += repeated.square().sum(0)
        if self._batch_inputs is not None:
            dm = b.p_dist.gather(1, d_top).view(B, H, k).sum(-1, dtype=F64)
            counts = [(code % 2 == 1), code >= 2, d_top <= self.short_range,
                      d_top >= self.long_range]
            for c, flags in enumerate(counts):
                self._batch_inputs[:, l, :, c] = flags.view(B, H, k).sum(-1, dtype=F64)
            self._batch_inputs[:, l, :, 4] = dm

    def _update_inputs(self, l: int, top_i: torch.Tensor, b: _Batch) -> None:
        """Per-input dominant tokens and the distinct-head share (module docstring)."""
        H, B, k = top_i.shape
        T, V = self.shape[2], self.vocab_size
        ends = torch.cat([self.iu[0].take(top_i), self.iu[1].take(top_i)], -1)  # (H, B, 2k)
        c = torch.zeros(H, B, T).scatter_add_(-1, ends, torch.ones(ends.shape))  # (H, B, T)
        c.mul_(b.plain_t)  # special tokens are never dominant
        best_n, best = c.max(-1)  # (H, B)
        unique_max = (c == best_n[..., None]).sum(-1) == 1
        has = unique_max & (best_n >= 2)  # (H, B) the head has a dominant token
        self.convergence[l] += (best_n / k).sum(1, dtype=F64)
        head = torch.arange(H)[:, None]
        tok = b.ids.gather(1, best.T).T  # (H, B) ids at the dominant positions
        self.dominant_at[l] += torch.bincount((head * T + best)[has], minlength=H * T)
        self.dominant_id[l] += torch.bincount((head * V + tok)[has], minlength=H * V)
        for name, value in (("position", best), ("id", tok)):
            self.distinct[name][l] += distinct_heads(value, has).sum(dtype=F64)

    def _update_attention(self, l: int, top_i, p: torch.Tensor, b: _Batch) -> None:
        """``p``: (B, H, T, T) attention weights, rows summing to 1.

        Over all pairs, ``sum_{i<j} (P_ij + P_ji) = T - tr P``, so the mean lift needs only
        the diagonal; over the top pairs it is gathered at ``(i, j)`` and ``(j, i)``.
        """
        B, H, T, _ = p.shape
        col = torch.matmul(self._ones(T), p)  # (B, H, T): attention received by each key
        mass = torch.einsum("bhj,bjm->bhm", col, b.keys) / T  # (B, H, 2) seps, specials
        self.sep_mass[l] += mass[..., 0].sum(0, dtype=F64)
        self.special_mass[l] += mass[..., 1].sum(0, dtype=F64)
        n_pairs = self.iu.shape[1]
        trace = p.diagonal(dim1=-2, dim2=-1).sum(-1)  # (B, H)
        self.lift_all[l] += ((T - trace) * (T / 2 / n_pairs)).sum(0, dtype=F64)
        a = p.reshape(B, H, T * T)
        idx = top_i.permute(1, 0, 2)  # (B, H, k)
        i, j = self.iu[0].take(idx), self.iu[1].take(idx)
        lift = (a.gather(-1, i * T + j) + a.gather(-1, j * T + i)) * (T / 2)
        self.top["lift"][l] += lift.sum((0, 2), dtype=F64)
        self.n_pattern[l] += B
        if l == 0:
            self.chance["sep"] += b.keys[..., 0].mean(1, dtype=F64).sum()
            self.chance["special"] += b.keys[..., 1].mean(1, dtype=F64).sum()

    def _ones(self, n: int) -> torch.Tensor:
        return self._buf("ones", (n,)).fill_(1.0)

    # ----------------------------------------------------------------- result
    def sums(self) -> SimilaritySums:
        """A copy of the running sums (further updates do not change it)."""
        L, H, T = self.shape
        c = lambda t: t.clone()  # noqa: E731
        return SimilaritySums(
            n_samples=self.n_samples, top_k=self.top_k, short_range=self.short_range,
            pairs=c(self.iu), special_ids=c(self.special_ids), sum_s=c(self.sum_s),
            top_codes=c(self.top_codes), top_dist=c(self.top_dist),
            top_dm_chance=c(self.top["dm_chance"]), same_by_d=c(self.same_by_d),
            cross_by_d=c(self.cross_by_d), same_n_d=c(self.same_n_d),
            cross_n_d=c(self.cross_n_d), rel_sum=c(self.rel_sum), plain_sum=c(self.plain_sum),
            plain_sq=c(self.plain_sq), rel_n=float(self.rel_n), plain_n=float(self.plain_n),
            chance_within=float(self.chance["within"]),
            chance_repeat=float(self.chance["repeat"]),
            chance_unrelated=float(self.chance["unrelated"]),
            endpoint_counts=self.endpoint_counts.view(L, H, self.vocab_size).clone(),
            token_counts=c(self.token_counts), n_pattern=c(self.n_pattern),
            sep_mass=c(self.sep_mass), special_mass=c(self.special_mass),
            top_lift=c(self.top["lift"]), all_lift=c(self.lift_all),
            chance_sep=float(self.chance["sep"]), chance_special=float(self.chance["special"]),
            repeat_sq=c(self.repeat_sq), convergence=c(self.convergence),
            dominant_at=self.dominant_at.view(L, H, T).clone(),
            dominant_id=self.dominant_id.view(L, H, self.vocab_size).clone(),
            distinct_position=c(self.distinct["position"]), distinct_id=c(self.distinct["id"]),
        )

    def input_counts(self) -> InputCounts:
        """The per-input top-pair counts of every input added so far (``keep_inputs``)."""
        if not self.keep_inputs:
            raise ConfigError("per-input counts were not kept; create the accumulator with "
                              "keep_inputs=True")
        if not self._inputs:
            raise ConfigError("no samples were added to the similarity accumulator")
        rows = torch.cat(self._inputs)  # (N, L, H, 5)
        return InputCounts(self.top_k, self.short_range, self.long_range,
                           *(rows[..., c].clone() for c in range(len(INPUT_COUNTS))))

    def compute(self) -> HeadSimilarityResult:
        """The :class:`HeadSimilarityResult` of everything added so far."""
        if self.n_samples == 0:
            raise ConfigError("no samples were added to the similarity accumulator")
        result = result_from_sums(self.sums())
        if self.keep_inputs:
            result.input_counts = self.input_counts()
        return result


def distinct_heads(value: torch.Tensor, has: torch.Tensor) -> torch.Tensor:
    """Per input, the share of heads whose value is theirs alone: ``(H, B)`` -> ``(B,)``.

    ``D_b = (1/H) #{h : has[h, b] and value[h, b] != value[h', b] for all h' != h with
    has[h', b]}``; heads without a value (``has`` false) count in ``H`` but never as distinct.
    """
    H = value.shape[0]
    same = (value[:, None] == value[None, :]) & has[:, None] & has[None, :]  # (H, H, B)
    alone = has & (same.sum(1) == 1)  # only itself
    return alone.sum(0).to(F64) / H


def _pair_square_sum(zh: torch.Tensor) -> torch.Tensor:
    """``sum_b sum_{i<j} <z_bi, z_bj>^2`` per head without forming S: (H, B, T, Dh) -> (H,).

    ``sum_{i,j} S_ij^2 = ||Z Z^T||_F^2 = ||Z^T Z||_F^2`` (a ``Dh x Dh`` Gram matrix), minus the
    diagonal ``sum_i ||z_i||^4``, halved for ``i < j``.
    """
    gram = torch.matmul(zh.transpose(-1, -2), zh).double()  # (H, B, Dh, Dh)
    diag = zh.square().sum(-1).double().square().sum(-1)  # (H, B)
    return ((gram.square().sum((-1, -2)) - diag) / 2).sum(1)
