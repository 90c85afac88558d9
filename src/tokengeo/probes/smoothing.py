"""Does a head smooth the residual stream? Its sign, measured per head on held-out inputs.

Zhang & Papyan (arXiv 2602.09297) read a Laplacian head ``X + (I − P) X W_V W_O`` as one step
of heat diffusion on the attention graph; that holds only if the learned value–output map is
negative in the directions the tokens spread (``W_V W_O ≈ −c I`` gives ``X + c (P − I) X``).
:func:`head_smoothing` measures, for every head h of every layer, two signs:

* ``variance_derivative`` — with X the block's residual input (``hook_resid_pre``, (B, T, d)),
  O_h the head's write to the residual (its ``hook_z`` slice through its columns of the output
  projection, bias excluded) and the within-sequence variance

      Var_w(X) = mean_{b, t} ‖x_{b,t} − x̄_b‖²   (x̄_b the mean of sequence b's tokens),

  the derivative of Var_w(X + ε O_h) at ε = 0, relative to Var_w(X):

      (d/dε) Var_w(X + ε O_h) |_{ε=0} / Var_w(X)
          = 2 mean_{b,t} ⟨x_{b,t} − x̄_b, o_{b,t} − ō_b⟩ / Var_w(X).

  Negative: the head pulls tokens towards their sequence's mean (smooths); positive: it
  spreads them (sharpens). A head writing ``−x`` gives −2, one writing ``+x`` gives +2.
* ``rayleigh`` — S_h the symmetric part of the head's value–output map in the residual basis,
  through the scale γ of the norm the attention reads (``x ↦ γ ⊙ x`` then ``W_V^h`` then
  ``W_O^h``; row vectors, so M_h = diag(γ) W_V^h W_O^h, (d, d), and S_h = (M_h + M_hᵀ) / 2),
  and u the centred token directions ``x_{b,t} − x̄_b`` of X:

      rayleigh = mean_{b, t} uᵀ S_h u / uᵀ u.

  Negative: the map points back against the directions the tokens spread, as diffusion does.
* ``variance_step`` and ``dirichlet_step`` — the head's real update X → X + O_h (ε = 1):
  the relative change of the within-sequence variance, and of the Dirichlet energy
  Σ_seq Σ_ij P_ij ‖x_i − x_j‖² on the head's own softmax pattern P (its graph, for Laplacian
  heads too): heat diffusion lowers the latter (:mod:`tokengeo.probes.diffusion`).

Rows are :class:`HeadSmoothing`; :func:`smoothing_reading` adds, per attention sublayer, the
within-sequence share of the token variance before it (``hook_resid_pre``) and after it
(``hook_resid_mid``, the stream after the attention's residual add) as
:class:`SublayerSmoothing` rows, so "this sublayer smooths" is measured, not summed from
derivatives. Works on tokengeo's ViT, GPT and text encoder, and on Hugging
Face models, laplacianized or not (:func:`tokengeo.models.hf.laplacianize`); the
L-Transformer is refused (its heads act on spectral slices in the transform domain).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import capture, is_hf_model

Linear = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class HeadSmoothing:
    """One head's smoothing signs (see the module docstring for the formulas)."""

    layer: int
    head: int
    kind: str  # "attention", "laplacian", "mixed" or "fixed"
    variance_derivative: float  # d/dε Var_w(X + ε O_h) at 0, / Var_w(X); < 0: smooths
    rayleigh: float  # mean over centred tokens u of uᵀ S_h u / uᵀ u
    variance_step: float  # (Var_w(X + O_h) − Var_w(X)) / Var_w(X); < 0: smooths
    dirichlet_step: float  # (E_P(X + O_h) − E_P(X)) / E_P(X), P the head's pattern

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SublayerSmoothing:
    """One attention sublayer's within-sequence share of the token variance, before it
    (the block's input) and after it (the stream after the attention's residual add)."""

    layer: int
    share_before: float
    share_after: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SmoothingReading:
    """What one forward pass measures: every head's row and every attention sublayer's."""

    heads: list[HeadSmoothing]
    sublayers: list[SublayerSmoothing]


