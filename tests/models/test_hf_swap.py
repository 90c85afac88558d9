"""The fast Laplacian swap of ``laplacianize``: head blocks, in-place edits, the
value tap that replaced the value projection's forward hook, and per-step op counts."""

from __future__ import annotations

import collections
import copy
import itertools

import pytest
import torch

import tokengeo

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
hf = pytest.importorskip("tokengeo.models.hf")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


def tiny_llama(layers: int = 2):
    """H=6 query heads reading Hkv=2 KV heads (groups of 3), head width 4."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=24, num_attention_heads=6, num_key_value_heads=2, head_dim=4,
        num_hidden_layers=layers, intermediate_size=32, vocab_size=50,
        attn_implementation="sdpa",
    )
    return transformers.LlamaForCausalLM(config).eval()


def tiny_gpt2():
    """Fused c_attn: V is a non-contiguous slice of the projection's output."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=4,
                                     n_positions=16, attn_implementation="sdpa")
    return transformers.GPT2LMHeadModel(config).eval()


IDS = torch.randint(1, 50, (2, 6), generator=torch.Generator().manual_seed(1))


def logits(model, ids=IDS):
    with torch.no_grad():
        return model(input_ids=ids).logits


def expand(blocks) -> list[tuple[int, int]]:
    """(query head, KV head) pairs a list of head blocks subtracts."""
    return [(b.head + i * b.r + j, b.kv + i) for b in blocks for i in range(b.n)
            for j in range(b.r)]


