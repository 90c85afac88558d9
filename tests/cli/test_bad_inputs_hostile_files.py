"""Bad input, round 3 (issue 45): one table of hostile cases per class.

1. data lost / written outside, 2. hangs, 3. tracebacks from hostile files, 4. silent
acceptance, 5. late refusals, 6. multi-line errors, 7. a valid input refused.

Every CLI case asserts exit status 2, exactly one line on stderr naming the offending value or
file (no traceback), and every file of the user's (everything under the test's folder)
unchanged byte for byte, so a refused run leaves no folder behind. Heavy work (a simulation,
an analysis, a suite's cells, a model load) fails the test, so a late refusal fails too. A
FIFO case that blocked would hang: every test runs under an alarm.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_bad_inputs_runs import TINY_FLOW, _suite_copy, one_line, snapshot

from tokengeo.cli import main
from tokengeo.errors import ConfigError, TokengeoError
from tokengeo.outmarker import MARKER, write_marker
from tokengeo.runlock import LOCK_NAME

pytestmark = pytest.mark.usefixtures("one_thread", "alarm")


@pytest.fixture
def alarm():
    """Fail, rather than hang, a case that blocks (a FIFO opened for reading)."""
    def ring(signum, frame):
        raise TimeoutError("the case blocked (a FIFO read?)")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(int(os.environ.get("TOKENGEO_TEST_ALARM", "60")))
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model or re-simulating a flow for the viewer fails the test."""
    import tokengeo.view.flow as vflow
    import tokengeo.view.loading as vload

    def fail(*a, **k):
        raise AssertionError("heavy work started before the input was refused")

    monkeypatch.setattr(vload, "load_for_view", fail)
    monkeypatch.setattr(vflow, "simulate_for_view", fail, raising=False)
    import importlib

    sim = importlib.import_module("tokengeo.flows.simulate")  # the package exports a function
    monkeypatch.setattr(sim, "simulate", fail)


def refused(tmp_path: Path, capsys, argv: list[str], needle: str) -> str:
    """Run ``argv``; exit 2, one line naming ``needle``, every file under tmp_path as it was."""
    command = argv[0]
    before = snapshot(tmp_path)
    capsys.readouterr()
    code = main(argv)
    line = one_line(capsys, command)
    assert code == 2, line
    assert needle in line, line
    assert snapshot(tmp_path) == before
    return line


def _precious(tmp: Path) -> Path:
    p = tmp / "precious.txt"
    p.write_text("a file of the user's that nothing may truncate\n")
    return p


def _corpus(tmp: Path) -> Path:
    p = tmp / "corpus.txt"
    p.write_text("One sentence here. Another one there.\n" * 60)
    return p


def _flow_json(tmp: Path, edit=None) -> Path:
    """A flow.json of the right shape (its series need not match: edits are refused first)."""
    from tokengeo.flows.presets import get_preset

    preset = get_preset("s2-ou", T=0.1, dt=0.01, record_every=1, n_paths=1)
    n = preset.n_records()
    data = {"preset": {**{k: getattr(preset, k) for k in (
        "name", "drift", "d", "n_tokens", "n_heads", "T", "dt", "noise_var", "n_paths", "init",
        "init_std", "seed", "integrator", "record_every")}, "scaling_heads": [1]},
        "main_run": {"t": [0.01 * i for i in range(n)], "n_heads": preset.n_heads,
                     "E": {"mean": [1.0] * n, "std": [0.0] * n},
                     "G2": {"mean": [1.0] * n, "std": [0.0] * n}}}
    text = json.dumps(data)
    if edit is not None:
        text = edit(data, text)
    path = tmp / "flow.json"
    path.write_text(text)
    return path


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


# =========================================================================== class 1
# data lost / written outside

def _hard_lock(command_args):
    def setup(tmp: Path) -> list[str]:
        out = tmp / "out"
        out.mkdir()
        os.link(_precious(tmp), out / LOCK_NAME)
        corpus = _corpus(tmp)
        return [a.format(corpus=corpus) for a in command_args] + ["--out", str(out)]
    return setup


def _user_tmp_in_previous(command: str, own: str, args: list[str]):
    def setup(tmp: Path) -> list[str]:
        out = tmp / "out"
        out.mkdir()
        write_marker(out, command)
        (out / own).write_text("{}")
        (out / ".tmp-notes.txt").write_text("the user's notes, named like a temporary\n")
        corpus = _corpus(tmp)
        return [a.format(corpus=corpus) for a in args] + ["--overwrite", "--out", str(out)]
    return setup


def _reproduce_user_file(rel: str):
    def setup(tmp: Path) -> list[str]:
        out = tmp / "out"
        out.mkdir()
        write_marker(out, "reproduce")
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("the user's own file\n")
        return ["reproduce", "--jobs", "1", "--only", "flows", "--out", str(out)]
    return setup


def _view_page(content: str):
    def setup(tmp: Path) -> list[str]:
        (tmp / "p.html").write_text(content)
        return ["view", "--flow", str(_flow_json(tmp)), "--out", str(tmp / "p.html")]
    return setup


def _view_files(name: str, sidecar: bool = False):
    def setup(tmp: Path) -> list[str]:
        (tmp / "p_files").mkdir()
        (tmp / "p_files" / name).write_text("TG_CHUNK('mine')")
        if sidecar:  # a sidecar that lists the file with another digest
            (tmp / ".p.html.tokengeo.json").write_text(json.dumps(
                {"command": "view", "files": {f"p_files/{name}": ["0" * 64]}}))
        return ["view", "--flow", str(_flow_json(tmp)), "--out", str(tmp / "p.html")]
    return setup


def _bench_json(kind: str):
    def setup(tmp: Path) -> list[str]:
        target = tmp / "result.json"
        if kind == "file":
            target.write_text('{"mine": true}\n')
        elif kind == "link":
            target.symlink_to(_precious(tmp))
        elif kind == "fifo":
            os.mkfifo(target)
        return ["bench", "laplacian", "--json", str(target)]
    return setup


TINY_TRAIN = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "32",
              "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1",
              "--set", "warmup=1", "--set", "eval_batches=1", "--quiet"]
FLOW = ["flow", *TINY_FLOW]
SIM = ["similarity", "--corpus", "{corpus}", "--no-figures"]
REPRO = ["reproduce", "--jobs", "1", "--only", "flows"]
TRAIN = ["train", "--model", "vit-tiny", "--data", "digits", "--steps", "1", "--quiet"]
GENERATOR = '<meta name="generator" content="tokengeo view">'

