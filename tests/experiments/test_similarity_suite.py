"""The similarity suite: its settings (MPNet main in --full, MiniLM only in --quick, prose as
the main corpus), bad settings refused in one line, and the summary on synthetic shards (a
model whose cells did not run is reported as not run, the others measured)."""

import json
import tomllib

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.reproduce import BUILTIN_CONFIG_DIR
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import similarity as suite
from tokengeo.probes.similarity.inputs import attention_payload, head_payload, input_payload
from tokengeo.probes.similarity.stats import HeadSimilarityAccumulator
from tokengeo.probes.similarity.vs_attention import AttentionComparisonAccumulator


def _settings(mode: str) -> dict:
    data = tomllib.loads((BUILTIN_CONFIG_DIR / "similarity.toml").read_text())
    return {**data.get("common", {}), **data[mode]}


def test_full_runs_mpnet_first_on_prose_with_code_docs_apart():
    full = _settings("full")
    assert full["models"][0] == "mpnet" and "minilm" in full["models"]
    (main, spec), *others = full["corpora"].items()
    assert "shakespeare" in spec["corpus"] and "python-docs" not in spec["corpus"]
    assert any("python-docs" in o["corpus"] for _, o in others)
    assert spec["shards"] * full["analysis"]["samples"] >= 1000  # inputs behind each claim
    assert spec["shards"] * full["attention_samples"] >= 100


def test_quick_needs_no_optional_model():
    assert _settings("quick")["models"] == ["minilm"]


