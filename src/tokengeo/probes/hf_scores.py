"""``attn.hook_attn_scores`` on Hugging Face models: the input of eager attention's softmax.

Eager attention forms ``P = softmax(S)`` inside a function (each family's
``eager_attention_forward``), not a module, so no module hook sees the scores ``S``. While
the site is attached, a :class:`~torch.overrides.TorchFunctionMode` is active for the
duration of the attention module's forward and intercepts the one softmax call there: its
input *is* the tensor eager attention takes the softmax of, ``q kᵀ · scaling`` plus
whatever the family adds (the additive mask, at the dtype's most negative value where
Hugging Face masks; Gemma 2's logit softcapping; MPNet's relative position bias), shaped
(B, H, T, S). What the hook returns (or edits in place) is what the softmax reads, so the
pattern applied to V is ``softmax`` of the edited scores. Nothing is recomputed, so the
site cannot differ from what the model uses; an attention forward with no softmax of that
shape, or with two, raises instead of guessing.

The fused kernels (sdpa, flash, flex) never form ``S``: on a model loaded with them the site
is unavailable (:meth:`ScoresSite.unavailable`), as ``hook_pattern`` is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from tokengeo.errors import ConfigError
from tokengeo.hooks import ActivationFn

SOFTMAXES = frozenset({F.softmax, torch.softmax, torch.Tensor.softmax})


class _SoftmaxTap(TorchFunctionMode):
    """Shows the input of the one softmax in an attention forward to ``fn`` and passes on
    what ``fn`` returns (or the input, edited in place)."""

    def __init__(self, fn: ActivationFn, n_heads: int, where: str) -> None:
        super().__init__()
        self.fn, self.n_heads, self.where, self.calls = fn, n_heads, where, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in SOFTMAXES:
            return func(*args, **kwargs)
        scores = args[0]  # (B, H, T, S)
        self.calls += 1
        if self.calls > 1 or scores.dim() != 4 or scores.shape[1] != self.n_heads:
            raise ConfigError(
                f"hook_attn_scores: the attention {self.where} took a softmax of a tensor "
                f"shaped {tuple(scores.shape)} (call {self.calls}), not the one (B, "
                f"{self.n_heads}, T, S) of its scores: this family's eager attention is not "
                "one tokengeo can read the scores of; read hook_pattern instead")
        new = self.fn(scores)
        return func(scores if new is None else new, *args[1:], **kwargs)


class ScoresSite:
    """The scores of one attention module (see the module docstring)."""

    def __init__(self, module: nn.Module, model: nn.Module, n_heads: int, where: str) -> None:
        self.module, self.model, self.n_heads, self.where = module, model, n_heads, where

    def unavailable(self) -> str | None:
        """Why this model cannot show its scores (not eager attention), or None."""
        impl = getattr(self.model.config, "_attn_implementation", None)
        if impl == "eager":
            return None
        return (f"attention scores need eager attention (the fused kernels never form them), "
                f"but this model uses attn_implementation={impl!r}: load it with "
                "from_pretrained(..., attn_implementation=\"eager\") or call "
                "model.set_attn_implementation(\"eager\")")

    def attach(self, fn: ActivationFn):
        why = self.unavailable()
        if why is not None:
            raise ConfigError(why)
        taps: list[_SoftmaxTap] = []

        def enter(_mod, _args):
            taps.append(_SoftmaxTap(fn, self.n_heads, self.where))
            taps[-1].__enter__()

        def leave(_mod, _args, output):
            tap = taps.pop()
            tap.__exit__(None, None, None)
            if tap.calls == 0 and output is not None:  # (None: the forward raised)
                raise ConfigError(f"hook_attn_scores: the attention {self.where} took no "
                                  "softmax (is it eager attention?)")

        return Handles(self.module.register_forward_pre_hook(enter),
                       self.module.register_forward_hook(leave, always_call=True))


class Handles:
    """Several hook handles removed as one."""

    def __init__(self, *handles) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
