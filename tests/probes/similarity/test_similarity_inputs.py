"""Per-input statistics of the similarity analysis: the counts agree with the corpus-level
statistics, the payloads pool without loss, and the contrasts, the repetition head and the
attention summaries give the known answer on synthetic data."""

import json

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.corpus import Windows
from tokengeo.probes.similarity.inputs import (
    PooledInputs,
    attention_payload,
    contrast,
    head_intervals,
    head_payload,
    input_payload,
    layer_share,
    pool,
    pool_attention,
    repetition_head,
)
from tokengeo.probes.similarity.run import shard_windows
from tokengeo.probes.similarity.stats import HeadSimilarityAccumulator

F64 = torch.float64


def _random_run(B=9, T=12, H=3, L=2, seed=0, keep=True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 8, (B, T), generator=g)  # a small vocabulary: many repetitions
    ids[:, 0] = 0
    lengths = torch.randint(1, 5, (B, T), generator=g).cumsum(1)
    sent = torch.searchsorted(lengths, torch.arange(T).expand(B, T).contiguous(), right=True)
    sent[:, 0] = -1
    acc = HeadSimilarityAccumulator(L, H, T, 8, top_k=6, short_range=2, special_ids=[0],
                                    keep_inputs=keep)
    for a, b in [(0, 4), (4, B)]:  # two batches
        z = [torch.randn(b - a, T, H, 3, generator=g) for _ in range(L)]
        acc.update(z, ids[a:b], sent[a:b])
    return acc


def test_input_counts_average_to_the_corpus_statistics():
    acc = _random_run()
    r = acc.compute()
    c = r.input_counts
    k = c.top_k
    assert c.within.shape == (9, 2, 3) and c.long_range == 12 // 4
    pairs = [(c.within, r.within_sentence_share),
             (c.dm_chance, r.within_sentence_chance_distance_matched),
             (c.short, r.top_short_range_share), (c.long, r.top_long_range_share),
             (c.repeated, r.repeated_token_share)]
    for counts, corpus in pairs:
        torch.testing.assert_close((counts / k).mean(0), corpus.to(F64))
    torch.testing.assert_close((c.repeated / k).std(0), r.repeated_token_share_std.to(F64))
    assert (c.within <= k).all() and (c.within >= 0).all() and (c.within == c.within.round()).all()
    assert r.repeated_token_share.sum() > 0  # the check above is not vacuous


def test_input_counts_must_be_asked_for():
    acc = _random_run(keep=False)
    assert acc.compute().input_counts is None
    with pytest.raises(ConfigError, match="keep_inputs=True"):
        acc.input_counts()


def test_payload_round_trips_through_json_and_pools_shards():
    a, b = _random_run(seed=1).compute(), _random_run(seed=2, B=5).compute()
    payloads = [json.loads(json.dumps(input_payload(r.input_counts))) for r in (a, b)]
    p = pool(payloads)
    assert p.n_inputs == 14 and p.n_layers == 2
    whole = torch.cat([a.input_counts.within, b.input_counts.within])  # (N, L, H)
    torch.testing.assert_close(p.within, whole.sum(-1), atol=1e-4, rtol=0)
    torch.testing.assert_close(p.repeated, torch.cat([a.input_counts.repeated,
                                                      b.input_counts.repeated]))
    # layer_share of one layer is the per-input mean over its heads of the within share
    want = (whole[:, 1] / 6).mean(-1)
    torch.testing.assert_close(layer_share(p, "within", [1]), want, atol=1e-4, rtol=0)
    excess = ((whole - torch.cat([a.input_counts.dm_chance, b.input_counts.dm_chance])) / 6)
    torch.testing.assert_close(layer_share(p, "excess", [0, 1]), excess.mean((1, 2)),
                               atol=1e-4, rtol=0)
    torch.testing.assert_close(layer_share(p, "repeated", [0]),
                               (p.repeated[:, 0] / 6).mean(-1))
    bad = dict(payloads[1], top_k=7)
    with pytest.raises(ConfigError, match="top_k"):
        pool([payloads[0], bad])
    with pytest.raises(ConfigError, match="empty"):
        layer_share(p, "within", [])


def _synthetic(n=60, L=6, H=4, k=10, long_early=0.0, seed=0):
    """Counts per input: the early layers' long-range share is raised by ``long_early``."""
    g = torch.Generator().manual_seed(seed)
    base = torch.full((n, L, H), 0.3)
    base[:, :2] += long_early
    long = torch.binomial(torch.full((n, L, H), float(k)), base, generator=g)
    zeros = torch.zeros(n, L)
    return PooledInputs(k, H, zeros, zeros, long.sum(-1).to(F64), zeros,
                        torch.zeros(n, L, H, dtype=F64))


