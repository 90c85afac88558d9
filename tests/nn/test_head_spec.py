"""One head spec and one formula: HeadSpec.parse on a table of valid and invalid specs (the
same answers for tokengeo's models, the L-Transformer and laplacianize), and every fast
path of z = a·V + b·P V against the reference ``mix_heads`` (values and gradients)."""

from __future__ import annotations

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.nn.heads import (
    ATTENTION,
    KIND_COEFFICIENTS,
    LAPLACIAN,
    MIXED,
    HeadMixer,
    HeadRuns,
    HeadSpec,
    kind_of,
)
from tokengeo.nn.kernels import compose, laplacian_attention
from tokengeo.nn.reference import attention_reference, mix_heads

L_, H_ = 3, 4  # layers and heads of every model in the table

# (n_laplacian, heads) -> {layer: [heads]}
VALID = [
    pytest.param(2, None, {0: [2, 3], 1: [2, 3], 2: [2, 3]}, id="last-k"),
    pytest.param(0, None, {}, id="k=0"),
    pytest.param(None, None, {}, id="nothing"),
    pytest.param(4, None, {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3]}, id="k=H"),
    pytest.param(None, {2: [3, 1], 0: []}, {2: [1, 3]}, id="dict"),
    pytest.param(0, {1: [0]}, {1: [0]}, id="k=0-and-dict"),
    pytest.param(None, {"1": [2]}, {1: [2]}, id="json-key"),
    pytest.param(None, [[0], [], [3, 2]], {0: [0], 2: [2, 3]}, id="per-layer-lists"),
    pytest.param(None, ([1], (2,), []), {0: [1], 1: [2]}, id="per-layer-tuples"),
]

# (n_laplacian, heads) -> the message every family gives
INVALID = [
    pytest.param(5, None, "n_laplacian=5 exceeds n_heads=4", id="k>H"),
    pytest.param(-1, None, "n_laplacian=-1 must be >= 0", id="k<0"),
    pytest.param(True, None, "n_laplacian=True must be a", id="bool-k"),
    pytest.param(1, {0: [1]}, "not both", id="both"),
    pytest.param(None, {0: [4]}, r"heads\[0\]: head index=4 is out of range", id="head>H"),
    pytest.param(None, {0: [1, 1]}, r"heads\[0\]=\[1, 1\] lists a head twice", id="twice"),
    pytest.param(None, {3: [0]}, "layer index=3 is out of range: the model has 3 layers",
                 id="layer>L"),
    pytest.param(None, {"x": [0]}, "layer index='x' must be an int", id="str-layer"),
    pytest.param(None, {0: 1}, r"heads\[0\]=1 must be a list of head indices", id="not-list"),
    pytest.param(None, {0: [0], "0": [1]}, "layer 0 is listed twice", id="layer-twice"),
    pytest.param(None, [[0], [1]], "2 per-layer lists but the model has 3 layers",
                 id="short-lists"),
    pytest.param(None, [0, 1, 2], "must be a dict", id="flat-list"),
    pytest.param(None, "0", "must be a dict", id="string"),
]


def ours(n_laplacian, heads):
    """The head kinds per layer of an encoder built from the spec."""
    model = tokengeo.create_model("encoder-tiny", n_layers=L_, n_heads=H_, vocab_size=20,
                                  n_laplacian=n_laplacian or 0, laplacian_heads=heads)
    return [b.attn.head_kinds for b in model.blocks]


def ltransformer(n_laplacian, heads):
    model = tokengeo.create_model("ltransformer-tiny", n_layers=L_, n_heads=H_,
                                  vocab_size=20, n_laplacian=n_laplacian or 0,
                                  laplacian_heads=heads)
    return [b.attn.head_kinds for b in model.blocks]