CLASS1 = [
    pytest.param(_hard_lock(FLOW), LOCK_NAME, id="flow-lock-hard-link"),
    pytest.param(_hard_lock(SIM), LOCK_NAME, id="similarity-lock-hard-link"),
    pytest.param(_hard_lock(REPRO), LOCK_NAME, id="reproduce-lock-hard-link"),
    pytest.param(_hard_lock(TRAIN), LOCK_NAME, id="train-lock-hard-link"),
    pytest.param(_view_page(f"<html><!-- {GENERATOR} --> my page</html>"), "did not write",
                 id="view-user-page-with-generator-comment"),
    pytest.param(_view_page(f"<!DOCTYPE html>\n<html><head>{GENERATOR}</head>mine</html>"),
                 "did not write", id="view-user-page-with-generator-tag"),
    pytest.param(_view_files("c-0-0.js"), "c-0-0.js", id="view-user-file-named-like-chunk"),
    pytest.param(_view_files("c-0-0.js", sidecar=True), "c-0-0.js",
                 id="view-chunk-with-forged-sidecar"),
    pytest.param(_view_files("notes.txt"), "notes.txt", id="view-user-file-in-files-folder"),
    pytest.param(_user_tmp_in_previous("similarity", "similarity.json", SIM), ".tmp-notes.txt",
                 id="similarity-overwrite-user-tmp-file"),
    pytest.param(_user_tmp_in_previous("flow", "flow.json", FLOW), ".tmp-notes.txt",
                 id="flow-overwrite-user-tmp-file"),
    pytest.param(_bench_json("file"), "--overwrite", id="bench-json-existing-file"),
    pytest.param(_bench_json("link"), "not a regular file", id="bench-json-a-link"),
    pytest.param(_bench_json("fifo"), "not a regular file", id="bench-json-a-fifo"),
    pytest.param(_reproduce_user_file("runs/notes.txt"), "runs/notes.txt",
                 id="reproduce-user-file-in-runs"),
    pytest.param(_reproduce_user_file("runs/flows/mine/draft.tex"), "draft.tex",
                 id="reproduce-user-file-deep-in-runs"),
    pytest.param(_reproduce_user_file("runs/flows/x/y/notes.md"), "notes.md",
                 id="reproduce-user-file-deep-in-a-run"),
    pytest.param(_reproduce_user_file("runs/flows/mine/config.json"),
                 "runs/flows/mine/config.json", id="reproduce-user-config-json-in-runs-suite"),
    pytest.param(_reproduce_user_file("runs/flows/a/b/summary.json"), "summary.json",
                 id="reproduce-user-summary-json-nested"),
    pytest.param(_reproduce_user_file("runs/flows/mine/metrics.jsonl"), "metrics.jsonl",
                 id="reproduce-user-metrics-jsonl"),
    pytest.param(_reproduce_user_file("runs/retrofit/x/converted.json"), "converted.json",
                 id="reproduce-user-converted-json"),
    pytest.param(_reproduce_user_file("runs/config.json"), "runs/config.json",
                 id="reproduce-run-file-outside-a-suite-folder"),
]


@pytest.mark.parametrize("setup,needle", CLASS1)
def test_class1_nothing_lost_nothing_written_outside(tmp_path, capsys, no_heavy_work, no_model,
                                                     monkeypatch, setup, needle):
    import tokengeo.bench.laplacian as bench
    import tokengeo.bench.measure as measure

    def started(*a, **k):
        raise AssertionError("the benchmark started")

    monkeypatch.setattr(measure, "ensure_precise_rss", started)  # it re-executes the process
    monkeypatch.setattr(bench, "run", started)
    refused(tmp_path, capsys, setup(tmp_path), needle)


def test_class1_a_page_written_while_the_model_ran_is_kept(tmp_path, capsys, monkeypatch):
    """The ownership of --out is decided again at the rename, not only before the model."""
    import tokengeo.commands.view as view_cmd

    page = tmp_path / "p.html"

    def payload_while_user_writes(path):
        page.write_text("<html>the user saved this page meanwhile</html>")
        return {"kind": "flow"}

    monkeypatch.setattr(view_cmd, "_flow", payload_while_user_writes)
    flow = _flow_json(tmp_path)
    capsys.readouterr()
    assert main(["view", "--flow", str(flow), "--out", str(page)]) == 2
    line = one_line(capsys, "view")
    assert "did not write" in line, line
    assert page.read_text() == "<html>the user saved this page meanwhile</html>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.json", "p.html"]


def test_class1_own_page_rewritten_edited_page_kept(tmp_path, capsys, monkeypatch):
    import tokengeo.commands.view as view_cmd

    monkeypatch.setattr(view_cmd, "_flow", lambda path: {"kind": "flow", "x": 1})
    flow, page = _flow_json(tmp_path), tmp_path / "p.html"
    assert main(["view", "--flow", str(flow), "--out", str(page)]) == 0
    assert main(["view", "--flow", str(flow), "--out", str(page)]) == 0  # ours: rewritten
    page.write_text(page.read_text() + "<!-- my notes -->")  # now the user's edit
    refused(tmp_path, capsys, ["view", "--flow", str(flow), "--out", str(page)], "p.html")


def test_class1_reproduce_keeps_its_own_training_runs(tmp_path):
    """A training cell's folder (the train marker, or a checkpoints/ folder from before
    markers) is reproduce's own, nested or not; the same names beside it are not."""
    from tokengeo.outmarker import check_output

    out = tmp_path / "out"
    out.mkdir()
    write_marker(out, "reproduce")
    run = out / "runs" / "retrofit" / "study-shakespeare" / "k1-s0-abc"
    run.mkdir(parents=True)
    write_marker(run, "train")
    for name in ("config.json", "summary.json", "curve.json", "converted.json",
                 "checkpoints/step-1.safetensors"):
        (run / name).parent.mkdir(exist_ok=True)
        (run / name).write_text("{}")
    legacy = out / "runs" / "laplacian" / "old-run"
    (legacy / "checkpoints").mkdir(parents=True)
    (legacy / "config.json").write_text("{}")
    assert check_output(out, "reproduce", resume=True) == []
    (run.parent / "config.json").write_text("the user's\n")  # beside the run, not in it
    with pytest.raises(ConfigError, match="study-shakespeare/config.json"):
        check_output(out, "reproduce", resume=True)


@pytest.mark.parametrize("member", ["/tmp/tokengeo-evil-{}", "../evil-{}", "a/../../evil-{}",
                                    "//evil-abs-{}"])
def test_class1_archive_members_resolved_under_the_target(tmp_path, member):
    from tokengeo.models.hf import mpnet

    name = member.format(os.getpid())
    parts = tmp_path / "part.zip"
    with zipfile.ZipFile(parts, "w") as zf:
        zf.writestr(f"{mpnet.NAME}/{name}", "written outside")
    target = tmp_path / "cache" / "x"
    target.mkdir(parents=True)
    with pytest.raises(TokengeoError, match="outside the model folder"):
        mpnet._extract_into(target, [parts], {})
    outside = Path("/tmp") / f"tokengeo-evil-{os.getpid()}"
    assert not outside.exists() and not (tmp_path / "cache" / f"evil-{os.getpid()}").exists()
    assert not (tmp_path / f"evil-{os.getpid()}").exists()


# =========================================================================== class 2
# hangs: FIFOs, absurd sizes, a Ray address that answers HTTP

def _fifo(tmp: Path, name: str) -> Path:
    p = tmp / name
    p.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(p)
    return p


def _view_file_fifo(tmp: Path) -> list[str]:
    return ["view", "--model", "minilm", "--file", str(_fifo(tmp, "t.txt")),
            "--out", str(tmp / "p.html")]


def _view_flow_fifo(tmp: Path) -> list[str]:
    return ["view", "--flow", str(_fifo(tmp, "run/flow.json").parent),
            "--out", str(tmp / "p.html")]


def _train_image_fifo(tmp: Path) -> list[str]:
    from PIL import Image

    for cls in ("a", "b"):
        (tmp / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (i * 40, 0, 0)).save(tmp / "imgs" / cls / f"{i}.png")
    _fifo(tmp, "imgs/a/blocked.png")
    return ["train", "--model", "vit-tiny", "--data", str(tmp / "imgs"), "--steps", "1",
            "--quiet", "--out", str(tmp / "run")]


