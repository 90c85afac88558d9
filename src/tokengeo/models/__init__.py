"""tokengeo.models: tokengeo's own model families and their registry; the Hugging Face
bridge is the subpackage :mod:`tokengeo.models.hf`.

Importing the package registers the built-in variants (:mod:`tokengeo.models.zoo`) and the
``hf:<source>`` pretrained-LM names (:mod:`tokengeo.models.hf.lm`) into
:mod:`tokengeo.models.registry`; the registry itself imports no family.

The Hugging Face modules that once sat here moved into :mod:`tokengeo.models.hf`; importing
one by its old path is an ImportError naming the new one (:data:`MOVED`).
"""

import importlib.abc
import sys

from tokengeo.models import zoo  # noqa: F401  (registers the built-in variants)
from tokengeo.models.hf import lm  # noqa: F401  (registers the hf:<source> names)

MOVED = {f"tokengeo.models.{old}": f"tokengeo.models.hf.{new}" for old, new in [
    ("hf_families", "families"), ("hf_lm", "lm"), ("pretrained", "pretrained"),
    ("gguf_header", "gguf_header"), ("mpnet", "mpnet")]}


class _MovedModules(importlib.abc.MetaPathFinder):
    """Answers an import of a moved module with an ImportError naming its new path."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            raise ImportError(f"{fullname} moved to {MOVED[fullname]}; import that instead")
        return None


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())
