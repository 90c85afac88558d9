"""Streaming head-output similarity statistics: hand-built cases, dense references."""

import itertools

import numpy as np
import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.pairs import context_similarity
from tokengeo.probes.similarity.stats import HeadSimilarityAccumulator


def _acc(L, H, T, V=20, **kw):
    return HeadSimilarityAccumulator(L, H, T, V, **kw)


def test_context_similarity_is_dot_products_with_zero_diagonal():
    z = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, -1.0]])[None, :, None, :]  # (1, 3, 1, 2)
    s = context_similarity(z)[0, 0]  # (3, 3)
    expected = torch.tensor([[0.0, 2.0, 0.0], [2.0, 0.0, -1.0], [0.0, -1.0, 0.0]])
    torch.testing.assert_close(s, expected)


def test_sentence_structured_head_puts_all_top_pairs_in_sentences():
    T = 8
    sent = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])
    ids = torch.tensor([[5, 6, 5, 7, 8, 9, 8, 9]])
    z = torch.nn.functional.one_hot(sent, 2).float()[..., None, :]  # (1, T, H=1, 2)
    acc = _acc(1, 1, T, top_k=12, short_range=2)
    acc.update([z], ids, sent)
    r = acc.compute()
    assert r.within_sentence_share[0, 0] == pytest.approx(1.0)
    assert r.within_sentence_chance == pytest.approx(12 / 28)
    dm = (6 * 6 / 7 + 4 * 4 / 6 + 2 * 2 / 5) / 12
    assert r.within_sentence_chance_distance_matched[0, 0] == pytest.approx(dm)
    assert r.noise_share[0, 0] == pytest.approx(0.0)
    assert r.repeated_token_chance == pytest.approx(3 / 28)
    assert r.repeated_token_share[0, 0] == pytest.approx(3 / 12)  # (0,2), (4,6), (5,7)
    assert r.top_short_range_share[0, 0] == pytest.approx(10 / 12)  # d <= 2: 6 + 4 pairs
    assert r.sentence_contrast[0, 0] > 0
    # related pairs S = 1, unrelated 0: d' = 1 / std of {12 ones, 16 zeros}
    assert r.snr[0, 0] == pytest.approx(1 / (12 / 28 * 16 / 28) ** 0.5)


def test_repetition_heads_find_distinct_dominant_tokens():
    T = 6
    ids = torch.tensor([[3, 4, 3, 4, 3, 4]])
    sent = torch.arange(T)[None]  # every token its own sentence
    z = torch.stack([(ids == 3).float(), (ids == 4).float()], -1)[..., None]  # (1, T, 2, 1)
    acc = _acc(1, 2, T, top_k=3)
    acc.update([z], ids, sent)
    r = acc.compute()
    assert r.dominant_token.tolist() == [[3, 4]]
    torch.testing.assert_close(r.dominant_token_share, torch.ones(1, 2, dtype=torch.float64))
    torch.testing.assert_close(r.repeated_token_share, torch.ones(1, 2, dtype=torch.float64))
    assert r.repeated_token_chance == pytest.approx(6 / 15)
    assert r.within_sentence_share.sum() == 0
    assert r.distinct_dominant_per_layer.tolist() == [1.0]
    assert r.dominant_token_lift[0, 0] == pytest.approx(1 / 0.5)  # token 3 is half the corpus


def test_attention_statistics_on_hand_built_patterns():
    T, B = 5, 2
    ids = torch.tensor([[1, 7, 2, 7, 9], [1, 7, 8, 8, 9]])  # 2 = separator, 1/9 = special
    sent = torch.tensor([[-1, 0, 0, 1, -1], [-1, 0, 0, 0, -1]])
    z = torch.randn(B, T, 2, 3)
    uniform = torch.full((B, T, T), 1 / T)
    onto_sep = torch.zeros(B, T, T)
    onto_sep[:, :, 2] = 1.0  # head 1 always attends to position 2
    p = torch.stack([uniform, onto_sep], 1)  # (B, H, T, T)
    acc = _acc(1, 2, T, top_k=2, separator_ids=[2], special_ids=[1, 9])
    acc.update([z], ids, sent, [p])
    r = acc.compute()
    assert r.separator_chance == pytest.approx((1 / 5 + 0) / 2)
    assert r.special_chance == pytest.approx(2 / 5)
    assert r.separator_attention[0, 0] == pytest.approx(0.1)  # uniform: 1/5 in sample 0 only
    # all rows on position 2, a separator in sample 0 only
    assert r.separator_attention[0, 1] == pytest.approx(0.5)
    assert r.special_attention[0, 0] == pytest.approx(2 / 5)
    assert r.all_attention_lift[0, 0] == pytest.approx(1.0)  # uniform attention = chance
    assert r.top_attention_lift[0, 0] == pytest.approx(1.0)


