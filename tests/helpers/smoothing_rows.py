"""Fake smoothing-sign rows of a training cell (the ``"smoothing"`` field that
tokengeo.probes.smoothing.head_smoothing fills), for the suites' claim tests."""


def fake_smoothing(k: int, seed: int, heads: int, layers: int, sign: float = 1.0) -> list[dict]:
    """The last k heads of every layer Laplacian; Laplacian heads smooth (derivative
    −sign × (0.2 + 0.01 seed), Rayleigh −sign × 0.3) and attention heads sharpen (+0.1)."""
    rows = []
    for layer in range(layers):
        for h in range(heads):
            lap = h >= heads - k
            d = -sign * (0.2 + 0.01 * seed + 0.003 * h) if lap else 0.1 + 0.005 * seed
            rows.append({"layer": layer, "head": h, "kind": "laplacian" if lap else "attention",
                         "variance_derivative": d, "rayleigh": -sign * 0.3 if lap else 0.05,
                         "variance_step": d + d * d / 4, "dirichlet_step": 1.5 * d})
    return rows


def fake_sublayers(seed: int, layers: int) -> list[dict]:
    """Per attention sublayer, the within-sequence share before and after it (each sublayer
    lowers it by 0.05)."""
    return [{"layer": layer, "share_before": 0.8 - 0.1 * layer + 0.01 * seed,
             "share_after": 0.75 - 0.1 * layer + 0.01 * seed} for layer in range(layers)]
