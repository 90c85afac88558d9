"""Settings checked as a whole, before the first cell: what depends on what.

Each suite's settings schema (:mod:`tokengeo.experiments.settings`) checks one value at a
time; this pass cross-checks the resolved settings of a suite, so that a run is refused in a
second with one line naming the setting and its valid range, never after its cells ran:

* every suite's ``seeds`` are distinct (a repeated seed gives a zero-width interval,
  silently);
* then the suite's own rules (``Suite.check``), built from the checks here: for a suite
  over k (:func:`check_ks`), ``ks`` are distinct, include the baseline 0, hold at least two
  values (every claim compares a k with k = 0), and each ``k <= H``, the model's heads per
  layer (H read from the registry's config, or for a pretrained ``hf:`` model from its
  ``config.json``, before any weights load); the Laplacian sweeps also hold every k their
  claims name: 0, H // 2 and H (the headline: all heads Laplacian), so a trend over k has
  at least three points;
* ``--only`` names each suite once.

``check_suite(suite, where, settings)`` is called by :func:`tokengeo.experiments.reproduce.
plan_suite` after the schema check and before the suite builds its cells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError


def check_only(only: Sequence[str]) -> None:
    """``--only`` lists each suite once."""
    seen: set[str] = set()
    for name in only:
        if name in seen:
            raise ConfigError(f"--only names suite {name!r} twice; list each suite once")
        seen.add(name)


def check_suite(suite, where: str | Path, settings: dict[str, Any]) -> None:
    """Cross-check the resolved settings (read from ``where``) of ``suite`` (a
    :class:`~tokengeo.experiments.suite.Suite`): distinct seeds, then ``suite.check``;
    ConfigError names the setting and its valid range."""
    where = str(where)
    if "seeds" in settings:
        check_distinct(where, "seeds", settings["seeds"])
    suite.check(where, settings)


def check_distinct(where: str, name: str, values: Sequence[Any]) -> None:
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ConfigError(f"{where}: {name} = {list(values)!r} repeats {v!r}; each value "
                              "must appear once (a repeated seed or setting is no new sample)")
        seen.add(v)


def check_ks(where: str, settings: dict[str, Any], *, headline: bool = False) -> None:
    """A suite over k: ``ks`` distinct, with 0 and a k >= 1, each k <= H; with ``headline``
    (the Laplacian sweeps, whose claims are at k = 0, H // 2, H) those three too. Settings
    without ``ks`` have nothing to check."""
    if "ks" not in settings:
        return
    ks = list(settings["ks"])
    check_distinct(where, "ks", ks)
    if 0 not in ks or len(ks) < 2:
        raise ConfigError(f"{where}: ks = {ks!r} must hold the baseline 0 and at least one "
                          "k >= 1 (every claim compares a k with k = 0)")
    heads, source = heads_of(settings)
    if heads is not None:
        for k in ks:
            if k > heads:
                raise ConfigError(f"{where}: ks = {ks!r} has k = {k} but {source} has "
                                  f"{heads} heads per layer; each k must lie in 0..{heads}")
    if headline and heads is not None:
        _check_headline_ks(where, ks, heads, source)


def _check_headline_ks(where: str, ks: list[int], heads: int, source: str) -> None:
    """A Laplacian sweep's claims compare k = H (all heads, the paper's headline) and
    k = H // 2 with k = 0, and fit a trend over k (three points at least)."""
    if heads < 2:
        raise ConfigError(f"{where}: {source} has {heads} head per layer; the Laplacian "
                          "sweep compares none, half and all heads, so it needs n_heads >= 2")
    missing = [k for k in (0, heads // 2, heads) if k not in ks]
    if missing:
        raise ConfigError(f"{where}: ks = {ks!r} lacks k = {', '.join(map(str, missing))}; "
                          f"{source} has H = {heads} heads per layer and the claims compare "
                          f"k = H // 2 = {heads // 2} and k = H = {heads} (all heads "
                          "Laplacian) with k = 0: list them, e.g. ks = "
                          f"{list(range(heads + 1))!r}")


def heads_of(settings: dict[str, Any]) -> tuple[int | None, str]:
    """(H, what it is) of the model of a suite's ``train`` table, known without loading any
    weights; (None, "") when it cannot be known yet (the model's own check refuses it
    later)."""
    train = settings.get("train")
    if not isinstance(train, dict) or not isinstance(train.get("model"), str):
        return None, ""
    model = train["model"]
    if model.startswith("hf:"):
        return _hf_heads(model[3:]), f"model {model!r}"
    cfg = registry_config(train)
    heads = getattr(cfg, "n_heads", None)
    return (int(heads) if isinstance(heads, int) else None), f"model {model!r}"


def registry_config(train: dict[str, Any]):
    """The registry config of a ``train`` table's tokengeo model, built without weights: its
    ``model_overrides`` (less ``n_laplacian``) and the image size its data are resized to."""
    from tokengeo.models.registry import get_entry

    overrides = dict(train.get("model_overrides") or {})
    overrides.pop("n_laplacian", None)
    from tokengeo.data.registry import image_size_of

    fields = {f.name for f in dataclasses.fields(get_entry(train["model"]).config_cls)}
    data = train.get("data")
    # the images the data set gives (CIFAR: 32 px; a resizing loader: its image_size), not
    # the model's default: a ViT of patch 8 on CIFAR-100 is valid
    size = image_size_of(data, train.get("data_options")) if isinstance(data, str) else None
    if size is not None and "image_size" in fields:
        overrides.setdefault("image_size", size)
    return get_entry(train["model"]).config(**overrides)


def _hf_heads(source: str) -> int | None:
    """``num_attention_heads`` of a pretrained model: a named one's record, or a folder's
    ``config.json`` (read and type-checked, never the weights)."""
    from tokengeo.io import read_json
    from tokengeo.models.hf import pretrained

    if pretrained.is_pretrained(source):
        return pretrained.get_spec(source).n_heads
    config = Path(source).expanduser() / "config.json"
    if not config.is_file():
        return None  # the model's own check names the missing folder
    heads = read_json(config, dict, limit=1 << 20).get("num_attention_heads")
    if heads is None:
        return None
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ConfigError(f"{config}: num_attention_heads = {heads!r} must be a whole "
                          "number >= 1")
    return heads


# ---- cached cell values: a schema per field ----------------------------------------------
#
# The fields suites read from a cell value (``Cell.fields``), by name: what each must hold.
# ``number``: an int or float (not a bool), NaN allowed (a diverged metric is a result),
# never ±inf; ``numbers``: a rectangular (nested) list of such numbers; ``tree``: a number,
# None, or a dict / list whose leaves are numbers, None or bools (no strings); ``strings``:
# a list of strings. A field not listed here is only checked for presence (cells.py).
CELL_FIELDS: dict[str, str] = {
    "final": "tree", "parameters": "tree", "wall_time_s": "number", "step": "number",
    "geometry": "tree", "summary": "tree", "t": "numbers", "G2": "numbers",
    "E_mean": "numbers", "figures": "strings", "warnings": "strings",
    "knn_accuracy": "tree", "linear_accuracy": "tree", "iou": "tree", "seg_miou": "tree",
    "seg_chance_miou": "tree",
    "patch_components_99": "tree", "patch_decay_alpha": "tree", "embedding_spread": "tree",
    "result.short_range_mass": "tree", "result.input_distinct_share": "tree",
    "result.repeated_token_share_std": "tree",
    "converted": "tree", "heads": "tree", "mix": "tree", "train_tokens": "number",
}


def cell_value_problem(value: dict, fields: Sequence[str]) -> str | None:
    """Why the cached ``value`` does not fit the schema of its ``fields``, or None."""
    for name in fields:
        kind = CELL_FIELDS.get(name) or CELL_FIELDS.get(name.split(".")[0])
        if kind is None:
            continue
        node: Any = value
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                break  # absence is cells.py's check
            node = node[part]
        else:
            why = _kind_problem(node, kind)
            if why is not None:
                return f"has {name!r} {why}"
    return None


def _is_number(x: Any) -> bool:
    import math

    return isinstance(x, int | float) and not isinstance(x, bool) and not math.isinf(x)


def _kind_problem(node: Any, kind: str) -> str | None:
    if kind == "number":
        return None if _is_number(node) else f"= {_short(node)}, not a finite number"
    if kind == "strings":
        ok = isinstance(node, list) and all(isinstance(s, str) for s in node)
        return None if ok else f"= {_short(node)}, not a list of strings"
    if kind == "numbers":
        return None if isinstance(node, list) and _shape(node) is not None else \
            f"= {_short(node)}, not a rectangular list of finite numbers"
    bad = _tree_leaf_problem(node)
    return None if bad is None else f"holding {_short(bad)}, not a number"


def _shape(node: Any) -> tuple[int, ...] | None:
    """The shape of a rectangular nested list of numbers, or None."""
    if _is_number(node):
        return ()
    if not isinstance(node, list):
        return None
    shapes = {_shape(x) for x in node}
    if None in shapes or len(shapes) > 1:
        return None
    inner = shapes.pop() if shapes else ()
    return (len(node), *inner)


def _tree_leaf_problem(node: Any, depth: int = 0) -> Any:
    """The first leaf that is not a number, None or a bool (a string, an infinity)."""
    if depth > 32:
        return node
    if isinstance(node, dict):
        items: Any = node.values()
    elif isinstance(node, list):
        items = node
    else:
        ok = node is None or isinstance(node, bool) or _is_number(node)
        return None if ok else (node if node is not None else "null")
    for item in items:
        bad = _tree_leaf_problem(item, depth + 1)
        if bad is not None:
            return bad
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
