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

Nothing of size (H, n, n) is ever held: heads and strips of (tile x n) token pairs are
processed in chunks of at most ``chunk_elems`` kernel entries, each costing one exp and two
matmuls; symmetric heads exponentiate only the diagonal tiles and the entries right of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

DEFAULT_CHUNK_ELEMS = 1 << 20  # 8 MB of float64 kernel per strip
TILE = 40  # strip rows (see _tiling)


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
    """(tile rows, heads) per strip so that a (P, heads, tile, n) kernel strip fits chunk_elems.

    A strip is ``tile`` rows against every column (right of the diagonal tile for symmetric
    heads, which exponentiate a fraction (m + 1) / 2m of the entries with m strips). About
    TILE rows keep the mirror matmul (contraction over the rows) efficient while m stays
    large; the tile shrinks, down to 16 rows, only when one head's strip would not fit.
    """
    tile = min(n, max(16, min(TILE, chunk_elems // (P * n))))
    tile = -(-n // -(-n // tile))  # balance the tiles
    return tile, max(1, min(H, chunk_elems // (P * tile * n)))


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


def _strip_sums(
    q: Tensor,
    x: Tensor,
    feats_t: Tensor,
    tile: int,
    symmetric: bool,
    gram_ito: bool,
    work: tuple[Tensor, Tensor, Tensor],
) -> tuple[Tensor, Tensor]:
    """sum_j K^h_ij [x_j, 1] for a chunk of c heads, strip by strip, as (P, d + 1, n, c).

    K^h_ij = exp(q_ih . x_j) with q = rows x_i^T B_h laid out (P, n, c, d), so a strip of
    rows i is one (P, tile c, L) matrix: one matmul and one in-place exp per strip. The
    strip holds columns j >= i0 for symmetric heads (j >= 0 otherwise). Its row sums over
    the columns right of the diagonal tile (all columns if not symmetric) are one matmul;
    for symmetric heads one more matmul, over the rows, gives sum_i K_ij feats_i for every
    column of the strip, the diagonal tile's own row sums included (K^h is symmetric there).
    Also returns sum_h sum_ij K^h_ij (x_i . x_j)^2, (P,), from the pair features U in
    ``feats_t`` or, when ``gram_ito``, from Gram strips (else zeros).
    """
    (P, n, c, d), n_feat = q.shape, feats_t.shape[1]
    xt = x.mT  # (P, d, n)
    rows = work[1][: P * n_feat * n * c].view(P, n_feat, n, c)  # columns right of the tile
    cols = work[2][: P * n_feat * c * n].view(P, n_feat, c, n)  # symmetric: columns via rows
    ito_sum = x.new_zeros(P)
    for i0 in range(0, n, tile):
        ti = min(tile, n - i0)
        j0 = i0 if symmetric else 0
        L = n - j0
        kern = work[0][: P * ti * c * L].view(P, ti * c, L)
        qi = q[:, i0 : i0 + ti].reshape(P, ti * c, d)
        torch.bmm(qi, xt[:, :, j0:], out=kern).exp_()  # (P, ti c, L)  K_ij, layout (i, h, j)
        row_out = rows[:, :, i0 : i0 + ti].view(P, n_feat, ti * c)
        right = ti if symmetric else 0
        if L > right:
            torch.bmm(feats_t[:, :, j0 + right :], kern[:, :, right:].mT, out=row_out)
        else:
            row_out.zero_()
        if symmetric:  # K_ji = K_ij: sum_i K_ij feats_i for the columns j >= i0
            fi, k2 = feats_t[:, :, i0 : i0 + ti], kern.view(P, ti, c * L)
            if i0 == 0:
                torch.bmm(fi, k2, out=cols.view(P, n_feat, c * n))
            else:
                cols[..., i0:] += torch.bmm(fi, k2).view(P, n_feat, c, L)
        if gram_ito:  # sum_ij K_ij (x_i . x_j)^2, each pair right of the diagonal tile twice
            gram2 = (x[:, i0 : i0 + ti] @ xt[:, :, j0:]).square_()  # (P, ti, L)
            if symmetric:
                gram2[:, :, ti:] *= 2
            per_row = kern.view(P * ti, c, L) @ gram2.view(P * ti, L, 1)  # (P ti, c, 1)
            ito_sum += per_row.view(P, -1).sum(1)
    base = d + 1  # [x, 1]; pair features U after them feed only the Ito sum
    if n_feat > base:  # sum_ij K_ij (x_i . x_j)^2 = sum_i <U_i, (K U)_i>, row and column parts
        u = feats_t[:, base:]  # (P, F - d - 1, n)
        ito_sum += (u.reshape(P, 1, -1) @ rows[:, base:].reshape(P, -1, c)).sum((1, 2))
        if symmetric:  # column part: sum over the heads first, (P, F - d - 1, n)
            ito_sum += (cols[:, base:].sum(2) * u).sum((1, 2))
    kf = rows[:, :base]  # (P, d + 1, n, c)
    if symmetric:
        kf += cols[:, :base].transpose(-1, -2)
    return kf, ito_sum


def evaluate_field(
    x: Tensor,
    score: Tensor,
    value: Tensor | None = None,
    *,
    energy: bool = True,
    ito: bool = False,
    chunk_elems: int = DEFAULT_CHUNK_ELEMS,
    symmetric: bool | None = None,
) -> FieldEval:
    """Velocity, G^2 and (optionally) energy, moments and Ito kernel at x.

    Args:
        x: tokens, (P, n, d); unit rows on the sphere (off-sphere points are allowed, as met
            in Runge-Kutta stages, with P_x = I - x x^T).
        score: B_h, (P, H, d, d).
        value: V_h, (P, H, d, d); ``None`` means V_h = B_h (the paper's symmetric D_h).
        energy: also compute E, M_h (and the Ito kernel when ``ito``).
        chunk_elems: the largest kernel strip (P, heads, tile, n) held at once.
        symmetric: whether every B_h is exactly symmetric; ``None`` checks (a host sync,
            which a captured CUDA graph cannot hold, so the graphed simulator passes it).

    When every B_h is exactly symmetric, K^h is symmetric and only the entries in or right of
    the diagonal tiles are exponentiated. In float32 the energy, moments, Ito kernel and G^2
    are summed in float64 (the kernel strips stay float32) and returned as float64. See the
    module docstring for the formulas (arXiv 2605.18870, Eq. 5 and Sec. 6).
    """
    (P, n, d), H = x.shape, score.shape[1]
    value = score if value is None else value
    if symmetric is None:
        symmetric = torch.equal(score, score.mT)
    acc_dtype = torch.float64  # sums of the energy terms (a no-op cast for float64 input)
    tile, heads = _tiling(P, H, n, chunk_elems)
    feats = _pair_features(x, ito and energy)  # (P, n, F)  [x, 1, (x x^T) features]
    n_feat = feats.shape[-1]
    gram_ito = energy and ito and n_feat == d + 1  # high d: (x_i . x_j)^2 from Gram tiles
    acc = torch.zeros_like(x)  # (P, n, d)  sum_h V_h sum_j A^h_ij x_j
    inv_n = x.new_zeros(P, n)  # sum_h 1 / N_{h,i}
    k_sum, ito_sum = x.new_zeros(P, dtype=acc_dtype), x.new_zeros(P, dtype=acc_dtype)
    moment = x.new_zeros(P, H, d, d, dtype=acc_dtype) if energy else None
    xt, feats_t = x.mT, feats.mT.contiguous()  # (P, d, n), (P, F, n)
    work = _work_buffers(x, heads * tile * n, heads * n_feat * n)
    for h0 in range(0, H, heads):
        hs = slice(h0, h0 + heads)
        b_h, v_h = score[:, hs], value[:, hs]  # (P, c, d, d)
        c = b_h.shape[1]
        q = torch.bmm(x, b_h.permute(0, 2, 1, 3).reshape(P, d, c * d))  # (P, n, c d)  x_i^T B_h
        kf, ito_part = _strip_sums(q.view(P, n, c, d), x, feats_t, tile, symmetric, gram_ito,
                                   work)
        kx, norm = kf[:, :d], kf[:, d]  # (P, d, n, c)  sum_j K_ij x_j;  (P, n, c)  N_{h,i}
        inv = norm.reciprocal()
        inv_n += inv.sum(-1)
        ax = (kx * inv.unsqueeze(1)).permute(0, 2, 1, 3).reshape(P, n, d * c)  # sum_j A_ij x_j
        acc.baddbmm_(ax, v_h.permute(0, 3, 1, 2).reshape(P, d * c, d))  # sum_h V_h (A x)_i
        if energy:
            k_sum += norm.to(acc_dtype).sum((1, 2))
            ito_sum += ito_part.to(acc_dtype)
            _add_moments(moment, hs, xt, kx)
    return _field(x, acc, inv_n, H, (k_sum, ito_sum if ito else None, moment) if energy
                  else None)


def _work_buffers(x: Tensor, kernel: int, sums: int) -> tuple[Tensor, Tensor, Tensor]:
    """Preallocated strips, per path: one kernel strip and two feature-sum buffers.
    Fresh multi-MB temporaries per strip cost more than the exp."""
    P = x.shape[0]
    return x.new_empty(P * kernel), x.new_empty(P * sums), x.new_empty(P * sums)


def _add_moments(moment: Tensor, hs: slice, xt: Tensor, kx: Tensor) -> None:
    """M_h[:, b] = sum_i x_i (K x)_ib for the heads ``hs``; kx is (P, d, n, c)."""
    for b in range(kx.shape[1]):
        moment[:, hs, :, b] = torch.bmm(xt, kx[:, b]).mT  # (P, c, d)


def _field(x: Tensor, acc: Tensor, inv_n: Tensor, H: int,
           energy_sums: tuple[Tensor, Tensor | None, Tensor] | None) -> FieldEval:
    """The velocity, G^2 and (``energy_sums`` = (sum K, Ito sum or None, M), unscaled) the
    energy terms, from the sums over heads: acc = sum_h V_h (A x)_i and inv_n = sum_h 1/N."""
    n = x.shape[1]
    velocity = tangent_project(x, acc / H)
    mobility = n * inv_n / H  # (P, n)  mean_h n / N_{h,i}
    g2 = (velocity.square().sum(-1).to(torch.float64) / mobility.to(torch.float64)).mean(-1)
    if energy_sums is None:
        return FieldEval(velocity, g2)
    k_sum, ito_sum, moment = energy_sums
    scale = 1.0 / (2 * H * n * n)
    ito_kernel = (ito_sum + k_sum) * scale if ito_sum is not None else None
    return FieldEval(velocity, g2, k_sum * scale, moment * scale, ito_kernel)


def interaction_energy(x: Tensor, D: Tensor) -> Tensor:
    """E(x; D) = 1/(2 H n^2) sum_h sum_ij exp(<x_i, D_h x_j>), (P,) (arXiv 2605.18870, Sec. 6).

    x is (P, n, d) and D is (P, H, d, d); computed in chunks by :func:`evaluate_field`.
    """
    return evaluate_field(x, D, energy=True).energy
