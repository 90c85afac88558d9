"""Output vectors vs attention maps: what a head's similarity matrix tells beyond its
attention map (Halevi et al., arXiv 2512.21956: "output vectors carry information
attention maps miss").

For layer l, head h and one input, over the unordered pairs i < j of non-special tokens:

* ``S_ij = <z_i, z_j>`` (:func:`~tokengeo.probes.similarity.pairs.context_similarity`) and
  the symmetrised attention ``A_ij = (P_ij + P_ji) / 2`` (S is symmetric, so each pair gets
  one attention score);
* **rank correlation** ρ = Spearman(S, A) over the pairs;
* for each token **relation** R (``same_sentence``; ``same_word``: two word pieces of one
  word; ``repetition``: the same token id twice), the AUC with which S ranks related
  pairs above unrelated ones, the AUC of A, their difference ΔAUC = AUC_S − AUC_A, and the
  **conditional AUC** of S within 10 equal-count strata of A (0.5 when S knows nothing
  about R beyond what A's value says; see :func:`~tokengeo.probes.similarity.ranks.
  conditional_auc`).

The unit of replication is the input: each statistic is one number per (layer, head,
input); summaries average over inputs and bootstrap over inputs. The claim "output
similarity carries information attention does not" is judged, per relation, on the
model-level ΔAUC (per input, averaged over all heads) with its bootstrap interval, and on
the conditional AUC against 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.similarity.pairs import context_similarity
from tokengeo.probes.similarity.ranks import (
    Strata,
    auc_from_ranks,
    average_ranks,
    bootstrap_mean,
    quantile_bins,
    spearman_from_ranks,
)

RELATIONS = ("same_sentence", "same_word", "repetition")
N_BINS = 10
DISTANCE_BINS = 4  # equal-count bins of |i − j|, crossed with the attention bins


def wordpiece_word_ids(input_ids: torch.Tensor, tokens_of, sentence_ids: torch.Tensor):
    """Word index of every token (N, T) for a WordPiece vocabulary (BERT, MPNet, MiniLM): a
    token spelt ``##...`` continues the previous token's word; special tokens
    (``sentence_ids < 0``) get -1. ``tokens_of(ids) -> list[str]`` is e.g. a tokenizer's
    ``convert_ids_to_tokens``."""
    out = torch.full_like(input_ids, -1)
    for n, row in enumerate(input_ids.tolist()):
        word = -1
        for t, piece in enumerate(tokens_of(row)):
            if int(sentence_ids[n, t]) < 0:
                continue
            if not (piece.startswith("##") and word >= 0):
                word += 1
            out[n, t] = word
    return out


BPE_WORD_START = ("Ġ", "Ċ", "ĉ")  # byte-level BPE: a space, newline or tab before the piece


def bpe_word_ids(input_ids: torch.Tensor, tokens_of, sentence_ids: torch.Tensor):
    """Word index of every token (N, T) for a byte-level BPE vocabulary (GPT-2, Llama,
    SmolLM2): a piece continues the previous real token's word only when both are letters
    or digits where they meet and it has no leading ``Ġ`` (space), ``Ċ`` (newline) or ``ĉ``
    (tab); any other piece starts a word (punctuation splits words, as WordPiece's
    pre-tokeniser does). Special tokens (``sentence_ids < 0``) get -1."""
    out = torch.full_like(input_ids, -1)
    for n, row in enumerate(input_ids.tolist()):
        word, prev = -1, ""
        for t, piece in enumerate(tokens_of(row)):
            if int(sentence_ids[n, t]) < 0:
                continue
            joins = (word >= 0 and _word_char(prev[-1:]) and _word_char(piece[:1]))
            if not joins:
                word += 1
            out[n, t], prev = word, piece
    return out


def _word_char(ch: str) -> bool:
    """A letter or digit of a word (a byte-level BPE whitespace marker is not)."""
    return ch.isalnum() and ch not in BPE_WORD_START


def word_ids_of(tokenizer, input_ids: torch.Tensor, sentence_ids: torch.Tensor):
    """Word indices (N, T) by the tokenizer's kind: WordPiece (``##`` continues a word:
    :func:`wordpiece_word_ids`) or byte-level BPE (:func:`bpe_word_ids`). A tokenizer of
    another kind gets no word ids (None: the ``same_word`` relation is left out)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    kind = type(backend.model).__name__ if backend is not None else ""
    tokens_of = tokenizer.convert_ids_to_tokens
    if kind == "WordPiece":
        return wordpiece_word_ids(input_ids, tokens_of, sentence_ids)
    if kind == "BPE":
        return bpe_word_ids(input_ids, tokens_of, sentence_ids)
    return None


