"""The HTML report renders offline in headless Chromium with its tables and images."""

import shutil

import numpy as np
import pytest
from helpers.browser import dump_dom, screenshot

from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput, write_report
from tokengeo.experiments.stats import Region, mean_interval

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="needs Debian's chromium (make test installs it as root; else apt-get install chromium)",
)


def _figure(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.imshow(np.random.default_rng(0).random((16, 16)), cmap="viridis")
    fig.savefig(path)
    plt.close(fig)
    return path


def test_report_renders_tables_and_embedded_images(tmp_path):
    (tmp_path / "out" / "figures").mkdir(parents=True)
    fig = _figure(tmp_path / "out" / "figures" / "heatmap.png")  # only figures/ is embedded
    claim = Claim("demo", "Laplacian heads raise accuracy", "Zhang & Papyan, §5", "+0.9",
                  "accuracy difference", Region.above(0), measured=mean_interval([0.1, 0.2, 0.15]))
    suite = SuiteOutput("demo", "Demo suite", "A paper", [claim], figures=[fig],
                        tables=[("numbers", ["k", "acc"], [["0", "0.8"], ["2", "0.9"]])])
    html = write_report(tmp_path / "out", [suite], "demo report", ["preamble"])
    html.with_name("heatmap.png").unlink(missing_ok=True)
    fig.unlink()  # the report must not depend on the PNG file: it is embedded

    dom = dump_dom(html)
    assert dom.count("<table") == 3 and "reproduced" in dom  # tally, summary, numbers
    assert "data:image/png;base64," in dom

    png = screenshot(html, tmp_path / "out" / "report.png")
    from matplotlib.image import imread

    pixels = imread(png)
    assert pixels.shape[0] > 500 and pixels.shape[1] > 500
    assert pixels[..., :3].std() > 0.05  # not a blank page
    # the embedded heatmap shows colour (viridis), which text and tables never do
    rgb = pixels[..., :3]
    saturated = (rgb.max(-1) - rgb.min(-1)) > 0.3
    assert saturated.sum() > 1000
