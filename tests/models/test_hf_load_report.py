"""``hf.from_pretrained`` of a model with mixed heads restores the coefficients without
transformers' "UNEXPECTED keys ... not ok" report, and still warns about real problems."""

import logging
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")

from tokengeo.models import hf  # noqa: E402


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    from helpers.tiny_llama import save_tiny_llama

    root = tmp_path_factory.mktemp("mixed")
    model = transformers.AutoModelForCausalLM.from_pretrained(save_tiny_llama(root / "plain"))
    hf.laplacianize(model, 1, kind="mixed")
    with torch.no_grad():
        for m in model.modules():
            coef = getattr(m, hf.MIX_NAME, None)
            if coef is not None:
                coef.copy_(torch.randn_like(coef))
    model.save_pretrained(root / "mixed")
    coefs = [getattr(m, hf.MIX_NAME).detach().clone() for m in model.modules()
             if getattr(m, hf.MIX_NAME, None) is not None]
    return root / "mixed", coefs


def test_no_unexpected_report_and_the_coefficients_restored(mixed_folder, caplog, capfd):
    folder, coefs = mixed_folder
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about
        with caplog.at_level(logging.INFO):
            model = hf.from_pretrained(str(folder))
    said = caplog.text + "".join(capfd.readouterr())
    assert "UNEXPECTED" not in said and "LOAD REPORT" not in said
    got = [getattr(m, hf.MIX_NAME) for m in model.modules()
           if getattr(m, hf.MIX_NAME, None) is not None]
    assert len(got) == len(coefs) == 2
    for a, b in zip(got, coefs, strict=True):
        torch.testing.assert_close(a, b)


def test_a_real_problem_stays_loud(mixed_folder, tmp_path):
    """A weight missing from the file: newly initialised, which must be said."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder, _ = mixed_folder
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    weights = load_file(broken / "model.safetensors")
    del weights["model.layers.0.mlp.up_proj.weight"]
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.warns(UserWarning, match=r"missing \(newly initialised\): "
                                         r"model\.layers\.0\.mlp\.up_proj\.weight"):
        hf.from_pretrained(str(broken))
