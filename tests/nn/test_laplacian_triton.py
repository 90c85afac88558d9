"""The fused Triton kernel against a float64 reference: values and gradients of q, k, v, a, b.

Without a GPU the kernels run in Triton's interpreter. ``TRITON_INTERPRET=1`` must be set
before a process first imports triton (triton wraps its own library for one mode at
import), so the interpreted cases run in one child process (this file run as a script, see
``__main__``) started with the variable set; each test below checks its case's errors. The
interpreter is slow, so the cases are small, with short tiles (16 and 32) and T not a
multiple of them. Its bfloat16 ``dot`` is wrong (Triton 3.9's interpreter: a 16 × 16 bf16
product off by ~1e10), so bfloat16 is checked on CUDA only. Tests marked ``cuda`` compile
the kernels and compare them at T = 1024 with the float64 reference and with the SDPA
composition in the same dtype.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tokengeo.errors import ConfigError, MissingDependencyError
from tokengeo.nn.kernels import triton as lt

pytestmark = pytest.mark.usefixtures("one_thread")


def reference(q, k, v, a, b, causal=False, scale=None):
    """float64 z = a V + b softmax(scale q kᵀ [+ mask]) V as (B, T, H, Dh), GQA by repeat."""
    q, k, v, a, b = (t.double() for t in (q, k, v, a, b))
    H, T, D = q.shape[1], q.shape[2], q.shape[3]
    group = H // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)  # (B, H, T, Dh)
    s = (q @ k.transpose(-1, -2)) * (D ** -0.5 if scale is None else scale)
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))
    z = a.view(1, -1, 1, 1) * v + b.view(1, -1, 1, 1) * (s.softmax(-1) @ v)
    return z.transpose(1, 2)  # (B, T, H, Dh)


COEFS = {  # (a, b) per head for H = 4
    "attention": ([0.0] * 4, [1.0] * 4),
    "laplacian": ([1.0] * 4, [-1.0] * 4),
    "mixed": ([0.0, 1.0, 0.3, 0.999], [1.0, -1.0, 0.7, 1e-3]),  # one head with b ≈ 0
}


def _inputs(B, H, Hkv, T, D, kind, dtype, device="cpu"):
    q = torch.randn(B, H, T, D, device=device)
    k, v = (torch.randn(B, Hkv, T, D, device=device) for _ in range(2))
    a, b = (torch.tensor(c, device=device) for c in COEFS[kind])
    return [t.to(dtype) for t in (q, k, v)] + [a, b]


def _rel(got, want) -> float:
    return ((got.double() - want).norm() / want.norm().clamp_min(1e-12)).item()


def _errors(fn, inputs, causal, dz, scale=None):
    """Relative errors of z and of each input's gradient against the float64 reference."""
    ours = [t.detach().clone().requires_grad_() for t in inputs]
    ref = [t.detach().double().requires_grad_() for t in inputs]
    z = fn(*ours, causal, scale)
    z_ref = reference(*ref, causal=causal, scale=scale)
    assert z.shape == z_ref.shape and z.is_contiguous() and z.dtype == inputs[0].dtype
    z.backward(dz.to(z.dtype))
    z_ref.backward(dz)
    pairs = [("z", z, z_ref)] + [(n, o.grad, r.grad) for n, o, r in zip("qkvab", ours, ref, strict=True)]
    return {name: _rel(got, want) for name, got, want in pairs}


def _kernel(q, k, v, a, b, causal, scale=None):
    return lt.laplacian_attention_triton(q, k, v, a, b, is_causal=causal, scale=scale)


# ------------------------------------------------------------------ interpreted cases

# name -> (B, H, Hkv, T, Dh, head kind, dtype, causal, scale)
CASES = {
    **{f"{kind}-{'causal' if c else 'full'}": (2, 4, 4, 45, 16, kind, "float32", c, None)
       for kind in COEFS for c in (False, True)},
    "gqa-full": (1, 4, 2, 37, 32, "mixed", "float32", False, None),
    "gqa-causal": (1, 4, 2, 37, 32, "mixed", "float32", True, None),
    "float16-scale": (1, 4, 4, 33, 16, "mixed", "float16", True, 0.3),
    "one-tile": (1, 4, 1, 5, 16, "laplacian", "float32", True, None),
}
RTOL = {"float32": 1e-5, "float16": 5e-3}


