"""Griffe extension for the API page: Sphinx roles in docstrings become mkdocstrings links.

tokengeo's docstrings cross-reference with Sphinx roles (``:func:`capture```,
``:class:`~tokengeo.hooks.HookPoint```), which Markdown shows as raw text. Before rendering,
each role becomes an autorefs link ``[`HookPoint`][tokengeo.hooks.HookPoint]`` when its target
is documented on the API page (docs/api.md), else inline code (a link to an undocumented
object would fail the strict build). A relative name is resolved against the object's class,
then its module, then the module's imports; ``~`` shows the last part only, as in Sphinx.
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|obj|exc|const):`([^`]+)`")
API_PAGE = Path(__file__).resolve().parents[1] / "api.md"


def documented_identifiers(page: Path = API_PAGE) -> set[str]:
    """``module`` and ``module.member`` of every ``::: module`` directive on the page."""
    text = page.read_text(encoding="utf-8")
    found: set[str] = set()
    for m in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, flags=re.M):
        module, options = m.group(1), m.group(2)
        found.add(module)
        members = re.search(r"members: \[([^\]]*)\]", options)
        if members:
            found.update(f"{module}.{name.strip()}" for name in members.group(1).split(",")
                         if name.strip())
    return found


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring's Sphinx roles (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.documented = documented_identifiers()

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda m: self._link(m.group(1), obj),
                                           obj.docstring.value)

    def _link(self, target: str, obj: griffe.Object) -> str:
        target = target.strip()
        if "<" in target and target.endswith(">"):  # :func:`title <target>`
            title, target = target[:-1].split("<", 1)
            shown = title.strip()
        else:
            short = target.startswith("~")
            target = target.lstrip("~").lstrip(".")
            shown = target.rsplit(".", 1)[-1] if short else target
        resolved = self._resolve(target, obj)
        if resolved is None:
            return f"`{shown}`"
        return f"[`{shown}`][{resolved}]"

    def _resolve(self, target: str, obj: griffe.Object) -> str | None:
        scopes = []
        here = obj if obj.is_class or obj.is_module else obj.parent
        while here is not None:
            scopes.append(here.path)
            here = here.parent
        candidates = [target, *(f"{scope}.{target}" for scope in scopes)]
        module = obj.module
        head = target.split(".", 1)[0]
        imported = module.imports.get(head) if hasattr(module, "imports") else None
        if imported:
            candidates.append(imported + target[len(head):])
        return next((c for c in candidates if c in self.documented), None)
