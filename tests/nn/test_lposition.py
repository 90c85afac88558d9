"""The slice-aware positional code of a fixed α is computed once per length, device and
dtype; the cached code equals a fresh one, and a learnable α is never cached."""

import torch

from tokengeo.nn.lposition import ALPHAS, SlicePositionalEncoding


def test_cached_code_equals_fresh_code_and_is_reused():
    for alpha in ALPHAS:
        enc = SlicePositionalEncoding(4, 16, alpha)
        first = enc(12)
        torch.testing.assert_close(first, enc._code(12), rtol=0, atol=0)
        again = enc(12)
        assert (again is first) == (alpha != "learnable")
        assert enc(7).shape == (4, 1, 7, 16)  # another length: recomputed
        torch.testing.assert_close(enc(7), enc._code(7), rtol=0, atol=0)


def test_cache_follows_dtype_and_skips_inference_mode():
    enc = SlicePositionalEncoding(2, 8, "linear")
    assert enc(5).dtype == torch.float32
    enc = enc.double()
    assert enc(5).dtype == torch.float64
    fresh = SlicePositionalEncoding(2, 8, "linear")
    with torch.inference_mode():
        fresh(5)
    assert "_cached_code" not in fresh.__dict__
    x = torch.zeros(2, 1, 5, 8, requires_grad=True)
    (x + fresh(5)).sum().backward()  # a code made outside inference mode enters autograd
    assert x.grad is not None


def test_learnable_alpha_still_gets_gradients():
    enc = SlicePositionalEncoding(3, 8, "learnable")
    for _ in range(2):
        enc.zero_grad()
        enc(6).sum().backward()  # (sin² + cos² would be constant in α)
        assert enc.log_alpha.grad is not None and enc.log_alpha.grad.abs().sum() > 0
