import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.data import EpochBatchSampler, RandomWindowSampler, TokenWindows
from tokengeo.data.splits import grouped_stratified_split, stratified_split
from tokengeo.errors import CheckpointError, ConfigError


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.integers(0, 4), min_size=1, max_size=200),
    val=st.floats(0, 0.45),
    test=st.floats(0, 0.45),
    seed=st.integers(0, 2**31),
)
def test_stratified_split_partitions_each_class(labels, val, test, seed):
    y = torch.tensor(labels)
    parts = stratified_split(y, (val, test), seed)
    every = torch.sort(torch.cat(parts)).values
    assert torch.equal(every, torch.arange(len(labels)))  # disjoint and complete
    for c in set(labels):
        n_c = labels.count(c)
        assert int((y[parts[1]] == c).sum()) == round(val * n_c)
        assert int((y[parts[2]] == c).sum()) == round(test * n_c)
    again = stratified_split(y, (val, test), seed)
    assert all(torch.equal(a, b) for a, b in zip(parts, again, strict=True))


def test_stratified_split_seed_changes_membership():
    y = torch.arange(1000) % 10
    a = stratified_split(y, (0.2,), 0)[1]
    b = stratified_split(y, (0.2,), 1)[1]
    assert len(a) == len(b) == 200 and not torch.equal(a, b)


def test_stratified_split_rejects_fractions_summing_to_one():
    with pytest.raises(ConfigError, match="sum"):
        stratified_split(torch.zeros(10), (0.5, 0.5), 0)


def test_grouped_split_keeps_groups_together():
    y = torch.arange(300) % 3
    groups = torch.arange(300) // 4  # groups of four, mixed labels inside
    parts = grouped_stratified_split(y, groups, (0.2, 0.2), 0)
    owner = {}
    for k, part in enumerate(parts):
        for g in groups[part].tolist():
            assert owner.setdefault(g, k) == k
    assert sorted(torch.cat(parts).tolist()) == list(range(300))


def test_token_windows_shift_and_bounds():
    w = TokenWindows(torch.arange(100), block_size=8)
    assert len(w) == 92
    x, y = w[torch.tensor([0, 91])]  # (2, 8)
    assert x.shape == (2, 8) and torch.equal(y, x + 1) and y[1, -1] == 99
    with pytest.raises(IndexError):
        w[torch.tensor([92])]
    starts = w.eval_starts()
    assert torch.equal(starts, torch.arange(0, 92, 8))  # non-overlapping, inside the stream
    assert len(w.eval_starts(max_windows=3)) == 3
    with pytest.raises(ConfigError, match="block_size"):
        TokenWindows(torch.arange(8), block_size=8)


def _take(it, n):
    return [next(it) for _ in range(n)]


def test_random_window_sampler_exact_resume_and_json_state():
    s = RandomWindowSampler(num_windows=1000, batch_size=16, seed=3)
    _take(s, 5)
    state = json.loads(json.dumps(s.state_dict()))
    expected = _take(s, 4)
    resumed = RandomWindowSampler(num_windows=1000, batch_size=16, seed=3)
    resumed.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(expected, _take(resumed, 4), strict=True))
    other = RandomWindowSampler(num_windows=1000, batch_size=16, seed=4)
    assert not torch.equal(next(other), _take(RandomWindowSampler(1000, 16, seed=3), 1)[0])


def test_random_window_sampler_ranks_split_the_global_batch():
    full = next(RandomWindowSampler(500, 12, seed=0))
    parts = [next(RandomWindowSampler(500, 12, seed=0, rank=r, world_size=3)) for r in range(3)]
    assert torch.equal(torch.cat(parts), full)
    with pytest.raises(ConfigError, match="divisible"):
        RandomWindowSampler(500, 10, world_size=3)


def test_sampler_refuses_state_of_other_settings():
    state = RandomWindowSampler(1000, 16, seed=3).state_dict()
    with pytest.raises(CheckpointError, match="seed"):
        RandomWindowSampler(1000, 16, seed=4).load_state_dict(state)


def test_epoch_sampler_covers_each_epoch_once_and_reshuffles():
    s = EpochBatchSampler(10, batch_size=4, seed=0, drop_last=False)
    epoch0 = torch.cat(_take(s, 3))  # 4 + 4 + 2
    epoch1 = torch.cat(_take(s, 3))
    assert sorted(epoch0.tolist()) == sorted(epoch1.tolist()) == list(range(10))
    assert not torch.equal(epoch0, epoch1) and s.epoch == 1
    dropping = EpochBatchSampler(10, batch_size=4, seed=0)
    assert [len(b) for b in _take(dropping, 3)] == [4, 4, 4] and dropping.epoch == 1


@pytest.mark.parametrize("stop", [1, 2, 3, 7])
def test_epoch_sampler_exact_resume_across_epochs(stop):
    s = EpochBatchSampler(10, batch_size=4, seed=5)
    _take(s, stop)
    expected = _take(s, 5)
    resumed = EpochBatchSampler(10, batch_size=4, seed=5)
    s2 = EpochBatchSampler(10, batch_size=4, seed=5)
    _take(s2, stop)
    resumed.load_state_dict(s2.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(expected, _take(resumed, 5), strict=True))


def test_epoch_sampler_ranks_split_the_global_batch():
    full = _take(EpochBatchSampler(20, 8, seed=1), 4)
    ranks = [_take(EpochBatchSampler(20, 8, seed=1, rank=r, world_size=2), 4) for r in (0, 1)]
    for k in range(4):
        assert torch.equal(torch.cat([ranks[0][k], ranks[1][k]]), full[k])
