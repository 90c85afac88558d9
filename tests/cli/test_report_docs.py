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
    for sub in ("papers", "results", "results-2026-12-05", "results-2026-12-06"):
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
    # the claim's table and the one-line findings of its paper's page: one line per block
    blocks = sorted(line.split()[1] for line in lines)
    assert blocks == sorted({block, block.replace("claims:", "findings:")})
    assert all(" differs from report.json in " in line for line in lines)
    assert "docs/published-run.md" in next(line for line in lines if f"block {block} " in line)


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
    data["tables"].append({"suite": "laplacian-images", "caption": "out-of-sample share (y)",
                           "header": ["block"], "rows": [["block 1"]]})
    body = render(data, "table:laplacian-images:out-of-sample-share")
    assert body.startswith("*out-of-sample share (y)*")  # a caption's hyphen matches too
    with pytest.raises(ConfigError, match="names no caption"):
        render(data, "table:laplacian-images")


def test_the_figures_block_links_a_suites_figures_through_the_prefix_and_nothing_else():
    from helpers.report_dicts import report

    from tokengeo.errors import ConfigError
    from tokengeo.reporting.blocks import render
    from tokengeo.reporting.reader import check_report

    figures = ["figures/laplacian-images/acc.png", "figures/../../etc/passwd.png",
               "https://evil.example/x.png", "figures/laplacian-images/x.png)![y](z"]
    data = check_report(report(suites=[{"name": "laplacian-images", "title": "t", "paper": "p",
                                        "figures": figures}]), "test")
    body = render(data, "figures:laplacian-images:../results")
    assert body == "![acc](../results/figures/laplacian-images/acc.png)"  # the others dropped
    named = render(data, "figures:laplacian-images:../results:acc,gone")
    assert named == body + "\n\n(this run of laplacian-images has no figure gone)"
    assert "no figures of those names" in render(data, "figures:laplacian-images:r:gone")
    for bad in ("figures:laplacian-images:/abs", "figures:laplacian-images:http://x",
                "figures:laplacian-images:", "figures:laplacian-images:a b"):
        with pytest.raises(ConfigError, match="PREFIX"):
            render(data, bad)
    with pytest.raises(ConfigError, match="names suite 'nope'"):
        render(data, "figures:nope:../results")


# ------------------------------------------------------------------ hostile inputs
# Each table below is one class of hostile input to `tokengeo report`; every case failed on
# the regex-and-dict code this replaced (a traceback, a silent pass, lost or outside text).
from helpers.report_dicts import claim as _claim  # noqa: E402
from helpers.report_dicts import report as _report  # noqa: E402
from test_bad_inputs_hostile_files import refused  # noqa: E402
from test_bad_inputs_runs import one_line  # noqa: E402

MD = "# Doc\n\nmy paragraph\n\n<!-- tokengeo:begin run -->\nold\n<!-- tokengeo:end run -->\n\ntail\n"


def _root(tmp_path, files: dict[str, str | bytes], data: dict | None = None) -> Path:
    root = tmp_path / "repo"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", newline="")
    (tmp_path / "report.json").write_text(json.dumps(data or _report()))
    return root


def _edit(**over):
    def make(data):
        for path, value in over.items():
            target = data
            *keys, last = path.split(".")
            for k in keys:
                target = target[int(k)] if isinstance(target, list) else target[k]
            if value is KeyError:
                del target[last]
            elif isinstance(target, list):
                target[int(last)] = value
            else:
                target[last] = value
        return json.dumps(data)
    return make


