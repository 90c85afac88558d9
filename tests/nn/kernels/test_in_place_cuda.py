"""The Laplacian kernels and laplacianize on a CUDA device, against float64 references.

Every test here is marked ``cuda``: skipped (with the reason) where no CUDA device exists;
``make gpu-check`` runs them. They cover each fused backend torch can pick (flash,
memory-efficient, cuDNN), both backwards (packed qkv and unpacked q, k, v), every head
kind, causal or not, fp32/bf16/fp16; that bf16/fp16 take the in_place kernel on a fused
backend; that its backward reads nothing back to the host; that the packed path's peak memory is standard attention's; and a laplacianized tiny
Llama with a dynamic and a static cache.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tokengeo.nn.heads import KIND_COEFFICIENTS, HeadRuns
from tokengeo.nn.kernels import Call, laplacian_attention, plan_kernel
from tokengeo.nn.kernels.sdpa_ops import Backend
from tokengeo.nn.reference import attention_reference

pytestmark = pytest.mark.cuda

LAYERS = {
    "attention": ("attention",) * 4,
    "laplacian": ("laplacian",) * 4,
    "half": ("attention", "attention", "laplacian", "laplacian"),
    "mixed": ("laplacian", "mixed", "attention", "mixed"),
}
# max |error| / max |reference| allowed, per dtype (values; gradients get 4x)
TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def coefficients(kinds, device="cuda"):
    ab = [KIND_COEFFICIENTS.get(k, (0.7, -0.3)) for k in kinds]
    a, b = (torch.tensor(c, dtype=torch.float32, device=device, requires_grad=True)
            for c in zip(*ab, strict=True))
    return a, b


def run_case(kinds, dtype, causal, packed, B=2, T=129, Dh=64, kernel="auto"):
    """(z, grads of qkv, a, b) on CUDA and the float64 CPU reference of both."""
    H = len(kinds)
    gen = torch.Generator().manual_seed(0)
    qkv64 = torch.randn(B, T, 3, H, Dh, generator=gen, dtype=torch.float64)
    g64 = torch.randn(B, T, H, Dh, generator=gen, dtype=torch.float64)
    qkv = qkv64.to("cuda", dtype).requires_grad_()
    a, b = coefficients(kinds)
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh)
    z = laplacian_attention(q, k, v, a, b, is_causal=causal, head_kinds=kinds, kernel=kernel,
                            qkv=qkv if packed else None)
    grads = torch.autograd.grad(z, (qkv, a, b), g64.to("cuda", dtype), allow_unused=True)

    ref_in = qkv64.clone().requires_grad_()
    ra, rb = (c.detach().cpu().double().requires_grad_() for c in (a, b))
    rq, rk, rv = (t.transpose(1, 2) for t in ref_in.unbind(2))
    ref = attention_reference(rq, rk, rv, ra, rb, is_causal=causal)[0].transpose(1, 2)
    ref_grads = torch.autograd.grad(ref, (ref_in, ra, rb), g64)
    return z, grads, ref, ref_grads


def close(got, want, tol):
    if got is None:
        return not want.abs().max() > 0
    err = (got.detach().double().cpu() - want).abs().max()
    return err <= tol * max(want.abs().max().item(), 1.0)


def is_in_place(z):
    return type(z.grad_fn).__name__ == "LaplacianSDPABackward"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16],
                         ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_in_place_kernel_matches_the_float64_reference(dtype, causal, packed, layer):
    z, grads, ref, ref_grads = run_case(LAYERS[layer], dtype, causal, packed)
    assert is_in_place(z), "a fused kernel exists for these inputs: in_place must run"
    assert z.shape == ref.shape and z.is_contiguous()
    assert close(z, ref, TOL[dtype])
    for got, want in zip(grads, ref_grads, strict=True):
        assert close(got, want, 4 * TOL[dtype])


@pytest.mark.parametrize("backend", ["FLASH_ATTENTION", "EFFICIENT_ATTENTION",
                                     "CUDNN_ATTENTION"])
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_each_backend_torch_can_pick(backend, packed):
    """Forced with sdpa_kernel, each fused backend runs the in_place kernel correctly (flash's
    integer outputs live on ctx, cuDNN's backward takes its own argument order)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, 4, 129, 64, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        plan = plan_kernel(Call(q=q, k=q, v=q, runs=HeadRuns.of(LAYERS["mixed"]),
                                is_causal=True))
        if plan.backend is None:
            pytest.skip(f"{backend} cannot run on this device for bf16 (torch says)")
        z, grads, ref, ref_grads = run_case(LAYERS["mixed"], torch.bfloat16, True, packed)
    assert is_in_place(z) and close(z, ref, TOL[torch.bfloat16])
    for got, want in zip(grads, ref_grads, strict=True):
        assert close(got, want, 4 * TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_takes_the_in_place_kernel_on_a_fused_backend(dtype):
    """Fixed heads with a packed qkv or separate q, k, v, learnt coefficients, mixed heads:
    ``auto`` takes in_place on a fused backend."""
    q = torch.randn(8, 12, 1024, 64, device="cuda", dtype=dtype)
    fused = (Backend.FLASH, Backend.EFFICIENT, Backend.CUDNN)
    lap = HeadRuns.of(("laplacian",) * 12)
    for call in (Call(q=q, k=q, v=q, runs=lap, is_causal=True, packed=True),
                 Call(q=q, k=q, v=q, runs=lap, is_causal=True),
                 Call(q=q, k=q, v=q, runs=lap, is_causal=True, coef_grad=True),
                 Call(q=q, k=q, v=q, runs=HeadRuns.of(LAYERS["mixed"] * 3), is_causal=True)):
        plan = plan_kernel(call)
        assert plan.kernel.name == "in_place" and plan.backend in fused


def test_composition_matches_the_reference_on_cuda():
    z, grads, ref, ref_grads = run_case(LAYERS["half"], torch.float32, True, False,
                                        kernel="compose")
    assert not is_in_place(z) and close(z, ref, TOL[torch.float32])
    for got, want in zip(grads, ref_grads, strict=True):
        assert close(got, want, 4 * TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_the_in_place_backward_reads_nothing_back_to_the_host(dtype, packed):
    qkv = torch.randn(2, 256, 3, 4, 64, device="cuda", dtype=dtype, requires_grad=True)
    a, b = coefficients(LAYERS["mixed"])
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
    z = laplacian_attention(q, k, v, a, b, is_causal=True, head_kinds=LAYERS["mixed"],
                            qkv=qkv if packed else None)
    g = torch.randn_like(z)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        torch.autograd.grad(z, (qkv, a, b), g)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def peak(fn) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kernel", ["auto", "in_place"])
def test_packed_path_peak_memory_is_standard_attentions(dtype, kernel):
    B, T, H, Dh = 4, 2048, 12, 64
    x = torch.randn(B, T, 3, H, Dh, device="cuda", dtype=dtype)
    g = torch.randn(B, T, H, Dh, device="cuda", dtype=dtype)
    ones = torch.ones(H, device="cuda")

    def step(laplacian):
        qkv = x.clone().requires_grad_()
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        if laplacian:
            z = laplacian_attention(q, k, v, ones, -ones, is_causal=True, qkv=qkv,
                                    head_kinds=("laplacian",) * H, kernel=kernel)
        else:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        z.backward(g)

    assert peak(lambda: step(True)) <= 1.02 * peak(lambda: step(False))


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_laplacianized_llama_on_cuda_equals_the_cpu(tmp_path, cache):
    pytest.importorskip("transformers", reason="needs the 'hf' extra")
    import transformers
    from helpers.tiny_llama import save_tiny_llama

    import tokengeo

    folder = save_tiny_llama(tmp_path / "llama")
    cpu = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa")
    gpu = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa")
    for model in (cpu, gpu):
        tokengeo.laplacianize(model, n_laplacian=2).eval()
    gpu.to("cuda")
    ids = torch.randint(1, cpu.config.vocab_size, (2, 12),
                        generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, got = cpu(input_ids=ids).logits, gpu(input_ids=ids.cuda()).logits.cpu()
        assert torch.allclose(got, want, atol=1e-4)
        options = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
        if cache == "static":
            options["cache_implementation"] = "static"
        assert torch.equal(gpu.generate(ids[:1].cuda(), **options).cpu(),
                           cpu.generate(ids[:1], **options))