def _run_case(B, H, Hkv, T, D, kind, dtype, causal, scale):
    inputs = _inputs(B, H, Hkv, T, D, kind, getattr(torch, dtype))
    dz = torch.randn(B, T, H, D, dtype=torch.float64)
    return _errors(_kernel, inputs, causal, dz, scale)


def _run_packed():
    """q, k, v as strided views of one (B, T, 3, H, Dh) projection, as the models pass them."""
    B, T, H, D = 1, 20, 4, 16
    qkv = torch.randn(B, T, 3, H, D, requires_grad=True)
    a, b = (torch.tensor(c) for c in COEFS["mixed"])
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh) views
    z = _kernel(q, k, v, a, b, True)
    ref_in = qkv.detach().double().requires_grad_()
    z_ref = reference(*(t.transpose(1, 2) for t in ref_in.unbind(2)), a, b, causal=True)
    dz = torch.randn_like(z_ref)
    z.backward(dz.float())
    z_ref.backward(dz)
    return {"z": _rel(z, z_ref), "qkv": _rel(qkv.grad, ref_in.grad)}


def _run_fixed_coefficients():
    """Buffers (no grad) skip the coefficient partial sums; q still gets its gradient."""
    q, k, v, a, b = _inputs(1, 4, 4, 24, 16, "laplacian", torch.float32)
    q.requires_grad_()
    _kernel(q, k, v, a, b, False).square().sum().backward()
    qr = q.detach().double().requires_grad_()
    reference(qr, k, v, a, b).square().sum().backward()
    return {"q": _rel(q.grad, qr.grad), "coef_grad": a.grad is not None or b.grad is not None}


def _run_small_b_per_head():
    """float16, head 3 mixed with (a, b) = (0.999, 1e-3): each head's own gradient error.

    z − a V loses b P V to z's float16 rounding there; the kernel recomputes δ for such
    heads, so their dq, dk, dv stay as accurate as the other heads'."""
    q, k, v, a, b = _inputs(1, 4, 4, 40, 16, "mixed", torch.float16)
    ours = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    z = _kernel(*ours, a, b, True)
    z_ref = reference(*ref, a, b, causal=True)
    dz = torch.randn_like(z_ref)
    z.backward(dz.half())
    z_ref.backward(dz)
    return {f"{n}{h}": _rel(o.grad[:, h], r.grad[:, h])
            for n, o, r in zip("qkv", ours, ref, strict=True) for h in range(4)}


def _interpreter_probe() -> str | None:
    """None if Triton's interpreter runs a loop bounded by a program id here, else why not
    (Triton 3.6's interpreter calls int() on a 1-element array, which numpy >= 2.4 refuses)."""
    import triton
    import triton.language as tl

    def probe(X, N: tl.constexpr):
        acc = tl.zeros((N,), tl.float32)
        for _ in range(0, tl.program_id(0) * N + N, N):
            acc += 1.0
        tl.store(X + tl.arange(0, N), acc)

    out = torch.zeros(4)
    try:
        triton.jit(probe)[(1,)](out, N=4)
    except Exception as exc:  # noqa: BLE001 - any failure means the interpreter is unusable
        return f"Triton {triton.__version__}'s interpreter fails here ({exc!r:.120})"
    return None if out.tolist() == [1.0] * 4 else "Triton's interpreter gave a wrong probe"


def _worker() -> dict:
    """Everything run in the interpreter (in the child process), as JSON-able errors."""
    torch.set_num_threads(1)
    unusable = _interpreter_probe()
    if unusable:
        return {"unusable": unusable}
    out = {}
    for name, case in CASES.items():
        torch.manual_seed(0)
        out[name] = _run_case(*case)
    out["packed"] = _run_packed()
    out["fixed"] = _run_fixed_coefficients()
    torch.manual_seed(0)
    out["small_b"] = _run_small_b_per_head()
    return out


