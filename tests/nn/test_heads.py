"""One head-kind module: the same head-choice rules for tokengeo models, the L-Transformer
and the Hugging Face adapter; HeadMixer.combine against a_h V + b_h P V."""

import ast
from pathlib import Path

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.nn.heads import HeadMixer, choose_heads

SRC = Path(__file__).resolve().parents[2] / "src" / "tokengeo"

# (heads spec, message) on 2 layers x 4 heads; the same message wherever heads are chosen.
BAD_HEADS = [
    ({0: [1, 1]}, r"heads\[0\]=\[1, 1\] lists a head twice"),
    ({0: [4]}, r"heads\[0\]: head index=4 is out of range"),
    ({0: [-1]}, r"heads\[0\]: head index=-1 is out of range"),
    ({0: [True]}, r"heads\[0\]: head index=True must be an int"),
    ({2: [0]}, r"heads: layer index=2 is out of range: the model has 2 layers"),
    ({"x": [0]}, r"heads: layer index='x' must be an int"),
    ({0: 1}, r"heads\[0\]=1 must be a list of head indices"),
    ({0: [0], "0": [1]}, r"heads: layer 0 is listed twice"),
]


def tokengeo_choice(heads):
    return tokengeo.create_model("encoder-tiny", n_layers=2, n_heads=4, vocab_size=20,
                                 laplacian_heads=heads)


def ltransformer_choice(heads):
    return tokengeo.create_model("ltransformer-tiny", n_layers=2, n_heads=4, vocab_size=20,
                                 laplacian_heads=heads)


def hf_choice(heads):
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.BertConfig(
        vocab_size=20, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=16, max_position_embeddings=8,
    )
    return tokengeo.laplacianize(transformers.BertModel(config), heads=heads)


CHOOSERS = [tokengeo_choice, ltransformer_choice, hf_choice]


@pytest.mark.parametrize("choose", CHOOSERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("heads,message", BAD_HEADS)
def test_bad_head_lists_are_refused_identically_everywhere(choose, heads, message):
    with pytest.raises(ConfigError, match=message):
        choose(heads)


@pytest.mark.parametrize("choose", CHOOSERS, ids=lambda f: f.__name__)
def test_json_layer_keys_choose_the_same_heads_everywhere(choose):
    """Layer keys as JSON/TOML write them ("1") mean layer 1 in every adapter."""
    from_json, from_ints = choose({"1": [2, 0]}), choose({1: [0, 2]})
    if hasattr(from_json, "blocks"):
        kinds = [b.attn.head_kinds for b in from_json.blocks]
        assert kinds == [b.attn.head_kinds for b in from_ints.blocks]
        assert kinds[1] == ("laplacian", "attention", "laplacian", "attention")
    else:
        from tokengeo.models.hf import laplacian_heads

        assert laplacian_heads(from_json) == laplacian_heads(from_ints) == {1: [0, 2]}


def test_choose_heads_rules():
    assert choose_heads(3, 4, n_laplacian=2) == {0: [2, 3], 1: [2, 3], 2: [2, 3]}
    assert choose_heads(3, 4, n_laplacian=0) == {}
    assert choose_heads(3, 4, heads={2: [3, 1], 0: []}) == {2: [1, 3]}
    assert choose_heads(3, 4, n_laplacian=0, heads={1: [0]}) == {1: [0]}
    with pytest.raises(ConfigError, match="not both"):
        choose_heads(3, 4, n_laplacian=1, heads={1: [0]})
    with pytest.raises(ConfigError, match="exceeds n_heads=4"):
        choose_heads(3, 4, n_laplacian=5)


@pytest.mark.parametrize("slices", [None, 3])
def test_combine_is_a_v_plus_b_pv(slices):
    """combine(V, PV) == a_h V + b_h PV with (a, b) = (0, 1), (1, −1) or learnt per slice."""
    kinds = ("attention", "laplacian", "mixed", "laplacian")
    heads = HeadMixer(4, kinds, "attention", slices=slices).double()
    with torch.no_grad():
        heads.mix_coef.normal_()
    p, B, T, Dh = slices or 1, 2, 5, 3
    v, pv = (torch.randn(p * B, T, 4, Dh, dtype=torch.float64) for _ in range(2))
    out = heads.combine(v, pv).view(p, B, T, 4, Dh)
    mix = heads.mix_coef.view(p, 2)  # (a, b) of head 2 in every slice
    for k in range(p):
        vk, pvk = v.view(p, B, T, 4, Dh)[k], pv.view(p, B, T, 4, Dh)[k]
        expected = torch.stack([pvk[:, :, 0], vk[:, :, 1] - pvk[:, :, 1],
                                mix[k, 0] * vk[:, :, 2] + mix[k, 1] * pvk[:, :, 2],
                                vk[:, :, 3] - pvk[:, :, 3]], dim=2)
        assert torch.allclose(out[k], expected, atol=1e-12)


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_head_choice_lives_in_one_module():
    """No second copy of the rules: hf.py and the attention modules import nn.heads and
    define no validators of their own."""
    for rel in ("models/hf/patch.py", "nn/attention.py", "nn/lattention.py", "models/config.py"):
        source = (SRC / rel).read_text()
        assert "tokengeo.nn.heads" in source, rel
        for name in ("_check_index", "_listed_heads", "_last_heads", "lists a head twice"):
            assert name not in source, (rel, name)
