"""The claims catalogue: every paper claim once, each tallied report row one entry."""

import importlib

import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments import catalogue
from tokengeo.experiments.reproduce import BUILTIN_CONFIG_DIR, SUITES, load_settings
from tokengeo.experiments.suite import SuiteContext

ENTRY = '''[[claim]]
id = "{id}"
section = "Sec. 1"
statement = "a statement"
value = ""
tests = {tests}
not_tested = "{why}"
'''


def _write(folder, stem, *entries):
    (folder / f"{stem}.toml").write_text("\n".join(ENTRY.format(**e) for e in entries))


def test_the_shipped_catalogue_loads_with_unique_ids_and_known_suites():
    entries = catalogue.load()
    ids = [e.id for e in entries]
    assert len(ids) == len(set(ids))
    assert catalogue.check_suites(entries, set(SUITES)) == []
    cov = catalogue.coverage(entries)
    for paper in ("laplacian", "ltransformer", "pde", "similarity"):
        assert cov[paper]["stated"] == cov[paper]["tested"] + cov[paper]["not tested"] > 0
    assert all(e.not_tested.strip() for e in entries if not e.tested)


def test_the_loader_refuses_a_repeated_id_a_missing_reason_and_a_wrong_prefix(tmp_path):
    _write(tmp_path, "laplacian", dict(id="laplacian.a", tests="[]", why="cost"))
    _write(tmp_path, "similarity", dict(id="similarity.b", tests="[]", why="data"))
    assert [e.id for e in catalogue.load(tmp_path)] == ["laplacian.a", "similarity.b"]
    _write(tmp_path, "ltransformer", dict(id="laplacian.a", tests="[]", why="x"))
    with pytest.raises(ConfigError, match="must read \"ltransformer"):
        catalogue.load(tmp_path)
    _write(tmp_path, "ltransformer", dict(id="ltransformer.a", tests="[]", why=""))
    with pytest.raises(ConfigError, match="no tests; say why"):
        catalogue.load(tmp_path)
    _write(tmp_path, "ltransformer", dict(id="ltransformer.a", tests='["ltransformer:x"]',
                                          why="both"))
    with pytest.raises(ConfigError, match="keep one"):
        catalogue.load(tmp_path)
    _write(tmp_path, "ltransformer", dict(id="ltransformer.a", tests="[]", why="cost"),
           dict(id="ltransformer.a", tests="[]", why="cost"))
    with pytest.raises(ConfigError, match="used twice"):
        catalogue.load(tmp_path)
    entries = [catalogue.Entry("laplacian.a", "s", "t", "", ("nosuch:row",), "")]
    assert "names no suite" in catalogue.check_suites(entries, set(SUITES))[0]


def _rows(mode: str, suite: str, tmp_path) -> list[dict]:
    """Every row ``suite`` reports under ``mode``'s settings (skipped: nothing runs)."""
    module = importlib.import_module(SUITES[suite])
    settings = {**load_settings(BUILTIN_CONFIG_DIR, suite, mode), "skip": "listing rows"}
    out = module.SUITE.summarise(settings, {}, SuiteContext.under(tmp_path, suite, settings))
    return [c.to_dict(out.paper_name) for c in out.claims]


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_every_tallied_row_is_one_catalogue_entry_and_none_is_tallied_twice(mode, tmp_path):
    entries = catalogue.load()
    rows = [r for s in SUITES for r in _rows(mode, s, tmp_path)]
    assert catalogue.check_report(entries, rows) == []
    tallied = [r["catalogue"] for r in rows if r["kind"] in ("paper", "stand-in")]
    assert tallied and len(tallied) == len(set(tallied))


def test_check_report_names_each_broken_rule():
    entries = [catalogue.Entry("laplacian.a", "s", "t", "", ("laplacian-images:x",), ""),
               catalogue.Entry("laplacian.b", "s", "t", "", ("dino:y",), "")]

    def row(claim, kind="stand-in", cid=None, suite="laplacian-images"):
        return {"suite": suite, "claim": claim, "kind": kind, "catalogue": cid}

    assert catalogue.check_report(entries, [row("x", cid="laplacian.a")]) == []
    problems = catalogue.check_report(entries, [
        row("x", cid="laplacian.a"), row("x2", cid="laplacian.a"), row("z"),
        row("w", cid="laplacian.zz"), row("d", kind="new", suite="dino")])
    text = " | ".join(problems)
    assert "tallied twice" in text and "names no catalogue entry" in text
    assert "unknown catalogue entry" in text
    assert "laplacian.b: tested in ['dino'], but no row" in text
    wrong_suite = catalogue.check_report(entries, [row("x", cid="laplacian.a"),
                                                   row("v", cid="laplacian.b")])
    assert wrong_suite and "no row of suite 'laplacian-images'" in wrong_suite[0]


def test_the_catalogue_block_lists_every_claim_its_test_and_its_verdict():
    import json
    from pathlib import Path

    from tokengeo.experiments.catalogue import render_catalogue
    from tokengeo.reporting.blocks import render

    entries = catalogue.load()
    claims = [{"suite": "laplacian-images", "claim": "a row", "kind": "stand-in",
               "catalogue": "laplacian.vit-accuracy", "verdict": "contradicted at the "
               "paper's setting"}]
    text = render({"claims": claims}, "catalogue")
    assert text == render_catalogue({"claims": claims})
    assert all(f"`{e.id}`" in text for e in entries)
    line = next(x for x in text.splitlines() if "`laplacian.vit-accuracy`" in x)
    assert "`laplacian-images`: a row (stand-in)" in line
    assert line.endswith("| contradicted at the paper's setting |")
    untested = next(e for e in entries if not e.tested)
    assert f"not tested: {untested.not_tested}" in text
    cov = catalogue.coverage(entries)["laplacian"]
    assert f"| {cov['stated']} | {cov['tested']} | {cov['not tested']} |" in text
    # a report written before rows carried ids: its rows are found by their text
    published = json.loads((Path(__file__).parents[2] / "docs" / "results" /
                            "report.json").read_text())
    line = next(x for x in render_catalogue(published).splitlines()
                if "`laplacian.vit-accuracy`" in x)
    assert "not in this report" not in line
