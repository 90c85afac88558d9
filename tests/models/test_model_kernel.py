"""The attention kernel is a model setting: ``create_model(name, kernel=...)`` reaches every
attention module, is validated with the config (an unknown name lists the table's), is
saved and rebuilt with the config, and a hooked pattern runs whatever the kernel."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.models.registry import create_model, model_from_config
from tokengeo.nn.attention import HeadAttention
from tokengeo.nn.kernels import KERNELS
from tokengeo.train.config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def attention_modules(model) -> list[HeadAttention]:
    return [m for m in model.modules() if isinstance(m, HeadAttention)]


def logits(kernel: str, n_laplacian: int = 2, name: str = "gpt-tiny"):
    torch.manual_seed(0)
    model = create_model(name, n_laplacian=n_laplacian, kernel=kernel).double()
    x = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    out = model(x)
    out.square().sum().backward()
    return model, out


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_of_the_table_is_a_model_setting(kernel):
    """Each name reaches every attention module; where it runs (attention heads for sdpa;
    checkpointed_compose refuses in eager mode, in one line) it plans that kernel and gives
    the values of the plain composition."""
    _, want = logits("compose")
    if kernel == "checkpointed_compose":
        with pytest.raises(ConfigError, match=r"^kernel='checkpointed_compose' cannot run: "
                                              r"torch.compile is not tracing"):
            logits(kernel)
        return
    n_laplacian = 0 if kernel == "sdpa" else 2
    model, got = logits(kernel, n_laplacian)
    modules = attention_modules(model)
    assert len(modules) == model.config.n_layers
    assert all(m.kernel == kernel for m in modules)
    planned = {plan.kernel.name for m in modules for plan in m._plans.values()}
    assert planned == ({"in_place"} if kernel == "auto" else {kernel})
    if kernel != "sdpa":
        assert torch.allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("name", ["vit-tiny", "ltransformer-tiny", "encoder-tiny"])
def test_every_family_passes_the_kernel_to_its_blocks(name):
    model = create_model(name, n_laplacian=1, kernel="compose")
    assert model.config.kernel == "compose"
    assert {m.kernel for m in attention_modules(model)} == {"compose"}


@pytest.mark.parametrize("bad", ["lean", "triton", "recompute", "fast"])
def test_an_unknown_kernel_is_one_error_listing_the_tables_names(bad):
    want = f"kernel={bad!r} is not valid; choose one of {list(KERNELS)}"
    with pytest.raises(ConfigError) as err:
        create_model("gpt-tiny", kernel=bad)
    assert str(err.value) == want
    with pytest.raises(ConfigError) as err:
        TrainConfig(model="gpt-tiny", data="shakespeare", kernel=bad).validate()
    assert str(err.value) == want


def test_the_kernel_is_saved_with_the_config_and_rebuilt():
    """The checkpoint sidecar stores ``asdict(model.config)`` as JSON; the model rebuilt from
    it runs the same kernel."""
    model = create_model("gpt-tiny", n_laplacian=2, kernel="compose")
    saved = json.loads(json.dumps(asdict(model.config)))
    assert saved["kernel"] == "compose"
    again = model_from_config("gpt-tiny", saved)
    assert again.config == model.config
    assert {m.kernel for m in attention_modules(again)} == {"compose"}


def test_train_config_passes_the_kernel_to_the_model_config():
    cfg = TrainConfig(model="vit-tiny", kernel="in_place").validate()
    assert cfg.model_config().kernel == "in_place"
    with pytest.raises(ConfigError, match="model_overrides.kernel='compose' contradicts "
                                          "kernel='in_place'"):
        TrainConfig(model="vit-tiny", kernel="in_place",
                    model_overrides={"kernel": "compose"}).validate()


@pytest.mark.parametrize("kernel", ["auto", "in_place", "compose"])
def test_a_pattern_hook_runs_under_every_kernel(kernel):
    """A hook on the pattern materialises P outside the kernel table, so it does not trip a
    kernel's refusal of hooks on z (``in_place`` raised "a hook sees z"): an identity hook
    gives the unhooked values and gradients, and an edited pattern changes the output."""
    torch.manual_seed(0)
    model = create_model("gpt-tiny", n_laplacian=2, kernel=kernel).double()
    x = torch.randint(0, 256, (2, 10), generator=torch.Generator().manual_seed(1))
    want = model(x)
    want_grad = torch.autograd.grad(want.square().sum(), model.blocks[0].attn.qkv.weight)[0]
    seen = []
    handle = model.blocks[0].attn.hook_pattern.add_hook(lambda p, hook: seen.append(p.shape))
    got = model(x)
    got_grad = torch.autograd.grad(got.square().sum(), model.blocks[0].attn.qkv.weight)[0]
    handle.remove()
    assert seen == [(2, 4, 10, 10)]
    assert torch.allclose(got, want, atol=1e-10) and torch.allclose(got_grad, want_grad, atol=1e-9)
    model.blocks[0].attn.hook_pattern.add_hook(lambda p, hook: torch.ones_like(p) / p.shape[-1])
    assert not torch.allclose(model(x), want, atol=1e-6)



def test_a_kernel_for_a_hugging_face_model_is_refused_not_ignored(tmp_path):
    """hf: models have no tokengeo kernel: ``auto`` leaves them alone, any other is refused
    (the config has no such field: passing it would fail as an unknown option)."""
    import dataclasses

    from tokengeo.models.registry import get_entry

    try:
        entry = get_entry("hf:smollm2-135m")
    except Exception as exc:  # noqa: BLE001 - the entry needs transformers and the weights package
        pytest.skip(f"hf:smollm2-135m cannot be resolved here: {exc}")
    assert "kernel" not in {f.name for f in dataclasses.fields(entry.config_cls)}
    auto = TrainConfig(model="hf:smollm2-135m", data="shakespeare", out=str(tmp_path / "r"))
    assert "kernel" not in auto._model_fields(entry)
    with pytest.raises(ConfigError, match="drop --kernel"):
        TrainConfig(model="hf:smollm2-135m", data="shakespeare", kernel="compose",
                    out=str(tmp_path / "r"))._model_fields(entry)
