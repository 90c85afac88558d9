"""The claims catalogue's home: one TOML file per paper in this folder (``laplacian.toml``,
``ltransformer.toml``, ``pde.toml``, ``similarity.toml``). The loader, the checks and the
doc block live in :mod:`tokengeo.reporting.catalogue` (the report renderer reads them
without importing the experiments); this module gives the same names to the suites and
tests."""

from tokengeo.reporting.catalogue import (
    FOLDER,
    PAPERS,
    TALLIED,
    Entry,
    check_report,
    check_suites,
    coverage,
    load,
    read_file,
    render_catalogue,
    rows_of,
    suites_of,
)

__all__ = ["FOLDER", "PAPERS", "TALLIED", "Entry", "check_report", "check_suites", "coverage",
           "load", "read_file", "render_catalogue", "rows_of", "suites_of"]
