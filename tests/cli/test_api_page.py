"""The API page documents every public top-level name, and shows each in its example; its
docstrings' Sphinx roles become links (the griffe extension of docs/_hooks)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import tokengeo

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"


def _documented() -> set[str]:
    text = API.read_text(encoding="utf-8")
    names = set()
    for m in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, flags=re.M):
        members = re.search(r"members: \[([^\]]*)\]", m.group(2))
        names.update(n.strip() for n in (members.group(1) if members else "").split(","))
    return names


def test_every_top_level_name_is_documented_and_in_the_example():
    text = API.read_text(encoding="utf-8")
    example = text[text.index("```python"):text.index("```\n", text.index("```python") + 9)]
    public = [n for n in tokengeo.__all__ if n != "__version__"]
    assert {"create_model", "load_model", "resolve_model", "mixed_coefficients", "TrainConfig",
            "Trainer", "HookPoint", "run_with_hooks", "ActivationCache"} <= set(public)
    missing = [n for n in public if n not in _documented()]
    assert missing == [], f"top-level names not on the API page: {missing}"
    unused = [n for n in public if f"tokengeo.{n}(" not in example
              and f"tokengeo.{n})" not in example and f"tokengeo.{n}." not in example]
    assert unused == [], f"top-level names the example does not use: {unused}"
    for name in public:  # each resolves to the object the page documents
        assert getattr(tokengeo, name) is not None


def test_sphinx_roles_become_links_or_code():
    pytest.importorskip("griffe", reason="griffe comes with the docs extra (make docs)")
    spec = importlib.util.spec_from_file_location("sphinx_roles",
                                                  ROOT / "docs/_hooks/sphinx_roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    import griffe

    module = griffe.load("tokengeo.probes.capture", search_paths=[str(ROOT / "src")],
                         extensions=griffe.load_extensions(roles.SphinxRoles()))
    doc = module["hook_sites"].docstring.value + module.docstring.value
    assert ":class:" not in doc and ":func:" not in doc
    assert "[`HookPoint`][tokengeo.hooks.HookPoint]" in doc
    assert "`tokengeo.probes.hf_sites.hf_hook_sites`" in doc  # not on the page: code
