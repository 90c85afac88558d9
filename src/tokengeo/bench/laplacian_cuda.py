"""The CUDA part of ``tokengeo bench laplacian --device cuda``: every kernel of the table.

Claim (Zhang & Papyan, arXiv 2602.09297; our promise): a Laplacian head costs what an
attention head costs. On a GPU, per dtype (bf16, fp32) and T, forward + backward of

* ``standard``      ``F.scaled_dot_product_attention`` (B = 8, H = 12, Dh = 64, causal);
* ``v_minus_sdpa``  ``V − SDPA`` in plain autograd (the floor of any Python kernel);
* ``KERNEL[heads]`` :func:`tokengeo.nn.kernels.laplacian_attention` with all heads
  Laplacian (``lap``), half (``half``) or mixed (``mixed``), for each kernel of the table;
* the same with the packed ``qkv`` a model passes (``packed``), where supported;

timed with CUDA events (:func:`tokengeo.bench.measure.cuda_median_ms`), and the training
step ratio k / k = 0 of the config's models under bf16 autocast per kernel (``auto``,
``in_place``, ``compose``). Every ratio is taken in one process.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from tokengeo.bench.measure import cuda_median_ms, cuda_peak_mb, cuda_seconds

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _coefficients(kind: str, H: int, device) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """(a, b, head kinds) for all-Laplacian, half-Laplacian or mixed heads."""
    if kind == "lap":
        kinds = ("laplacian",) * H
    elif kind == "half":
        kinds = ("attention",) * (H - H // 2) + ("laplacian",) * (H // 2)
    else:
        kinds = ("mixed",) * H
    table = {"attention": (0.0, 1.0), "laplacian": (1.0, -1.0), "mixed": (0.7, -0.4)}
    ab = torch.tensor([table[k] for k in kinds], device=device)
    a = ab[:, 0].clone().requires_grad_(kind == "mixed")
    b = ab[:, 1].clone().requires_grad_(kind == "mixed")
    return a, b, kinds


KERNELS = ("auto", "in_place", "compose")
"""The kernel names timed: ``auto`` and every Laplacian kernel of the table."""


def operator_case(dtype: str, T: int, *, B=8, H=12, Dh=64, repeats=20, packed=False) -> dict:
    """fwd + bwd of every operator at one dtype and length; times and peaks."""
    from tokengeo.nn.kernels import laplacian_attention

    dev, dt = torch.device("cuda"), DTYPES[dtype]
    torch.manual_seed(0)
    qkv = torch.randn(B, T, 3, H, Dh, device=dev, dtype=dt, requires_grad=True)
    grad = torch.randn(B, T, H, Dh, device=dev, dtype=dt)

    def heads():  # q, k, v (B, H, T, Dh) views of qkv, as a model's projection gives them
        return tuple(x.transpose(1, 2) for x in qkv.unbind(2))

    def run(op):
        def step():
            qkv.grad = None
            op().backward(grad)
        return step

    def standard():
        return F.scaled_dot_product_attention(*heads(), is_causal=True).transpose(1, 2)

    def v_minus_sdpa():
        q, k, v = heads()
        return (v - F.scaled_dot_product_attention(q, k, v, is_causal=True)).transpose(1, 2)

    fns = {"standard": run(standard), "v_minus_sdpa": run(v_minus_sdpa)}
    errors = {}
    for kind in ("lap", "half", "mixed"):
        a, b, kinds = _coefficients(kind, H, dev)
        for kernel in KERNELS:
            extra = {"kernel": kernel}
            if packed:
                extra["qkv"] = qkv

            def op(a=a, b=b, kinds=kinds, extra=extra):
                return laplacian_attention(*heads(), a, b, is_causal=True, head_kinds=kinds,
                                           **extra)
            name = f"{kernel}[{kind}]"
            try:
                run(op)()  # fails here, once, if the kernel cannot run this case
                fns[name] = run(op)
            except Exception as e:  # recorded in the JSON: a diagnostic table, not a fallback
                errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
    ms = {name: cuda_median_ms(fn, repeats) for name, fn in fns.items()}
    mb = {name: cuda_peak_mb(fn) for name, fn in fns.items()}
    return {
        "dtype": dtype, "T": T, "B": B, "H": H, "Dh": Dh, "packed": packed,
        "median_ms": ms, "peak_mb": mb,
        "time_over_standard": {n: ms[n] / ms["standard"] for n in ms},
        "peak_over_standard": {n: mb[n] / mb["standard"] for n in mb},
        "errors": errors,
    }


def train_step_case(model_name: str, *, repeats=20, batch=None, kernel="auto",
                    compile_mode: str | None = None) -> dict:
    """Median step time (bf16 autocast, AdamW) at k = 0, H/2, H and the ratios to k = 0,
    with the model's ``kernel`` (``auto``: what a user gets; ``in_place``, ``compose``:
    forced); ``compile_mode``: the model's forward
    through ``torch.compile`` in that mode (``"default"``, ``"reduce-overhead"``)."""
    from tokengeo.models.registry import create_model

    result = _train_step_case(create_model, model_name, torch.device("cuda"), repeats, batch,
                              kernel, compile_mode)
    return {**result, "compile_mode": compile_mode}


def _train_step_case(create_model, model_name, dev, repeats, batch, kernel,
                     compile_mode=None) -> dict:

    def step_fn(k):
        torch.manual_seed(0)
        model = create_model(model_name, n_laplacian=k, kernel=kernel, device="cuda")
        forward = model if compile_mode is None else torch.compile(model, mode=compile_mode)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        cfg = model.config
        g = torch.Generator().manual_seed(0)
        if hasattr(cfg, "vocab_size") and hasattr(cfg, "block_size"):
            B = batch or 32
            idx = torch.randint(0, cfg.vocab_size, (B, cfg.block_size + 1), generator=g).to(dev)
            x, y = idx[:, :-1], idx[:, 1:]
        else:
            B = batch or 256
            x = torch.randn(B, cfg.in_chans, cfg.image_size, cfg.image_size, generator=g).to(dev)
            y = torch.randint(0, cfg.num_classes, (B,), generator=g).to(dev)

        def step():
            if compile_mode == "reduce-overhead":  # CUDA graphs: a new step, new outputs
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = forward(x)
                loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step, cfg.n_heads

    _, H = step_fn(0)
    ks = sorted({0, H // 2, H})
    fns = {f"k={k}": step_fn(k)[0] for k in ks}
    for fn in fns.values():
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(repeats):  # interleaved, so drift hits every k alike
        for n, fn in fns.items():
            times[n].append(1e3 * cuda_seconds(fn))
    ms = {n: statistics.median(t) for n, t in times.items()}
    return {"model": model_name, "n_heads": H, "kernel": kernel, "median_ms": ms,
            "ratio_vs_k0": {n: ms[n] / ms["k=0"] for n in ms}}


def kernel_figures(cfg, log) -> dict:
    """For a :class:`~tokengeo.bench.laplacian.LaplacianBenchConfig` on CUDA: the operator
    table (bf16 and fp32 at each T; packed at fp32 and the first T), train steps per kernel,
    and compiled train steps (``cfg.compile``: CUDA graphs)."""
    ops, seq_lens = [], cfg.seq_lens
    shape = {"B": cfg.batch, "H": cfg.n_heads, "Dh": cfg.head_dim, "repeats": cfg.op_repeats}
    for dtype in ("bf16", "fp32"):
        for T in seq_lens:
            log(f"operator, {dtype}, T={T}")
            ops.append(operator_case(dtype, T, **shape))
            if dtype == "fp32" or T == seq_lens[0]:
                ops.append(operator_case(dtype, T, packed=True, **shape))
    train = []
    for m in cfg.models:
        for kernel in KERNELS:
            log(f"{m} training step, kernel={kernel}")
            try:
                train.append(train_step_case(m, repeats=cfg.train_repeats, kernel=kernel))
            except Exception as e:  # recorded: a diagnostic table
                train.append({"model": m, "kernel": kernel,
                              "error": f"{type(e).__name__}: {str(e)[:300]}"})
    figures = {"kernels": list(KERNELS), "operator": ops, "train_step": train}
    if cfg.compile:
        log("compiled training steps (reduce-overhead)")
        figures["compiled_train_step"] = compiled_train_steps(cfg.models, cfg.train_repeats)
    return figures


def compiled_train_steps(models=("gpt-small", "vit-small"), repeats=15,
                         modes=("reduce-overhead",)) -> list[dict]:
    """Train steps with the model compiled (``kernel="auto"``: under compile, the
    composition inside selective checkpointing, :mod:`tokengeo.nn.kernels.checkpointed`),
    per mode;
    each case records its error instead of stopping the others."""
    cases = []
    for mode in modes:
        for m in models:
            try:
                cases.append(train_step_case(m, repeats=repeats, compile_mode=mode))
            except Exception as e:  # recorded: a diagnostic table
                cases.append({"model": m, "compile_mode": mode,
                              "error": f"{type(e).__name__}: {str(e)[:300]}"})
    return cases

