"""scripts/cell_means.py: the hints' measured means, per suite and cell group."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("cell_means", ROOT / "scripts" / "cell_means.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_groups_drop_seed_shard_and_hash_only():
    m = _script()
    assert m.group_of("k=4-s2-89e207f164") == "k=4"
    assert m.group_of("minilm-prose-shard3-0123456789") == "minilm-prose"
    assert m.group_of("L_alpha-identity-s10-abcdefabcd") == "L_alpha-identity"
    assert m.group_of("ou-H16-0123456789") == "ou-H16"  # no seed: the name stays
    assert m.group_of("efficiency") == "efficiency"


def test_means_over_stored_cells_and_a_damaged_file_is_skipped(tmp_path, capsys):
    m = _script()
    suite = tmp_path / "laplacian-images"
    suite.mkdir()
    for seed, seconds in enumerate([10.0, 20.0, 60.0]):
        (suite / f"k=0-s{seed}-{seed:010x}.json").write_text(json.dumps(
            {"format": "tokengeo-cell/1", "cell": "x", "value": {}, "seconds": seconds}))
    (suite / "k=4-s0-ffffffffff.json").write_text("{not json")
    (suite / "k=4-s1-eeeeeeeeee.json").write_text(json.dumps({"seconds": -5}))
    table = m.means(tmp_path)
    assert table == {"laplacian-images": {"k=0": {"cells": 3, "mean_s": 30.0, "min_s": 10.0,
                                                  "max_s": 60.0, "core_s": 90.0}}}
    assert "k=4-s0-ffffffffff.json" in capsys.readouterr().err
    assert m.main([str(tmp_path / "nowhere")]) == 2