def _random_batch(B, T, H, L, V=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = [torch.randn(B, T, H, 4, generator=g) for _ in range(L)]
    p = [torch.softmax(torch.randn(B, H, T, T, generator=g), -1) for _ in range(L)]
    ids = torch.randint(2, V, (B, T), generator=g)
    ids[:, 0] = 0  # special
    lengths = torch.randint(1, 4, (B, T), generator=g).cumsum(1)
    sent = torch.searchsorted(lengths, torch.arange(T).expand(B, T).contiguous(), right=True)
    sent[:, 0] = -1
    return z, p, ids, sent


def _fields(r):
    out = {}
    for k, v in vars(r).items():
        if isinstance(v, torch.Tensor):
            out[k] = v.double()
        elif isinstance(v, float):
            out[k] = torch.tensor(v, dtype=torch.float64)
    return out


def test_streaming_equals_one_batch():
    L, H, T, B = 2, 3, 10, 7
    z, p, ids, sent = _random_batch(B, T, H, L)
    kw = dict(top_k=5, short_range=2, separator_ids=[3], special_ids=[0])
    whole = _acc(L, H, T, **kw)
    whole.update(z, ids, sent, p)
    parts = _acc(L, H, T, **kw)
    for a, b in [(0, 3), (3, 4), (4, 7)]:
        parts.update([x[a:b] for x in z], ids[a:b], sent[a:b], [x[a:b] for x in p])
    rw, rp = _fields(whole.compute()), _fields(parts.compute())
    assert rw.keys() == rp.keys() and len(rw) > 20
    for k in rw:
        torch.testing.assert_close(rw[k], rp[k], atol=1e-5, rtol=1e-5, equal_nan=True)


def test_mean_matrix_profile_and_snr_match_dense_reference():
    L, H, T, B = 1, 2, 9, 5
    z, _, ids, sent = _random_batch(B, T, H, L, seed=3)
    acc = _acc(L, H, T, top_k=4, short_range=3, special_ids=[0])
    acc.update(z, ids, sent)
    r = acc.compute()
    s = context_similarity(z[0])  # (H, B, T, T)
    mean = s.mean(1)
    torch.testing.assert_close(r.mean_similarity[0], mean, atol=1e-5, rtol=1e-5)
    for d in (1, 4, 8):
        ref = torch.stack([mean[h].diagonal(d).mean() for h in range(H)])
        torch.testing.assert_close(r.distance_profile[0, :, d - 1].float(), ref, atol=1e-5,
                                   rtol=1e-5)
    for h in range(H):
        rel, unrel = [], []
        for b, i, j in itertools.product(range(B), range(T), range(T)):
            if i >= j or ids[b, i] == 0 or ids[b, j] == 0:
                continue
            related = bool(sent[b, i] == sent[b, j]) or bool(ids[b, i] == ids[b, j])
            (rel if related else unrel).append(float(s[h, b, i, j]))
        rel, unrel = torch.tensor(rel, dtype=torch.float64), torch.tensor(unrel,
                                                                           dtype=torch.float64)
        pooled = torch.cat([rel, unrel]).std(unbiased=False)
        snr = (rel.mean() - unrel.mean()) / pooled
        assert float(r.snr[0, h]) == pytest.approx(float(snr), rel=1e-4)
        # distance-matched same- vs cross-sentence contrast, by explicit loops
        same, cross = {}, {}
        for b, i, j in itertools.product(range(B), range(T), range(T)):
            if i >= j or ids[b, i] == 0 or ids[b, j] == 0:
                continue
            bucket = same if bool(sent[b, i] == sent[b, j]) else cross
            bucket.setdefault(j - i, []).append(float(s[h, b, i, j]))
        num = den = 0.0
        for d in set(same) & set(cross):
            w = min(len(same[d]), len(cross[d]))
            num += w * (np.mean(same[d]) - np.mean(cross[d]))
            den += w
        assert float(r.sentence_contrast[0, h]) == pytest.approx(
            num / den / float(pooled), rel=1e-4)
        # top pairs: explicit per-sample sort
        hits = 0
        for b in range(B):
            pairs = [(float(s[h, b, i, j]), i, j) for i in range(T) for j in range(i + 1, T)]
            for _, i, j in sorted(pairs, reverse=True)[:4]:
                hits += int(sent[b, i] == sent[b, j] and sent[b, i] >= 0)
        assert float(r.within_sentence_share[0, h]) == pytest.approx(hits / (4 * B))


def test_accumulator_rejects_bad_shapes_and_empty_results():
    acc = _acc(2, 1, 6, top_k=3)
    with pytest.raises(ConfigError, match="no samples"):
        acc.compute()
    with pytest.raises(ConfigError, match="expected 2 layers"):
        acc.update([torch.randn(1, 6, 1, 2)], torch.zeros(1, 6, dtype=torch.long),
                   torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(ConfigError, match="top_k"):
        _acc(1, 1, 4, top_k=7)


def test_the_result_reads_only_the_public_sums():
    """result.py computes from SimilaritySums fields, never from the accumulator's state."""
    import ast
    import dataclasses
    import inspect

    from tokengeo.probes.similarity import result
    from tokengeo.probes.similarity.result import SimilaritySums

    public = {f.name for f in dataclasses.fields(SimilaritySums)} | {"shape"}
    tree = ast.parse(inspect.getsource(result))
    read, sums_args = set(), 0
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        params = {a.arg for a in fn.args.args
                  if isinstance(a.annotation, ast.Name) and a.annotation.id == "SimilaritySums"}
        sums_args += len(params)
        read |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)
                 and isinstance(n.value, ast.Name) and n.value.id in params}
    private = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and n.attr.startswith("_") and not n.attr.startswith("__")}
    assert sums_args >= 6 and read and read <= public
    assert private == set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "HeadSimilarityAccumulator" not in names and "acc" not in names


