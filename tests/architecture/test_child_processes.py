"""Every child process tokengeo starts dies with it.

A measurement in a fresh interpreter or a torchrun launcher that outlives a killed worker
keeps its cores busy and its output folder locked. Every ``subprocess.run``/``Popen`` in
``src/tokengeo`` must therefore pass ``preexec_fn=die_with_parent``
(:mod:`tokengeo.lifetime`), except short read-only calls named in :data:`EXEMPT`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tokengeo

ROOT = Path(tokengeo.__file__).parent
STARTERS = {"run", "Popen", "call", "check_call", "check_output"}
EXEMPT = {("experiments/summary.py", "git")}  # `git rev-parse HEAD`: returns at once


def _subprocess_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in STARTERS and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "subprocess"):
            yield node


def _first_word(call: ast.Call) -> str | None:
    cmd = call.args[0] if call.args else None
    if isinstance(cmd, ast.List) and cmd.elts and isinstance(cmd.elts[0], ast.Constant):
        return cmd.elts[0].value
    return None


def _unguarded(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for call in _subprocess_calls(ast.parse(path.read_text(), str(path))):
            guarded = any(k.arg == "preexec_fn" and isinstance(k.value, ast.Name)
                          and k.value.id == "die_with_parent" for k in call.keywords)
            if not guarded and (rel, _first_word(call)) not in EXEMPT:
                out.append(f"{rel}:{call.lineno}")
    return out


def test_every_child_process_dies_with_tokengeo():
    assert _unguarded() == []


def test_the_check_sees_an_unguarded_call(tmp_path):
    (tmp_path / "bad.py").write_text("import subprocess\nsubprocess.run(['python', '-V'])\n")
    (tmp_path / "good.py").write_text(
        "import subprocess\nsubprocess.run(['python', '-V'], preexec_fn=die_with_parent)\n")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "summary.py").write_text(
        "import subprocess\nsubprocess.run(['git', 'rev-parse', 'HEAD'])\n")
    assert _unguarded(tmp_path) == ["bad.py:2"]