def _sim_corpus_fifo(tmp: Path) -> list[str]:
    return ["similarity", "--corpus", str(_fifo(tmp, "c.txt")), "--no-figures",
            "--out", str(tmp / "out")]


def _view_run_fifo(tmp: Path) -> list[str]:
    (tmp / "run").mkdir()
    _fifo(tmp, "run/report.json")
    return ["view", "--report", str(tmp / "run"), "--out", str(tmp / "p.html")]


def _view_flow_long(tmp: Path) -> list[str]:
    def edit(data, text):
        data["preset"]["T"] = 1e4  # 2 million steps: refused before simulating
        return json.dumps(data)
    return ["view", "--flow", str(_flow_json(tmp, edit)), "--out", str(tmp / "p.html")]


def _view_flow_many_tokens(tmp: Path) -> list[str]:
    def edit(data, text):
        data["preset"].update(n_tokens=10**7, n_paths=1, n_heads=1)
        data["main_run"]["n_heads"] = 1
        return json.dumps(data)
    return ["view", "--flow", str(_flow_json(tmp, edit)), "--out", str(tmp / "p.html")]


def _http_server():
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *a: None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _ray_http(tmp: Path) -> list[str]:
    pytest.importorskip("ray", reason="needs the 'cluster' extra")
    server = _http_server()
    return ["reproduce", "--jobs", "1", "--only", "flows", "--executor", "ray",
            "--ray-address", f"127.0.0.1:{server.server_port}", "--connect-timeout", "3",
            "--out", str(tmp / "out")]


MINILM_SIZES = {"model_type": "bert", "num_hidden_layers": 6, "num_attention_heads": 12,
                "hidden_size": 384, "max_position_embeddings": 512, "vocab_size": 50}


def _sim_long(*extra: str, config: dict | None = None):
    """An analysis whose sizes fit in memory checks but would run for months: refused with
    the time estimate before the model loads or the corpus is tokenised."""
    def setup(tmp: Path) -> list[str]:
        folder = _hf_folder(tmp, config or MINILM_SIZES, {})
        return ["similarity", "--model", str(folder), "--corpus", str(_corpus(tmp)), *extra,
                "--no-figures", "--out", str(tmp / "out")]
    return setup


CLASS2 = [
    pytest.param(_sim_long("--samples", "100000000"), "--samples",
                 id="similarity-samples-1e8-time"),
    pytest.param(_sim_long("--samples", "3000000", "--seq-len", "512"), "seq_len=512 through",
                 id="similarity-seq-len-512-time"),
    pytest.param(_sim_long("--samples", "50000", config={**MINILM_SIZES, "hidden_size": 2048,
                                                         "num_hidden_layers": 24}),
                 "width 2048", id="similarity-wide-model-time"),
    pytest.param(_view_file_fifo, "not a regular file", id="view-file-fifo"),
    pytest.param(_view_flow_fifo, "not a regular file", id="view-flow-fifo"),
    pytest.param(_view_run_fifo, "report.json", id="view-run-report-fifo"),
    pytest.param(_train_image_fifo, "blocked.png", id="train-image-folder-fifo"),
    pytest.param(_sim_corpus_fifo, "not a regular file", id="similarity-corpus-fifo"),
    pytest.param(_view_flow_long, "records", id="view-flow-T-1e4-before-simulating"),
    pytest.param(_view_flow_many_tokens, "n_tokens=10000000", id="view-flow-n-tokens-1e7"),
    pytest.param(_ray_http, "not as a Ray cluster", id="ray-address-answers-http"),
]


@pytest.mark.parametrize("setup,needle", CLASS2)
def test_class2_no_hangs(tmp_path, capsys, no_heavy_work, no_model, setup, needle):
    refused(tmp_path, capsys, setup(tmp_path), needle)


@pytest.mark.parametrize("overrides,needle", [
    ({"n_tokens": 500_000, "n_paths": 1, "n_heads": 1, "scaling_heads": (1,)}, "days"),
    ({"n_tokens": 10**7, "n_paths": 1, "n_heads": 1, "scaling_heads": (1,)}, "n_tokens"),
    ({"n_tokens": 5_000, "T": 2000.0, "scaling_heads": (1, 100)}, "--T"),
])
def test_class2_flow_time_estimated_before_work(monkeypatch, overrides, needle):
    """Memory alone passes these (on a machine with a petabyte); the time estimate refuses
    them at once, naming the flags."""
    import tokengeo.checks as checks
    from tokengeo.flows.presets import get_preset

    monkeypatch.setattr(checks, "available_memory", lambda: 2**50)
    with pytest.raises(ConfigError, match="operations") as err:
        get_preset("s2-ou", **overrides)
    assert needle in str(err.value)


def test_class2_flow_time_estimate_keeps_the_papers_runs():
    from tokengeo.flows.presets import get_preset

    get_preset("s2-ou", scaling_heads=(1, 10, 100))  # the paper's full run: T=20, H up to 100


@pytest.mark.parametrize("layers,width,samples", [(6, 384, 2000), (12, 768, 20_000)])
def test_class2_similarity_time_keeps_the_default_and_the_papers_size(layers, width, samples):
    """MiniLM at the CLI's default size and BERT-base at the paper's (20,000 inputs of 128
    tokens, Halevi et al.) pass the time estimate; 100x the paper's inputs do not."""
    from tokengeo.probes.similarity.run import SimilarityConfig, check_similarity_time

    check_similarity_time(SimilarityConfig(samples=samples), layers, width)
    with pytest.raises(ConfigError, match="--samples"):
        check_similarity_time(SimilarityConfig(samples=2_000_000 * samples), layers, width)


def test_class2_similarity_suite_time_estimated_from_its_settings():
    """An edited similarity suite whose analysis would run for weeks a shard is refused
    when its settings are read, naming the setting; the shipped modes pass."""
    import tomllib

    from tokengeo.experiments.suites.similarity import _check_analysis

    with pytest.raises(ConfigError, match=r"\[full\]\.analysis\.samples"):
        _check_analysis({"samples": 10**8, "seq_len": 128}, "[full].analysis")
    shipped = Path(__import__("tokengeo").__file__).parent / "experiments/suites/similarity.toml"
    modes = tomllib.loads(shipped.read_text())
    for mode, table in modes.items():
        if isinstance(table, dict) and "analysis" in table:
            _check_analysis(dict(table["analysis"]), f"[{mode}].analysis")


def _fake_view_model(monkeypatch, config: dict, n_tokens: int):
    """``view --model`` loads a stand-in of ``config``'s sizes that encodes any text as
    ``n_tokens`` ids; its forward pass (extract_heads) fails the test."""
    from types import SimpleNamespace

    import torch

    import tokengeo.view.heads as vheads
    import tokengeo.view.loading as vload

    model = torch.nn.Linear(1, 1)
    model.config = SimpleNamespace(**config)
    vm = vload.ViewModel(model=model, encode=lambda text: list(range(n_tokens)),
                         token_text=str, positions=None, name="stand-in")
    monkeypatch.setattr(vload, "check_model", lambda name: None)
    monkeypatch.setattr(vload, "load_for_view", lambda name: vm)

    def ran(*a, **k):
        raise AssertionError("the model ran before the page size was checked")

    monkeypatch.setattr(vheads, "extract_heads", ran)


