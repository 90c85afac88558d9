"""L-Transformer costs and baselines: parameter-matched encoder, total size with BERT's
vocabulary, projection/FFN FLOPs (analytic vs FlopCounterMode), the efficiency rows."""

import pytest
import torch

from tokengeo.bench.ltransformer import counted_flops, efficiency
from tokengeo.errors import ConfigError
from tokengeo.models.encoder import TextEncoder
from tokengeo.models.lt_budget import (
    BERT_VOCAB,
    fair_baseline,
    param_matched_baseline,
    projection_flops,
    standard_block_parameters,
    total_parameter_count,
)
from tokengeo.models.ltransformer import LTransformer, LTransformerConfig


def lt_config(**kw):
    base = dict(d_model=128, p=4, n_heads=2, n_layers=2, vocab_size=300, max_len=32)
    return LTransformerConfig(**{**base, **kw})


def on_meta(cls, cfg):
    with torch.device("meta"):
        return cls(cfg)


GRID = [
    dict(d_model=d, p=p, n_heads=h, n_layers=n, mlp_ratio=r, bias=b)
    for d, p, h in [(128, 4, 2), (256, 4, 2), (512, 4, 4), (768, 4, 3), (128, 2, 4),
                    (256, 8, 1), (384, 2, 3), (256, 1, 8)]
    for n, r, b in [(2, 4.0, True), (4, 2.0, False)]
]


@pytest.mark.parametrize("kw", GRID, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_param_matched_baseline_has_the_encoder_parameters_within_2_percent(kw):
    cfg = lt_config(**kw)
    lt = on_meta(LTransformer, cfg)
    matched = param_matched_baseline(cfg)
    base = on_meta(TextEncoder, matched)
    n_lt, n_base = lt.num_parameters(only_blocks=True), base.num_parameters(only_blocks=True)
    assert abs(n_base / n_lt - 1) <= 0.02
    assert matched.d_model < cfg.d_model or cfg.p == 1  # narrower: the budget of one slice set
    assert (matched.n_layers, matched.mlp_ratio, matched.vocab_size) == (
        cfg.n_layers, cfg.mlp_ratio, cfg.vocab_size)


def test_fair_baseline_has_the_same_heads_and_embedding():
    cfg = lt_config()
    fair = fair_baseline(cfg)
    assert fair.d_model == cfg.d_model and fair.n_heads == cfg.n_heads * cfg.p
    assert fair.d_model // fair.n_heads == cfg.d_slice // cfg.n_heads
    assert fair.embed_scale and fair.positions == "sinusoidal"


def test_baselines_refuse_laplacian_heads():
    with pytest.raises(ConfigError, match="attention heads only"):
        param_matched_baseline(lt_config(n_laplacian=1))
    with pytest.raises(ConfigError, match="attention heads only"):
        fair_baseline(lt_config(n_laplacian=1))


@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(pool="cls"),
                                dict(alpha="learnable"), dict(transform="learnable"),
                                dict(p=2, n_heads=4)])
def test_total_parameter_count_matches_the_modules(kw):
    cfg = lt_config(vocab_size=BERT_VOCAB, **kw)
    assert total_parameter_count(cfg) == on_meta(LTransformer, cfg).num_parameters()
    for positions in ("learned", "sinusoidal"):
        fair = fair_baseline(cfg)
        fair.positions = positions
        model = on_meta(TextEncoder, fair)
        assert total_parameter_count(fair) == model.num_parameters()
        assert standard_block_parameters(fair.d_model, fair) == \
            model.num_parameters(only_blocks=True)


def test_total_size_at_d768_matches_the_papers_reduction():
    """arXiv 2603.05727: -41 % total size at d = 768 (V = 30,522), encoder 28.4M -> 7.1M."""
    cfg = lt_config(d_model=768, n_layers=4, n_heads=3, vocab_size=BERT_VOCAB, max_len=512)
    fair = fair_baseline(cfg)
    lt_total, base_total = total_parameter_count(cfg), total_parameter_count(fair)
    assert round(1 - lt_total / base_total, 2) == 0.41
    assert round(on_meta(LTransformer, cfg).num_parameters(only_blocks=True) / 1e6, 1) == 7.1
    assert round(standard_block_parameters(768, fair) / 1e6, 1) == 28.4


@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(transform="identity"),
                                dict(p=2, n_heads=4), dict(p=1, n_heads=8),
                                dict(mlp_ratio=2.5)])
def test_projection_flops_analytic_equal_the_flop_counter(kw):
    cfg = lt_config(**kw)
    ids = torch.randint(1, cfg.vocab_size, (3, 16))
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    for c, cls in [(cfg, LTransformer), (fair_baseline(cfg), TextEncoder)]:
        torch.manual_seed(0)
        model = cls(c)
        counted = counted_flops(model, ids, mask)
        analytic = projection_flops(c, ids.numel())
        assert counted["projections_and_ffn"] == analytic.projections_and_ffn
        assert counted["transform_in"] * 2 == analytic.transform  # in and out cost the same


def test_projection_flops_are_one_pth_of_the_fair_baseline():
    for p, h in [(2, 4), (4, 2), (8, 1)]:
        cfg = lt_config(p=p, n_heads=h, bias=False)  # no folded shifts: exactly 1/p
        lt, base = projection_flops(cfg, 1000), projection_flops(fair_baseline(cfg), 1000)
        assert lt.projections_and_ffn * p == base.projections_and_ffn


def test_efficiency_rows_are_consistent():
    cfg = lt_config()
    rows = {r.name: r for r in efficiency(cfg, batch=2, seq_len=16)}
    assert set(rows) == {"ltransformer", "fair_baseline", "param_matched"}
    for row in rows.values():
        assert row.flops_analytic == row.flops_counted > 0
        assert row.saved_activation_bytes > 0 and row.peak_bytes >= 0
    assert abs(rows["param_matched"].encoder_params / rows["ltransformer"].encoder_params
               - 1) <= 0.02
    assert rows["ltransformer"].total_params_bert_vocab < rows["fair_baseline"] \
        .total_params_bert_vocab


def test_baselines_build_through_the_registry():
    """What a suite does: the registered encoder with the baseline's fields as overrides."""
    from dataclasses import asdict

    from tokengeo.models.registry import create_model

    cfg = lt_config()
    for make in (fair_baseline, param_matched_baseline):
        base = make(cfg)
        model = create_model("encoder-tiny", **asdict(base))
        assert model.config == base
        assert model.num_parameters(only_blocks=True) == standard_block_parameters(
            base.d_model, base)
