"""Brute-force references for rank statistics, shared by the similarity tests."""

import math


def brute_auc(s, pos):
    """P(s+ > s-) + 1/2 P(s+ = s-) over all (positive, negative) pairs."""
    plus, minus = s[pos], s[~pos]
    if len(plus) == 0 or len(minus) == 0:
        return math.nan
    diff = plus[:, None] - minus[None, :]
    return float(((diff > 0).double() + 0.5 * (diff == 0).double()).mean())
