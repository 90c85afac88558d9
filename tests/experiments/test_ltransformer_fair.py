"""The L-Transformer compared fairly: the fair baseline's embedding, the suite's claims and
regions, and the benchmark's encoder-only measurements."""

import math
from pathlib import Path

import pytest
import torch
from torch import nn

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import ltransformer as suite
from tokengeo.nn.lposition import sinusoid

SIZES = dict(vocab_size=50, n_layers=1, max_len=16)


def _ids(T=10):
    return torch.randint(1, 50, (3, T), generator=torch.Generator().manual_seed(0))


def test_fair_baseline_embeds_as_the_ltransformer_before_its_transform():
    fair = tokengeo.create_model("encoder-tiny", embed_scale=True, positions="sinusoidal",
                                 **SIZES)
    d, ids = fair.config.d_model, _ids()
    x, _ = fair.embed(ids)  # (B, T, d)
    expected = fair.tok_emb(ids) * math.sqrt(d) + sinusoid(torch.arange(10.0), d)
    assert torch.equal(x, expected)
    # the L-Transformer with one slice (its transform is the identity) embeds the same
    lt = tokengeo.create_model("ltransformer-tiny", p=1, n_heads=4, **SIZES)
    lt.tok_emb.weight.data.copy_(fair.tok_emb.weight.data)
    assert torch.equal(x, lt.stream_to_tokens(lt.embed(ids)[0]))
    # with p = 4 slices its pre-transform term is the fair baseline's scaled embedding
    assert torch.equal(lt.tok_emb(ids) * lt.emb_scale, fair.tok_emb(ids) * fair.emb_scale)


def test_default_encoder_keeps_learned_unscaled_embedding():
    model = tokengeo.create_model("encoder-tiny", **SIZES)
    assert (model.config.embed_scale, model.config.positions) == (False, "learned")
    ids = _ids()
    x, _ = model.embed(ids)
    assert torch.equal(x, model.tok_emb(ids) + model.pos_emb.weight[:10])


def test_sinusoidal_encoder_has_no_position_table():
    learned = tokengeo.create_model("encoder-tiny", **SIZES)
    fixed = tokengeo.create_model("encoder-tiny", positions="sinusoidal", **SIZES)
    assert fixed.pos_emb is None
    assert learned.num_parameters() - fixed.num_parameters() == 16 * learned.config.d_model
    ids = _ids()
    assert torch.equal(fixed.embed(ids)[0], fixed.tok_emb(ids) + sinusoid(torch.arange(10.0), 128))


