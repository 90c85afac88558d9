"""Edit activations by name: ``run_with_hooks``, the ``hooks()`` context and ``reset_hooks``,
as TransformerLens has them, on tokengeo models and every supported Hugging Face model.

A hook is ``fn(activation, hook) -> replacement or None``; ``hook.name`` is the site's name
(``blocks.3.attn.hook_z``) and ``hook.layer`` its block (or None). What a forward hook returns
flows on through the model; what a backward hook returns replaces the gradient of that
activation. A name may be a shell pattern (``blocks.*.attn.hook_pattern``) or a predicate
``lambda name: ...``::

    def ablate_head_2(z, hook):                       # z: (B, T, H, Dh)
        z[:, :, 2] = 0
        return z

    logits = run_with_hooks(model, ids, fwd_hooks=[("blocks.1.attn.hook_z", ablate_head_2)])
    with hooks(model, fwd_hooks=[("blocks.1.attn.hook_z", ablate_head_2)]):
        logits = model(ids)                           # the same edit

The sites are those of :func:`tokengeo.probes.capture.hook_sites`: every tokengeo hook point
(all editable) and, on a Hugging Face model, the table of :mod:`tokengeo.probes.hf_sites`
(all editable except ``hook_pattern`` and the ungrouped ``hook_k``/``hook_v``, which are
read-only and raise on a replacement). Hooks are removed when the context exits or the run
returns, also on error. A backward hook is a tensor hook on the activation, registered when
the forward pass reaches the site; it is removed with the forward hooks, so call
``backward()`` inside :func:`hooks` (or pass ``reset_hooks_end=False`` to
:func:`run_with_hooks` and call :func:`reset_hooks` after the backward pass).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import hook_sites

Selector = str | Callable[[str], bool]
HookFn = Callable[..., torch.Tensor | None]  # fn(activation, hook) -> replacement or None
_HANDLES = "_tokengeo_user_hooks"  # on the model: the handles hooks() and run_with_hooks add
_LAYER = re.compile(r"^blocks\.(\d+)\.")


@dataclass(frozen=True)
class Hook:
    """What a hook function receives beside the activation: the site's name and layer."""

    name: str
    layer: int | None

    @classmethod
    def of(cls, name: str) -> Hook:
        m = _LAYER.match(name)
        return cls(name, int(m.group(1)) if m else None)


def select(available: Sequence[str], selector: Selector) -> list[str]:
    """The site names a shell pattern or a predicate picks; none raises with examples."""
    if callable(selector):
        hits = [n for n in available if selector(n)]
        what = "the name filter"
    elif isinstance(selector, str):
        hits = [n for n in available if fnmatch.fnmatchcase(n, selector)]
        what = repr(selector)
    else:
        raise ConfigError(f"a hook is (name, fn) with name a string or a predicate, got "
                          f"{type(selector).__name__}")
    if not hits:
        raise ConfigError(f"no hook point matches {what}; available names include: "
                          f"{', '.join(available[:8])} ({len(available)} in all; see "
                          "tokengeo.probes.capture.hook_sites(model))")
    return hits


def _forward(fn: HookFn, hook: Hook) -> Callable[[torch.Tensor], torch.Tensor | None]:
    return lambda x: fn(x, hook)


def _backward(fn: HookFn, hook: Hook, handles: list) -> Callable[[torch.Tensor], None]:
    def watch(x: torch.Tensor) -> None:
        if not x.requires_grad:
            raise ConfigError(f"backward hook on {hook.name}: the activation needs no gradient "
                              "(run with gradients enabled and trainable inputs or weights)")
        handles.append(x.register_hook(lambda grad: fn(grad, hook)))
        return None

    return watch


def _pairs(hooks: Iterable[tuple[Selector, HookFn]] | None, kind: str) -> list:
    pairs = list(hooks or ())
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and callable(pair[1])):
            raise ConfigError(f"{kind} must be a list of (name, fn) pairs, e.g. "
                              f"[('blocks.0.attn.hook_z', fn)]; got {pair!r}")
    return pairs


def add_hooks(model: nn.Module, fwd_hooks=None, bwd_hooks=None, *,
              ungroup_kv: bool = False) -> list:
    """Attach the hooks and return their handles (also kept on ``model`` for
    :func:`reset_hooks`). Nothing is attached if any name matches no site."""
    fwd, bwd = _pairs(fwd_hooks, "fwd_hooks"), _pairs(bwd_hooks, "bwd_hooks")
    sites = hook_sites(model, ungroup_kv=ungroup_kv)
    names = list(sites)
    plan = [(n, _forward(fn, Hook.of(n))) for sel, fn in fwd for n in select(names, sel)]
    handles: list = model.__dict__.setdefault(_HANDLES, [])
    plan += [(n, _backward(fn, Hook.of(n), handles)) for sel, fn in bwd
             for n in select(names, sel)]
    added = []
    try:
        for name, fn in plan:
            added.append(sites[name].attach(fn))
    except BaseException:
        for handle in added:
            handle.remove()
        raise
    handles.extend(added)
    return added


def reset_hooks(model: nn.Module) -> None:
    """Remove every hook :func:`hooks`, :func:`run_with_hooks` and :func:`add_hooks` attached
    to ``model`` (the backward tensor hooks included); capture contexts keep theirs."""
    handles = model.__dict__.get(_HANDLES, [])
    while handles:
        handles.pop().remove()


@contextmanager
def hooks(model: nn.Module, fwd_hooks=None, bwd_hooks=None, *,
          ungroup_kv: bool = False) -> Iterator[nn.Module]:
    """Context in which ``model`` runs with the hooks; they are removed on exit, also on
    error (the ones attached before the context stay)."""
    before = len(model.__dict__.get(_HANDLES, []))
    add_hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv)
    try:
        yield model
    finally:
        handles = model.__dict__.get(_HANDLES, [])
        while len(handles) > before:
            handles.pop().remove()


def run_with_hooks(model: nn.Module, *args: Any, fwd_hooks=None, bwd_hooks=None,
                   reset_hooks_end: bool = True, ungroup_kv: bool = False,
                   **kwargs: Any) -> Any:
    """``model(*args, **kwargs)`` with the hooks attached; returns the model's output.

    With ``reset_hooks_end=False`` the hooks stay (for a backward pass after the call) until
    :func:`reset_hooks`; backward hooks need it, since the backward pass runs after the call.
    """
    if bwd_hooks and reset_hooks_end:
        raise ConfigError("bwd_hooks run during backward(), after run_with_hooks returns: pass "
                          "reset_hooks_end=False and call reset_hooks(model) after backward(), "
                          "or call backward() inside `with hooks(model, bwd_hooks=...)`")
    if not reset_hooks_end:
        add_hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv)
        return model(*args, **kwargs)
    with hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv):
        return model(*args, **kwargs)
