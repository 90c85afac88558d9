"""docs/interop.md's three workflows run on a tiny offline Llama in the default suite (the
page's SmolLM2 load and prompts swapped for the tiny model's). On SmolLM2-135M itself, as
written, they run in tests/cli/test_readme.py's slow test of every docs block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interop.cases import REASON

pytest.importorskip("transformer_lens", reason=REASON)
pytest.importorskip("nnsight", reason=REASON)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "interop.md"
LOAD = 'load("smollm2-135m")'
PROMPTS = {"The capital of France is": "Thou art more lovely and more",  # 14 tokens each
           "The capital of Italy is": "Thou art more temperate and more"}


def blocks() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def tiny(code: str) -> str:
    """The block on the tiny Llama: its folder for SmolLM2, prompts its tokenizer knows."""
    assert LOAD in code
    code = code.replace(LOAD, "load_tiny()")
    for smollm, tiny_prompt in PROMPTS.items():
        code = code.replace(smollm, tiny_prompt)
    return code


def run_block(code: str, folder: Path, **names) -> dict:
    """Run a block as a file (nnsight reads a trace's source back from disk)."""
    import runpy

    path = folder / "block.py"
    path.write_text(code, encoding="utf-8")
    return runpy.run_path(str(path), init_globals=names, run_name="docs")


def test_the_page_has_the_three_workflows():
    found = blocks()
    assert len(found) == 3
    assert "stack_head_results" in found[0] and "accumulated_resid" in found[0]
    assert "patching.get_act_patch_attn_head_out_all_pos" in found[1] and "index_df" in found[1]
    assert "NNsight" in found[2]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["logit-lens-dla", "patching", "nnsight"])
def test_workflow_runs_on_a_tiny_llama(index, llama_folder, tmp_path, capsys):
    from tokengeo.models.hf.pretrained import load_folder

    namespace = run_block(tiny(blocks()[index]), tmp_path,
                          load_tiny=lambda: load_folder(llama_folder))
    assert capsys.readouterr().out.strip()  # it reported something
    if index == 0:  # a Laplacian head's attribution is among the printed ones
        assert namespace["laplacian"] and namespace["dla"].shape[0] == 2 * 4
