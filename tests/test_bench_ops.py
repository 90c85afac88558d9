"""The benchmark's three operators compute the same thing (a benchmark of wrong code is moot)."""

import torch

from tokengeo.bench.laplacian import fused_laplacian_op, naive_laplacian_op, standard_op
from tokengeo.bench.measure import interleaved_medians


def test_fused_and_naive_laplacian_agree_and_complement_attention():
    q, k, v = (torch.randn(2, 17, 3, 8, dtype=torch.float64) for _ in range(3))
    fused, naive = fused_laplacian_op(q, k, v), naive_laplacian_op(q, k, v)
    assert torch.allclose(fused, naive, atol=1e-12)
    assert torch.allclose(standard_op(q, k, v) + fused, v.reshape(2, 17, 24), atol=1e-12)


def test_interleaved_medians_calls_each_function():
    calls = {"a": 0, "b": 0}

    def make(name):
        def f():
            calls[name] += 1
        return f

    t = interleaved_medians({"a": make("a"), "b": make("b")}, repeats=3, warmup=1)
    assert set(t) == {"a", "b"} and all(v >= 0 for v in t.values())
    assert calls == {"a": 4, "b": 4}
