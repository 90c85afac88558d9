"""tokengeo: how transformers shape token representations.

Top-level API (imported lazily so ``import tokengeo`` stays light)::

    tokengeo.create_model("vit-tiny", n_laplacian=2)   # a registered model variant
    tokengeo.list_models()                              # their names
    tokengeo.resolve_model("smollm2-135m")              # a named model, folder or run: sizes, load
    tokengeo.laplacianize(hf_model, n_laplacian=3)      # Laplacian heads in a HF model
    tokengeo.run_with_cache(model, x, names=[...])      # (output, ActivationCache)
    tokengeo.run_with_hooks(model, x, fwd_hooks=[(name, fn)])  # edit activations by name
    with tokengeo.with_hooks(model, fwd_hooks=[...]): ...  # the same, removed on exit
    tokengeo.view.show(model, "some text", tokenizer=tok)  # the explorer in a notebook
    tokengeo.load_model("runs/vit-l3")                  # a trained run's model (no data needed)
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "create_model": "tokengeo.models.registry",
    "list_models": "tokengeo.models.registry",
    "register_model": "tokengeo.models.registry",
    "resolve_model": "tokengeo.models.names",
    "laplacianize": "tokengeo.models.hf",
    "capture": "tokengeo.probes.capture",
    "run_with_cache": "tokengeo.probes.capture",
    "run_with_hooks": "tokengeo.probes.hooked",
    "with_hooks": "tokengeo.probes.hooked",
    "reset_hooks": "tokengeo.probes.hooked",
    "hook_sites": "tokengeo.probes.capture",
    "ActivationCache": "tokengeo.probes.activation_cache",
    "load_model": "tokengeo.train.loading",
    "load_run": "tokengeo.train.loading",
    "mixed_coefficients": "tokengeo.models.hf",
    "TrainConfig": "tokengeo.train.config",
    "Trainer": "tokengeo.train.trainer",
    "train": "tokengeo.train.trainer",
    "HookPoint": "tokengeo.hooks",
    "to_transformer_lens": "tokengeo.interop",
}

# subpackages reachable as attributes (``tokengeo.view.show``) without an import of their own;
# each is imported on first use, and imports its own heavy dependencies lazily
_SUBPACKAGES = ("view", "probes", "models", "nn", "flows", "hooks")

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"tokengeo.{name}")
    raise AttributeError(f"module 'tokengeo' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What ``tokengeo.<Tab>`` completes: the public API and the subpackages."""
    return sorted({*globals(), *__all__, *_SUBPACKAGES} - {"annotations", "importlib"})