@pytest.mark.parametrize("name, value, needle", [
    ("corpora", {"prose": "shakespeare"}, "corpus ="),
    ("corpora", {"prose": {"corpus": "shakespeare", "shards": 0}}, "shards"),
    ("corpora", {}, "at least one corpus"),
    ("analysis", {"model": "mpnet", "samples": 4}, "models"),
    ("analysis", {"samples": 0}, "samples"),
    ("cell_cost", {"mpnet": -1}, "> 0"),
])
def test_bad_settings_are_one_line_errors(name, value, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        suite.SETTINGS[name].check(value, f"similarity.toml: {name}")
    assert "\n" not in str(info.value)


def _shard_value(L: int, n: int, seed: int) -> dict:
    """A cell value like similarity_cell's, from random head outputs and attention."""
    g = torch.Generator().manual_seed(seed)
    T, H = 16, 3
    ids = torch.randint(3, 9, (n, T), generator=g)
    ids[:, 0], ids[:, -1] = 0, 1
    sent = (torch.arange(T) >= 8).long().expand(n, T).clone()
    sent[:, 0] = sent[:, -1] = -1
    z = [torch.randn(n, T, H, 4, generator=g) for _ in range(L)]
    p = [torch.randn(n, H, T, T, generator=g).softmax(-1) for _ in range(L)]
    acc = HeadSimilarityAccumulator(L, H, T, 9, top_k=5, short_range=2, separator_ids=[3],
                                    special_ids=[0, 1], keep_inputs=True)
    acc.update(z, ids, sent, p)
    result = acc.compute()
    acc = AttentionComparisonAccumulator(n_bins=3)
    acc.update(z, p, ids, sent)
    comp = acc.compute()
    value = {"result": result.to_dict(), "inputs": input_payload(result.input_counts),
             "attention": {**attention_payload(comp), "heads": head_payload(comp)},
             "figures": []}
    return json.loads(json.dumps(value))  # as stored in a cell file


def test_summary_reports_a_missing_model_as_not_run_and_measures_the_other(tmp_path):
    settings = {"models": ["mpnet", "minilm"], "attention_samples": 4, "n_boot": 200,
                "corpora": {"prose": {"corpus": "shakespeare", "shards": 2},
                            "code-docs": {"corpus": "python-docs", "shards": 1}},
                "analysis": {"samples": 6, "seq_len": 16}}
    results = {}
    for model, label, _, shard, _ in suite._units(settings):
        key = suite._key(model, label, shard)
        results[key] = (CellResult(key, None, not_run="all-mpnet-base-v2 is not installed")
                        if model == "mpnet" else
                        CellResult(key, _shard_value(3, 6, seed=shard + 10 * len(label))))
    out = suite.summarise(settings, results, SuiteContext(tmp_path, tmp_path / "fig"))
    # the main model: one not-run row per paper claim that no model measured (its shard
    # statistics: head specialisation, noise, separators, high-attention regions)
    mpnet = [c for c in out.claims if "[mpnet]" in c.text]
    # the second model: 3 layer contrasts, sentence preference, repetition head, and the
    # AUC difference for the 2 relations these windows have (no word pieces: no same_word)
    minilm = [c for c in out.claims if "[minilm]" in c.text]
    assert len(mpnet) == 5 and all("not installed" in c.not_run for c in mpnet)
    assert {c.catalogue for c in mpnet} == {
        "similarity.distinct-token-per-head", "similarity.noise",
        "similarity.separator-attention", "similarity.high-attention-regions",
        "similarity.long-range-struggle"}
    # 3 layer contrasts, the same-sentence share with its chance contrast (one row), the
    # repetition head, the relations beyond attention (one row), and beyond attention and
    # distance (one row)
    assert len(minilm) == 7 and all(c.measured is not None or c.members for c in minilm)
    minilm = [d for c in minilm for d in ([c, *c.descendants()])]
    texts = " ".join(c.text for c in minilm)
    for relation in ("same_sentence", "repetition"):
        assert f"attention does not: {relation}" in texts
    auc = next(c for c in minilm if "attention does not: repetition" in c.text)
    assert "heads whose own ΔAUC interval lies above 0" in auc.detail and "of 9" in auc.detail
    # "beyond attention" is the attention-stratified AUC against 0.5, not ΔAUC against 0
    assert auc.region.low == 0.5 and "within 10 strata" in auc.quantity
    assert "ΔAUC (S − A)" in auc.detail
    assert len(auc.measured.values) == auc.measured.n  # the per-input numbers behind it
    contrast = next(c for c in minilm if c.text.startswith("middle layers"))
    assert contrast.measured.n == 12 and contrast.measured.method == "bootstrap over inputs"
    # the per-input numbers it resampled: their mean is the claim's mean
    assert len(contrast.measured.values) == 12
    assert sum(contrast.measured.values) / 12 == pytest.approx(contrast.measured.mean)
    rep = next(c for c in minilm if "repetition head" in c.text)
    assert "the head: layer" in rep.detail and "-layer head" in rep.detail
    titles = [t[0] for t in out.tables]
    layer_rows = out.tables[0][2]
    assert {r[1] for r in layer_rows} == {"prose", "code-docs"}  # code docs: separate rows
    assert len(layer_rows) == 2 * 3 and any("AUC" in t for t in titles)
    assert any("mpnet on prose" in n for n in out.notes)


def test_a_finding_measured_on_two_models_is_one_tallied_family(tmp_path):
    settings = {"models": ["mpnet", "minilm"], "attention_samples": 4, "n_boot": 200,
                "corpora": {"prose": {"corpus": "shakespeare", "shards": 2}},
                "analysis": {"samples": 6, "seq_len": 16}}
    results = {}
    for model, label, _, shard, _ in suite._units(settings):
        key = suite._key(model, label, shard)
        seed = shard + 10 * len(label) + 100 * (model == "mpnet")
        results[key] = CellResult(key, _shard_value(3, 6, seed=seed))
    out = suite.summarise(settings, results, SuiteContext(tmp_path, tmp_path / "fig"))
    families = [c for c in out.claims if c.members]
    # the 7 findings measured on both models: one row each, the models its members (the
    # same-sentence finding's two readings and the relations beyond attention, and beyond
    # attention and distance: one row each, whose members are the per-model families)
    assert len(families) == 7
    per_model = [f if not f.members[0].members else g for f in families
                 for g in (f.members or [f])]
    for f in families:
        assert f.text.endswith("[mpnet, minilm]") and f.kind == "stand-in"
        assert f.catalogue and f.proxy.count(" for BERT-base") == 2  # both models
    for f in per_model:
        assert f.rule_of_family == "all" and [m.label for m in f.members] == ["mpnet",
                                                                              "minilm"]
    far = next(c for c in out.claims if c.catalogue == "similarity.long-range-struggle")
    final = suite._groups(3)["final"]
    want = []
    for shard in range(2):  # the main model's shards: final layers' long share − chance
        r = results[suite._key("mpnet", "prose", shard)].value["result"]
        heads = [v for layer in final for v in r["top_long_range_share"][layer]]
        want.append(sum(heads) / len(heads) - r["long_range_chance"])
    assert far.region.high == 0 and far.measured.values == pytest.approx(tuple(want))
    same = next(f for f in families if f.catalogue == "similarity.same-sentence-preference")
    assert [m.label for m in same.members] == ["share > 1/3", "above chance"]
    assert same.members[0].region.low == pytest.approx(1 / 3)
    texts = [c.text.rsplit(" [", 1)[0] for c in out.claims]
    assert len(texts) == len(set(texts))  # no finding counted twice
    singles = [c for c in out.claims if not c.members]
    assert singles and all(c.text.endswith("[mpnet]") for c in singles)  # the main model's
    # the independent audit recomputes every member, Holm and family verdict and the tally
    import json as _json

    from helpers.report_audit import audit

    from tokengeo.experiments.report import write_report

    write_report(tmp_path / "r", [out], "r", ["pre"], mode="full")
    data = _json.loads((tmp_path / "r" / "report.json").read_text())
    a = audit(data)
    assert a.problems == [] and a.families == 7 + 6  # 6 inner per-model families
    # self-sufficient: every interval carries the per-unit values it was computed from

    def leaves(c):
        return [d for m in c.get("members", []) for d in leaves(m)] or [c]

    empty = [c["claim"] for row in data["claims"] for c in leaves(row)
             if c["interval"] is not None and not c["interval"].get("values")]
    assert empty == []
    assert sum(data["tally"]["papers"][out.paper_key].values()) == len(out.claims)


# ---- a causal decoder (SmolLM2-135M in a named run; a tiny Llama here, the same code path)

def test_a_causal_decoder_runs_through_the_suite_cell_and_summary(tmp_path):
    """SmolLM2 is a Llama folder like this one (its load takes ~60 s): the suite's cell
    reads it with BPE word ids and the pairs i < j, and the summary judges it as a model."""
    from helpers.tiny_llama import save_tiny_llama, write_text_folder

    folder = str(save_tiny_llama(tmp_path / "llama", layers=3))  # 3 layer groups
    text = str(write_text_folder(tmp_path / "text"))  # small: the tiny BPE reads it fast
    settings = {"models": ["minilm-absent", folder], "attention_samples": 4, "n_boot": 200,
                "corpora": {"prose": {"corpus": text, "shards": 2}},
                "analysis": {"samples": 6, "seq_len": 24, "batch_size": 3}}
    results = {}
    for model, label, corpus, shard, shards in suite._units(settings):
        key = suite._key(model, label, shard)
        if model != folder:
            results[key] = CellResult(key, None, not_run="absent")
            continue
        config = {**settings["analysis"], "model": model, "corpus": corpus}
        value = suite.similarity_cell(config, shard, shards, 4, None)
        results[key] = CellResult(key, json.loads(json.dumps(value)))
    first = results[suite._key(folder, "prose", 0)].value
    assert first["result"]["n_samples"] == 6 and first["attention"]["relations"]
    out = suite.summarise(settings, results, SuiteContext(tmp_path, tmp_path / "fig"))
    causal = [c for c in out.claims if f"[{folder}]" in c.text]
    assert causal and all(c.measured is not None or c.members for c in causal)
    causal = [d for c in causal for d in (c, *c.descendants())]
    assert any("same_word" in c.text for c in causal)  # BPE words: pieces without Ġ join
    assert any("lower triangle" in n for n in out.notes)


def test_smollm2_has_a_name_and_a_layer_mapping_and_a_full_cost():
    assert "causal" in suite.MODEL_NAMES["smollm2-135m"]
    assert "of 30" in suite.LAYER_MAPPING["smollm2-135m"]
    full = _settings("full")
    assert "smollm2-135m" not in full["models"]  # over the --full budget: named to run
    assert full["cell_cost"]["smollm2-135m"] > full["cell_cost"]["mpnet"]
