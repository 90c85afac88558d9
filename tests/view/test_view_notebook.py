"""``tokengeo.view.show``: the explorer inline in a notebook (``_repr_html_``), rendered in a
headless Chromium with no network; the log colour scale that survives an attention sink."""

from __future__ import annotations

import shutil

import pytest
import torch

import tokengeo
from tokengeo.errors import ConfigError
from tokengeo.view import show
from tokengeo.view.encode import LOG_DECADES, dequantise, dequantise_log, quantise, quantise_log
from tokengeo.view.heads import HeadMaps
from tokengeo.view.payloads import heads_payload


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
        decades = heads_payload(view.maps)[0]["heads"][0]["p_log"]  # head (0, 0)
        assert "log," in scale and f"{decades:g} decades" in scale and "grey: masked" in scale
        P = view.maps.P[0, 0]
        bound = 10 ** (decades / 508) - 1
        for i, j in [(5, 2), (19, 0), (7, 7)]:
            got = page.evaluate(f"{frame}.TG.value('P', {i}, {j})")
            want = float(P[i, j])
            if want >= float(P.max()) * 10 ** -decades:
                assert abs(got - want) <= bound * want + 1e-9, (i, j, got, want)
        # the frame fits its page; masked cells (j > i) are grey; the token view shows row T-1
        fits = page.evaluate(f"Math.abs(document.querySelector('iframe').offsetHeight - "
                             f"{frame}.document.documentElement.scrollHeight)")
        assert fits <= 8
        grey = page.evaluate(f"Array.from({frame}.TG.panels.P.img.data.slice(4 * 3, 4 * 3 + 3))")
        assert grey == [0xE4, 0xE4, 0xE4]  # cell (0, 3): masked by causality
        row = page.evaluate(f"(() => {{ const d = {frame}.TG.panels.P.img.data; "
                            f"return Array.from({{length: 20}}, (_, j) => "
                            f"`rgb(${{d[4*(19*20+j)]}}, ${{d[4*(19*20+j)+1]}}, ${{d[4*(19*20+j)+2]}})`); }})()")
        assert page.evaluate(f"{frame}.TG.tokenColours") == row
        assert page.errors == [] and page.requests == []


def _decoded_p(chunk: str, T: int) -> torch.Tensor:
    import base64
    import zlib

    raw = zlib.decompress(base64.b64decode(chunk))
    return torch.frombuffer(bytearray(raw[:T * T]), dtype=torch.uint8).reshape(T, T).double()


def sink_view(colour: str, exclude=(0,)):
    model = tiny_gpt()
    ids = torch.randint(0, 40, (1, 16), generator=torch.Generator().manual_seed(3))
    view = show(model, ids, colour=colour, exclude=exclude)
    P = view.maps.P.clone()
    P[..., 0] += 5.0  # a sink on the first key token, far above every other weight
    view.maps.P = P / P.sum(-1, keepdim=True)
    return view


def test_row_scale_without_the_sink_against_a_slow_reference():
    from tokengeo.view.payloads import heads_payload

    view = sink_view("row")
    payload, chunks = heads_payload(view.maps, colour="row", exclude=view.exclude)
    assert payload["colour"] == "row" and payload["p_exclude"] == [0] and payload["p_log"] == 0
    L, H, T = view.maps.shape
    for hd in payload["heads"]:
        P = view.maps.P[hd["l"], hd["h"]].double()  # (T, T)
        codes = _decoded_p(chunks[f"{hd['l']}-{hd['h']}"], T)
        for i in range(T):
            row_max = max(float(P[i, j]) for j in range(1, T))  # key 0 left out
            assert abs(hd["p_rows"][i] - row_max) <= 1e-5 * row_max
            for j in range(1, T):
                assert abs(float(codes[i, j]) / 255 * row_max - float(P[i, j])) \
                    <= row_max / 510 + 1e-7
            assert codes[i, 0] == 255  # the sink is clipped to the top colour ...
            assert abs(hd["p_excluded"][0][i] - float(P[i, 0])) <= 1e-5  # ... and sent exact
            assert float(P[i, 0]) > row_max


def test_head_scale_without_the_sink_and_the_default_unchanged():
    from tokengeo.view.encode import quantise_relative
    from tokengeo.view.payloads import heads_payload

    view = sink_view("log")
    T = view.maps.shape[2]
    payload, chunks = heads_payload(view.maps, colour="log", exclude=[0])
    hd = payload["heads"][0]
    P = view.maps.P[0, 0]
    assert abs(hd["p_scale"] - float(P[:, 1:].max())) <= 1e-6 and "p_rows" not in hd
    codes = _decoded_p(chunks["0-0"], T)
    assert bool((codes[:, 0] == 255).all()) and int(codes[:, 1:].max()) == 255
    # without exclusions the codes are those of quantise_log (at the fitted decades) /
    # quantise, one scale per head, except that a positive weight never gets the masked code 0
    for colour, old in [("log", lambda x, d: quantise_log(x, decades=d)[0]),
                        ("linear", lambda x, d: quantise(x, signed=False)[0])]:
        payload, chunks = heads_payload(view.maps, colour=colour)
        assert payload["p_exclude"] == [] and "p_excluded" not in payload["heads"][0]
        want = old(P.float(), payload["p_log"])
        want = torch.where((P > 0) & (want == 0), torch.ones_like(want), want)
        assert torch.equal(_decoded_p(chunks["0-0"], T).to(torch.uint8), want)
    assert torch.equal(quantise_relative(P, P.max(), decades=LOG_DECADES),
                       quantise_log(P)[0])


