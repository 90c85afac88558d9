"""``hf:<source>`` models: a pretrained causal LM (here a tiny random Llama saved to a
folder), laplacianized, trained with its own tokenizer by the unchanged trainer."""

import pytest
import torch

from tokengeo.errors import ConfigError

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_llama import save_tiny_llama, write_text_folder  # noqa: E402

from tokengeo.models.hf import laplacianize  # noqa: E402
from tokengeo.models.registry import create_model  # noqa: E402
from tokengeo.train import TrainConfig, Trainer  # noqa: E402
from tokengeo.train.loading import load_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    return write_text_folder(tmp_path_factory.mktemp("texts"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path / "cache"))


def _plain(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


def _config(tiny, texts, out, **kw):
    values = dict(model=f"hf:{tiny}", data=str(texts), n_laplacian=2, steps=4, batch_size=4,
                  warmup=1, eval_every=0, final_eval_batches=1, out=str(out), device="cpu",
                  model_overrides={"block_size": 16})
    return TrainConfig(**{**values, **kw})


def test_hf_model_gives_the_logits_of_the_laplacianized_transformers_model(tiny):
    ids = torch.randint(0, 300, (2, 12))  # (B, T)
    plain = _plain(tiny)
    want0 = plain(input_ids=ids).logits
    got0 = create_model(f"hf:{tiny}", block_size=16).eval()(ids)
    torch.testing.assert_close(got0, want0)
    want2 = laplacianize(plain, 2)(input_ids=ids).logits
    got2 = create_model(f"hf:{tiny}", n_laplacian=2, block_size=16).eval()(ids)
    torch.testing.assert_close(got2, want2)
    assert (want2 - want0).abs().max() > 1e-3  # the conversion changes the function


def test_hook_final_is_the_final_norm_output(tiny):
    from tokengeo.probes.capture import capture

    model = create_model(f"hf:{tiny}", n_laplacian=1, block_size=16).eval()
    ids = torch.randint(0, 300, (2, 10))
    with capture(model, ["hook_final"]) as cache:
        model(ids)
    hidden = model.hf(input_ids=ids, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(cache["hook_final"], hidden)  # (B, T, d) after the norm


def test_train_with_own_tokenizer_resume_and_load(tiny, texts, tmp_path):
    straight = Trainer(_config(tiny, texts, tmp_path / "a"), progress=False)
    tok = transformers.AutoTokenizer.from_pretrained(tiny)
    assert straight.data.vocab_size == len(tok)  # the data is encoded with the model's own
    assert straight.data.train_tokens[:20].tolist() == \
        tok(straight.data.tokenizer.decode(straight.data.train_tokens[:20]),
            add_special_tokens=False).input_ids
    done = straight.fit()
    assert done["step"] == 4 and done["final"]["val"]["perplexity"] > 1
    reloaded = load_model(tmp_path / "a")
    ids = torch.randint(0, 300, (2, 12))
    torch.testing.assert_close(reloaded(ids), straight.model.eval()(ids))
    assert reloaded.hf.config.tokengeo_laplacian_heads == {"0": [2, 3], "1": [2, 3]}


def test_resume_continues_bit_for_bit(tiny, texts, tmp_path, monkeypatch):
    straight = Trainer(_config(tiny, texts, tmp_path / "a", checkpoint_every=2), progress=False)
    straight.fit()
    original = Trainer.train_step

    def dies_at_step_3(self):
        if self.step + 1 == 3:
            raise KeyboardInterrupt  # killed after the checkpoint of step 2
        return original(self)

    cut = _config(tiny, texts, tmp_path / "b", checkpoint_every=2)
    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_step", dies_at_step_3)
        with pytest.raises(KeyboardInterrupt):
            Trainer(cut, progress=False).fit()
    resumed = Trainer(cut, resume=True, progress=False)
    assert resumed.step == 2
    resumed.fit()
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters(),
                            strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("change, message", [
    ({"model": "hf:no-such-model"}, "unknown Hugging Face model 'no-such-model'"),
    ({"n_laplacian": 5}, "n_laplacian=5 but"),
    ({"model_overrides": {"block_size": 128}}, "block_size=128 exceeds the 64 positions"),
    ({"head_kind": "attention"}, "head_kind='attention' is not valid"),
])
def test_bad_config_is_refused_before_loading(tiny, texts, tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _config(tiny, texts, tmp_path / "r", **change).validate()


def test_data_must_take_the_models_tokenizer(tiny, texts, tmp_path):
    from tokengeo.train.tasks import data_options

    cfg = _config(tiny, texts, tmp_path / "r", data_options={"tokenizer": "gpt2"})
    with pytest.raises(ConfigError, match="brings its own tokenizer"):
        data_options(cfg)
    cfg = _config(tiny, texts, tmp_path / "r", data="shakespeare-char")
    with pytest.raises(ConfigError, match="not shakespeare-char"):
        data_options(cfg)


def test_train_cli_refuses_unknown_hf_model(tmp_path, capsys):
    from tokengeo.cli import main

    code = main(["train", "--model", "hf:nope", "--data", "shakespeare",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown Hugging Face model 'nope'" in err and "Traceback" not in err


def test_retrofit_quick_setting_is_reported_as_full_only(tmp_path):
    from tokengeo.experiments.reproduce import ReproduceConfig, reproduce

    cfg = ReproduceConfig(out=tmp_path / "out", only=("retrofit",))
    path, (out,) = reproduce(cfg, log=lambda m: None)
    assert out.claims and all(c.verdict.startswith("not run: runs only with") for c in out.claims)
    assert "reproduce --full" in path.read_text()
