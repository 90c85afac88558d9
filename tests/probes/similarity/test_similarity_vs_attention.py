"""Output vectors vs attention maps: per-input statistics against a brute-force reference,
and the model-level verdict on synthetic heads whose answer is known."""

import math

import pytest
import torch
from helpers.rank_reference import brute_auc

from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.vs_attention import (
    AttentionComparisonAccumulator,
    layer_stats,
    relation_pairs,
    wordpiece_word_ids,
)


def test_relation_pairs_by_hand():
    ids = torch.tensor([[0, 5, 7, 5, 9, 2]])  # [CLS] a b a c [SEP]
    sent = torch.tensor([[-1, 0, 0, 1, 1, -1]])
    words = torch.tensor([[-1, 0, 0, 1, 2, -1]])  # "b" continues word 0
    valid, rel = relation_pairs(ids, sent, words)
    i, j = torch.triu_indices(6, 6, 1)
    pairs = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(i, j, strict=True))}
    assert int(valid.sum()) == 6  # 4 plain tokens: 6 pairs
    assert rel["repetition"][0, pairs[(1, 3)]] and not rel["repetition"][0, pairs[(1, 2)]]
    assert rel["same_sentence"][0, pairs[(1, 2)]] and not rel["same_sentence"][0, pairs[(2, 3)]]
    assert rel["same_word"][0, pairs[(1, 2)]] and not rel["same_word"][0, pairs[(3, 4)]]
    assert list(rel) == ["same_sentence", "same_word", "repetition"]
    assert "same_word" not in relation_pairs(ids, sent)[1]


def test_wordpiece_word_ids():
    vocab = {0: "[CLS]", 1: "play", 2: "##ing", 3: "now", 4: "[SEP]", 5: "##s"}
    ids = torch.tensor([[0, 1, 2, 3, 5, 4]])
    sent = torch.tensor([[-1, 0, 0, 0, 0, -1]])
    words = wordpiece_word_ids(ids, lambda row: [vocab[i] for i in row], sent)
    assert words.tolist() == [[-1, 0, 0, 1, 1, -1]]


def test_layer_stats_equal_brute_force():
    stats = pytest.importorskip("scipy.stats", reason="scipy is in the data extra")
    g = torch.Generator().manual_seed(0)
    B, T, H, D = 3, 9, 2, 4
    z = torch.randn(B, T, H, D, generator=g)
    pattern = torch.randn(B, H, T, T, generator=g).softmax(-1)
    ids = torch.randint(3, 7, (B, T), generator=g)
    sent = torch.tensor([[-1, 0, 0, 0, 1, 1, 1, 1, -1]] * B)
    valid, rel = relation_pairs(ids, sent)
    got = layer_stats(z, pattern, valid, rel, n_bins=3)
    i, j = torch.triu_indices(T, T, 1)
    for b in range(B):
        keep = valid[b]
        for h in range(H):
            s = (z[b, :, h] @ z[b, :, h].T)[i, j][keep].double()
            a = 0.5 * (pattern[b, h] + pattern[b, h].T)[i, j][keep].double()
            assert float(got.rho[h, b]) == pytest.approx(stats.spearmanr(s, a).statistic)
            for name, related in rel.items():
                pos = related[b][keep]
                want_s, want_a = brute_auc(s, pos), brute_auc(a, pos)
                for value, want in [(got.auc_similarity[name][h, b], want_s),
                                    (got.auc_attention[name][h, b], want_a)]:
                    assert (math.isnan(want) and math.isnan(float(value))) or \
                        float(value) == pytest.approx(want)


