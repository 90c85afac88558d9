"""Optional arms of the ltransformer suite kept in the settings but left out (``left_out``):
no cells, and their claims not run with the stated reason; a bad entry is refused."""

import pytest
from test_ltransformer_fair import CTX, SETTINGS, _results

from tokengeo.errors import ConfigError
from tokengeo.experiments.suites import ltransformer as suite

REASONS = {"long_train": "opt-in: at its ceiling, 30 cells; run it with X",
           "slices": "opt-in: our own question, 15 cells; run it with Y"}


def test_left_out_arms_train_nothing_and_say_why():
    settings = {**SETTINGS, "left_out": REASONS}
    keys = [c.key for c in suite.cells(settings, CTX)]
    assert not any(k.startswith("long") or k.startswith("p1_L") or k.startswith("p2_L")
                   for k in keys)
    assert any(k.startswith("long") for k in (c.key for c in suite.cells(SETTINGS, CTX)))
    out = suite.summarise(settings, _results(), CTX)
    by_text = {c.text: c for c in out.claims}
    slices = by_text["accuracy falls as the width is split into more slices p"]
    assert slices.verdict == "not run: " + REASONS["slices"]
    long = [c for c in out.claims if c.text.startswith("long inputs")]
    assert long and all(REASONS["long_train"] in c.verdict for c in long)


@pytest.mark.parametrize("table", [{"widths": "x"}, {"slices": ""}, {"long_train": 3}])
def test_bad_left_out_entries_are_refused(table):
    with pytest.raises(ConfigError, match="left_out maps an optional arm"):
        suite.check_left_out(table, "ltransformer.full.left_out")