def test_sums_are_a_snapshot_and_give_the_result():
    from tokengeo.probes.similarity.result import result_from_sums

    acc = _acc(1, 2, 6, top_k=3)
    ids, sent = torch.randint(0, 20, (2, 6)), torch.zeros(2, 6, dtype=torch.long)
    acc.update([torch.randn(2, 6, 2, 4)], ids, sent)
    sums = acc.sums()
    before = sums.sum_s.clone()
    acc.update([torch.randn(2, 6, 2, 4)], ids, sent)
    assert sums.n_samples == 2 and torch.equal(sums.sum_s, before)
    torch.testing.assert_close(result_from_sums(acc.sums()).snr, acc.compute().snr,
                               equal_nan=True)


class _Attn(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        from tokengeo.hooks import HookPoint

        self.h, self.qkv, self.out = h, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.hook_pattern, self.hook_z = HookPoint(), HookPoint()

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, D // self.h).unbind(2)  # (B, T, H, Dh)
        p = torch.softmax(torch.einsum("bihd,bjhd->bhij", q, k), -1)
        if self.hook_pattern.is_active():
            p = self.hook_pattern(p)
        z = self.hook_z(torch.einsum("bhij,bjhd->bihd", p, v))  # (B, T, H, Dh)
        return x + self.out(z.reshape(B, T, D))


class _TinyHooked(torch.nn.Module):
    """A stand-in for a tokengeo model: HookPoints named blocks.{l}.attn.hook_*."""

    def __init__(self, vocab=20, d=8, h=2, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(torch.nn.Module() for _ in range(layers))
        for b in self.blocks:
            b.attn = _Attn(d, h)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b.attn(x)
        return x


def test_hooked_model_similarity_and_corpus_analysis():
    from tokengeo.probes.capture import run_with_cache
    from tokengeo.probes.similarity.corpus import Windows
    from tokengeo.probes.similarity.pairs import head_output_similarity
    from tokengeo.probes.similarity.run import analyze_windows

    model = _TinyHooked().eval()
    ids = torch.randint(0, 20, (3, 7))
    sim = head_output_similarity(model, ids)
    _, cache = run_with_cache(model, ids, names=["blocks.1.attn.hook_z"])
    torch.testing.assert_close(sim[1], context_similarity(cache["blocks.1.attn.hook_z"]))
    assert sim.shape == (2, 2, 3, 7, 7)
    sent = torch.arange(7).div(3, rounding_mode="floor").expand(3, 7).contiguous()
    windows = Windows(ids, sent, special_ids=())
    r = analyze_windows(model, windows, batch_size=2, top_k=4, short_range=2)
    assert r.n_samples == 3 and r.separator_attention is not None
    torch.testing.assert_close(r.mean_similarity, sim.mean(2).float(), atol=1e-5, rtol=1e-5)
    with pytest.raises(ConfigError, match="attention_mask"):
        head_output_similarity(model, ids, torch.ones(3, 7))