@pytest.mark.parametrize("overrides, needle", [
    (dict(positions="rotary"), "positions='rotary' is not valid"),
    (dict(embed_scale="yes"), "embed_scale='yes' must be true or false"),
])
def test_bad_embedding_options_are_named(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        tokengeo.create_model("encoder-tiny", **overrides)


# ---------------------------------------------------------------- the suite

SETTINGS = {
    "seeds": [0, 1, 2, 3, 4], "baseline_model": "encoder-tiny", "l_model": "ltransformer-tiny",
    "p": 4, "head_dim": 16, "main_alpha": "identity", "alphas": ["linear", "harmonic"],
    "accuracy_tolerance": 0.01, "widths": [256, 512], "slices": [1, 2],
    "train": {"data": "rotten-tomatoes", "steps": 2},
    "long_train": {"data": "spam-assassin", "steps": 2},
    "efficiency": {"widths": [128], "n_layers": 1, "seq_len": 8, "batch": 2, "vocab_size": 50,
                   "repeats": 1},
}
CTX = SuiteContext.under(Path("/tmp/unused"), "ltransformer")
# accuracy by cell label, chosen so every claim's answer is known: L 0.5 point above the fair
# encoder at d = 128, 1 and 2 points at 256 and 512; 2 above the parameter-matched one; 1
# above naive splitting; α ranked identity > linear > harmonic on the main task and the
# reverse on the long one; accuracy falling with p
ACC = {"fair": 0.80, "matched": 0.785, "L_alpha-identity": 0.805, "L_alpha-linear": 0.795,
       "L_alpha-harmonic": 0.79, "L_naive": 0.795, "d256_fair": 0.80, "d256_L": 0.81,
       "d512_fair": 0.80, "d512_L": 0.82, "p1_L": 0.83, "p2_L": 0.82,
       "long_fair": 0.95, "long_L_alpha-identity": 0.93, "long_L_alpha-linear": 0.94,
       "long_L_alpha-harmonic": 0.955}


def _results():
    out = {}
    for i, (label, acc) in enumerate(ACC.items()):
        for seed in SETTINGS["seeds"]:
            # a small jitter that differs by label: no paired difference is tied over seeds
            acc_s = acc + 0.001 * seed + 0.0004 * math.sin(seed * (i + 1))
            value = {"final": {"test": {"accuracy": acc_s}}, "wall_time_s": 1.0,
                     "parameters": {"encoder": 1, "total": 2}}
            out[f"{label}-s{seed}"] = CellResult(f"{label}-s{seed}", value)
    return out


def _efficiency_value(saved_l=40, saved_fair=100):
    def row(name, d, flops, saved):
        return {"name": name, "d_model": d, "d_model_l": 128, "encoder_params": 10,
                "total_params_bert_vocab": 20, "flops_analytic": flops, "flops_counted": flops,
                "transform_flops": 0, "saved_activation_bytes": saved, "peak_bytes": None,
                "step_ms": 1.0}
    def peak(name, batch, mb):
        return {"name": name, "d_model_l": 128, "batch": batch, "seq_len": 64,
                "peak_bytes": int(mb * 2**20), "parameter_bytes": 2**20,
                "method": "cpu peak RSS (4 KiB mmap threshold)"}
    return {"rows": [row("ltransformer", 128, 25, saved_l), row("fair_baseline", 128, 100,
                                                                 saved_fair),
                     row("param_matched", 64, 26, 50)],
            "training_peaks": [peak("ltransformer", 8, 15), peak("fair_baseline", 8, 20),
                               peak("ltransformer", 16, 27), peak("fair_baseline", 16, 30)]}


def test_suite_cells_build_the_papers_comparisons():
    from tokengeo.models.lt_budget import MATCH_TOLERANCE, standard_block_parameters

    cells = {c.key: c for c in suite.cells(SETTINGS, CTX)}
    assert {k for k in cells if k.endswith("-s0")} == {f"{lab}-s0" for lab in ACC}
    assert "efficiency" in cells and len(cells) == len(ACC) * 5 + 1
    over = {lab: cells[f"{lab}-s0"].kwargs["config"]["model_overrides"] for lab in ACC}
    # heads of width 16 everywhere: fair 8 heads at d = 128, L 2 per slice of width 32
    assert over["fair"] == {"d_model": 128, "n_heads": 8, "embed_scale": True,
                            "positions": "sinusoidal"}
    assert over["L_alpha-linear"] == {"d_model": 128, "p": 4, "n_heads": 2, "alpha": "linear",
                                      "transform": "dct"}
    assert over["L_naive"]["transform"] == "identity" and over["L_naive"]["alpha"] == "identity"
    assert over["d512_L"]["n_heads"] == 8 and over["d512_fair"]["n_heads"] == 32
    assert (over["p1_L"]["p"], over["p1_L"]["n_heads"]) == (1, 8)
    # the parameter-matched encoder: narrower, the L-Transformer's encoder parameters ± 2 %
    matched = over["matched"]
    lt = suite.l_config(SETTINGS)
    model = tokengeo.create_model("encoder-tiny", **matched)
    ratio = model.num_parameters(only_blocks=True) / tokengeo.create_model(
        "ltransformer-tiny", **over["L_alpha-identity"]).num_parameters(only_blocks=True)
    assert matched["d_model"] < lt.d_model and abs(ratio - 1) <= MATCH_TOLERANCE
    assert model.num_parameters(only_blocks=True) == standard_block_parameters(
        matched["d_model"], model.config)
    long = cells["long_L_alpha-harmonic-s3"].kwargs["config"]
    assert long["data"] == "spam-assassin" and long["model_overrides"]["alpha"] == "harmonic"


def test_suite_claims_give_the_known_answers():
    results = {**_results(), "efficiency": CellResult("efficiency", _efficiency_value())}
    out = suite.summarise(SETTINGS, results, CTX)
    by_text = {c.text: c for c in out.claims}
    assert len(out.claims) == 14
    equivalence = by_text["an L-linear layer is p independent linear maps of width d/p in the "
                          "transform domain"]
    assert equivalence.kind == "construction" and equivalence.verdict == "reproduced"
    beats = by_text["the L-Transformer (some α): accuracy beats the fair encoder"]
    assert [m.label for m in beats.members] == ["α=identity", "α=linear", "α=harmonic"]
    assert beats.verdict == "reproduced" and beats.members[0].measured.mean == \
        pytest.approx(0.005, abs=5e-4)
    assert beats.kind == "stand-in" and beats.members[0].vs_paper == "smaller"
    assert by_text["the L-Transformer (α=identity): accuracy beats the parameter-matched "
                   "encoder"].verdict == "reproduced"
    coupling = by_text["the DCT coupling beats naive splitting (identity transform)"]
    assert coupling.measured.mean == pytest.approx(0.01, abs=5e-4)
    rank = by_text["the ranking of the α strategies depends on the data set"]
    assert rank.verdict == "reproduced" and "p = 0.00794" in rank.detail
    assert "identity (main), harmonic (long)" in rank.detail
    width = by_text["the gain over the fair encoder grows with the width d"]
    assert width.verdict == "reproduced"
    assert width.measured.mean == pytest.approx(0.0075, abs=1e-3)  # per doubling of d
    assert by_text["accuracy falls as the width is split into more slices p"].verdict == \
        "reproduced"
    parity = by_text["accuracy within 1 point of the fair encoder at d = 768"]
    assert "not trained in these settings" in parity.verdict
    # issue 46: a "not run" stand-in names the command that runs it
    assert "tokengeo reproduce --full --only ltransformer --config-dir" in parity.verdict
    long = by_text["long inputs: the L-Transformer (some α): accuracy within 1 point of the "
                   "fair encoder"]
    assert long.verdict == "reproduced"  # harmonic is 0.5 point above
    one_over_p = by_text["encoder parameters and projection/FFN FLOPs ≈ 1/p (p = 4)"]
    assert one_over_p.verdict == "reproduced"
    assert [m.measured.mean for m in one_over_p.members][1] == 0.25
    total = by_text["total parameters L / fair with a 30,522-token vocabulary (d = 768)"]
    assert total.verdict == "reproduced" and round(1 - total.measured.mean, 2) == 0.41
    memory = by_text["peak training memory of the L-Transformer below its fair encoder's "
                     "(d = 128, every batch size)"]
    assert [m.label for m in memory.members] == ["batch 8", "batch 16"]
    assert [math.exp(m.measured.mean) for m in memory.members] == pytest.approx([0.75, 0.9])
    assert memory.verdict == "reproduced" and memory.kind == "stand-in"
    assert not any(c.text.startswith("saved activations") for c in out.claims)
    titles = [t[0] for t in out.tables]
    assert any(t.startswith("Peak memory of a training step with AdamW") for t in titles)
    assert any(t.startswith("α: mean rank") for t in titles)
    assert any(t.startswith("Efficiency") for t in titles)


def test_peak_memory_is_judged_per_batch_size_against_the_papers_reduction(tmp_path):
    value = _efficiency_value()
    peaks = []
    for batch, (peak_l, peak_fair) in ((16, (74, 100)), (32, (82, 100)), (64, (90, 100))):
        for name, mb in (("ltransformer", peak_l), ("fair_baseline", peak_fair)):
            peaks.append({**value["training_peaks"][0], "name": name, "batch": batch,
                          "peak_bytes": mb * 2**20})
    ctx = SuiteContext(tmp_path, tmp_path / "fig")
    out = suite.summarise(SETTINGS, {**_results(), "efficiency": CellResult(
        "efficiency", {**value, "training_peaks": peaks})}, ctx)
    memory = next(c for c in out.claims if c.text.startswith("peak training memory of the L"))
    assert [m.label for m in memory.members] == ["batch 16", "batch 32", "batch 64"]
    assert [round(math.exp(m.measured.mean), 2) for m in memory.members] == [0.74, 0.82, 0.9]
    assert memory.verdict == "reproduced"  # lower at every batch
    zero = [{**r, "peak_bytes": 0} for r in peaks]  # below the RSS resolution: no ratio
    out0 = suite.summarise(SETTINGS, {**_results(), "efficiency": CellResult(
        "efficiency", {**value, "training_peaks": zero})}, ctx)
    none = next(c for c in out0.claims if c.text.startswith("peak training memory of the L"))
    assert none.verdict.startswith("not run: peak memory below the measurement's resolution")
    # the paper's −15 % is for d = 768 with 30,522 tokens: not compared at d = 128 with 50
    assert [m.vs_paper for m in memory.members] == [None, None, None]
    assert "not compared" in memory.detail


def test_suite_without_a_long_task_reports_its_claims_as_not_run():
    settings = {k: v for k, v in SETTINGS.items() if k not in ("long_train", "widths")}
    cells = suite.cells(settings, CTX)
    assert not any(c.key.startswith("long") for c in cells)
    out = suite.summarise(settings, _results(), CTX)
    by_text = {c.text: c for c in out.claims}
    alphas = by_text["the ranking of the α strategies depends on the data set"].verdict
    assert "runs only with `tokengeo reproduce --full`" in alphas
    widths = by_text["the gain over the fair encoder grows with the width d"].verdict
    assert "no widths are trained" in widths and "add `widths`" in widths
    assert by_text["the DCT coupling beats naive splitting (identity transform)"].verdict == \
        "reproduced"


def test_parity_at_768_not_run_states_the_measured_cost():
    value = _efficiency_value()
    for r in value["rows"]:
        r["d_model_l"] = 768
    out = suite.summarise(SETTINGS, {**_results(), "efficiency": CellResult("efficiency",
                                                                            value)}, CTX)
    (parity,) = [c for c in out.claims if "d = 768" in c.text and "within" in c.text]
    assert "0.00 s for one L and one fair training step" in parity.verdict


@pytest.mark.slow  # three d = 128 models timed, counted and measured: ~5 s idle
def test_efficiency_cell_counts_flops_and_drops_imprecise_peaks(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    config = {**SETTINGS["efficiency"], "p": 4, "head_dim": 16}
    value = suite.efficiency_cell(config)
    rows = {r["name"]: r for r in value["rows"]}
    assert set(rows) == {"ltransformer", "fair_baseline", "param_matched"}
    assert all(r["peak_bytes"] is None and r["step_ms"] > 0 and r["d_model_l"] == 128
               for r in rows.values())
    assert rows["ltransformer"]["flops_counted"] * 4 < rows["fair_baseline"]["flops_counted"] \
        * 1.1
    title, header, body = suite.efficiency_table(value["rows"])
    assert len(body) == 3 and body[0][7] == "n/a"
    peaks = value["training_peaks"]  # measured in a fresh process with the mmap threshold
    assert {(p["name"], p["batch"]) for p in peaks} == {
        (n, b) for n in ("ltransformer", "fair_baseline") for b in (2, 4, 8)}
    # at this tiny size (~230 kB of parameters, tensors under a page) the RSS peak resolves
    # pages, not tensors, and reads low under load: at least parameters + gradients here;
    # tests/bench/test_train_memory.py (slow) checks + Adam's two moments at a size that can
    for p in peaks:
        assert p["peak_bytes"] >= 2 * p["parameter_bytes"]


# ---------------------------------------------------------------- the benchmark

def test_saved_bytes_counts_activations_not_parameters():
    from tokengeo.bench.ltransformer import saved_bytes

    lin = nn.Linear(8, 4, bias=False)
    x = torch.randn(3, 8)
    # y = x Wᵀ saves x (for W's gradient); W itself is a parameter and is left out
    assert saved_bytes(lambda: lin(x).sum().backward(), lin) == 3 * 8 * 4


def test_encoder_only_step_runs_the_blocks_alone():
    from tokengeo.bench.ltransformer import SequentialSlices, encode

    lt = tokengeo.create_model("ltransformer-tiny", **SIZES).eval()
    seq = SequentialSlices(lt)
    ids = _ids()
    x, mask = lt.embed(ids)
    with torch.no_grad():
        expected = x
        for block in lt.blocks:
            expected = block(expected, mask)
        assert torch.allclose(encode(lt, x, mask), expected)
        assert torch.allclose(encode(seq, x, mask), expected, atol=1e-5)


def test_the_learnable_alphas_trained_values_are_a_table_per_run():
    settings = {**SETTINGS, "alphas": ["linear", "learnable"]}
    cells = {c.key: c for c in suite.cells(settings, CTX)}
    assert "learned_alpha" in cells["L_alpha-learnable-s0"].fields  # a cached cell without
    assert "learned_alpha" in cells["long_L_alpha-learnable-s3"].fields  # it is recomputed
    assert "learned_alpha" not in cells["L_alpha-linear-s0"].fields
    results = _results()
    for task, acc in (("", 0.8), ("long_", 0.94)):
        for seed in settings["seeds"]:
            value = {"final": {"test": {"accuracy": acc + 0.002 * seed}}, "wall_time_s": 1.0,
                     "parameters": {"encoder": 1, "total": 2},
                     "learned_alpha": {"alpha": [1.0, 1.0 + 0.01 * seed, 0.5, 2.0],
                                       "group": 1, "lr": 2e-3, "weight_decay": 0.0}}
            key = f"{task}L_alpha-learnable-s{seed}"
            results[key] = CellResult(key, value)
    out = suite.summarise(settings, results, CTX)
    title, header, body = next(t for t in out.tables if t[0].startswith("learnable α"))
    assert header == ["task", "seed", "α_0", "α_1", "α_2", "α_3", "optimizer group",
                      "peak lr", "weight decay"]
    assert len(body) == 10 and body[0][0] == "main" and body[5][0] == "long inputs"
    assert body[3] == ["main", "3", "1.0000", "1.0300", "0.5000", "2.0000", "1", "0.002", "0"]
    rank = next(c for c in out.claims if c.text.startswith("the ranking of the α"))
    assert "learnable α trained to α_k ∈ [0.5, 2]" in rank.detail


def test_no_learnable_alpha_no_table():
    out = suite.summarise(SETTINGS, _results(), CTX)
    assert not any(t[0].startswith("learnable α") for t in out.tables)