@pytest.fixture(scope="module")
def interpreted():
    """The child process's results (one process: the interpreter needs a fresh import)."""
    pytest.importorskip("triton", reason="Triton is not installed: pip install triton")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "unusable" in result:
        pytest.skip(result["unusable"])
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_interpreted_kernel_matches_float64_reference(interpreted, name):
    """z and the gradients of q, k, v, a, b: attention / Laplacian / mixed (one head with
    b = 1e-3) heads, causal or not, GQA, float16, a custom scale, T within one tile."""
    rtol = RTOL[CASES[name][6]]
    for what, err in interpreted[name].items():
        assert err < rtol, f"{name}: {what} relative error {err:.2e} >= {rtol}"


def test_interpreted_packed_qkv_views(interpreted):
    assert interpreted["packed"]["z"] < 1e-5 and interpreted["packed"]["qkv"] < 1e-5


def test_interpreted_fixed_coefficients_get_no_gradient(interpreted):
    assert not interpreted["fixed"]["coef_grad"] and interpreted["fixed"]["q"] < 1e-5


def test_interpreted_small_b_head_as_accurate_as_the_others(interpreted):
    errors = interpreted["small_b"]
    assert max(errors.values()) < 1e-2, errors


@pytest.fixture
def interpret(monkeypatch):
    """TRITON_INTERPRET=1 for input checks that fail before any kernel is built."""
    pytest.importorskip("triton", reason="Triton is not installed: pip install triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


# ------------------------------------------------------------------ errors


def _ok_inputs():
    return _inputs(1, 4, 4, 8, 16, "laplacian", torch.float32)


@pytest.mark.parametrize("change, match", [
    (lambda t: [t[0][..., :8]] + t[1:], "must be shaped|like q"),
    (lambda t: [t[0][..., :12], t[1][..., :12], t[2][..., :12]] + t[3:], "head size Dh=12"),
    (lambda t: [x.double() for x in t[:3]] + t[3:], "one dtype among"),
    (lambda t: [t[0], t[1].half(), t[2]] + t[3:], "one dtype among"),
    (lambda t: [t[0], t[1][:, :3], t[2][:, :3]] + t[3:], "multiple of k/v's 3 heads"),
    (lambda t: t[:3] + [t[3][:2], t[4]], r"shaped \(4,\)"),
    (lambda t: [t[0][0]] + t[1:], r"\(B, H, T, Dh\)"),
])
def test_unsupported_inputs_raise_config_error(interpret, change, match):
    with pytest.raises(ConfigError, match=match):
        lt.laplacian_attention_triton(*change(_ok_inputs()))


def test_cpu_tensors_without_interpreter_raise(monkeypatch):
    pytest.importorskip("triton", reason="Triton is not installed: pip install triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ConfigError, match="TRITON_INTERPRET=1"):
        lt.laplacian_attention_triton(*_ok_inputs())


def test_missing_triton_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` fail
    assert not lt.triton_available()
    with pytest.raises(MissingDependencyError, match="pip install triton"):
        lt.laplacian_attention_triton(*_ok_inputs())


def test_interpreter_mode_changed_after_import_is_a_clear_error(monkeypatch):
    """TRITON_INTERPRET flipped after this process imported triton: one ConfigError saying
    to set it before the first import (not Triton's own error from inside a kernel)."""
    pytest.importorskip("triton", reason="Triton is not installed: pip install triton")
    import triton.language as tl

    imported_interpreting = type(tl.zeros).__name__ == "InterpretedFunction"
    monkeypatch.setenv("TRITON_INTERPRET", "0" if imported_interpreting else "1")
    with pytest.raises(ConfigError, match="before the first `import triton`"):
        lt._kernels()


def test_tilings_are_validated():
    with pytest.raises(ConfigError, match="not a valid tiling"):
        lt.TileConfig(64, 128, 4, 128, 32, 4, 32, 128, 4, 3)  # key tile > query tile
    with pytest.raises(ConfigError, match="powers of two"):
        lt.TileConfig(128, 48, 4, 128, 32, 4, 32, 128, 4, 3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_benchmark_without_cuda_says_so_in_one_line(capsys):
    from tokengeo.bench.registry import script

    assert script("laplacian_triton", []) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a CUDA device" in err


# ------------------------------------------------------------------ CUDA (compiled)

CUDA_TOL = {torch.float32: 5e-3, torch.float16: 1e-2, torch.bfloat16: 3e-2}


def _sdpa_composition(q, k, v, a, b, causal, scale=None):
    """a V + b SDPA(q, k, v) in the inputs' dtype, as (B, T, H, Dh) (GQA by repeat)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    pv = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    a, b = a.to(q.dtype).view(1, -1, 1, 1), b.to(q.dtype).view(1, -1, 1, 1)
    # contiguous like the kernel's z: _errors checks the layout of every function it runs
    return (a * v + b * pv).transpose(1, 2).contiguous()


@pytest.fixture
def compiled(monkeypatch):
    pytest.importorskip("triton", reason="Triton is not installed: pip install triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


# Each case compiles its own kernels (dtype, causal, GQA group and T's divisibility by 16
# are specialisations), so the list is kept to what differs: ~30 compilations.
CUDA_CASES = [(dtype, causal, 1024, 4) for dtype in (torch.float32, torch.bfloat16,
                                                     torch.float16) for causal in (False, True)]
CUDA_CASES += [(torch.bfloat16, True, 1000, 2)]  # T not a multiple of the tiles, GQA


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, causal, T, Hkv", CUDA_CASES)
def test_cuda_matches_reference_and_sdpa(compiled, dtype, causal, T, Hkv):
    """Compiled kernels: within a dtype's tolerance of float64, and no worse than twice the
    error of torch's own SDPA composition in the same dtype (plus a floor)."""
    inputs = _inputs(2, 4, Hkv, T, 64, "mixed", dtype, device="cuda")
    dz = torch.randn(2, T, 4, 64, device="cuda", dtype=torch.float64)
    ours = _errors(_kernel, inputs, causal, dz)
    theirs = _errors(_sdpa_composition, inputs, causal, dz)
    for name, e in ours.items():
        assert math.isfinite(e) and e < CUDA_TOL[dtype], f"{name}: {e:.2e} ({theirs})"
        assert e <= 2 * theirs[name] + 1e-3, f"{name}: {e:.2e} vs sdpa {theirs[name]:.2e}"


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, D", [(torch.bfloat16, 16), (torch.bfloat16, 32),
                                      (torch.bfloat16, 128), (torch.float32, 128)])
def test_cuda_head_sizes(compiled, dtype, D):
    inputs = _inputs(1, 4, 4, 300, D, "laplacian", dtype, device="cuda")
    dz = torch.randn(1, 300, 4, D, device="cuda", dtype=torch.float64)
    errs = _errors(_kernel, inputs, True, dz)
    assert all(math.isfinite(e) and e < CUDA_TOL[dtype] for e in errs.values()), errs


@pytest.mark.cuda
def test_cuda_small_b_head_gradients(compiled):
    """bfloat16: the head with (a, b) = (0.999, 1e-3) takes the exact-δ pass; each head's
    dq, dk, dv within bfloat16's tolerance of float64 (≈0.4 without that pass)."""
    q, k, v, a, b = _inputs(2, 4, 4, 1024, 64, "mixed", torch.bfloat16, device="cuda")
    ours = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    z = _kernel(*ours, a, b, True)
    z_ref = reference(*ref, a, b, causal=True)
    dz = torch.randn_like(z_ref)
    z.backward(dz.to(z.dtype))
    z_ref.backward(dz)
    errors = {f"{n}{h}": _rel(o.grad[:, h], r.grad[:, h])
              for n, o, r in zip("qkv", ours, ref, strict=True) for h in range(4)}
    assert max(errors.values()) < CUDA_TOL[torch.bfloat16], errors


if __name__ == "__main__":  # the interpreted cases' child process (TRITON_INTERPRET=1)
    print(json.dumps(_worker()))