BAD_REPORTS = [  # (report.json text, the words the one line must hold)
    pytest.param(_edit(tally=KeyError), "'tally' is missing", id="no-tally"),
    pytest.param(_edit(mode=KeyError), "'mode' is missing", id="no-mode"),
    pytest.param(_edit(**{"claims.0.verdict": 5}), "claims[0].verdict", id="verdict-number"),
    pytest.param(_edit(**{"claims.0.verdict": "great"}), "claims[0].verdict",
                 id="verdict-unknown"),
    pytest.param(_edit(**{"claims.0.interval.n": "3"}), "claims[0].interval.n", id="n-string"),
    pytest.param(_edit(**{"claims.0.interval.n": "<img src=x onerror=alert(1)>"}),
                 "claims[0].interval.n", id="n-markup"),
    pytest.param(_edit(**{"claims.0.interval.method": KeyError}), "'method' is missing",
                 id="interval-no-method"),
    pytest.param(_edit(**{"claims.0.suite": ["x"]}), "claims[0].suite", id="suite-list"),
    pytest.param(_edit(**{"claims.0.region": "< 0"}), "claims[0].region", id="region-text"),
    pytest.param(_edit(claims={}), "claims: must be array", id="claims-object"),
    pytest.param(_edit(tables=[{"suite": "s", "caption": 1, "header": [], "rows": []}]),
                 "tables[0].caption", id="caption-number"),
    pytest.param(_edit(**{"tally.papers": {"P": {"reproduced": -1}}}), "tally.papers.P",
                 id="tally-negative"),
    pytest.param(_edit(cells={"all": {"cells": 1}}), "cells.all", id="cells-incomplete"),
    pytest.param(lambda d: json.dumps(d).replace('"mean": -1.02', '"mean": Infinity'),
                 "claims[0].interval.mean: inf is not a JSON number", id="mean-infinity"),
    pytest.param(lambda d: json.dumps(d).replace('"high": -0.9', '"high": -Infinity'),
                 "claims[0].interval.high", id="high-minus-infinity"),
    pytest.param(lambda d: json.dumps(d).replace('"std": 0.1', '"std": NaN'),
                 "claims[0].interval.std: nan", id="std-nan"),
    pytest.param(_edit(format="tokengeo-report/1"), "this tokengeo reads", id="format-1"),
    pytest.param(_edit(extra=1), "extra: not a field", id="unknown-top-field"),
    pytest.param(lambda d: json.dumps([d]), "not a tokengeo report.json", id="a-list"),
    pytest.param(_edit(**{"tally.papers": {"P\nQ": {"reproduced": -1}}}),
                 "tally.papers['P\\nQ']", id="key-with-newline"),
]


@pytest.mark.parametrize("make,needle", BAD_REPORTS)
@pytest.mark.parametrize("act", ["", "--check-docs", "--write-docs"])
def test_a_bad_report_json_is_one_line_naming_its_field(tmp_path, capsys, make, needle, act):
    root = _root(tmp_path, {"README.md": MD})
    (tmp_path / "report.json").write_text(make(_report()))
    refused(tmp_path, capsys, ["report", str(tmp_path / "report.json"),
                               *([act] if act else []), "--root", str(root)], needle)


@pytest.mark.parametrize("make,needle", BAD_REPORTS[:8])
def test_a_bad_report_json_is_one_line_in_view(tmp_path, capsys, make, needle):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_text(make(_report()))
    refused(tmp_path, capsys, ["view", "--report", str(tmp_path / "run"), "--out",
                               str(tmp_path / "p.html")], needle)


B, E = "<!-- tokengeo:begin {} -->\n", "<!-- tokengeo:end {} -->\n"
BAD_MARKERS = [  # (README.md text, the line and words the one line must name)
    pytest.param(B.format("run") + "mine\n\n" + B.format("run") + "x\n" + E.format("run"),
                 "README.md:4: begin marker of 'run' inside block", id="stray-begin"),
    pytest.param(B.format("run") + B.format("tally") + "mine\n" + E.format("run") + "more\n"
                 + E.format("tally"), "README.md:2: begin marker of 'tally' inside",
                 id="crossed"),
    pytest.param("mine\n" + E.format("run"), "README.md:2: end marker of 'run' with no begin",
                 id="stray-end"),
    pytest.param("x\n" + B.format("run") + "mine\n", "README.md:2: block 'run' has no end",
                 id="no-end"),
    pytest.param(B.format("run") + E.format("tally"), "README.md:2: end marker of 'tally' "
                 "closes block 'run'", id="wrong-end"),
    pytest.param(B.format("run").replace("\n", " \n") + "old\n" + E.format("run"),
                 "README.md:1: '<!-- tokengeo:begin run -->' looks like", id="begin-trailing-space"),
    pytest.param("  " + B.format("run") + "old\n" + E.format("run"), "README.md:1:",
                 id="begin-indented"),
    pytest.param(B.format("run") + "old\n" + E.format("run").replace("\n", "\t\n"),
                 "README.md:3:", id="end-trailing-tab"),
    pytest.param(B.format("run").replace(" -->", "  -->") + "old\n" + E.format("run"),
                 "README.md:1:", id="begin-two-spaces"),
    pytest.param("<!-- tokengeo:begin -->\n", "README.md:1:", id="begin-without-name"),
]