def test_contrast_finds_a_planted_layer_difference_and_not_a_missing_one():
    early, final = [0, 1], [4, 5]
    planted = contrast(_synthetic(long_early=0.3), "long", early, final, n_boot=500)
    assert planted.low > 0.2 and planted.high < 0.4 and planted.n == 60
    null = contrast(_synthetic(long_early=0.0), "long", early, final, n_boot=500)
    assert null.low < 0 < null.high


def test_repetition_head_is_chosen_on_half_the_inputs_and_measured_on_the_other():
    n, L, H, k = 40, 3, 4, 10
    rep = torch.zeros(n, L, H, dtype=F64)
    rep[0::2, 2, 1] = 9  # the chosen head: strong on the even inputs ...
    rep[1::2, 2, 1] = 3  # ... weaker on the held-out odd ones
    rep[:, 0, 0] = 6  # steady but never the best on the even inputs
    p = PooledInputs(k, H, *(torch.zeros(n, L, dtype=F64) for _ in range(4)), rep)
    head = repetition_head(p, n_boot=200)
    assert (head.layer, head.head) == (2, 1)
    assert head.selection_share == pytest.approx(0.9)
    assert head.share.mean == pytest.approx(0.3) and head.share.n == n // 2
    with pytest.raises(ConfigError, match="at least 2 inputs"):
        repetition_head(PooledInputs(k, H, *(torch.zeros(1, L) for _ in range(4)),
                                     torch.zeros(1, L, H)))


def test_attention_payload_summarises_per_input_means_over_heads():
    from tokengeo.probes.similarity.vs_attention import AttentionComparison

    g = torch.Generator().manual_seed(0)
    L, H, N = 2, 3, 5
    rand = lambda: torch.rand(L, H, N, generator=g, dtype=F64)  # noqa: E731
    auc_s, auc_a, cond = rand(), rand(), rand()
    auc_s[1, 2, 4] = float("nan")  # a head without a value on one input is skipped
    comp = AttentionComparison(rand(), {"repetition": auc_s}, {"repetition": auc_a},
                               {"repetition": cond}, relations=("repetition",))
    pooled = pool_attention([json.loads(json.dumps(attention_payload(comp)))])
    delta = pooled.per_input("repetition", "delta")
    want = (auc_s - auc_a).nanmean(1).mean(0)  # heads, then layers
    torch.testing.assert_close(delta, want, atol=1e-4, rtol=0)
    torch.testing.assert_close(pooled.layer_means("repetition", "auc_similarity"),
                               auc_s.nanmean(1).mean(-1), atol=1e-4, rtol=0)
    payload = {**attention_payload(comp), "heads": head_payload(comp)}
    pooled = pool_attention([json.loads(json.dumps(payload))] * 2)  # two shards
    want = (auc_s - auc_a).permute(2, 0, 1)  # (N, L, H)
    torch.testing.assert_close(pooled.heads["repetition"], torch.cat([want, want]),
                               atol=1e-4, rtol=0, equal_nan=True)


def test_head_intervals_find_the_one_informative_head():
    g = torch.Generator().manual_seed(3)
    n, L, H = 80, 2, 5
    delta = 0.05 * torch.randn(n, L, H, generator=g, dtype=F64)
    delta[:, 1, 3] += 0.2  # one head's outputs know what attention does not
    delta[:, 0, 0] -= 0.2  # one head knows less
    delta[7] = float("nan")  # an input without related pairs: dropped
    iv = head_intervals(delta, n_boot=400)
    assert iv.n == n - 1 and iv.best() == (1, 3)
    assert iv.count_above() == 1 and iv.count_below() == 1
    assert float(iv.low[1, 3]) > 0.15 and float(iv.high[1, 3]) < 0.25
    empty = head_intervals(torch.full((3, L, H), float("nan")))
    assert empty.n == 0 and torch.isnan(empty.mean).all()


def test_shards_are_disjoint_and_together_the_draw():
    ids = torch.arange(30).view(10, 3)
    w = Windows(ids, torch.zeros_like(ids), (0,))
    parts = [shard_windows(w, s, 3) for s in range(3)]
    rows = sorted(int(r[0]) for p in parts for r in p.input_ids)
    assert rows == [int(r[0]) for r in ids] and [len(p) for p in parts] == [4, 3, 3]
    for shard, shards in [(3, 3), (-1, 2), (0, 0)]:
        with pytest.raises(ConfigError, match="shard"):
            shard_windows(w, shard, shards)