def hugging_face(n_laplacian, heads):
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    config = transformers.BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=L_,
                                     num_attention_heads=H_, intermediate_size=16,
                                     max_position_embeddings=8)
    model = transformers.BertModel(config)
    if n_laplacian is None and heads is None:
        n_laplacian = 0  # laplacianize wants one of the two
    tokengeo.laplacianize(model, n_laplacian=n_laplacian, heads=heads)
    chosen = tokengeo.models.hf.laplacian_heads(model)
    return [tuple(LAPLACIAN if h in chosen.get(layer, ()) else ATTENTION for h in range(H_))
            for layer in range(L_)]


def spec(n_laplacian, heads):
    return HeadSpec.parse(L_, H_, n_laplacian=n_laplacian, heads=heads).kinds()


FAMILIES = [ours, ltransformer, hugging_face]


def kinds_of(choice: dict[int, list[int]]) -> list[tuple[str, ...]]:
    return [tuple(LAPLACIAN if h in choice.get(layer, ()) else ATTENTION for h in range(H_))
            for layer in range(L_)]


@pytest.mark.parametrize("n_laplacian, heads, expected", VALID)
def test_valid_specs_parse_to_the_chosen_heads(n_laplacian, heads, expected):
    spec = HeadSpec.parse(L_, H_, n_laplacian=n_laplacian, heads=heads)
    assert spec.choice() == expected
    assert spec.kinds() == kinds_of(expected)
    assert spec.n_chosen == sum(map(len, expected.values()))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n_laplacian, heads, expected", VALID)
def test_every_family_builds_the_heads_of_the_spec(family, n_laplacian, heads, expected):
    assert family(n_laplacian, heads) == kinds_of(expected)


@pytest.mark.parametrize("family", [spec, *FAMILIES], ids=lambda f: f.__name__)
@pytest.mark.parametrize("n_laplacian, heads, message", INVALID)
def test_invalid_specs_raise_the_same_message_everywhere(family, n_laplacian, heads, message):
    with pytest.raises(ConfigError, match=message):
        family(n_laplacian, heads)


def test_a_float_k_is_refused_by_every_family():
    """The config's type check words it "whole number", the spec "int": both refuse."""
    for family in (spec, *FAMILIES):
        with pytest.raises(ConfigError, match=r"n_laplacian=1\.5 must be a"):
            family(1.5, None)


def test_kind_and_mixed_init_are_checked_once():
    spec = HeadSpec.parse(2, 4, n_laplacian=1, kind=MIXED, mixed_init=ATTENTION)
    assert spec.layer_kinds(1) == (ATTENTION, ATTENTION, ATTENTION, MIXED)
    with pytest.raises(ConfigError, match="head_kind='mix' is not valid"):
        HeadSpec.parse(2, 4, n_laplacian=1, kind="mix")
    with pytest.raises(ConfigError, match="mixed_init='x' is not valid"):
        HeadSpec.parse(2, 4, n_laplacian=1, mixed_init="x")


def test_coefficients_and_kinds_round_trip():
    for kind, (a, b) in KIND_COEFFICIENTS.items():
        assert kind_of(a, b) == kind
    assert kind_of(0.5, -0.5) == MIXED
    assert HeadRuns.of((ATTENTION, LAPLACIAN, LAPLACIAN, MIXED)).runs == (
        (0, 1, ATTENTION), (1, 3, LAPLACIAN), (3, 4, MIXED))


# ---- every fast a·V + b·P V against the reference ---------------------------------------

KINDS = (LAPLACIAN, ATTENTION, MIXED, LAPLACIAN, MIXED, ATTENTION)


def coefficients(kinds, dtype=torch.float64):
    g = torch.Generator().manual_seed(3)
    ab = [KIND_COEFFICIENTS.get(k) or tuple(torch.randn(2, generator=g).tolist())
          for k in kinds]
    a, b = (torch.tensor(c, dtype=dtype) for c in zip(*ab, strict=True))
    return a, b