# --- head blocks -----------------------------------------------------------------------


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_head_blocks_cover_exactly_the_chosen_heads_and_their_kv_heads(groups):
    for k in range(1, 7):
        for heads in itertools.combinations(range(6), k):
            blocks = hf.head_blocks(list(heads)[::-1], groups)
            assert expand(blocks) == [(h, h // groups) for h in heads], (heads, groups)


@pytest.mark.parametrize("n_heads, groups, k, n_blocks", [
    (9, 3, 3, 1),  # SmolLM2: the last 3 of 9 read KV head 2
    (9, 3, 2, 1), (9, 3, 6, 1), (9, 3, 4, 2), (12, 1, 3, 1), (8, 4, 8, 1), (8, 2, 3, 2),
])
def test_last_k_heads_take_few_blocks(n_heads, groups, k, n_blocks):
    assert len(hf.head_blocks(range(n_heads - k, n_heads), groups)) == n_blocks


# --- the swap itself ---------------------------------------------------------------------


@pytest.mark.parametrize("build", [tiny_llama, tiny_gpt2])
def test_in_place_subtraction_equals_the_index_reference(build):
    """Views + one broadcast sub give bit for bit the index_select/index_copy swap."""
    site = hf.attention_sites(build())[0]
    shape = site.shape
    gen = torch.Generator().manual_seed(2)
    fused = torch.randn(2, 5, 3 * shape.n_kv_heads * shape.head_dim, generator=gen)
    value = fused[..., -shape.n_kv_heads * shape.head_dim:]  # (B, T, Hkv*Dh), non-contiguous
    for k in range(1, shape.n_heads + 1):
        for heads in itertools.combinations(range(shape.n_heads), k):
            swap = hf.LaplacianSwap(site, list(heads))
            z = torch.randn(2, 5, shape.n_heads * shape.head_dim, generator=gen)
            edited = z.clone()
            swap.subtract_in_place(edited, value)
            assert torch.equal(edited, swap._swapped(z, value)), heads


def installed_swap(model, layer: int = 0):
    out_proj = hf.attention_sites(model)[layer].out_proj
    return out_proj.__dict__["_tokengeo_swap"], out_proj


def test_no_grad_edits_z_in_place_and_autograd_returns_a_new_tensor():
    model = tokengeo.laplacianize(tiny_llama(), n_laplacian=2)
    swap, out_proj = installed_swap(model)
    gen = torch.Generator().manual_seed(3)
    value = torch.randn(2, 5, 8, generator=gen)  # (B, T, Hkv*Dh)
    z = torch.randn(2, 5, 24, generator=gen)  # (B, T, H*Dh)
    want = swap._swapped(z, value)
    edited = z.clone()
    with torch.no_grad():
        swap._value = value
        (out,) = swap.swap_heads(out_proj, (edited,))
    assert out is edited  # edited in place
    assert torch.equal(edited, want)
    wide = torch.randn(2, 5, 48, generator=gen)[..., ::2]  # a non-contiguous z: copied
    before = wide.clone()
    with torch.no_grad():
        swap._value = value
        (out,) = swap.swap_heads(out_proj, (wide,))
    assert torch.equal(wide, before) and torch.equal(out, swap._swapped(before, value))
    leaf = z.clone().requires_grad_()
    swap._value = value
    (out,) = swap.swap_heads(out_proj, (leaf,))  # autograd: out of place
    assert torch.equal(leaf.detach(), z) and torch.equal(out, want)
    assert out.grad_fn is not None


def test_no_grad_and_autograd_forwards_agree_and_gradients_reach_v():
    model = tokengeo.laplacianize(tiny_llama(), n_laplacian=2)
    out = model(input_ids=IDS).logits
    torch.testing.assert_close(logits(model), out.detach(), rtol=0, atol=1e-6)
    out.sum().backward()
    for site in hf.attention_sites(model):
        assert site.value_module.weight.grad.abs().sum() > 0


def test_every_pre_hook_of_the_output_projection_sees_the_swapped_z():
    """Registered before or after laplacianize: the swap runs before all of them."""
    model = tiny_llama()
    site = hf.attention_sites(model)[0]
    seen = []

    def grab(module, args):
        seen.append(args[0].clone())

    early = site.out_proj.register_forward_pre_hook(grab)
    plain = logits(model)
    tokengeo.laplacianize(model, n_laplacian=2)
    late = site.out_proj.register_forward_pre_hook(grab)
    patched = logits(model)
    early.remove()
    late.remove()
    plain_z, early_z, late_z = seen
    assert torch.equal(early_z, late_z)
    assert torch.equal(early_z[..., :16], plain_z[..., :16])  # heads 0-3: P V
    assert not torch.equal(early_z[..., 16:], plain_z[..., 16:])  # heads 4, 5: V - P V
    assert not torch.equal(patched, plain)


# --- the value tap ----------------------------------------------------------------------


def test_no_hooks_are_installed_and_unpatch_restores_forward_and_class():
    model = tiny_llama()
    plain = logits(model)
    tokengeo.laplacianize(model, n_laplacian=2)
    for site in hf.attention_sites(model):
        assert not site.value_module._forward_hooks  # the fast nn.Module.__call__ path
        assert type(site.value_module).__name__ == "LaplacianLinear"  # taps after hooks
        assert "forward" not in vars(site.value_module)
        assert not site.out_proj._forward_pre_hooks
        assert isinstance(site.out_proj, torch.nn.Linear)
        assert type(site.out_proj).__name__ == "LaplacianLinear"
    hf.unlaplacianize(model)
    for site in hf.attention_sites(model):
        assert type(site.value_module) is torch.nn.Linear
        assert "_tokengeo_value_tap" not in vars(site.value_module)
        assert type(site.out_proj) is torch.nn.Linear
        assert "_tokengeo_swap" not in vars(site.out_proj)
    assert torch.equal(logits(model), plain)


def test_forward_wrappers_before_and_after_the_patch_keep_working():
    """Like accelerate, which wraps module.forward: ours chains to it and unwinds cleanly."""
    model = tiny_llama()
    plain = logits(model)
    v_proj = hf.attention_sites(model)[0].value_module
    calls = collections.Counter()

    def wrap(name):
        inner = v_proj.forward

        def forward(*args, **kwargs):
            calls[name] += 1
            return inner(*args, **kwargs)
        v_proj.forward = forward
        return forward

    before = wrap("before")
    tokengeo.laplacianize(model, n_laplacian=2)
    patched = logits(model)
    after = wrap("after")
    assert torch.equal(logits(model), patched)
    hf.unlaplacianize(model)  # not outermost any more: becomes a pass-through
    assert vars(v_proj)["forward"] is after
    assert torch.equal(logits(model), plain)
    tokengeo.laplacianize(model, n_laplacian=2)
    hf.unlaplacianize(model)  # outermost: restores `after` exactly
    assert vars(v_proj)["forward"] is after
    assert torch.equal(logits(model), plain)
    assert calls["before"] == calls["after"] + 1 == 4
    assert before is not after


def test_deepcopy_of_a_patched_model_is_patched_on_its_own_modules():
    model = tokengeo.laplacianize(tiny_llama(), n_laplacian=2)
    patched = logits(model)
    twin = copy.deepcopy(model)
    assert torch.equal(logits(twin), patched)
    hf.unlaplacianize(twin)
    assert torch.equal(logits(model), patched)  # the original keeps its patch
    assert not torch.equal(logits(twin), patched)
    assert torch.equal(logits(twin), logits(hf.unlaplacianize(model)))


@pytest.mark.parametrize("make, kind", [(tiny_llama, "laplacian"), (tiny_gpt2, "laplacian"),
                                        (tiny_llama, "mixed")])
def test_torch_save_of_a_patched_model_loads_patched(tmp_path, make, kind):
    """torch.save pickles the whole model; the loaded one computes the same logits, keeps
    its patch (taps, swapping class) on its own modules and can be unpatched."""
    model = tokengeo.laplacianize(make(), n_laplacian=2, kind=kind)
    patched = logits(model)
    torch.save(model, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    assert torch.equal(logits(loaded), patched)
    assert hf.laplacian_heads(loaded) == hf.laplacian_heads(model)
    hf.unlaplacianize(loaded)
    assert torch.equal(logits(loaded), logits(hf.unlaplacianize(model)))
    assert not torch.equal(logits(loaded), patched)


# --- cost of a decoding step ------------------------------------------------------------


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def decode_step_ops(model) -> collections.Counter:
    """ATen ops of one cached decoding step (batch 1, one new token)."""
    cache = transformers.DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=IDS[:1], cache=cache)
        with _CountOps() as counter:
            model(input_ids=IDS[:1, -1:], cache=cache)
    return counter.ops


def test_a_decoding_step_adds_one_in_place_sub_per_layer():
    """Last 3 of 6 heads = one KV head: 2 slices, 2 views, 1 sub per layer; no index ops,
    no copy of z (the old swap: 8 ops per layer, 4 of them allocating), and no module on
    the slow path of nn.Module.__call__ (the old patch: 2 hooked modules per layer)."""
    model = tiny_llama(layers=4)
    plain = decode_step_ops(model)
    tokengeo.laplacianize(model, n_laplacian=3)
    extra = decode_step_ops(model) - plain
    assert dict(extra) == {"slice": 8, "unflatten": 8, "sub": 4}
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