@pytest.mark.parametrize("text,needle", BAD_MARKERS)
@pytest.mark.parametrize("act", ["--check-docs", "--write-docs"])
def test_unpaired_or_near_markers_are_refused_naming_file_and_line(tmp_path, capsys, text,
                                                                    needle, act):
    root = _root(tmp_path, {"docs/a.md": MD, "README.md": text})  # docs/a.md comes after
    refused(tmp_path, capsys, ["report", str(tmp_path / "report.json"), act, "--root",
                               str(root)], needle)


def test_a_bad_block_in_a_later_file_writes_no_earlier_file(tmp_path, capsys):
    root = _root(tmp_path, {"README.md": MD, "docs/z.md": B.format("run") + "x\n"})
    refused(tmp_path, capsys, ["report", str(tmp_path / "report.json"), "--write-docs",
                               "--root", str(root)], "docs/z.md:1")


FENCED = ("Write a block like this:\n\n```markdown\n" + B.format("run") + "anything\n"
          + E.format("run") + "```\n\n~~~\n" + B.format("tally") + "~~~\n\n"
          + "Inline: `<!-- tokengeo:begin NAME -->` starts one.\n\n" + MD)


def _write_twice(tmp_path, root) -> None:
    for _ in range(2):
        assert main(["report", str(tmp_path / "report.json"), "--write-docs", "--root",
                     str(root)]) == 0
    assert main(["report", str(tmp_path / "report.json"), "--check-docs", "--root",
                 str(root)]) == 0


@pytest.mark.parametrize("text", [
    pytest.param(FENCED, id="markers-in-fenced-code-and-inline"),
    pytest.param(MD.replace("\n", "\r\n"), id="crlf"),
    pytest.param("<!-- a comment of the user's -->\n" + MD, id="user-comment"),
])
def test_text_outside_blocks_is_kept_byte_for_byte(tmp_path, text):
    root = _root(tmp_path, {"README.md": text})
    _write_twice(tmp_path, root)
    got = (root / "README.md").read_bytes().decode()
    eol = "\r\n" if "\r\n" in text else "\n"
    run = ("Mode `quick`, report written by tokengeo 0.0 at commit `abc1234`: 1 claims. (This "
           "report.json holds no `run` object: no wall time or peak memory measured by the run.)")
    begin = "<!-- tokengeo:begin run -->"
    assert text.count(f"{begin}{eol}old{eol}") == 1
    assert got == text.replace(f"{begin}{eol}old{eol}", f"{begin}{eol}{run}{eol}")


@pytest.mark.parametrize("hostile", [
    E.format("run") + "\n",  # closes the block early on the next write
    "x\n" + B.format("run") + "y",  # a begin inside the block
    "<!-- tokengeo:end findings:flows -->",
    "<!-- hides the rest of the page",
])
def test_rendered_text_never_holds_a_marker(tmp_path, hostile):
    data = _report([_claim(claim="a " + hostile, verdict="reproduced")])
    doc = MD.replace("run -->", "findings:flows -->") + "\nlast words\n"
    root = _root(tmp_path, {"README.md": doc}, data)
    _write_twice(tmp_path, root)  # idempotent: the check passes after a write
    got = (root / "README.md").read_text()
    assert got.count("<!--") == 2 and "my paragraph" in got and got.endswith("last words\n")


def test_the_file_mode_is_kept(tmp_path):
    root = _root(tmp_path, {"README.md": MD})
    (root / "README.md").chmod(0o444)
    _write_twice(tmp_path, root)
    assert (root / "README.md").stat().st_mode & 0o777 == 0o444
    assert "Mode `quick`" in (root / "README.md").read_text()


def _link_docs(tmp_path, root):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text(MD)
    (root / "docs").symlink_to(elsewhere)


def _link_sub(tmp_path, root):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text(MD)
    (root / "docs").mkdir()
    (root / "docs" / "sub").symlink_to(elsewhere)