@pytest.mark.parametrize("config,n_tokens,memory,needle", [
    ({"num_hidden_layers": 30, "num_attention_heads": 9}, 8192, None, "--max-tokens 1410"),
    ({"n_layer": 48, "n_head": 25}, 2048, None, "--max-tokens 668"),
    ({"n_layers": 4, "n_heads": 4}, 20_000, None, "12,207 MB"),
    ({"num_hidden_layers": 6, "num_attention_heads": 12}, 512, 2**26, "memory"),
], ids=["smollm2-like-8192-tokens", "gpt2-xl-spelling", "tokengeo-run-spelling",
        "minilm-512-on-64-MiB-machine"])
def test_class2_view_page_size_estimated_before_the_model_runs(
        tmp_path, capsys, monkeypatch, config, n_tokens, memory, needle):
    import tokengeo.checks as checks

    if memory is not None:
        monkeypatch.setattr(checks, "available_memory", lambda: memory)
    _fake_view_model(monkeypatch, config, n_tokens)
    refused(tmp_path, capsys, ["view", "--model", "stand-in", "--text", "words",
                               "--out", str(tmp_path / "p.html")], needle)


def test_class2_view_page_size_keeps_mpnet_at_full_length(tmp_path, monkeypatch):
    """MPNet (12 x 12 heads) at its 514 positions passes the estimate and reaches the model."""
    _fake_view_model(monkeypatch, {"num_hidden_layers": 12, "num_attention_heads": 12}, 514)
    with pytest.raises(AssertionError, match="the model ran"):
        main(["view", "--model", "stand-in", "--text", "words",
              "--out", str(tmp_path / "p.html")])


@pytest.fixture(autouse=True)
def _ray_env(monkeypatch):
    """The cases set RAY_TMPDIR / RAY_ADDRESS; monkeypatch restores them."""
    monkeypatch.setenv("RAY_TMPDIR", os.environ.get("RAY_TMPDIR", "/tmp"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_class2_ray_auto_finds_the_recorded_cluster(tmp_path, monkeypatch):
    """`--ray-address auto` means the cluster `ray start --head` recorded (here an HTTP
    server stands in for it, and is refused as one)."""
    from tokengeo.experiments.executors import probe_address

    server = _http_server()
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{server.server_port}\n")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(ConfigError, match="not as a Ray cluster"):
        probe_address("auto", 2.0, "--ray-address")
    server.shutdown()


def test_class2_ray_http_refused_within_the_timeout():
    import time

    from tokengeo.experiments.executors import probe_address

    server = _http_server()
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="not as a Ray cluster"):
        probe_address(f"127.0.0.1:{server.server_port}", 2.0, "--ray-address")
    assert time.monotonic() - t0 < 5
    server.shutdown()


# =========================================================================== class 3
# tracebacks from hostile files

def _view_flow_edit(edit):
    def setup(tmp: Path) -> list[str]:
        return ["view", "--flow", str(_flow_json(tmp, edit)), "--out", str(tmp / "p.html")]
    return setup


def _series(value):
    def edit(data, text):
        return text.replace('"mean": [1.0,', f'"mean": [{value},', 1)
    return edit


def _heads(value):
    def edit(data, text):
        data["main_run"]["n_heads"] = value
        return json.dumps(data)
    return edit


def _hf_folder(tmp: Path, config: dict, files: dict[str, bytes]) -> Path:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text("{}")
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


BERT = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2,
        "hidden_size": 8, "max_position_embeddings": 64, "vocab_size": 50}


def _sim_model(config: dict, files: dict[str, bytes]):
    def setup(tmp: Path) -> list[str]:
        folder = _hf_folder(tmp, config, files)
        return ["similarity", "--model", str(folder), "--corpus", str(_corpus(tmp)),
                "--no-figures", "--out", str(tmp / "out")]
    return setup


def _view_model(config: dict, files: dict[str, bytes]):
    def setup(tmp: Path) -> list[str]:
        folder = _hf_folder(tmp, config, files)
        return ["view", "--model", f"hf:{folder}", "--text", "some words",
                "--out", str(tmp / "p.html")]
    return setup


def _dev(path: str, what: str):
    def setup(tmp: Path) -> list[str]:
        if what == "file":
            return ["view", "--model", "minilm", "--file", path, "--out", str(tmp / "p.html")]
        if what == "flow":
            return ["view", "--flow", path, "--out", str(tmp / "p.html")]
        return ["similarity", "--corpus", path, "--no-figures", "--out", str(tmp / "out")]
    return setup


def _inline(value: str):
    def setup(tmp: Path) -> list[str]:
        return ["view", "--flow", str(_flow_json(tmp)), f"--inline-limit={value}",
                "--out", str(tmp / "p.html")]
    return setup


def _cifar_deep_pickle(tmp: Path) -> list[str]:
    from helpers.cifar_archive import cifar10_members, write_archive

    members = cifar10_members()
    depth = 5000
    deep = b"\x80\x02}(U\x04data" + b"]" * depth + b"a" * (depth - 1) + b"u."
    members["data_batch_1"] = deep
    path = write_archive(tmp / "cifar-10-python.tar.gz", "cifar-10-batches-py", members)
    return ["train", "--model", "vit-tiny", "--data", f"cifar10:{path}", "--steps", "1",
            "--quiet", "--out", str(tmp / "run")]


def _ray(address: str):
    def setup(tmp: Path) -> list[str]:
        os.environ["RAY_TMPDIR"] = str(tmp / "no-ray")  # auto: no cluster recorded here
        os.environ.pop("RAY_ADDRESS", None)
        return ["reproduce", "--jobs", "1", "--only", "flows", "--executor", "ray",
                "--ray-address", address, "--out", str(tmp / "out")]
    return setup


def _resume_deep_metrics(tmp: Path) -> list[str]:
    run = tmp / "run"
    assert main(["train", *TINY_TRAIN, "--steps", "2", "--out", str(run)]) == 0
    with open(run / "metrics.jsonl", "a") as f:
        f.write(_deep(10_000) + "\n" + '{"step": 3}\n')
    return ["train", "--resume", "--quiet", "--out", str(run)]