@pytest.mark.parametrize("colour, exclude, match", [
    ("rows", (), "colour scale 'rows' is not one of"),
    ("row", (16,), r"must list token positions in 0..15 of this 16-token text"),
    ("log", ("a",), "must list token positions, e.g. \\[0\\]"),
    ("log", tuple(range(16)), "leaves no key token to scale the colours by"),
])
def test_show_refuses_a_bad_colour_or_exclusion(colour, exclude, match):
    ids = torch.arange(16)
    with pytest.raises(tokengeo.errors.ConfigError, match=match):
        show(tiny_gpt(), ids, colour=colour, exclude=exclude)


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="needs Debian's chromium (apt-get install chromium)")
def test_row_scale_page_renders_with_exact_sink_values(tmp_path):
    from helpers.browser import Page

    view = sink_view("row")
    page_file = view.save(tmp_path / "row.html")
    with Page(page_file, width=1400, height=900) as page:
        page.wait_for("window.TG && TG.ready")
        scale = page.evaluate("document.querySelector('.panel .scale').textContent")
        assert "per query row" in scale and "without key token 0" in scale
        P = view.maps.P[0, 0]
        for i, j in [(5, 0), (9, 3), (15, 15), (0, 0)]:
            got, want = page.evaluate(f"TG.value('P', {i}, {j})"), float(P[i, j])
            row_max = float(P[i, 1:].max())
            tol = 1e-5 if j == 0 else row_max / 510 + 1e-6
            assert abs(got - want) <= tol, (i, j, got, want)
        page.key("ArrowRight", key_code=39)  # head 2, the Laplacian one: its I - P panel
        page.key("ArrowRight", key_code=39)
        page.wait_for("document.body.dataset.ready === '0-2'")
        assert page.evaluate("Object.keys(TG.panels).join()") == "P,L,S"
        P = view.maps.P[0, 2]
        for i, j in [(4, 4), (4, 0), (6, 1)]:
            tol = 1e-5 if j == 0 else float(P[i, 1:].max()) / 510 + 1e-6
            got = page.evaluate(f"TG.value('L', {i}, {j})")
            assert abs(got - ((i == j) - float(P[i, j]))) <= tol, (i, j, got)
        assert page.errors == [] and page.requests == []


def synthetic_maps(P: torch.Tensor) -> HeadMaps:
    L, H, T, _ = P.shape
    return HeadMaps(tokens=[f"t{i}" for i in range(T)], P=P, S=torch.zeros_like(P),
                    kinds=[["attention"] * H for _ in range(L)])


def causal_uniform(T: int) -> torch.Tensor:
    mask = torch.ones(T, T).tril()
    return (mask / mask.sum(-1, keepdim=True))[None, None]  # (1, 1, T, T)


def test_the_log_scale_spans_what_the_text_fills():
    """A 13-token sentence (weights from 1 down to 1/13) gets one or two decades, not four;
    a sink row (0.999 on one token, the rest 1e-6 each) keeps all four."""
    short, _ = heads_payload(synthetic_maps(causal_uniform(13)))
    assert 1 <= short["p_log"] <= 1.5
    sink = torch.full((1, 1, 30, 30), 1e-6)
    sink[..., 0] = 0.999
    wide, _ = heads_payload(synthetic_maps(sink / sink.sum(-1, keepdim=True)))
    assert wide["p_log"] == LOG_DECADES


def test_masked_cells_are_not_small_weights():
    P = causal_uniform(6).clone()
    P[0, 0, 5, 4] = 1e-9  # a real, tiny weight
    P[0, 0, 5] /= P[0, 0, 5].sum()
    for colour in ("log", "linear", "row"):
        payload, chunks = heads_payload(synthetic_maps(P), colour=colour)
        codes = _decoded_p(chunks["0-0"], 6)
        upper = torch.ones(6, 6, dtype=torch.bool).triu(1)
        assert bool((codes[upper] == 0).all()) and bool((codes[~upper] >= 1).all()), colour


@pytest.mark.parametrize("kwargs, match", [
    ({"max_tokens": -1}, "max_tokens=-1 must be a positive whole number"),
    ({"max_tokens": 0}, "max_tokens=0"),
    ({"max_tokens": True}, "max_tokens=True"),
    ({"height": -5}, "height=-5 must be a positive whole number"),
    ({"height": 2.5}, "height=2.5"),
])
def test_show_refuses_bad_sizes(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        show(tiny_gpt(), torch.arange(8), **kwargs)


def test_show_refuses_float_ids_instead_of_truncating():
    with pytest.raises(ConfigError, match="token ids must be integers; got torch.float32"):
        show(tiny_gpt(), torch.tensor([1.0, 2.7, 3.0]))
    with pytest.raises(ConfigError, match="must be integers"):
        show(tiny_gpt(), [1.5, 2.0])


def test_the_frame_sizes_itself_unless_given_a_height():
    view = show(tiny_gpt(), torch.arange(8))
    assert "onload=" in view._repr_html_() and "ResizeObserver" in view._repr_html_()
    fixed = show(tiny_gpt(), torch.arange(8), height=500)._repr_html_()
    assert "onload=" not in fixed and "height:500px" in fixed
