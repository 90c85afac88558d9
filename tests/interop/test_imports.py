"""The interp extra's imports leave the process's warnings and logging as they were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from interop.cases import REASON

pytest.importorskip("transformer_lens", reason=REASON)

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import logging, warnings
import transformers  # its logger at its own level first
from tokengeo.interop.imports import nnsight, transformer_lens
level, filters = logging.getLogger("transformers").level, list(warnings.filters)
transformer_lens(); nnsight()
from tokengeo.interop import to_transformer_lens
import tokengeo
to_transformer_lens(tokengeo.create_model("gpt-tiny", n_layers=1))
assert logging.getLogger("transformers").level == level, logging.getLogger("transformers").level
assert list(warnings.filters) == filters, [f for f in warnings.filters if f not in filters]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    warnings.warn("tokengeo: a warning of our own", UserWarning)
assert [str(w.message) for w in caught] == ["tokengeo: a warning of our own"]
print("ok")
"""


def test_importing_the_extra_leaves_warnings_and_logging_alone():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]


def test_side_effects_are_undone_inside_the_context():
    import logging
    import warnings

    from tokengeo.interop.imports import side_effects_undone

    logger = logging.getLogger("transformers")
    level, filters = logger.level, list(warnings.filters)
    with side_effects_undone():
        logger.setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", category=UserWarning)
    assert logger.level == level and list(warnings.filters) == filters


def test_a_missing_extra_names_the_install_command(monkeypatch):
    from tokengeo.errors import MissingDependencyError
    from tokengeo.interop import imports

    monkeypatch.setitem(sys.modules, "nnsight", None)  # import nnsight raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'tokengeo\[interp\]'"):
        imports.nnsight()
