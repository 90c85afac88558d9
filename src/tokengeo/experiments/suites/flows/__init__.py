"""Suite ``flows``: Massucco et al. (arXiv 2605.18870), tokens on S² (Sec. 6) and the theory
(Sec. 3–5), one module per question:

* :mod:`.scaling`: G² against H for three weight drifts (OU, the figures' in-phase
  oscillating drift, the authors' current per-head drift); :mod:`.runs` makes their cells;
* :mod:`.settling`: whether the cloud settles (OU) or never settles (oscillating weights);
* :mod:`.identity`: the energy-dissipation identity of the multi-head, time-dependent energy
  as dt → 0, term by term;
* :mod:`.clustering`: time dependence against its own static average, and the stationary
  points of the integrable regime;
* :mod:`.stability`: Grönwall and weight-path continuity (construction checks).

Settings: ``suites/flows.toml``; their schema and checks: :mod:`.plan`.
"""

from __future__ import annotations

from tokengeo.experiments.decidability import paths_t
from tokengeo.experiments.suite import Suite
from tokengeo.experiments.suites.flows.common import PAPER, TITLE
from tokengeo.experiments.suites.flows.plan import SETTINGS, cells, check
from tokengeo.experiments.suites.flows.runs import flow_cell
from tokengeo.experiments.suites.flows.scaling import EXPONENT_CLAIMS, power_law_shape
from tokengeo.experiments.suites.flows.summary import summarise

SUITE = Suite("flows", TITLE, PAPER, SETTINGS, cells, summarise, check, planned=paths_t)

__all__ = ["EXPONENT_CLAIMS", "SETTINGS", "SUITE", "cells", "check", "flow_cell",
           "power_law_shape", "summarise"]
