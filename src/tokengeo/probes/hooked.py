"""Edit activations by name: ``run_with_hooks``, the ``with_hooks()`` context and
``reset_hooks``, as TransformerLens has them (``run_with_hooks``, ``hooks``, ``reset_hooks``), on
tokengeo models and every supported Hugging Face model.

A hook is ``fn(activation, hook) -> replacement or None``; ``hook.name`` is the site's name
(``blocks.3.attn.hook_z``) and ``hook.layer()`` its block (or None), as on TransformerLens'
``HookPoint``. What a forward hook returns flows on through the model; it must have the
activation's shape (a tensor of another shape is refused, never reshaped or broadcast). An
edit in place (``z[:, :, 2] = 0`` and no return) is honoured like a replacement, or refused
where the site is read-only. What a backward hook returns replaces the gradient of that
activation. A name may be a shell pattern (``blocks.*.attn.hook_pattern``) or a predicate
``lambda name: ...``::

    def ablate_head_2(z, hook):                       # z: (B, T, H, Dh)
        z[:, :, 2] = 0

    logits = run_with_hooks(model, ids, fwd_hooks=[("blocks.1.attn.hook_z", ablate_head_2)])
    with with_hooks(model, fwd_hooks=[("blocks.1.attn.hook_z", ablate_head_2)]):
        logits = model(ids)                           # the same edit

The sites are those of :func:`tokengeo.probes.capture.hook_sites`: every tokengeo hook point
(all editable) and, on a Hugging Face model, the table of :mod:`tokengeo.probes.hf_sites`
(all editable except ``hook_pattern`` and the ungrouped ``hook_k``/``hook_v``, which are
read-only and raise on an edit). Each context removes the hooks it attached, and only those,
when it exits or the run returns, also on error, in any order, nested or from another
thread. A backward hook is a tensor hook on the activation, registered when the forward
pass reaches the site; it is removed with its context's forward hooks, so call
``backward()`` inside :func:`with_hooks` (or pass ``reset_hooks_end=False`` to
:func:`run_with_hooks` and call :func:`reset_hooks` after the backward pass).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.probes.capture import Selector, hook_sites, select

HookFn = Callable[..., torch.Tensor | None]  # fn(activation, hook) -> replacement or None
_GROUPS = "_tokengeo_hook_groups"  # on the model: the HookGroups attached and not removed
_LOCK = threading.Lock()  # guards every model's list of groups
_LAYER = re.compile(r"^blocks\.(\d+)\.")
RUN_WITH_HOOKS_KEYWORDS = ("fwd_hooks", "bwd_hooks", "reset_hooks_end", "ungroup_kv")


@dataclass(frozen=True)
class Hook:
    """What a hook function receives beside the activation: the site's ``name`` and, as
    TransformerLens' ``HookPoint.layer()``, its block."""

    name: str

    def layer(self) -> int | None:
        """The block of the site (``blocks.3.attn.hook_z`` -> 3), None outside the blocks."""
        m = _LAYER.match(self.name)
        return int(m.group(1)) if m else None


def check_replacement(name: str, old: torch.Tensor, new: Any) -> None:
    """A forward hook's return value must be a tensor shaped like the activation."""
    if not isinstance(new, torch.Tensor):
        raise ConfigError(f"the hook on {name} returned {type(new).__name__}; return the "
                          "activation (edited) as a tensor, or None to leave it")
    if new.shape != old.shape:
        raise ConfigError(f"the hook on {name} returned a tensor shaped {tuple(new.shape)} for "
                          f"an activation shaped {tuple(old.shape)}: return the same shape (a "
                          "replacement is never reshaped or broadcast)")


def _forward(fn: HookFn, hook: Hook) -> Callable[[torch.Tensor], torch.Tensor | None]:
    """The site function of ``fn``: its replacement checked, its edit in place returned as
    the replacement (so a site that hands out a copy puts it back, a read-only one raises).
    Inference tensors keep no version counter: there a copy tells whether ``fn`` edited."""

    def run(x: torch.Tensor) -> torch.Tensor | None:
        before = x.clone() if torch.is_inference(x) else x._version
        new = fn(x, hook)
        if new is not None:
            check_replacement(hook.name, x, new)
            return new
        if isinstance(before, torch.Tensor):
            edited = bool(((before != x) & ~(before.isnan() & x.isnan())).any())
        else:
            edited = x._version != before
        return x if edited else None

    return run