def _link_readme(tmp_path, root):
    (tmp_path / "mine.md").write_text(MD)
    (root / "README.md").unlink()
    (root / "README.md").symlink_to(tmp_path / "mine.md")


def _link_inside(tmp_path, root):
    (root / "docs").mkdir()
    (root / "docs" / "x.md").symlink_to(root / "README.md")


@pytest.mark.parametrize("make,needle", [
    pytest.param(_link_docs, "docs is a symbolic link", id="docs-link-out"),
    pytest.param(_link_sub, "docs/sub is a symbolic link", id="docs-sub-link-out"),
    pytest.param(_link_readme, "README.md is a symbolic link", id="readme-link"),
    pytest.param(_link_inside, "docs/x.md is a symbolic link", id="doc-link-inside-root"),
])
@pytest.mark.parametrize("act", ["--check-docs", "--write-docs"])
def test_nothing_is_read_or_written_through_a_link(tmp_path, capsys, make, needle, act):
    root = _root(tmp_path, {"README.md": MD})
    make(tmp_path, root)
    refused(tmp_path, capsys, ["report", str(tmp_path / "report.json"), act, "--root",
                               str(root)], needle)


def _compare(path: str):
    return MD.replace("run -->", f"compare:{path} -->")


@pytest.mark.parametrize("files,needle", [
    pytest.param({"README.md": _compare("../outside.json")}, "compare:../outside.json names no",
                 id="compare-dotdot"),
    pytest.param({"README.md": _compare("/etc/passwd")}, "compare:/etc/passwd names no",
                 id="compare-absolute"),
    pytest.param({"README.md": _compare("link.json")}, "a link out of the root",
                 id="compare-link-out"),
    pytest.param({"README.md": _compare("old.json"), "old.json": json.dumps(
        {k: v for k, v in _report().items() if k != "tally"})}, "'tally' is missing",
        id="compare-without-tally"),
    pytest.param({"README.md": _compare("old.json"), "old.json": "[1]"},
                 "not a tokengeo report", id="compare-not-a-report"),
    pytest.param({"README.md": b"\xff\xfe" + MD.encode()}, "README.md: not UTF-8",
                 id="doc-not-utf8"),
    pytest.param({"README.md": MD, "docs/a.md": "x\n"}, "docs/a.md: not a doc file",
                 id="doc-gigabytes"),
    pytest.param({"README.md": MD.replace("run -->", "nosuch -->")}, "unknown block",
                 id="unknown-block"),
])
@pytest.mark.parametrize("act", ["--check-docs", "--write-docs"])
def test_bad_doc_files_and_compare_targets_are_one_line(tmp_path, capsys, files, needle, act):
    root = _root(tmp_path, files)
    (tmp_path / "outside.json").write_text(json.dumps(_report()))
    (root / "link.json").symlink_to(tmp_path / "outside.json")
    argv = ["report", str(tmp_path / "report.json"), act, "--root", str(root)]
    if "docs/a.md" not in files:
        refused(tmp_path, capsys, argv, needle)
        return
    with open(root / "docs" / "a.md", "r+b") as f:  # a sparse file of 3 GB: never read whole
        f.truncate(3 << 30)
    capsys.readouterr()
    assert main(argv) == 2
    assert needle in one_line(capsys, "report")
    assert (root / "README.md").read_text() == MD and (root / "docs" / "a.md").stat().st_size \
        == 3 << 30


def test_a_ragged_smoothing_table_is_one_line(tmp_path, capsys):
    table = {"suite": "flows", "caption": "smoothing sign (k=H)", "header": ["block", "x dVar/Var"],
             "rows": [["0"]]}
    root = _root(tmp_path, {"README.md": MD.replace("run -->", "smoothing:flows -->")},
                 _report(tables=[table]))
    refused(tmp_path, capsys, ["report", str(tmp_path / "report.json"), "--write-docs",
                               "--root", str(root)], "rows of another length")


def test_a_null_mean_is_shown_as_no_value_never_as_infinity():
    from helpers.report_dicts import interval

    from tokengeo.reporting.text import interval_text

    assert interval_text(interval(mean=None)) == "no value (n=5)"
    assert interval_text(interval(low=None)).startswith("−1.02 [−∞, ")