ST_HEADER_2_63 = struct.pack("<Q", 2**63) + b"{}"
def _report_json(content):
    """``tokengeo report`` of a report.json holding ``content`` (None: a FIFO)."""
    def setup(tmp: Path) -> list[str]:
        path = tmp / "report.json"
        if content is None:
            os.mkfifo(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return ["report", str(path), "--root", str(tmp)]
    return setup


CLASS3 = [
    pytest.param(_view_flow_edit(lambda d, t: _deep()), "levels deep", id="flow-json-deep"),
    pytest.param(_view_flow_edit(_series("NaN")), "NaN", id="flow-json-nan"),
    pytest.param(_view_flow_edit(_series("Infinity")), "Infinity", id="flow-json-infinity"),
    pytest.param(_view_flow_edit(_series("-Infinity")), "-Infinity", id="flow-json-minus-inf"),
    pytest.param(_view_flow_edit(_heads("3")), "n_heads", id="flow-json-heads-string"),
    pytest.param(_view_flow_edit(_heads(0)), "n_heads", id="flow-json-heads-0"),
    pytest.param(_view_flow_edit(_heads(10**9)), "n_heads", id="flow-json-heads-1e9"),
    pytest.param(_view_flow_edit(_heads(True)), "n_heads", id="flow-json-heads-bool"),
    pytest.param(_view_flow_edit(_heads(2.5)), "n_heads", id="flow-json-heads-float"),
    pytest.param(_dev("/dev/zero", "file"), "not a regular file", id="view-file-dev-zero"),
    pytest.param(_dev("/dev/zero", "flow"), "not a regular file", id="view-flow-dev-zero"),
    pytest.param(_dev("/dev/zero", "corpus"), "not a regular file", id="sim-corpus-dev-zero"),
    pytest.param(_dev("/dev/null", "flow"), "not a regular file", id="view-flow-dev-null"),
    pytest.param(_inline("nan"), "--inline-limit nan", id="inline-limit-nan"),
    pytest.param(_inline("inf"), "--inline-limit inf", id="inline-limit-inf"),
    pytest.param(_inline("-inf"), "--inline-limit -inf", id="inline-limit-minus-inf"),
    pytest.param(_inline("0"), "--inline-limit 0", id="inline-limit-0"),
    pytest.param(_inline("1e30"), "--inline-limit 1e+30", id="inline-limit-huge"),
    pytest.param(_sim_model(BERT, {"pytorch_model.bin": b"\x80\x02}q\x00."}), "pickled weights",
                 id="hf-pickle-only-similarity"),
    pytest.param(_view_model(BERT, {"model.ckpt": b"\x80\x02}."}), "pickled weights",
                 id="hf-pickle-only-view"),
    pytest.param(_sim_model({**BERT, "hidden_size": 10**9}, {}), "hidden_size",
                 id="hf-absurd-hidden-size"),
    pytest.param(_sim_model({**BERT, "intermediate_size": 10**12}, {}), "hidden_size",
                 id="hf-absurd-intermediate-size"),
    pytest.param(_sim_model(BERT, {"model.safetensors": ST_HEADER_2_63}), "safetensors header",
                 id="hf-safetensors-header-2-63"),
    pytest.param(_sim_model(BERT, {"model.safetensors": struct.pack("<Q", 10) + b"[[[[[[[[[["}),
                 "safetensors header", id="hf-safetensors-header-not-an-object"),
    pytest.param(_sim_model(BERT, {"model.safetensors": b""}), "safetensors header",
                 id="hf-safetensors-empty"),
    pytest.param(_cifar_deep_pickle, "nests containers", id="cifar-deep-pickle"),
    pytest.param(_ray("auto"), "ray start --head", id="ray-address-auto-no-cluster"),
    pytest.param(_ray("10.0.0.5"), "host:port", id="ray-address-without-port"),
    pytest.param(_ray("ray://"), "host:port", id="ray-address-empty-host"),
    pytest.param(_resume_deep_metrics, "levels deep", id="train-resume-deep-metrics",
                 marks=pytest.mark.slow),  # trains 2 steps first
    pytest.param(_report_json(_deep()), "levels deep", id="report-json-deep"),
    pytest.param(_report_json('{"format": "tokengeo-report/1", "claims": [NaN]'),
                 "not valid JSON", id="report-json-truncated"),
    pytest.param(_report_json(None), "not a regular file", id="report-json-fifo"),
    pytest.param(_report_json(b"\xff\xfe{}"), "UTF-8", id="report-json-not-utf8"),
]


@pytest.mark.parametrize("setup,needle", CLASS3)
def test_class3_hostile_files_one_line(tmp_path, capsys, no_heavy_work, no_model, setup,
                                       needle):
    refused(tmp_path, capsys, setup(tmp_path), needle)


@pytest.mark.parametrize("text,needle", [
    (_deep(), "levels deep"), ('{"a": NaN}', "NaN"), ('{"a": [Infinity]}', "Infinity"),
    ('{"a": -Infinity}', "-Infinity"), ("[" * 65 + "]" * 65, "65 levels"),
    ('{"s": "' + "[" * 10_000 + '"}', None),  # brackets inside a string do not nest
])
def test_class3_bounded_json_reader(tmp_path, text, needle):
    from tokengeo.io import read_json

    path = tmp_path / "x.json"
    path.write_text(text)
    if needle is None:
        assert read_json(path, dict)["s"].startswith("[[[")
        return
    with pytest.raises(ConfigError, match=needle) as err:
        read_json(path, (dict, list))
    assert "x.json" in str(err.value) and "\n" not in str(err.value)


def test_class3_json_between_ranks_is_bounded(monkeypatch):
    """What torchrun ranks send each other goes through the bounded reader: a rank's NaN
    (a diverged loss) arrives as NaN; nesting past the bound is one ConfigError naming the
    rank, not a RecursionError on the receiving rank."""
    import math

    import torch

    import tokengeo.train.distributed as td

    def all_gather(out, t):  # two ranks that send the same bytes
        for o in out:
            o.copy_(t)

    monkeypatch.setattr(td.dist, "all_gather", all_gather)
    env = td.DistEnv(rank=0, world_size=2, device=torch.device("cpu"))
    got = td.all_gather_json({"loss": float("nan"), "step": 3}, env)
    assert len(got) == 2 and math.isnan(got[1]["loss"]) and got[1]["step"] == 3
    deep: list = []
    for _ in range(80):
        deep = [deep]
    with pytest.raises(ConfigError, match="rank 0's JSON nests JSON 81 levels deep"):
        td.all_gather_json(deep, env)


@pytest.mark.parametrize("stdout,needle", [
    ("[" * 100_000 + "]" * 100_000, "levels deep"),
    ('[{"batches": 1}', "not valid JSON"),
    ('{"not": "a list"}', "must hold a JSON list"),
])
def test_class3_bench_child_output_is_bounded(monkeypatch, stdout, needle):
    """A benchmark child's output is parsed by the bounded reader: a hostile or damaged
    line is one ConfigError naming the child, never a RecursionError or a KeyError."""
    import subprocess

    import tokengeo.bench.train_memory as tm
    from tokengeo.models.ltransformer import LTransformerConfig

    monkeypatch.delenv(tm.MMAP_ENV, raising=False)  # measured in a child, whose line we read
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=stdout, stderr=""))
    with pytest.raises(ConfigError, match=needle) as err:
        tm.training_peaks(LTransformerConfig(), batches=(1,), seq_len=8)
    assert "training-memory child" in str(err.value)


@pytest.mark.parametrize("name", ["cell", "sidecar", "marker", "cache-config"])
def test_class3_deep_json_in_every_reader(tmp_path, name):
    """Cells, checkpoint sidecars, --out markers and model caches: deep JSON is a clear
    refusal (or a recompute), never a RecursionError."""
    deep = _deep()
    if name == "cell":
        from tokengeo.experiments.cells import Cell, CellStore

        store = CellStore(tmp_path)
        cell = Cell("s", "k", json.dumps, {"x": 1})
        store.path(cell).parent.mkdir(parents=True, exist_ok=True)
        store.path(cell).write_text(deep)
        assert store.load(cell) is None
    elif name == "sidecar":
        from tokengeo.errors import CheckpointError
        from tokengeo.train.checkpoint import STATE_FILE, _read_sidecar

        (tmp_path / STATE_FILE).write_text(deep)
        with pytest.raises(CheckpointError, match="levels deep"):
            _read_sidecar(tmp_path, None)
    elif name == "marker":
        from tokengeo.outmarker import read_marker

        (tmp_path / MARKER).write_text(deep)
        assert read_marker(tmp_path) is None
    else:
        from tokengeo.models.hf.pretrained import cache_problem

        (tmp_path / "config.json").write_text(deep)
        (tmp_path / "tokengeo-source.json").write_text("{}")
        assert "levels deep" in (cache_problem(tmp_path, None) or "")


def _gguf(tmp: Path, body: bytes, kv_count: int = 1) -> Path:
    path = tmp / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, kv_count) + body)
    return path


def _key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