def relation_pairs(input_ids: torch.Tensor, sentence_ids: torch.Tensor,
                   word_ids: torch.Tensor | None = None):
    """``(valid, relations)`` over the pairs i < j (``torch.triu_indices(T, T, 1)`` order):
    ``valid`` (B, M) both tokens non-special; ``relations[name]`` (B, M) bool. Without
    ``word_ids`` there is no ``same_word``."""
    T = input_ids.shape[1]
    i, j = torch.triu_indices(T, T, 1, device=input_ids.device)
    plain = sentence_ids >= 0  # (B, T)
    valid = plain[:, i] & plain[:, j]  # (B, M)
    relations = {
        "same_sentence": sentence_ids[:, i] == sentence_ids[:, j],
        "repetition": input_ids[:, i] == input_ids[:, j],
    }
    if word_ids is not None:
        relations["same_word"] = (word_ids[:, i] == word_ids[:, j]) & (word_ids[:, i] >= 0)
    return valid, {name: relations[name] for name in RELATIONS if name in relations}


@dataclass
class LayerInputStats:
    """Per (head, input) statistics of one layer on one batch: tensors shaped (H, B)."""

    rho: torch.Tensor
    auc_similarity: dict[str, torch.Tensor]
    auc_attention: dict[str, torch.Tensor]
    auc_conditional: dict[str, torch.Tensor]
    # within joint strata of attention and token distance |i − j|
    auc_conditional_distance: dict[str, torch.Tensor] = field(default_factory=dict)


def layer_stats(z: torch.Tensor, pattern: torch.Tensor, valid: torch.Tensor,
                relations: dict[str, torch.Tensor], n_bins: int = N_BINS) -> LayerInputStats:
    """The statistics of one layer: ``z`` (B, T, H, Dh) per-head outputs, ``pattern``
    (B, H, T, T) attention weights, ``valid`` and ``relations`` from :func:`relation_pairs`."""
    B, T, H, _ = z.shape
    i, j = torch.triu_indices(T, T, 1, device=z.device)
    s = context_similarity(z.to(torch.float64))[..., i, j]  # (H, B, M)
    p = pattern.to(torch.float64).transpose(0, 1)  # (H, B, T, T)
    a = 0.5 * (p[..., i, j] + p[..., j, i])  # (H, B, M)
    rows = (H * B, -1)
    s, a = s.reshape(rows), a.reshape(rows)
    keep = valid.expand(H, -1, -1).reshape(rows)
    rank_s, rank_a = average_ranks(s, keep), average_ranks(a, keep)
    strata = Strata.of(rank_s, rank_a, keep, n_bins)
    distance = (j - i).to(torch.float64).expand(H * B, -1)  # (H*B, M)
    joint = (quantile_bins(average_ranks(distance, keep), keep, DISTANCE_BINS) * n_bins
             + quantile_bins(rank_a, keep, n_bins))  # (H*B, M): distance bin × attention bin
    by_distance = Strata.of_bins(rank_s, joint, keep, n_bins * DISTANCE_BINS)
    out = LayerInputStats(spearman_from_ranks(rank_s, rank_a, keep).view(H, B), {}, {}, {})
    for name, related in relations.items():
        pos = related.expand(H, -1, -1).reshape(rows)
        out.auc_similarity[name] = auc_from_ranks(rank_s, pos, keep).view(H, B)
        out.auc_attention[name] = auc_from_ranks(rank_a, pos, keep).view(H, B)
        out.auc_conditional[name] = strata.auc(pos).view(H, B)
        out.auc_conditional_distance[name] = by_distance.auc(pos).view(H, B)
    return out