class HookGroup:
    """The handles one :func:`add_hooks` call attached (forward hooks, and the backward tensor
    hooks its watchers register during forward passes); :meth:`remove` removes those only."""

    def __init__(self, model: nn.Module) -> None:
        self.model, self.handles, self.removed = model, [], False
        self._lock = threading.Lock()

    def keep(self, handle: Any) -> None:
        with self._lock:
            if self.removed:  # a forward pass outlived the context: nothing stays behind
                handle.remove()
            else:
                self.handles.append(handle)

    def remove(self) -> None:
        with self._lock:
            self.removed = True
            handles, self.handles = self.handles, []
        for handle in reversed(handles):
            handle.remove()
        with _LOCK:
            groups = self.model.__dict__.get(_GROUPS, [])
            if self in groups:
                groups.remove(self)


def _backward(fn: HookFn, hook: Hook, group: HookGroup) -> Callable[[torch.Tensor], None]:
    def watch(x: torch.Tensor) -> None:
        if not x.requires_grad:
            raise ConfigError(f"backward hook on {hook.name}: the activation needs no gradient "
                              "(run with gradients enabled and trainable inputs or weights)")
        group.keep(x.register_hook(lambda grad: fn(grad, hook)))
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
              ungroup_kv: bool = False) -> HookGroup:
    """Attach the hooks and return their :class:`HookGroup` (also kept on ``model`` for
    :func:`reset_hooks`). Nothing is attached if any name matches no site."""
    fwd, bwd = _pairs(fwd_hooks, "fwd_hooks"), _pairs(bwd_hooks, "bwd_hooks")
    sites = hook_sites(model, ungroup_kv=ungroup_kv)
    group = HookGroup(model)
    plan = [(n, _forward(fn, Hook(n))) for sel, fn in fwd for n in select(sites, sel)]
    plan += [(n, _backward(fn, Hook(n), group)) for sel, fn in bwd for n in select(sites, sel)]
    try:
        for name, fn in plan:
            group.keep(sites[name].attach(fn))
    except BaseException:
        group.remove()
        raise
    with _LOCK:
        model.__dict__.setdefault(_GROUPS, []).append(group)
    return group


def reset_hooks(model: nn.Module) -> None:
    """Remove every hook :func:`with_hooks`, :func:`run_with_hooks` and :func:`add_hooks`
    attached to ``model`` (the backward tensor hooks included); capture contexts keep theirs."""
    with _LOCK:
        groups = list(model.__dict__.get(_GROUPS, []))
    for group in groups:
        group.remove()


@contextmanager
def with_hooks(model: nn.Module, fwd_hooks=None, bwd_hooks=None, *,
               ungroup_kv: bool = False) -> Iterator[nn.Module]:
    """Context in which ``model`` runs with the hooks (TransformerLens' ``model.hooks``); on
    exit, also on error, exactly the hooks it attached are removed."""
    group = add_hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv)
    try:
        yield model
    finally:
        group.remove()


def run_with_hooks(model: nn.Module, *args: Any, fwd_hooks=None, bwd_hooks=None,
                   reset_hooks_end: bool = True, ungroup_kv: bool = False,
                   **kwargs: Any) -> Any:
    """``model(*args, **kwargs)`` with the hooks attached; returns the model's output.

    With ``reset_hooks_end=False`` the hooks stay (for a backward pass after the call) until
    :func:`reset_hooks`; backward hooks need it, since the backward pass runs after the call.
    Keyword arguments the model's ``forward`` does not take are refused.
    """
    from tokengeo.probes.forward_args import check_forward_kwargs

    check_forward_kwargs(model, kwargs, "run_with_hooks", RUN_WITH_HOOKS_KEYWORDS)
    if bwd_hooks and reset_hooks_end:
        raise ConfigError("bwd_hooks run during backward(), after run_with_hooks returns: pass "
                          "reset_hooks_end=False and call reset_hooks(model) after backward(), "
                          "or call backward() inside `with with_hooks(model, bwd_hooks=...)`")
    if not reset_hooks_end:
        add_hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv)
        return model(*args, **kwargs)
    with with_hooks(model, fwd_hooks, bwd_hooks, ungroup_kv=ungroup_kv):
        return model(*args, **kwargs)
