"""Per-input similarity statistics (Halevi et al.'s per-input claims): hand-built heads."""

import pytest
import torch

from tokengeo.probes.similarity.result import distinct_chance
from tokengeo.probes.similarity.stats import HeadSimilarityAccumulator, distinct_heads


def _star(T: int, center: int) -> torch.Tensor:
    """(T, 1) outputs whose top pairs all contain ``center``: S_cj = 1, S_ij = 0.01."""
    z = torch.full((T, 1), 0.1)
    z[center] = 10.0
    return z


def test_heads_sharing_a_token_per_input_are_not_distinct_though_corpus_counts_say_so():
    """Corpus-wide dominant ids differ (5 vs 6), yet in 2 of 3 inputs both heads converge on
    the same token: the per-input distinct share is 1/3, the corpus measure 1."""
    T = 6
    ids = torch.tensor([[10, 5, 11, 12, 13, 14], [15, 6, 16, 17, 18, 19],
                        [20, 21, 5, 6, 22, 23]])
    centers = [(1, 1), (1, 1), (2, 3)]  # (head 0, head 1) per input
    z = torch.stack([torch.stack([_star(T, c0), _star(T, c1)], 1)
                     for c0, c1 in centers])  # (B, T, H=2, 1)
    acc = HeadSimilarityAccumulator(1, 2, T, 30, top_k=T - 1)
    acc.update([z], ids, torch.zeros(3, T, dtype=torch.long))
    r = acc.compute()
    assert r.dominant_token.tolist() == [[5, 6]]
    assert r.distinct_dominant_per_layer.tolist() == [1.0]  # the former, corpus-wide measure
    assert r.input_distinct_share.tolist() == pytest.approx([1 / 3])
    assert r.input_distinct_share_by_id.tolist() == pytest.approx([1 / 3])
    # q_0 = {1: 2/3, 2: 1/3}, q_1 = {1: 2/3, 3: 1/3}: 2/3 * 1/3 + 1/3 * 1 = 5/9 per head
    assert r.input_distinct_chance.tolist() == pytest.approx([5 / 9])
    assert r.input_distinct_chance_by_id.tolist() == pytest.approx([5 / 9])
    torch.testing.assert_close(r.input_convergence, torch.ones(1, 2, dtype=torch.float64))
    torch.testing.assert_close(r.input_dominant_rate, torch.ones(1, 2, dtype=torch.float64))


def test_heads_without_a_single_dominant_token_never_count_as_distinct():
    T = 6
    ids = torch.tensor([[99, 1, 2, 3, 4, 5]])  # 99 = special ([CLS])
    matching = torch.nn.functional.one_hot(torch.arange(T) // 2, 3).float()  # pairs (0,1)...
    star1 = torch.nn.functional.pad(_star(T, 1), (0, 2))  # on a plain token
    star0 = torch.nn.functional.pad(_star(T, 0), (0, 2))  # on the special token
    z = torch.stack([matching, star1, star0], 1)[None]  # (1, T, H=3, 3)
    acc = HeadSimilarityAccumulator(1, 3, T, 100, top_k=3, special_ids=[99])
    acc.update([z], ids, torch.zeros(1, T, dtype=torch.long))
    r = acc.compute()
    # matching: every token once (a tie); star on [CLS]: specials never dominate
    assert r.input_dominant_rate.tolist() == [[0.0, 1.0, 0.0]]
    assert r.input_convergence[0].tolist() == pytest.approx([1 / 3, 1.0, 1 / 3])
    assert r.input_distinct_share.tolist() == pytest.approx([1 / 3])
    assert r.input_distinct_chance.tolist() == pytest.approx([1 / 3])


def test_distinct_heads_and_its_chance_on_small_tables():
    value = torch.tensor([[1, 1, 4], [1, 2, 4], [3, 2, 5]])  # (H=3, B=3)
    has = torch.tensor([[True, True, True], [True, True, False], [True, True, True]])
    # input 0: heads 0, 1 share 1 -> only head 2; input 1: head 0 alone; input 2: head 1
    # has none, heads 0 and 2 differ
    assert distinct_heads(value, has).tolist() == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    # heads that always pick the same value have chance 0; disjoint habits have chance 1
    same = torch.tensor([[[4, 0], [4, 0]]])  # (L=1, H=2, X=2) counts over 4 inputs
    apart = torch.tensor([[[4, 0], [0, 4]]])
    assert distinct_chance(same, 4).tolist() == [0.0]
    assert distinct_chance(apart, 4).tolist() == [1.0]


def test_repeated_token_share_has_its_spread_over_inputs():
    T = 6
    ids = torch.tensor([[3, 4, 3, 4, 3, 4], [5, 6, 7, 8, 9, 10]])
    z = (torch.arange(T) % 2 == 0).float()[None, :, None, None].expand(2, T, 1, 1)
    acc = HeadSimilarityAccumulator(1, 1, T, 20, top_k=3)
    acc.update([z], ids, torch.arange(T).expand(2, T))
    r = acc.compute()  # top pairs (0,2), (0,4), (2,4): repeated in input 0 only
    assert r.repeated_token_share[0, 0] == pytest.approx(0.5)
    assert r.repeated_token_share_std[0, 0] == pytest.approx(0.5 ** 0.5)


def test_long_range_share_of_top_pairs_against_all_pairs():
    T = 8  # long range: |i - j| >= T // 4 = 2
    neighbours = torch.nn.functional.one_hot(torch.arange(T) // 2, 4).float()  # d = 1
    parity = torch.nn.functional.pad(
        torch.nn.functional.one_hot(torch.arange(T) % 2, 2).float(), (0, 2))  # even d >= 2
    z = torch.stack([neighbours, parity], 1)[None]  # (1, T, 2, 4)
    acc = HeadSimilarityAccumulator(1, 2, T, 20, top_k=4)
    acc.update([z], torch.arange(T)[None], torch.zeros(1, T, dtype=torch.long))
    r = acc.compute()
    assert r.long_range == 2
    assert r.long_range_chance == pytest.approx((28 - 7) / 28)
    assert r.top_long_range_share.tolist() == [[0.0, 1.0]]
