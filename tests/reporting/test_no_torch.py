"""tokengeo.reporting is a low package: reading, checking and rendering a report.json (the
Markdown, the HTML page, the doc blocks) imports no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCRIPT = """
import sys
from pathlib import Path
from tokengeo.reporting.reader import read_report
from tokengeo.reporting.document import document
from tokengeo.reporting.render import html, markdown
from tokengeo.reporting.docfiles import check_docs
folder = Path("docs/results")
data = read_report(folder / "report.json")
assert markdown(document(data), folder) and html(document(data), "t", folder)
assert check_docs(data, Path(".")) == []
print("torch" in sys.modules)
"""


def test_reading_and_rendering_a_report_imports_no_torch():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT / "src")},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
