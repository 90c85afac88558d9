"""`tokengeo view --model <a train run of hf:...>`: the run's HF model trained with sdpa is
viewed with its attention patterns (once: "no hook point matches
'blocks.*.attn.hook_pattern'"), its Laplacian heads marked."""

import json

import pytest
import torch

from tokengeo.cli import main

pytest.importorskip("transformers", reason="transformers is an optional extra")


def _page_data(path) -> dict:
    text = path.read_text(encoding="utf-8")
    start = text.index('type="application/json">') + len('type="application/json">')
    return json.loads(text[start : text.index("</script>", start)])


def test_view_a_train_run_of_an_hf_model(tmp_path):
    from helpers.tiny_llama import save_tiny_llama, write_text_folder

    folder = save_tiny_llama(tmp_path / "llama")
    run = tmp_path / "run"
    assert main(["train", "--model", f"hf:{folder}", "--data",
                 str(write_text_folder(tmp_path / "docs", 2)), "--n-laplacian", "1",
                 "--steps", "1", "--batch-size", "1", "--set", "model_overrides.block_size=16",
                 "--set", "warmup=0", "--set", "eval_every=0", "--set", "final_eval_batches=1",
                 "--device", "cpu", "--quiet", "--out", str(run)]) == 0
    out = tmp_path / "view.html"
    assert main(["view", "--model", str(run), "--text", "Shall I compare thee",
                 "--out", str(out)]) == 0
    data = _page_data(out)
    assert (data["L"], data["H"]) == (2, 4)
    assert "".join(data["tokens"]) == "Shall I compare thee"
    kinds = [[h["kind"] for h in data["heads"] if h["l"] == l] for l in range(2)]
    assert kinds == [["attention"] * 3 + ["laplacian"]] * 2
    # the stored P of a head is row-stochastic and causal (what eager attention forms)
    from tokengeo.view.loading import load_for_view

    vm = load_for_view(str(run))
    from tokengeo.view.heads import extract_heads

    ids = torch.tensor([vm.encode("Shall I compare thee")])
    maps = extract_heads(vm.model, ids, [vm.token_text(i) for i in ids[0].tolist()])
    torch.testing.assert_close(maps.P.sum(-1), torch.ones(maps.P.shape[:-1]))
    assert float(maps.P.triu(1).abs().max()) == 0