GGUF_CASES = {
    "kv-count-2-64": (b"", 2**64 - 1),
    "key-length-2-63": (struct.pack("<Q", 2**63), 1),
    "string-length-huge": (_key("a") + struct.pack("<I", 8) + struct.pack("<Q", 2**62), 1),
    "array-count-overflow": (_key("a") + struct.pack("<I", 9) + struct.pack("<IQ", 10, 2**63),
                             1),
    "array-of-strings-2-64": (_key("a") + struct.pack("<I", 9) + struct.pack("<IQ", 8, 2**64 - 1),
                              1),
    "arrays-nested-1000-deep": (_key("a") + struct.pack("<I", 9)
                                + struct.pack("<IQ", 9, 1) * 1000 + struct.pack("<IQ", 4, 0), 1),
    "unknown-type": (_key("a") + struct.pack("<I", 99), 1),
    "truncated-value": (_key("a") + struct.pack("<I", 4) + b"\x01", 1),
}


@pytest.mark.parametrize("case", list(GGUF_CASES))
def test_class3_crafted_gguf_headers(tmp_path, case):
    from tokengeo.models.hf.gguf_header import read_gguf_metadata

    body, count = GGUF_CASES[case]
    with pytest.raises(ConfigError) as err:
        read_gguf_metadata(_gguf(tmp_path, body, count))
    assert "m.gguf" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("value", ["'12'", "0", "2**63", "1.5"])
def test_class3_gguf_sizes_that_are_not_counts(tmp_path, value):
    from tokengeo.models.hf.gguf_header import gguf_sizes

    v = eval(value)  # noqa: S307 - a literal of the table
    kv = [("general.architecture", 8, "llama"), ("llama.block_count", None, v),
          ("llama.attention.head_count", 4, 2), ("llama.context_length", 4, 64),
          ("llama.vocab_size", 4, 10)]
    body = b""
    for key, kind, val in kv:
        if kind is None:
            kind = 8 if isinstance(val, str) else 6 if isinstance(val, float) else 10
        body += _key(key) + struct.pack("<I", kind)
        body += (_key(val) if kind == 8 else struct.pack({4: "<I", 6: "<f", 10: "<Q"}[kind],
                                                         val))
    with pytest.raises(ConfigError, match="block_count|num_hidden_layers"):
        gguf_sizes(_gguf(tmp_path, body, len(kv)), 0)


@pytest.mark.parametrize("damage", ["offsets-string", "offsets-negative", "config-list",
                                    "header-2-63", "weights-fifo"])
def test_class3_damaged_model_cache_is_named_not_raised(tmp_path, damage):
    """``cache_problem`` says why (the load then rebuilds the cache), never raises."""
    from tokengeo.models.hf.pretrained import SOURCE_FILE, WEIGHTS_FILE, cache_problem

    (tmp_path / SOURCE_FILE).write_text("{}")
    (tmp_path / "config.json").write_text("[1, 2]" if damage == "config-list" else "{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    offsets = {"offsets-string": ["0", "4"], "offsets-negative": [-4, 4]}.get(damage, [0, 4])
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": offsets}}).encode()
    if damage == "header-2-63":
        (tmp_path / WEIGHTS_FILE).write_bytes(ST_HEADER_2_63)
    elif damage == "weights-fifo":
        os.mkfifo(tmp_path / WEIGHTS_FILE)
    else:
        (tmp_path / WEIGHTS_FILE).write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    assert cache_problem(tmp_path, None) is not None


@pytest.mark.parametrize("kind", ["file", "link-dev-null", "under-a-file"])
def test_class3_tokengeo_cache_not_a_folder(tmp_path, monkeypatch, kind):
    from tokengeo.data.cache import cache_dir

    root = tmp_path / "cache"
    if kind == "file":
        root.write_text("not a folder")
    elif kind == "link-dev-null":
        root.symlink_to("/dev/null")
    else:
        (tmp_path / "f").write_text("x")
        root = tmp_path / "f" / "cache"
    monkeypatch.setenv("TOKENGEO_CACHE", str(root))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match="TOKENGEO_CACHE"):
        cache_dir("tokens")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["empty", "truncated", "object-array", "float-array",
                                    "missing-key", "fifo"])
def test_class3_bad_npz_cache_is_recomputed(tmp_path, monkeypatch, damage):
    import hashlib

    import torch

    from tokengeo.data.cache import cached_int_arrays

    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))
    parts = ["k"]
    path = tmp_path / "enc" / f"{hashlib.sha256(b'k' + bytes(1)).hexdigest()[:24]}.npz"
    path.parent.mkdir()
    good = {"flat": torch.arange(5), "lengths": torch.tensor([2, 3])}
    if damage == "fifo":
        os.mkfifo(path)
    elif damage == "object-array":
        np.savez(path, flat=np.array([[1], "x"], dtype=object), lengths=np.array([1]))
    elif damage == "float-array":
        np.savez(path, flat=np.array([0.5]), lengths=np.array([1]))
    elif damage == "missing-key":
        np.savez(path, flat=np.arange(3))
    else:
        np.savez(path, flat=np.arange(5), lengths=np.array([2, 3]))
        data = path.read_bytes()
        path.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    got = cached_int_arrays("enc", parts, lambda: good, keys=("flat", "lengths"))
    assert torch.equal(got["flat"], good["flat"]) and torch.equal(got["lengths"], good["lengths"])


@pytest.mark.parametrize("text,errno_", [
    ("Error while serializing: I/O error: No space left on device (os error 28)", 28),
    ("Error while serializing: IoError(Os { code: 122, kind: QuotaExceeded })", 122),
    ("Error while serializing: something else", None),
])
def test_class3_disk_full_checkpoint_write(tmp_path, monkeypatch, text, errno_):
    import torch
    from safetensors import SafetensorError

    import tokengeo.train.checkpoint as ck
    from tokengeo.errors import CheckpointError

    def full(*a, **k):
        raise SafetensorError(text)

    monkeypatch.setattr(ck, "save_file", full)
    if errno_ is None:
        with pytest.raises(CheckpointError, match="cannot write checkpoint file"):
            ck._save_tensors({"w": torch.zeros(1)}, tmp_path / "m.safetensors")
        return
    with pytest.raises(OSError) as err:
        ck._save_tensors({"w": torch.zeros(1)}, tmp_path / "m.safetensors")
    assert err.value.errno == errno_ and err.value.filename.endswith("m.safetensors")


@pytest.mark.slow  # trains a step first
def test_class3_disk_full_checkpoint_is_one_line_from_the_cli(tmp_path, capsys, monkeypatch):
    from safetensors import SafetensorError

    import tokengeo.train.checkpoint as ck

    def full(*a, **k):
        raise SafetensorError("Error while serializing: I/O error: No space left on device "
                              "(os error 28)")

    monkeypatch.setattr(ck, "save_file", full)
    capsys.readouterr()
    assert main(["train", *TINY_TRAIN, "--steps", "1", "--out", str(tmp_path / "run")]) == 2
    line = one_line(capsys, "train")
    assert "No space left on device" in line and "m" in line


@pytest.mark.slow
def test_class3_valid_flow_with_plots_runs(tmp_path):
    """`flow --preset s2-ou --T 0.2 --dt 0.05 --record-every 1` with plots: five records make
    a snapshot grid with an empty panel, which used to crash the 3-D layout."""
    out = tmp_path / "flow"
    assert main(["flow", "--preset", "s2-ou", "--T", "0.2", "--dt", "0.05", "--record-every",
                 "1", "--n-paths", "1", "--scaling-heads", "none", "--quiet",
                 "--out", str(out)]) == 0
    assert (out / "snapshots.png").stat().st_size > 1000 and (out / "flow.json").is_file()


