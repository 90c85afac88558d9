"""Velocity, energy, strong gradient G^2 and the balance integrands, evaluated in chunks.

Massucco et al., arXiv 2605.18870, Eq. (5) and Sec. 6. Tokens x_i (i = 1..n) on S^{d-1},
heads h = 1..H with score matrices B_h and value matrices V_h (the paper: B_h = V_h = D_h,
symmetric). With K^h_ij = exp(<x_i, B_h x_j>) and N_{h,i} = sum_j K^h_ij:

    v_i  = (1/H) sum_h P_{x_i}( sum_j A^h_ij V_h x_j ),  A^h_ij = K^h_ij / N_{h,i},
    E    = 1/(2 H n^2) sum_h sum_ij K^h_ij,
    G^2  = mean_i |v_i|^2 / mean_h (n / N_{h,i})          (harmonic-mean mobility),

and the weight-derivative terms of the energy balance need only the d x d moments

    M_h  = 1/(2 H n^2) sum_ij K^h_ij x_i x_j^T:   dE/dt|_x = sum_h <f_h, M_h>,
                                                  martingale increment = sum_h <sigma dW_h, M_h>,
    Ito kernel = 1/(2 H n^2) sum_h sum_ij K^h_ij ((x_i . x_j)^2 + 1)   (times sigma^2 / 4).

Nothing of size (H, n, n) is ever held: heads and (tile x tile) blocks of token pairs are
processed in chunks of at most ``chunk_elems`` kernel entries, each costing one exp and two
small matmuls; symmetric heads exponentiate only the upper blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

DEFAULT_CHUNK_ELEMS = 1 << 19


@dataclass
class FieldEval:
    """The vector field and energy integrands at one state (P paths)."""

    velocity: Tensor  # (P, n, d)  v_i, tangent at x_i; the flow is dx/dt = -v
    g2: Tensor  # (P,)  strong gradient G^2
    energy: Tensor | None = None  # (P,)  E(x; D)
    moment: Tensor | None = None  # (P, H, d, d)  M_h
    ito_kernel: Tensor | None = None  # (P,)


def tangent_project(x: Tensor, u: Tensor) -> Tensor:
    """P_x u = u - x (x^T u), the projection onto the tangent space of the sphere at x."""
    return u - x * (x * u).sum(-1, keepdim=True)


def _tiling(P: int, H: int, n: int, chunk_elems: int) -> tuple[int, int]:
    """(tile rows, heads) per block so that a (P, heads, tile, tile) kernel fits chunk_elems.

    Tiles are sized for about 16 heads per block: smaller tiles exponentiate fewer
    symmetric entries twice (a fraction (m + 1) / 2m of them with m tiles per side), larger
    ones pay less per-block overhead.
    """
    tile = min(n, max(16, math.isqrt(max(1, chunk_elems // (16 * P)))))
    tile = -(-n // -(-n // tile))  # balance the tiles
    return tile, max(1, min(H, chunk_elems // (P * tile * tile)))


_MAX_PAIR_FEATURES = 21  # use (x x^T) features for the Ito kernel up to d = 6


def _pair_features(x: Tensor, ito: bool) -> Tensor:
    """[x, 1] and, for the Ito kernel in low d, U_i with <U_i, U_j> = (x_i . x_j)^2, (P, n, F).

    U_i = (x_ia^2)_a ++ (sqrt(2) x_ia x_ib)_{a<b}; then sum_ij K_ij (x_i . x_j)^2 =
    sum_i <U_i, sum_j K_ij U_j> comes out of the same matmul as sum_j K_ij x_j and N_i.
    """
    cols = [x, torch.ones_like(x[..., :1])]
    d = x.shape[-1]
    if ito and d * (d + 1) // 2 <= _MAX_PAIR_FEATURES:
        a, b = torch.triu_indices(d, d, offset=1, device=x.device)
        cols += [x.square(), math.sqrt(2) * x[..., a] * x[..., b]]
    return torch.cat(cols, dim=-1)


def _kernel_sums(
    xs: Tensor,
    x: Tensor,
    feats_t: Tensor,
    tile: int,
    symmetric: bool,
    gram_ito: bool,
    bufs: tuple[Tensor, Tensor],
) -> tuple[Tensor, Tensor]:
    """sum_j K^h_ij feats_j for a chunk of heads, tile by tile, as (P, c, F, n).

    K^h_ij = exp(xs_hi . x_j) with xs = x B_h, (P, c, n, d). With symmetric K only tiles
    j >= i are exponentiated and each also adds its transpose. Sums are kept transposed,
    (F, n): the faster layout for these skinny matmuls. Also returns sum_ij K_ij (x_i.x_j)^2,
    (P,), when ``gram_ito`` (else zeros).
    """
    P, c, n, d = xs.shape
    n_feat = feats_t.shape[1]
    xt = x.mT  # (P, d, n)
    kf = x.new_zeros(P, c, n_feat, n)
    ito_sum = x.new_zeros(P)
    for i0 in range(0, n, tile):
        ri = slice(i0, i0 + tile)
        qi = xs[:, :, ri].reshape(P, -1, d)  # (P, c * ti, d)
        ti = qi.shape[1] // c
        fi = feats_t[:, None, :, ri].expand(P, c, n_feat, ti).reshape(P * c, n_feat, ti)
        for j0 in range(i0 if symmetric else 0, n, tile):
            rj = slice(j0, j0 + tile)
            tj = min(tile, n - j0)
            kern = bufs[0][: P * c * ti * tj].view(P, c * ti, tj)
            torch.bmm(qi, xt[:, :, rj], out=kern).exp_()  # (P, c * ti, tj)  K_ij
            rows = bufs[1][: P * n_feat * c * ti].view(P, n_feat, c * ti)
            torch.bmm(feats_t[:, :, rj], kern.mT, out=rows)  # (P, F, c * ti)
            kf[..., ri] += rows.view(P, n_feat, c, ti).transpose(1, 2)
            mirror = symmetric and j0 != i0
            if mirror:  # K_ji = K_ij: sum_i K_ij feats_i for the rows j
                cols = bufs[1][: P * c * n_feat * tj].view(P * c, n_feat, tj)
                torch.bmm(fi, kern.view(P * c, ti, tj), out=cols)  # (P c, F, tj)
                kf[..., rj] += cols.view(P, c, n_feat, tj)
            if gram_ito:
                gram2 = (x[:, ri] @ xt[:, :, rj]).square_()  # (P, ti, tj)  (x_i . x_j)^2
                kern4 = kern.view(P, c, ti, tj)
                ito_sum += (1 + mirror) * kern4.mul_(gram2.unsqueeze(1)).sum((1, 2, 3))
    return kf, ito_sum


def evaluate_field(
    x: Tensor,
    score: Tensor,
    value: Tensor | None = None,
    *,
    energy: bool = True,
    ito: bool = False,
    chunk_elems: int = DEFAULT_CHUNK_ELEMS,
) -> FieldEval:
    """Velocity, G^2 and (optionally) energy, moments and Ito kernel at x.

    Args:
        x: tokens, (P, n, d); unit rows on the sphere (off-sphere points are allowed, as met
            in Runge-Kutta stages, with P_x = I - x x^T).
        score: B_h, (P, H, d, d).
        value: V_h, (P, H, d, d); ``None`` means V_h = B_h (the paper's symmetric D_h).
        energy: also compute E, M_h (and the Ito kernel when ``ito``).
        chunk_elems: the largest kernel block (P, heads, tile, tile) held at once.

    When every B_h is exactly symmetric, K^h is symmetric and only the tiles on and above
    the diagonal are exponentiated. See the module docstring for the formulas
    (arXiv 2605.18870, Eq. 5 and Sec. 6).
    """
    P, n, d = x.shape
    H = score.shape[1]
    value = score if value is None else value
    symmetric = torch.equal(score, score.mT)
    tile, heads = _tiling(P, H, n, chunk_elems)
    feats = _pair_features(x, ito and energy)  # (P, n, F)  [x, 1, (x x^T) features]
    n_feat = feats.shape[-1]
    gram_ito = energy and ito and n_feat == d + 1  # high d: (x_i . x_j)^2 from Gram tiles
    xt = x.mT  # (P, d, n)
    acc = torch.zeros_like(x)  # (P, n, d)  sum_h V_h sum_j A^h_ij x_j
    inv_n = x.new_zeros(P, n)  # sum_h 1 / N_{h,i}
    k_sum, ito_sum = x.new_zeros(P), x.new_zeros(P)
    moment = x.new_zeros(P, H, d, d) if energy else None
    # Preallocated work buffers: fresh multi-MB temporaries per block cost more than the exp.
    feats_t = feats.mT.contiguous()  # (P, F, n)
    bufs = (x.new_empty(P * heads * tile * tile), x.new_empty(P * heads * tile * n_feat))
    for h0 in range(0, H, heads):
        hs = slice(h0, h0 + heads)
        xs = x.unsqueeze(1) @ score[:, hs]  # (P, c, n, d)  rows x_i^T B_h
        kf, ito_gram = _kernel_sums(xs, x, feats_t, tile, symmetric, gram_ito, bufs)
        kx, norm = kf[:, :, :d].mT, kf[:, :, d]  # (P, c, n, d), (P, c, n)
        acc += ((kx / norm.unsqueeze(-1)) @ value[:, hs].mT).sum(1)
        inv_n += norm.reciprocal().sum(1)
        if energy:
            k_sum += norm.sum((1, 2))
            moment[:, hs] = xt.unsqueeze(1) @ kx  # (P, c, d, d)
            if gram_ito:
                ito_sum += ito_gram
            elif ito:  # sum_ij K_ij (x_i . x_j)^2 = sum_i <U_i, (K U)_i>
                ito_sum += (kf[:, :, d + 1 :] * feats_t[:, None, d + 1 :]).sum((1, 2, 3))
    velocity = tangent_project(x, acc / H)
    mobility = n * inv_n / H  # (P, n)  mean_h n / N_{h,i}
    g2 = (velocity.square().sum(-1) / mobility).mean(-1)
    if not energy:
        return FieldEval(velocity, g2)
    scale = 1.0 / (2 * H * n * n)
    ito_kernel = (ito_sum + k_sum) * scale if ito else None
    return FieldEval(velocity, g2, k_sum * scale, moment * scale, ito_kernel)


def interaction_energy(x: Tensor, D: Tensor) -> Tensor:
    """E(x; D) = 1/(2 H n^2) sum_h sum_ij exp(<x_i, D_h x_j>), (P,) (arXiv 2605.18870, Sec. 6).

    x is (P, n, d) and D is (P, H, d, d); computed in chunks by :func:`evaluate_field`.
    """
    return evaluate_field(x, D, energy=True).energy
