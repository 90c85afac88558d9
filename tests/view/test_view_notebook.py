"""``tokengeo.view.show``: the explorer inline in a notebook (``_repr_html_``), rendered in a
headless Chromium with no network; the log colour scale that survives an attention sink."""

from __future__ import annotations

import shutil

import pytest
import torch

import tokengeo
from tokengeo.view import show
from tokengeo.view.encode import LOG_DECADES, dequantise, dequantise_log, quantise, quantise_log


def tiny_gpt():
    torch.manual_seed(0)
    return tokengeo.create_model("gpt-tiny", vocab_size=40, block_size=32, n_layers=2,
                                 n_heads=3, d_model=24, n_laplacian=1).eval()


def test_log_codes_keep_the_weights_beside_a_sink():
    """A sink row: 0.97 on token 0 and 0.03 spread over 29 tokens. Linear codes squash the
    29 weights into a few levels; log codes keep each within its relative bound."""
    gen = torch.Generator().manual_seed(0)
    rest = torch.rand(29, generator=gen) + 0.2
    row = torch.cat([torch.tensor([0.97]), 0.03 * rest / rest.sum()])  # sums to 1
    P = row.expand(30, 30).clone()
    lin_codes, lin_scale = quantise(P, signed=False)
    log_codes, log_scale = quantise_log(P)
    assert len(set(lin_codes[0, 1:].tolist())) <= 3  # the sink flattens the rest
    back = dequantise_log(log_codes, log_scale)
    bound = 10 ** (LOG_DECADES / 508) - 1  # half a code step, relative
    assert float(((back[:, 1:] - P[:, 1:]).abs() / P[:, 1:]).max()) <= bound + 1e-9
    assert len(set(log_codes[0, 1:].tolist())) >= 20
    # below the floor reads as 0; the maximum is exact
    tiny = torch.tensor([1.0, 1e-6, 0.0])
    c, s = quantise_log(tiny)
    assert c.tolist() == [255, 0, 0] and dequantise_log(c, s).tolist() == [1.0, 0.0, 0.0]
    assert float((dequantise(lin_codes, lin_scale, signed=False) - P).abs().max()) <= 0.97 / 510 + 1e-9


def test_show_needs_a_tokenizer_for_text_and_gives_the_maps():
    model = tiny_gpt()
    with pytest.raises(tokengeo.errors.ConfigError, match="needs tokenizer="):
        show(model, "some words")
    ids = torch.randint(0, 40, (12,), generator=torch.Generator().manual_seed(1))
    view = show(model, ids)
    assert view.maps.shape == (2, 3, 12) and view.maps.tokens == [str(int(i)) for i in ids]
    frame = view._repr_html_()
    assert frame.startswith("<iframe srcdoc=\"") and "<script" not in frame  # escaped inside
    assert "default-src &#x27;none&#x27;" in frame  # the page's no-network policy


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="needs Debian's chromium (apt-get install chromium)")
def test_show_renders_inline_in_chromium_without_network(tmp_path):
    from helpers.browser import Page

    model = tiny_gpt()
    ids = torch.randint(0, 40, (1, 20), generator=torch.Generator().manual_seed(2))
    view = show(model, ids)
    host = tmp_path / "notebook.html"  # what a notebook's output cell holds
    host.write_text("<!DOCTYPE html><html><body><div class='output'>" + view._repr_html_()
                    + "</div></body></html>", encoding="utf-8")
    frame = "document.querySelector('iframe').contentWindow"
    with Page(host, width=1400, height=900) as page:
        page.wait_for(f"{frame}.TG && {frame}.TG.ready")
        assert page.evaluate(f"{frame}.document.querySelectorAll('.panel').length") == 2
        assert page.evaluate(f"{frame}.TG.thumbs.length") == 6
        scale = page.evaluate(f"{frame}.document.querySelector('.panel .scale').textContent")
        assert "log," in scale and f"{LOG_DECADES} decades" in scale
        P = view.maps.P[0, 0]
        bound = 10 ** (LOG_DECADES / 508) - 1
        for i, j in [(5, 2), (19, 0), (7, 7)]:
            got = page.evaluate(f"{frame}.TG.value('P', {i}, {j})")
            want = float(P[i, j])
            if want >= float(P.max()) * 10 ** -LOG_DECADES:
                assert abs(got - want) <= bound * want + 1e-9, (i, j, got, want)
        assert page.errors == [] and page.requests == []