def test_class3_snapshot_grid_with_empty_panels(tmp_path):
    import torch

    from tokengeo.flows.plots import snapshots_figure
    from tokengeo.flows.simulate import FlowResult
    from tokengeo.plotting import save_figure

    for records in (2, 5):  # grids of 3 columns with 1 empty panel
        x = torch.nn.functional.normalize(torch.randn(1, records, 6, 3, dtype=torch.float64),
                                          dim=-1)
        z = torch.zeros(1, records)
        result = FlowResult(torch.arange(records, dtype=torch.float64), z, z, z, z, z, z, z,
                            True, x=x)
        png = save_figure(snapshots_figure(result), tmp_path / f"s{records}.png")
        assert png.read_bytes().startswith(b"\x89PNG")


# =========================================================================== class 4
# silent acceptance

def _sim_no_tokenizer(tmp: Path) -> list[str]:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT))
    return ["similarity", "--model", str(folder), "--corpus", str(_corpus(tmp)),
            "--no-figures", "--out", str(tmp / "out")]


def _view_no_tokenizer(tmp: Path) -> list[str]:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT))
    return ["view", "--model", f"hf:{folder}", "--text", "words", "--out", str(tmp / "p.html")]


def _binary_in_corpus(name: str, data: bytes):
    def setup(tmp: Path) -> list[str]:
        folder = tmp / "texts"
        folder.mkdir()
        (folder / "a.txt").write_text("Plain words. More words.\n")
        (folder / name).write_bytes(data)
        return ["similarity", "--corpus", str(folder), "--no-figures",
                "--out", str(tmp / "out")]
    return setup


def _strings_in_series(where: str):
    def edit(data, text):
        if where == "t":
            data["main_run"]["t"][1] = "0.01"
        else:
            data["main_run"][where]["mean"][0] = "1.0"
        return json.dumps(data)
    return _view_flow_edit(edit)


CLASS4 = [
    pytest.param(_sim_no_tokenizer, "no tokenizer", id="similarity-folder-without-tokenizer"),
    pytest.param(_view_no_tokenizer, "no tokenizer", id="view-folder-without-tokenizer"),
    pytest.param(_binary_in_corpus("b.txt", b"\x00\x01\x02binary"), "b.txt",
                 id="corpus-folder-binary-txt"),
    pytest.param(_binary_in_corpus("c.md", "caf\xe9".encode("latin-1") * 10), "c.md",
                 id="corpus-folder-latin1-md"),
    pytest.param(_binary_in_corpus("d.rst", b"\x89PNG\r\n\x1a\n" + bytes(64)), "d.rst",
                 id="corpus-folder-png-named-rst"),
    pytest.param(_strings_in_series("E"), "E.mean", id="flow-json-string-in-E"),
    pytest.param(_strings_in_series("G2"), "G2.mean", id="flow-json-string-in-G2"),
    pytest.param(_strings_in_series("t"), "main_run t", id="flow-json-string-in-t"),
]


@pytest.mark.parametrize("setup,needle", CLASS4)
def test_class4_nothing_silent(tmp_path, capsys, no_heavy_work, no_model, setup, needle):
    refused(tmp_path, capsys, setup(tmp_path), needle)


@pytest.mark.parametrize("name", ["a#b.html", "a?b.html", "100%.html", "a b.html"])
def test_class4_folder_mode_page_names_load_their_data(tmp_path, name):
    from urllib.parse import unquote

    from tokengeo.view.page import write_page

    page = write_page(tmp_path / name, {"kind": "flow"}, {"0-0": "QUJD"}, title="t",
                      inline_limit=1)
    data = json.loads(page.read_text().split('id="tg-data" type="application/json">')[1]
                      .split("</script>")[0])
    assert "#" not in data["chunks"] and "?" not in data["chunks"]
    assert (tmp_path / unquote(data["chunks"]) / "c-0-0.js").is_file()


def test_class4_report_figures_stay_within_the_page_budget(tmp_path, monkeypatch):
    """Each figure of figures/<suite>/ is embedded once, and none past the page's budget (a
    report with many large figures does not make a page of hundreds of MB)."""
    import json

    from helpers.report_dicts import claim, report

    import tokengeo.reporting.render as render
    import tokengeo.view.runs as runs

    monkeypatch.setattr(render, "FIGURES_LIMIT", 300_000)
    (tmp_path / "figures" / "S").mkdir(parents=True)
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(200_000)
    for name in ("a", "b", "c"):
        (tmp_path / "figures" / "S" / f"{name}.png").write_bytes(png)
    data = report([claim(suite="S", verdict="inconclusive")])
    (tmp_path / "report.json").write_text(json.dumps(data))
    figures = [b for s in runs.read_run(tmp_path)["sections"] for b in s["blocks"]
               if b["kind"] == "figure"]
    assert [f["name"] for f in figures if f["data"]] == ["a"]
    assert [f["name"] for f in figures if "not embedded" in (f["problem"] or "")] == ["b", "c"]
    assert sum(len(f["data"]) for f in figures) < len(png) * 1.4  # base64 of one figure


def test_class4_similarity_estimates_the_memory_of_a_large_corpus(tmp_path, capsys,
                                                                  no_heavy_work, monkeypatch):
    import tokengeo.checks as checks

    monkeypatch.setattr(checks, "available_memory", lambda: 2**30)  # a 1 GiB machine
    corpus = tmp_path / "big.txt"
    corpus.write_text("Words and more words. " * 400_000)  # ~9 MB: ~1.8 GB to tokenise
    refused(tmp_path, capsys, ["similarity", "--corpus", str(corpus), "--no-figures",
                               "--out", str(tmp_path / "out")], "tokenising")


# =========================================================================== class 5
# late refusals: every input checked before --out is touched

def _paper_cifar(make):
    def setup(tmp: Path) -> list[str]:
        path = make(tmp)
        return ["reproduce", "--paper", "--only", "laplacian-images", "--jobs", "1",
                "--data-path", f"CIFAR100={path}", "--out", str(tmp / "out")]
    return setup


def _archive_with(tmp: Path, **replace) -> Path:
    from helpers.cifar_archive import cifar100_members, write_archive

    members = {**cifar100_members(), **replace}
    return write_archive(tmp / "cifar-100-python.tar.gz", "cifar-100-python", members)


def _truncated(tmp: Path) -> Path:
    path = _archive_with(tmp)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


PAYLOAD = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."

CLASS5 = [
    pytest.param(_paper_cifar(lambda t: "/dev/null"), "not a regular file or folder",
                 id="data-path-dev-null"),
    pytest.param(_paper_cifar(lambda t: _fifo(t, "cifar-100-python.tar.gz")),
                 "not a regular file or folder", id="data-path-fifo"),
    pytest.param(_paper_cifar(lambda t: _archive_with(t, train=PAYLOAD)), "posix.system",
                 id="data-path-pickle-payload"),
    pytest.param(_paper_cifar(_truncated), "not a readable tar archive",
                 id="data-path-truncated-archive"),
    pytest.param(_paper_cifar(lambda t: _archive_with(t, meta=b"not a pickle")), "meta",
                 id="data-path-meta-not-a-pickle"),
    pytest.param(_ray("127.0.0.1:70000"), "outside 1..65535", id="ray-port-out-of-range"),
    pytest.param(_ray("127.0.0.1:0"), "outside 1..65535", id="ray-port-0"),
]


