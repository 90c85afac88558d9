"""Shared by the tests/test_data*.py files: skip a test when a source is absent here."""

from __future__ import annotations

import pytest

from tokengeo.data.sources import Source
from tokengeo.errors import DataNotFoundError


def require_source(source: Source):
    """Skip (reason: the install command) when ``source`` is not installed on this machine."""
    try:
        source.locate()
    except DataNotFoundError as exc:
        pytest.skip(f"source not installed here: {exc}")