def _synthetic(similarity_knows: bool, attention_knows: bool, n_inputs=40, T=20, H=3):
    """Heads whose outputs and/or attention encode the sentence of each token."""
    g = torch.Generator().manual_seed(1)
    cut = torch.randint(5, T - 5, (n_inputs,), generator=g)
    sent = (torch.arange(T)[None, :] >= cut[:, None]).long()  # two sentences per input
    sent[:, 0] = -1
    sent[:, -1] = -1
    ids = torch.randint(10, 1000, (n_inputs, T), generator=g)
    onehot = torch.nn.functional.one_hot(sent.clamp(min=0), 2).float()  # (N, T, 2)
    z = torch.randn(n_inputs, T, H, 4, generator=g)
    if similarity_knows:
        z[..., :2] += 3 * onehot[:, :, None, :]
    logits = torch.randn(n_inputs, H, T, T, generator=g)
    if attention_knows:
        same = (sent[:, :, None] == sent[:, None, :]).float()
        logits = logits + 3 * same[:, None]
    acc = AttentionComparisonAccumulator(n_bins=5)
    for s in range(0, n_inputs, 16):  # several batches, two layers
        sl = slice(s, s + 16)
        acc.update([z[sl], z[sl]], [logits[sl].softmax(-1)] * 2, ids[sl], sent[sl])
    return acc.compute()


def test_verdict_when_only_the_outputs_know_the_sentence():
    result = _synthetic(similarity_knows=True, attention_knows=False)
    assert result.rho.shape == (2, 3, 40) and result.relations == ("same_sentence",
                                                                   "repetition")
    v = result.verdict("same_sentence", n_boot=400)
    assert v["delta_auc"]["ci95"][0] > 0.2 and v["delta_auc"]["p_le_null"] == 0.0
    assert v["auc_conditional"]["ci95"][0] > 0.7  # beyond what attention's value says
    assert v["share_heads_delta_above_0"] == 1.0


def test_verdict_when_only_attention_knows_the_sentence():
    result = _synthetic(similarity_knows=False, attention_knows=True)
    v = result.verdict("same_sentence", n_boot=400)
    assert v["delta_auc"]["ci95"][1] < -0.2 and v["delta_auc"]["p_le_null"] == 1.0
    assert v["share_heads_delta_below_0"] == 1.0
    assert abs(v["auc_conditional"]["mean"] - 0.5) < 0.1  # outputs add nothing


def test_verdict_when_neither_knows():
    v = _synthetic(similarity_knows=False, attention_knows=False).verdict("same_sentence",
                                                                          n_boot=400)
    assert v["delta_auc"]["ci95"][0] < 0 < v["delta_auc"]["ci95"][1]


def test_to_dict_and_errors():
    result = _synthetic(True, False)
    d = result.to_dict(n_boot=100)
    assert set(d["verdicts"]) == {"same_sentence", "repetition"}
    assert len(d["layers"]["same_sentence"]) == 2
    with pytest.raises(ConfigError, match="same_word"):
        result.verdict("same_word")
    with pytest.raises(ConfigError, match="no batches"):
        AttentionComparisonAccumulator().compute()


def test_compare_windows_on_a_tiny_mpnet():
    transformers = pytest.importorskip("transformers", reason="transformers is optional")
    from tokengeo.probes.similarity.corpus import Windows
    from tokengeo.probes.similarity.vs_attention import compare_windows

    cfg = transformers.MPNetConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=64,
                                   max_position_embeddings=40, attn_implementation="eager")
    model = transformers.MPNetModel(cfg, add_pooling_layer=False).eval()
    ids = torch.randint(3, 60, (5, 12))
    sent = torch.tensor([[-1] + [0] * 5 + [1] * 5 + [-1]] * 5)
    result = compare_windows(model, Windows(ids, sent, (0, 2)), batch_size=2)
    assert result.rho.shape == (2, 4, 5)
    auc_s = result.auc_similarity["same_sentence"]
    assert ((auc_s >= 0) & (auc_s <= 1)).all()


def test_bpe_word_ids_start_a_word_at_whitespace_and_punctuation():
    from tokengeo.probes.similarity.vs_attention import bpe_word_ids

    pieces = ["<s>", "Sh", "all", "ĠI", "Ġcomp", "are", ",", "Ċ", "Thou", "ĉx"]
    vocab = dict(enumerate(pieces))
    ids = torch.arange(len(pieces)).unsqueeze(0)  # (1, T)
    sent = torch.tensor([[-1, 0, 0, 0, 0, 0, 0, 0, 1, 1]])  # <s> is special
    words = bpe_word_ids(ids, lambda row: [vocab[i] for i in row], sent)
    assert words.tolist() == [[-1, 0, 0, 1, 2, 2, 3, 4, 5, 6]]