@pytest.mark.parametrize("setup,needle", CLASS5)
def test_class5_checked_before_out(tmp_path, capsys, no_heavy_work, setup, needle):
    refused(tmp_path, capsys, setup(tmp_path), needle)
    assert not (tmp_path / "out").exists()


def test_class5_impossible_patch_size_before_out(tmp_path, capsys, no_heavy_work):
    cfg = _suite_copy(tmp_path, "laplacian-images", [("patch_size = 4, d_model = 384",
                                                      "patch_size = 7, d_model = 384")])
    data = _archive_with(tmp_path)
    refused(tmp_path, capsys, ["reproduce", "--paper", "--only", "laplacian-images",
                               "--config-dir", str(cfg), "--jobs", "1", "--data-path",
                               f"CIFAR100={data}", "--out", str(tmp_path / "out")],
            "patch_size=7")


# =========================================================================== class 6
# multi-line errors

def test_class6_decompression_bomb_is_one_line(tmp_path, capsys, monkeypatch):
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (40, 40)).save(tmp_path / "imgs" / cls / f"{i}.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 1600 pixels: PIL's warning band
    with _no_warning():
        refused(tmp_path, capsys, ["train", "--model", "vit-tiny", "--data",
                                   str(tmp_path / "imgs"), "--steps", "1", "--quiet",
                                   "--out", str(tmp_path / "run")], "too large")


class _no_warning:
    """Fail if a warning (PIL's two-line DecompressionBombWarning) escapes the block."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings(record=True)
        self.seen = self._ctx.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        bombs = [w for w in self.seen if "Decompression" in str(w.category.__name__)]
        assert not bombs, [str(w.message) for w in bombs]


@pytest.mark.parametrize("pixels", [1000, 700])  # warning band, error band (> 2x the limit)
def test_class6_bomb_in_the_image_folder_loader(tmp_path, monkeypatch, pixels):
    from PIL import Image

    from tokengeo.data.bounded import load_image

    Image.new("RGB", (40, 40)).save(tmp_path / "x.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", pixels)
    with _no_warning(), pytest.raises(ConfigError, match="x.png is too large") as err:
        load_image(Image, tmp_path / "x.png", "RGB")
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("rank", ["0", "1"])
def test_class6_torchrun_join_failure_is_one_line_on_rank_0(tmp_path, rank):
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # nobody listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank,
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    corpus = _corpus(tmp_path)
    res = subprocess.run([sys.executable, "-m", "tokengeo", "train", "--model", "gpt-tiny",
                          "--data", str(corpus), "--steps", "1", "--quiet",
                          "--connect-timeout", "2", "--out", str(tmp_path / "run")],
                         env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2, res.stderr[-2000:]
    assert lines == ([] if rank == "1" else lines[:1]) and len(lines) <= 1, lines
    if rank == "0":
        assert "could not join the process group" in lines[0]
    assert not (tmp_path / "run").exists()


# =========================================================================== class 7
# a valid input refused

@pytest.mark.parametrize("data,patch,size", [("cifar100:/x/c.tar.gz", 8, 32),
                                              ("cifar10:/x/c.tar.gz", 16, 32),
                                              ("digits", 4, 8), ("fashion-mnist", 7, 28),
                                              ("imagenet:/x", 16, 224)])
def test_class7_vit_size_comes_from_the_data_set(data, patch, size):
    from tokengeo.experiments.validation import registry_config

    cfg = registry_config({"model": "vit-small", "data": data,
                           "model_overrides": {"patch_size": patch}})
    assert (cfg.image_size, cfg.patch_size) == (size, patch)


def test_class7_paper_vit_patch_8_on_cifar100_is_accepted(tmp_path, capsys):
    cfg = _suite_copy(tmp_path, "laplacian-images", [("patch_size = 4, d_model = 384",
                                                      "patch_size = 8, d_model = 384")])
    data = _archive_with(tmp_path)
    code = main(["reproduce", "--paper", "--only", "laplacian-images", "--config-dir", str(cfg),
                 "--data-path", f"CIFAR100={data}", "--dry-run", "--out",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "not divisible" not in err


# --------------------------------------------------------------------------- report.json is data
# `view --report` of a report.json whose every string field carries markup: none of it becomes
# markup (the interval's `n`, inserted unescaped before, is refused unless an integer: see
# tests/cli/test_report_docs.py), and the page's CSP runs no inline script but its own.
XSS = [
    '<img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=1</script>",
    '"><svg onload=window.__pwned=1>',
    "</script><script>window.__pwned=1</script><!--",
]


def _hostile_report(payload: str) -> dict:
    """A valid report.json with ``payload`` in every string field a page shows."""
    from helpers.report_dicts import claim, interval, report

    def s(name: str) -> str:
        return f"{name} {payload}"

    member = claim(suite=s("suite"), claim=s("member"), label=s("label"), verdict="inconclusive",
                   interval=interval(method=s("method")), mde_80=0.1, seeds_for_80=9,
                   power_basis="observed")
    c = claim(suite=s("suite"), paper=s("paper"), claim=s("claim"), proxy=s("proxy"),
              source=s("source"), paper_value=s("value"), quantity=s("quantity"),
              region={"low": None, "high": 0.0, "text": s("region")}, rule=s("rule"),
              detail=s("detail"), vs_paper="consistent", paper_effect=-1.0, members=[member],
              family_rule="any", verdict_raw="inconclusive", verdict="not run: " + s("why"))
    table = {"suite": s("suite"), "caption": s("caption"), "header": [s("h")],
             "rows": [[s("cell")]]}
    data = report([c, claim(kind="construction", claim=s("verified"))], [table],
                  title=s("title"), preamble=[s("pre")], commit=s("commit"),
                  tokengeo=s("version"),
                  suites=[{"name": s("suite"), "title": s("stitle"), "paper": s("spaper"),
                           "question": s("q"), "can_say": s("say"), "gap": [[s("g")] * 3],
                           "notes": [s("note")], "figures": [s("figure") + ".png"]}])
    from helpers.report_dicts import VERDICTS

    data["tally"]["kinds"] = {s("kind"): {**dict.fromkeys(VERDICTS, 0), "reproduced": 1}}
    data["tally"]["verified"] = [{"suite": s("vs"), "claim": s("vc"), "verdict": "reproduced"}]
    return data


@pytest.mark.parametrize("payload", XSS)
def test_class1_report_json_strings_are_text_on_the_run_page(tmp_path, payload):
    import shutil

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_text(json.dumps(_hostile_report(payload)))
    out = tmp_path / "p.html"
    assert main(["view", "--report", str(tmp_path / "run"), "--out", str(out)]) == 0
    page = out.read_text()
    csp = page.split('Content-Security-Policy" content="')[1].split('"')[0]
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0], csp
    assert page.count("<script") == 2 and "window.__pwned" not in page.split("<script>")[1]
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed: the page was checked as text only")
    from helpers.browser import Page

    with Page(out) as tab:
        tab.wait_for("window.TG && TG.ready")
        assert tab.evaluate("window.__pwned === undefined")
        assert tab.evaluate("document.querySelectorAll('#main img, #main svg, #main script')"
                            ".length") == 0
        shown = tab.evaluate("document.getElementById('main').textContent")
        for field in ("claim", "member", "caption", "cell", "note", "detail", "q", "vc"):
            assert f"{field} {payload}" in shown, field
