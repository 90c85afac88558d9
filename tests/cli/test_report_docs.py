"""``tokengeo report``: the docs' generated blocks agree with docs/results/report.json, and
``--check-docs`` notices one changed number."""

import json
import shutil
from pathlib import Path

import pytest

from tokengeo.cli import main

ROOT = Path(__file__).parents[2]
PUBLISHED = ROOT / "docs" / "results" / "report.json"


def _docs_copy(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    for sub in ("papers", "results", "results-2026-12-05"):
        shutil.copytree(ROOT / "docs" / sub, root / "docs" / sub,
                        ignore=shutil.ignore_patterns("*.png", "*.html"))
    for page in (ROOT / "docs").glob("*.md"):
        shutil.copy(page, root / "docs" / page.name)
    return root


def _changed_report(tmp_path) -> tuple[Path, str]:
    data = json.loads(PUBLISHED.read_text())
    claim = next(c for c in data["claims"] if c["suite"] == "flows"
                 and c["interval"] and c["interval"]["n"] >= 2)
    claim["interval"]["mean"] += 0.125  # one number of one claim
    out = tmp_path / "report.json"
    out.write_text(json.dumps(data))
    return out, "claims:flows"


def test_the_repository_docs_agree_with_the_published_report(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the docs under the current folder
    assert main(["report", "docs/results/report.json", "--check-docs"]) == 0
    assert capsys.readouterr().err == ""


def test_one_changed_number_fails_the_check_naming_its_block(tmp_path, capsys):
    report, block = _changed_report(tmp_path)
    assert main(["report", str(report), "--check-docs", "--root", str(ROOT)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"block {block} differs" in lines[0]
    assert "docs/published-run.md" in lines[0]


def test_write_docs_renders_the_change_and_the_check_then_passes(tmp_path, capsys):
    root = _docs_copy(tmp_path)
    report, block = _changed_report(tmp_path)
    assert main(["report", str(report), "--write-docs", "--root", str(root)]) == 0
    assert main(["report", str(report), "--check-docs", "--root", str(root)]) == 0
    assert main(["report", str(PUBLISHED), "--check-docs", "--root", str(root)]) == 1
    text = (root / "docs" / "published-run.md").read_text()
    assert text.count(f"<!-- tokengeo:begin {block} -->") == 1


@pytest.mark.parametrize("bad", ["nothing.json", "not-a-report.json"])
def test_a_bad_report_is_one_line_and_exit_2(tmp_path, capsys, bad):
    (tmp_path / "not-a-report.json").write_text('{"a": 1}')
    assert main(["report", str(tmp_path / bad), "--check-docs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "report.json" in err[0]


def test_an_unknown_block_is_refused(tmp_path, capsys):
    root = tmp_path / "r"
    root.mkdir()
    (root / "README.md").write_text("<!-- tokengeo:begin nonsense -->\n"
                                    "<!-- tokengeo:end nonsense -->\n")
    assert main(["report", str(PUBLISHED), "--check-docs", "--root", str(root)]) == 2
    assert "unknown block 'nonsense'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--check-docs", "--root", "{tmp}/missing"], "not a folder"),
    (["--write-docs", "--check-docs"], "not allowed with"),
])
def test_bad_report_arguments_are_one_line_and_write_nothing(tmp_path, capsys, argv, message):
    root = _docs_copy(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        code = main(["report", str(PUBLISHED), *argv])
    except SystemExit as exc:  # argparse's own refusals exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "missing").exists()


def _without_tables(data: dict, suite: str, caption_start: str) -> dict:
    """A copy of ``data`` without ``suite``'s tables whose caption starts so."""
    data = json.loads(json.dumps(data))
    data["tables"] = [t for t in data["tables"] if not (
        t["suite"] == suite and t["caption"].startswith(caption_start))]
    return data


def _with_smoothing_table(data: dict, suite: str) -> dict:
    data = _without_tables(data, suite, "smoothing sign")
    data["tables"].append({
        "suite": suite, "caption": "smoothing sign per block: (a test table)",
        "header": ["block", "k=4 laplacian dVar/Var", "k=4 laplacian Rayleigh"],
        "rows": [["block 1", "0.021 ± 0.01", "0.3 ± 0.1"],
                 ["block 2", "-0.04 ± 0.02", "-0.2 ± 0.1"]]})
    return data


def test_the_smoothing_block_names_the_blocks_that_smooth_and_sharpen():
    from tokengeo.reporting.blocks import render

    data = _with_smoothing_table(json.loads(PUBLISHED.read_text()), "laplacian-images")
    body = render(data, "smoothing:laplacian-images")
    assert "| block 2 | -0.04 ± 0.02 |" in body
    line = next(x for x in body.splitlines() if x.startswith("- k=4 laplacian"))
    assert "smooth) in block 2;" in line and "sharpen) in block 1" in line


def test_a_run_without_the_smoothing_table_says_so():
    from tokengeo.reporting.blocks import render

    data = _without_tables(json.loads(PUBLISHED.read_text()), "laplacian-language",
                           "smoothing sign")
    assert "no smoothing-sign table" in render(data, "smoothing:laplacian-language")


def test_the_smoothing_block_reads_the_mechanism_table_by_row():
    from tokengeo.reporting.blocks import render

    data = json.loads(PUBLISHED.read_text())
    data["tables"].append({
        "suite": "laplacian-mechanism", "caption": "smoothing sign of the chosen heads per block",
        "header": ["variant", "block 1", "block 2"],
        "rows": [["(1, −1)", "-0.5 ± 0.1", "0.25 ± 0.1"]]})
    body = render(data, "smoothing:laplacian-mechanism")
    assert "- (1, −1): mean derivative negative (the heads smooth) in block 1; positive " \
           "(they sharpen) in block 2" in body


def test_the_compare_block_lists_the_tally_and_each_changed_verdict(tmp_path):
    from tokengeo.reporting.blocks import render

    old = json.loads(PUBLISHED.read_text())
    new = json.loads(PUBLISHED.read_text())
    first = new["claims"][0]
    was = first["verdict"]
    first["verdict"] = "inconclusive" if was != "inconclusive" else "reproduced"
    paper = next(iter(new["tally"]["papers"]))
    new["tally"]["papers"][paper]["reproduced"] += 5
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.json").write_text(json.dumps(old))
    body = render(new, "compare:old/report.json", tmp_path)
    n_old = old["tally"]["papers"][paper]["reproduced"]
    assert f"| {paper} | {n_old} → {n_old + 5} |" in body
    rows = [x for x in body.splitlines() if x.startswith(f"| {first['suite']} |")]
    assert len(rows) == 1 and f"| {was.split(':')[0]} | {first['verdict']} |" in rows[0]
    assert "of the earlier run only: 0; of this run only: 0" in body


def test_the_compare_block_refuses_a_missing_report(tmp_path):
    from tokengeo.errors import ConfigError
    from tokengeo.reporting.blocks import render

    with pytest.raises(ConfigError, match="compare:nowhere.json names no report.json"):
        render(json.loads(PUBLISHED.read_text()), "compare:nowhere.json", tmp_path)


def test_the_table_block_renders_a_suite_table_by_its_caption():
    from tokengeo.errors import ConfigError
    from tokengeo.reporting.blocks import render

    data = _without_tables(json.loads(PUBLISHED.read_text()), "laplacian-images", "along")
    data["tables"].append({"suite": "laplacian-images", "caption": "along training, by k (x)",
                           "header": ["setting", "step"], "rows": [["k=0", "750"]]})
    body = render(data, "table:laplacian-images:along-training")
    assert body.startswith("*along training, by k (x)*") and "| k=0 | 750 |" in body
    assert "no table whose caption starts" in render(data, "table:laplacian-images:nothing")
    with pytest.raises(ConfigError, match="names no caption"):
        render(data, "table:laplacian-images")