@dataclass
class AttentionComparison:
    """Per (layer, head, input) statistics, each (L, H, N), and their summaries."""

    rho: torch.Tensor
    auc_similarity: dict[str, torch.Tensor]
    auc_attention: dict[str, torch.Tensor]
    auc_conditional: dict[str, torch.Tensor]
    n_bins: int = N_BINS
    relations: tuple[str, ...] = field(default=())
    auc_conditional_distance: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def n_inputs(self) -> int:
        return int(self.rho.shape[-1])

    def delta(self, relation: str) -> torch.Tensor:
        """ΔAUC = AUC_S − AUC_A, (L, H, N)."""
        return self.auc_similarity[relation] - self.auc_attention[relation]

    def head_rows(self, relation: str, *, n_boot: int = 1000, seed: int = 0) -> list[dict]:
        """One row per head: mean ρ, AUC_S, AUC_A, and bootstrap summaries (over inputs) of
        ΔAUC (null 0) and of the conditional AUC (null 0.5)."""
        L, H, _ = self.rho.shape
        delta, cond = self.delta(relation), self.auc_conditional[relation]
        rows = []
        for layer in range(L):
            for head in range(H):
                rows.append({
                    "layer": layer, "head": head,
                    "rho": _nanmean(self.rho[layer, head]),
                    "auc_similarity": _nanmean(self.auc_similarity[relation][layer, head]),
                    "auc_attention": _nanmean(self.auc_attention[relation][layer, head]),
                    "delta_auc": bootstrap_mean(delta[layer, head], n_boot=n_boot,
                                                seed=seed).to_dict(),
                    "auc_conditional": bootstrap_mean(cond[layer, head], null=0.5,
                                                      n_boot=n_boot, seed=seed).to_dict(),
                })
        return rows

    def verdict(self, relation: str, *, n_boot: int = 2000, seed: int = 0) -> dict:
        """Model-level test of "output similarity carries information attention does not"
        for ``relation``: per input, ΔAUC and the conditional AUC averaged over all heads
        (NaN heads skipped), then bootstrapped over inputs; plus the share of heads whose
        own ΔAUC interval lies above 0 (and below 0)."""
        if relation not in self.auc_similarity:
            raise ConfigError(f"relation {relation!r} was not measured; measured: "
                              f"{list(self.auc_similarity)}")
        delta, cond = self.delta(relation), self.auc_conditional[relation]
        per_input_delta = _nanmean_heads(delta)  # (N,)
        per_input_cond = _nanmean_heads(cond)
        heads = self.head_rows(relation, n_boot=n_boot // 2, seed=seed)
        n = len(heads)
        above = sum(r["delta_auc"]["ci95"][0] > 0 for r in heads)
        below = sum(r["delta_auc"]["ci95"][1] < 0 for r in heads)
        return {
            "relation": relation,
            "delta_auc": bootstrap_mean(per_input_delta, n_boot=n_boot, seed=seed).to_dict(),
            "auc_conditional": bootstrap_mean(per_input_cond, null=0.5, n_boot=n_boot,
                                              seed=seed).to_dict(),
            "rho": _nanmean(self.rho.flatten()),
            "share_heads_delta_above_0": above / n,
            "share_heads_delta_below_0": below / n,
        }

    def layer_rows(self, relation: str) -> list[dict]:
        """Per layer means over heads and inputs: ρ, AUC_S, AUC_A, ΔAUC, conditional AUC."""
        rows = []
        for layer in range(self.rho.shape[0]):
            rows.append({
                "layer": layer, "rho": _nanmean(self.rho[layer]),
                "auc_similarity": _nanmean(self.auc_similarity[relation][layer]),
                "auc_attention": _nanmean(self.auc_attention[relation][layer]),
                "delta_auc": _nanmean(self.delta(relation)[layer]),
                "auc_conditional": _nanmean(self.auc_conditional[relation][layer]),
            })
        return rows

    def to_dict(self, *, n_boot: int = 2000, seed: int = 0) -> dict:
        return {
            "n_inputs": self.n_inputs, "n_bins": self.n_bins,
            "verdicts": {r: self.verdict(r, n_boot=n_boot, seed=seed) for r in self.relations},
            "layers": {r: self.layer_rows(r) for r in self.relations},
        }


def _nanmean(x: torch.Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def _nanmean_heads(x: torch.Tensor) -> torch.Tensor:
    """(L, H, N) -> (N,): mean over the heads with a value on each input."""
    flat = x.reshape(-1, x.shape[-1])
    return flat.nanmean(0)


class AttentionComparisonAccumulator:
    """Collects :func:`layer_stats` batch after batch (per-input numbers only: memory grows
    with the number of inputs, L·H·(1 + 3·relations) floats each)."""

    def __init__(self, n_bins: int = N_BINS) -> None:
        self.n_bins = n_bins
        self.layers: list[list[LayerInputStats]] = []

    def update(self, zs: list[torch.Tensor], patterns: list[torch.Tensor],
               input_ids: torch.Tensor, sentence_ids: torch.Tensor,
               word_ids: torch.Tensor | None = None) -> None:
        """One batch: per layer ``zs[l]`` (B, T, H, Dh) and ``patterns[l]`` (B, H, T, T)."""
        if len(zs) != len(patterns) or not zs:
            raise ConfigError(f"need per-head outputs and attention patterns of every layer; "
                              f"got {len(zs)} and {len(patterns)}")
        valid, relations = relation_pairs(input_ids, sentence_ids, word_ids)
        if not self.layers:
            self.layers = [[] for _ in zs]
        for layer, (z, p) in enumerate(zip(zs, patterns, strict=True)):
            self.layers[layer].append(layer_stats(z, p, valid, relations, self.n_bins))

    def compute(self) -> AttentionComparison:
        if not self.layers:
            raise ConfigError("no batches were added to the similarity-vs-attention comparison")

        def stack(get) -> torch.Tensor:  # -> (L, H, N)
            return torch.stack([torch.cat([get(s) for s in per_layer], dim=1)
                                for per_layer in self.layers])

        names = tuple(self.layers[0][0].auc_similarity)
        return AttentionComparison(
            rho=stack(lambda s: s.rho),
            auc_similarity={r: stack(lambda s, r=r: s.auc_similarity[r]) for r in names},
            auc_attention={r: stack(lambda s, r=r: s.auc_attention[r]) for r in names},
            auc_conditional={r: stack(lambda s, r=r: s.auc_conditional[r]) for r in names},
            n_bins=self.n_bins, relations=names,
            auc_conditional_distance={r: stack(lambda s, r=r: s.auc_conditional_distance[r])
                                      for r in names},
        )


@torch.no_grad()
def compare_windows(model, windows, *, batch_size: int = 16, word_ids=None,
                    n_bins: int = N_BINS) -> AttentionComparison:
    """Stream :class:`~tokengeo.probes.similarity.corpus.Windows` through a Hugging Face
    encoder loaded with eager attention; capture ``hook_z`` and ``hook_pattern`` of every
    layer and compare them (``word_ids`` (N, T), e.g. from :func:`wordpiece_word_ids`,
    adds the ``same_word`` relation)."""
    from tokengeo.probes.capture import capture, hook_sites
    from tokengeo.probes.similarity.pairs import forward_tokens, layer_index

    sites = hook_sites(model)
    z_names = sorted((n for n in sites if n.endswith("attn.hook_z")), key=layer_index)
    p_names = sorted((n for n in sites if n.endswith("attn.hook_pattern")), key=layer_index)
    acc = AttentionComparisonAccumulator(n_bins)
    with capture(model, z_names + p_names) as cache:
        for s in range(0, len(windows), batch_size):
            ids = windows.input_ids[s:s + batch_size]
            forward_tokens(model, ids)
            acc.update([cache[n] for n in z_names], [cache[n] for n in p_names], ids,
                       windows.sentence_ids[s:s + batch_size],
                       None if word_ids is None else word_ids[s:s + batch_size])
    return acc.compute()
