"""Every test that reads numbers saved in the repository is marked ``saved_reference`` (so
``make test`` runs it a second time under another ATen kernel set) and compares them at a
tolerance, never bit for bit (CONTRIBUTING.md, "Numbers saved on disk")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SUFFIXES = {".npz", ".npy", ".pt", ".safetensors"}


def saved_arrays() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def readers(saved: Path) -> list[Path]:
    """The test modules that name the saved file."""
    return [m for m in sorted(TESTS.rglob("test_*.py")) if saved.name in m.read_text()]


BIT_FOR_BIT = re.compile(r"rtol=0,\s*atol=0|atol=0,\s*rtol=0|torch\.equal\(|array_equal\(")
LOADS = re.compile(r"\b(np\.load|numpy\.load|torch\.load|load_file)\(")


def bit_exact_loaders(module: Path) -> list[str]:
    """Functions of ``module`` that load saved arrays and compare something bit for bit."""
    text = module.read_text()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = ast.get_source_segment(text, node) or ""
            if LOADS.search(body) and BIT_FOR_BIT.search(body):
                out.append(f"{module.name}:{node.name}")
    return out


def test_every_saved_array_is_read_by_a_marked_tolerant_test():
    saved = saved_arrays()
    assert saved, "no saved arrays found under tests/: the scan itself is broken"
    bad = []
    for path in saved:
        modules = readers(path)
        if not modules:
            bad.append(f"{path.relative_to(TESTS)}: no test reads it")
        for module in modules:
            text = module.read_text()
            if "saved_reference" not in text:
                bad.append(f"{module.name}: reads {path.name} but is not marked saved_reference")
            bad += [f"{f}: loads saved arrays and compares bit for bit"
                    for f in bit_exact_loaders(module)]
    assert not bad, bad