@dataclass(frozen=True)
class LayerMaps:
    """One layer's per-head linear maps, read off its modules."""

    kinds: list[str]  # (H,)
    write: torch.Tensor  # (H, Dh, d): W_O^h, head h's z -> its write to the residual
    value_output: torch.Tensor  # (H, d, d): M_h = diag(γ) W_V^h W_O^h


# ------------------------------------------------------------------ pure functions on tensors


def centred(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """x − its sequence's mean over real tokens, zero at padding: (B, T, d) -> (B, T, d).

    ``mask``: (B, T), 1 / True for real tokens (None: all real).
    """
    if mask is None:
        return x - x.mean(dim=1, keepdim=True)
    w = mask.to(x.dtype).unsqueeze(-1)  # (B, T, 1)
    mean = (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1.0)
    return (x - mean) * w


def _n_tokens(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return torch.tensor(float(x.shape[0] * x.shape[1]), dtype=x.dtype)
    return mask.to(x.dtype).sum()


def within_variance(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Var_w(X) = mean over real tokens of ‖x_{b,t} − x̄_b‖² (a scalar); x (B, T, d)."""
    return centred(x, mask).pow(2).sum() / _n_tokens(x, mask)


def variance_derivative(
    x: torch.Tensor, o: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """(d/dε) Var_w(X + ε O) at ε = 0, divided by Var_w(X): 2 mean ⟨X − X̄, O − Ō⟩ / Var_w(X).

    x, o: (B, T, d); a scalar tensor. Zhang & Papyan (arXiv 2602.09297): a head smooths
    the residual stream when this is negative.
    """
    xc, oc = centred(x, mask), centred(o, mask)
    n = _n_tokens(x, mask)
    return 2 * (xc * oc).sum() / n / ((xc.pow(2).sum() / n).clamp_min(1e-30))


def rayleigh_quotients(
    x: torch.Tensor, maps: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per map, the mean over centred token directions u of uᵀ S u / uᵀ u, S = (M + Mᵀ) / 2.

    x: (B, T, d); maps: (H, d, d); returns (H,). Tokens with u = 0 (a one-token sequence,
    padding) are left out.
    """
    u = centred(x, mask).reshape(-1, x.shape[-1])  # (N, d)
    norm2 = u.pow(2).sum(-1)  # (N,)
    u = u[norm2 > 1e-12 * norm2.max().clamp_min(1e-30)]
    if u.shape[0] == 0:
        raise ConfigError("no token differs from its sequence's mean: the Rayleigh quotient "
                          "needs sequences of at least two distinct tokens")
    # uᵀ S u = uᵀ M u for the symmetric part S of M
    quad = torch.einsum("nd,hde,ne->hn", u, maps, u)  # (H, N)
    return (quad / u.pow(2).sum(-1)).mean(-1)


# ------------------------------------------------------------------ maps from modules


def norm_scale(norm: nn.Module | None, d: int, like: torch.Tensor) -> torch.Tensor:
    """The per-feature scale γ (d,) of a LayerNorm / RMSNorm (any parametrisation, e.g.
    Gemma's 1 + w): (norm(v) − norm(−v)) / 2v for v = (1, −1, 1, …), a zero-mean vector of
    unit variance, which any of them maps to γ ⊙ v (the bias cancels). None: ones."""
    if norm is None:
        return torch.ones(d, dtype=like.dtype, device=like.device)
    if d % 2:
        raise ConfigError(f"the norm's scale is read with a zero-mean ±1 vector, which needs an "
                          f"even width; this model's width is {d}")
    v = torch.ones(d, dtype=like.dtype, device=like.device)
    v[1::2] = -1
    out = norm(torch.stack([v, -v]))  # (2, d)
    return (out[0] - out[1]) / (2 * v)


def layer_maps(
    value: Linear, write: Linear, gamma: torch.Tensor, kinds: list[str], n_kv_heads: int,
    head_dim: int,
) -> LayerMaps:
    """Per-head maps from the value projection and output projection seen as functions.

    ``value``: residual rows (n, d) -> the layer's values (n, Hkv*Dh), bias included;
    ``write``: per-head outputs (..., H*Dh) -> (..., d), bias included. Both are read by
    probing with basis vectors and subtracting the image of 0, so the same code serves
    fused and separate projections, Conv1D (GPT-2) and grouped KV heads (query head h
    reads KV head h // (H / Hkv)).
    """
    n_heads, d = len(kinds), gamma.shape[0]
    zero_in = gamma.new_zeros(1, d)
    values = value(torch.diag(gamma)) - value(zero_in)  # (d, Hkv*Dh)
    values = values.unflatten(-1, (n_kv_heads, head_dim))  # (d, Hkv, Dh)
    values = values.repeat_interleave(n_heads // n_kv_heads, dim=1)  # (d, H, Dh)
    basis = gamma.new_zeros(n_heads, head_dim, n_heads * head_dim)  # (H, Dh, H*Dh)
    for h in range(n_heads):
        basis[h, :, h * head_dim:(h + 1) * head_dim] = torch.eye(head_dim, dtype=gamma.dtype)
    w_o = write(basis) - write(gamma.new_zeros(1, 1, n_heads * head_dim))  # (H, Dh, d)
    maps = torch.einsum("dhe,hef->hdf", values, w_o)  # (H, d, d)
    return LayerMaps(list(kinds), w_o.float(), maps.float())


def _tokengeo_maps(model: nn.Module) -> list[LayerMaps]:
    if getattr(model, "family", "") == "ltransformer" or not hasattr(model, "blocks"):
        raise ConfigError(
            f"head_smoothing does not support {type(model).__name__}: the L-Transformer's heads "
            "act on spectral slices in the transform domain, so no head has a value-output map "
            "in the residual basis; use a ViT, GPT, text encoder or Hugging Face model")
    out = []
    for block in model.blocks:
        attn = block.attn
        d, dh = attn.d_model, attn.head_dim
        w, b = attn.qkv.weight, attn.qkv.bias

        def value(x, w=w, b=b, d=d):  # (n, d) -> (n, d): the V third of qkv
            return F.linear(x, w, b)[..., 2 * d:]

        gamma = norm_scale(block.ln1, d, w)
        out.append(layer_maps(value, attn.proj, gamma, list(attn.head_kinds), attn.n_heads,
                              dh))
    return out


def _hf_kinds(model: nn.Module, n_layers: int, n_heads: int) -> list[list[str]]:
    from tokengeo.models.hf import KIND_KEY, laplacian_heads

    chosen = laplacian_heads(model)
    kind = getattr(model.config, KIND_KEY, "laplacian")
    return [[kind if h in chosen.get(layer, ()) else "attention" for h in range(n_heads)]
            for layer in range(n_layers)]


def _hf_maps(model: nn.Module) -> list[LayerMaps]:
    from tokengeo.models.hf import attention_sites
    from tokengeo.models.hf.families import family_of

    family = family_of(model, "head_smoothing")
    base = model.base_model
    blocks = base.get_submodule(family.blocks)
    sites = attention_sites(model)
    kinds = _hf_kinds(model, len(sites), sites[0].n_heads)
    d = int(model.config.get_text_config().hidden_size)
    out = []
    for layer, (block, site) in enumerate(zip(blocks, sites, strict=True)):
        vm, om = site.value_module, site.out_proj
        like = next(vm.parameters())
        norm = block.get_submodule(family.attn_norm) if family.attn_norm else None

        # the classes' forwards: past laplacianize's value tap and head swap
        def value(x, vm=vm, take=site.take_value):
            return take(type(vm).forward(vm, x))

        def write(z, om=om):
            return type(om).forward(om, z)

        gamma = norm_scale(norm, d, like)
        out.append(layer_maps(value, write, gamma, kinds[layer], site.shape.n_kv_heads,
                              site.head_dim))
    return out


def head_maps(model: nn.Module) -> list[LayerMaps]:
    """Every layer's :class:`LayerMaps` of a tokengeo or Hugging Face model."""
    with torch.no_grad():
        return _hf_maps(model) if is_hf_model(model) and not hasattr(model, "family") \
            else _tokengeo_maps(model)


# ------------------------------------------------------------------ the measurement


def _forward(model: nn.Module, inputs, attention_mask):
    if isinstance(inputs, Mapping):
        return model(**inputs), inputs.get("attention_mask", attention_mask)
    if attention_mask is None:
        return model(inputs), None
    return model(inputs, attention_mask=attention_mask), attention_mask


def _stream_mask(mask: torch.Tensor | None, n_tokens: int) -> torch.Tensor | None:
    """The input's (B, T_in) mask for the residual stream's T tokens (prefix tokens such
    as a cls token in front count as real)."""
    if mask is None:
        return None
    extra = n_tokens - mask.shape[1]
    if extra < 0:
        raise ConfigError(f"attention_mask has {mask.shape[1]} tokens, the residual stream "
                          f"{n_tokens}")
    return torch.cat([mask.new_ones(mask.shape[0], extra), mask], dim=1) if extra else mask


def head_smoothing(
    model: nn.Module, inputs, *, attention_mask: torch.Tensor | None = None
) -> list[HeadSmoothing]:
    """One :class:`HeadSmoothing` row per (layer, head) of ``model`` on ``inputs``.

    ``inputs``: what the model takes (token ids, images), or a mapping of keyword arguments
    (Hugging Face: ``input_ids``, ``attention_mask``, ``pixel_values``); ``attention_mask``
    (B, T), 1 for real tokens, restricts every mean to real tokens. One forward pass in eval
    mode without gradients; the model's training mode is restored after. Hugging Face models
    must be loaded with ``attn_implementation="eager"`` (the Dirichlet step reads the
    softmax pattern). Formulas: the module docstring (Zhang & Papyan, arXiv 2602.09297, the
    Laplacian head as heat diffusion).
    """
    return _measure(model, inputs, attention_mask, sublayers=False).heads


def smoothing_reading(
    model: nn.Module, inputs, *, attention_mask: torch.Tensor | None = None
) -> SmoothingReading:
    """:func:`head_smoothing`'s rows and, per attention sublayer, the within-sequence share
    of the token variance before and after it (:class:`SublayerSmoothing`), from the same
    forward pass. The model needs a ``hook_resid_mid`` site (parallel-residual blocks have
    none)."""
    return _measure(model, inputs, attention_mask, sublayers=True)


def _capture_all(model: nn.Module, inputs, attention_mask, names: list[str]):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), capture(model, names) as cache:
            _, mask = _forward(model, inputs, attention_mask)
    finally:
        model.train(was_training)
    return cache, mask


def _head_rows(layer: int, lm: LayerMaps, x, z, pattern, m) -> list[HeadSmoothing]:
    """Rows of one layer: x (B, T, d), z (B, T, H, Dh), pattern (B, H, T, T)."""
    from tokengeo.probes.diffusion import dirichlet_step, variance_step

    ray = rayleigh_quotients(x, lm.value_output.to(x.device), m)  # (H,)
    rows = []
    for h, kind in enumerate(lm.kinds):
        o = z[:, :, h] @ lm.write[h].to(x.device)  # (B, T, d)
        rows.append(HeadSmoothing(layer, h, kind, float(variance_derivative(x, o, m)),
                                  float(ray[h]), float(variance_step(x, o, m)),
                                  float(dirichlet_step(x, o, pattern[:, h], m))))
    return rows


def _measure(model: nn.Module, inputs, attention_mask, sublayers: bool) -> SmoothingReading:
    from tokengeo.probes.diffusion import within_share

    maps = head_maps(model)
    names = ["blocks.*.hook_resid_pre", "blocks.*.attn.hook_z", "blocks.*.attn.hook_pattern"]
    names += ["blocks.*.hook_resid_mid"] if sublayers else []
    cache, mask = _capture_all(model, inputs, attention_mask, names)
    heads, subs = [], []
    for layer, lm in enumerate(maps):
        x = cache[f"blocks.{layer}.hook_resid_pre"].float()  # (B, T, d)
        z = cache[f"blocks.{layer}.attn.hook_z"].float()  # (B, T, H, Dh)
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]  # (B, H, T, T)
        m = _stream_mask(mask, x.shape[1])
        m = None if m is None else m.to(x.device)
        heads += _head_rows(layer, lm, x, z, pattern, m)
        if sublayers:
            after = cache[f"blocks.{layer}.hook_resid_mid"]  # (B, T, d)
            subs.append(SublayerSmoothing(layer, within_share(x, m), within_share(after, m)))
    return SmoothingReading(heads, subs)
