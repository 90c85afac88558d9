"""The one reader of a report.json: bounded, strict, checked against ``report.schema.json``.

Every renderer (``tokengeo report``, the doc blocks and their ``compare`` target, ``tokengeo
view --report``, the report written by ``tokengeo reproduce``) reads through
:func:`read_report`, so a report.json from anywhere is data: its size is bounded, NaN and
Infinity are refused (tokengeo writes null for an unbounded or missing number), and any field
of the wrong type or missing is one :class:`~tokengeo.errors.ConfigError` line naming the
field and the fix, raised before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.reporting.schema import report_schema, violation

REPORT_LIMIT = 64 << 20  # a report.json is a few MB at most
FIX = "regenerate it with `tokengeo reproduce` (it resumes from the cached cells)"


def check_report(data, what: str = "report.json") -> dict:
    """``data`` itself when it is a report.json by the schema; else one ConfigError line."""
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith(
            "tokengeo-report/"):
        raise ConfigError(f"{what} is not a tokengeo report.json (no tokengeo-report format); "
                          "pass the report.json that `tokengeo reproduce` wrote")
    formats = report_schema()["properties"]["format"]["enum"]
    if data["format"] not in formats:
        raise ConfigError(f"{what} has format {str(data['format'])[:40]!r}; this tokengeo reads "
                          f"{formats}: {FIX}")
    problem = violation(data, report_schema())
    if problem is not None:
        raise ConfigError(f"{what}: {problem}; fix that field or {FIX}")
    return data


def read_report(path: str | Path) -> dict:
    """The report.json at ``path``, validated (see the module); ConfigError otherwise."""
    from tokengeo.io import parse_json, read_small

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{str(path)!r}: no such report; pass a run's report.json")
    raw = read_small(path, REPORT_LIMIT)  # a FIFO, a folder or a huge file: one line
    # NaN and Infinity parse here so that the check names the field that holds them
    data = parse_json(raw, repr(str(path)), None, limit=REPORT_LIMIT, allow_nan=True)
    return check_report(data, repr(str(path)))