def test_head_kinds_combine_equals_the_reference():
    heads = HeadMixer(len(KINDS), KINDS).double()
    a, b = coefficients(KINDS)
    with torch.no_grad():
        heads.mix_coef.copy_(torch.stack([a, b], 1)[heads.mixed_index])
    v, pv = (torch.randn(2, 5, len(KINDS), 3, dtype=torch.float64, requires_grad=True)
             for _ in range(2))
    got, want = heads.combine(v, pv), mix_heads(v, pv, a, b)
    assert torch.allclose(got, want, atol=1e-14)
    g = torch.randn_like(got)
    assert all(torch.allclose(x, y, atol=1e-14) for x, y in zip(
        torch.autograd.grad(got, (v, pv), g), torch.autograd.grad(want, (v, pv), g),
        strict=True))


@pytest.mark.parametrize("kernel", ["in_place", "compose", "compose-runs"])
@pytest.mark.parametrize("coef_grad", [False, True])
def test_laplacian_attention_equals_the_reference(kernel, coef_grad):
    q, k, v = (torch.randn(2, len(KINDS), 7, 4, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    a, b = (c.requires_grad_(coef_grad) for c in coefficients(KINDS))
    if kernel == "compose-runs":
        z = compose(q, k, v, a, b, is_causal=True, runs=HeadRuns.of(KINDS))
    else:
        z = laplacian_attention(q, k, v, a, b, is_causal=True, kernel=kernel,
                                head_kinds=KINDS)
    ref = attention_reference(q, k, v, a, b, is_causal=True)[0].transpose(1, 2)
    assert torch.allclose(z, ref, atol=1e-12)
    inputs = (q, k, v, a, b) if coef_grad else (q, k, v)
    g = torch.randn_like(z)
    for x, y in zip(torch.autograd.grad(z, inputs, g), torch.autograd.grad(ref, inputs, g),
                    strict=True):
        assert torch.allclose(x, y, atol=1e-10)


def test_hf_swap_equals_the_reference():
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    from tokengeo.models import hf
    from tokengeo.models.hf.families import ungroup

    config = transformers.LlamaConfig(hidden_size=24, num_attention_heads=6,
                                      num_key_value_heads=2, head_dim=4, num_hidden_layers=1,
                                      intermediate_size=32, vocab_size=50)
    site = hf.attention_sites(transformers.LlamaForCausalLM(config))[0]
    shape = site.shape
    z = torch.randn(2, 5, shape.n_heads * shape.head_dim, dtype=torch.float64)
    value = torch.randn(2, 5, shape.n_kv_heads * shape.head_dim, dtype=torch.float64)
    v = ungroup(value.unflatten(-1, (shape.n_kv_heads, shape.head_dim)), shape.groups)
    chosen = [1, 2, 5]
    kinds = [LAPLACIAN if h in chosen else ATTENTION for h in range(shape.n_heads)]
    a, b = coefficients(kinds)
    want = mix_heads(v, z.unflatten(-1, (shape.n_heads, shape.head_dim)), a, b).flatten(-2)
    edited = z.clone()
    hf.LaplacianSwap(site, chosen).subtract_in_place(edited, value)
    assert torch.allclose(edited, want, atol=1e-14)


def test_multi_head_attention_equals_the_readable_reference_layer():
    from tokengeo.models.config import TransformerConfig
    from tokengeo.nn.attention import MultiHeadAttention
    from tokengeo.nn.reference import self_attention_reference

    kinds = (LAPLACIAN, ATTENTION, MIXED, LAPLACIAN)
    cfg = TransformerConfig(d_model=16, n_heads=4, bias=False)
    attn = MultiHeadAttention(cfg, kinds, causal=True).double()
    with torch.no_grad():
        attn.mix_coef.copy_(torch.tensor([[0.3, -0.6]]))
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    a, b = attn.head_coefficients()
    want = self_attention_reference(x, attn.qkv.weight, attn.proj.weight, 4, a, b,
                                    is_causal=True)
    assert torch.allclose(attn(x), want, atol=1e-12)
