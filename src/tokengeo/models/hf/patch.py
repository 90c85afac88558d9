"""Laplacian heads in Hugging Face transformers models (Zhang & Papyan, arXiv 2602.09297).

A standard head writes ``z_h = P_h V_h`` (``P_h`` the row-stochastic softmax attention
matrix); a Laplacian head writes ``z_h = (I - P_h) V_h = V_h - P_h V_h``. It adds no
parameters. :func:`laplacianize` converts a loaded model in place, whatever its attention
kernel (eager, sdpa, flash, ...), with two taps per patched layer and no T x T matrix:

1. the value projection gets a subclass of its class (not a hook, which would put every
   call on ``nn.Module.__call__``'s slow path) whose ``__call__`` keeps ``V`` of the current
   call as the model goes on with it (after the module's forward hooks: an edit of ``V`` by
   ``hook_v``, nnsight or TransformerLens is the ``V`` a Laplacian head subtracts from), shaped
   (B, T, Hkv*Dh): the values of the *query* tokens (with a KV cache, dynamic or static:
   the new tokens only, never rows read back from the cache);
2. the output projection, whose input is the per-head outputs ``z = P V`` (B, T, H*Dh),
   gets a subclass of its class whose ``__call__`` first replaces ``z_h`` by
   ``V_{g(h)} - z_h`` on the chosen heads, where ``g(h) = h // (H / Hkv)`` is the
   key/value head that query head ``h`` reads (grouped-query attention; ``g(h) = h``
   without it). Its own hooks all see the swapped z. Without autograd the swap writes into
   z in place, one broadcast subtraction of precomputed views per block of heads
   (:func:`head_blocks`; the default "last k heads" is one block).

Everything inside the kernel (rotary positions, q/k norms, logit softcapping, sliding
windows, padding masks) shapes ``P`` and is kept. In training mode the kernel applies
attention dropout to ``P``, so a Laplacian head computes ``V - dropout(P) V``, as tokengeo's
own attention does. ``kind="mixed"`` gives each chosen head learnable ``(a_h, b_h)`` and the
output ``a_h V_h + b_h P_h V_h`` (a parameter ``tokengeo_mix_coef`` of the attention module,
saved with the model). Supported architectures: :data:`tokengeo.models.hf.families.FAMILIES`;
the ones refused, with the reason: :data:`~tokengeo.models.hf.families.REFUSED`.

The chosen heads are recorded in ``model.config.tokengeo_laplacian_heads``
(``{"layer": [heads]}``), so they survive ``save_pretrained``; :func:`from_pretrained`
reloads a model and re-applies them (a plain ``transformers`` load gives the unpatched model).

Head choice and its rules (and the per-head ``combine``) are those of tokengeo's own models:
:mod:`tokengeo.nn.heads`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokengeo._deps import require
from tokengeo.checks import check_choice, is_whole
from tokengeo.errors import ConfigError
from tokengeo.models.hf.families import (
    FAMILIES,
    HeadShape,
    family_of,
    head_shape,
    qkv_slicer,
    ungroup,
)
from tokengeo.nn.heads import (
    ATTENTION,
    LAPLACIAN,
    MIXED,
    SELECTED_KINDS,
    HeadChoice,
    HeadMixer,
    HeadSpec,
    kind_coefficients,
    last_k_heads,
)
from tokengeo.nn.kernels import combine_runs

CONFIG_KEY = "tokengeo_laplacian_heads"
KIND_KEY = "tokengeo_head_kind"  # recorded only for kind="mixed"
MIX_NAME = "tokengeo_mix_coef"  # (k, 2) learnable (a, b) of the chosen heads, on the attention
KINDS = SELECTED_KINDS  # what laplacianize makes of the chosen heads
SUPPORTED = ", ".join(FAMILIES)
_PATCH_ATTR = "_tokengeo_laplacian_patch"


@dataclass
class _Patch:
    """What :func:`laplacianize` installed on a backbone, kept there to undo it."""

    heads: HeadChoice
    handles: list[_ValueTap | _InputSwap]
    kind: str = LAPLACIAN
    mixed_modules: tuple[nn.Module, ...] = ()


@dataclass(frozen=True)
class AttentionSite:
    """Where one layer's self-attention computes V and consumes the per-head outputs z."""

    value_module: nn.Module  # its output holds V
    take_value: Callable[[torch.Tensor], torch.Tensor]  # that output -> V (B, T, Hkv*Dh)
    out_proj: nn.Module  # its input is z (B, T, H*Dh)
    attention: nn.Module  # the self-attention module (holds the mixed coefficients)
    shape: HeadShape

    @property
    def n_heads(self) -> int:
        return self.shape.n_heads

    @property
    def head_dim(self) -> int:
        return self.shape.head_dim


def _base_model(model: Any) -> nn.Module:
    """The backbone of a supported model, or a ConfigError naming why not."""
    family_of(model)
    base = getattr(model, "base_model", None)
    if not isinstance(base, nn.Module):
        raise ConfigError(f"laplacianize does not support {type(model).__name__}: it has no "
                          "base_model (load it with transformers' from_pretrained)")
    return base


def attention_sites(model: Any) -> list[AttentionSite]:
    """One :class:`AttentionSite` per layer of a supported Hugging Face model."""
    family = family_of(model)
    base = _base_model(model)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") \
        else model.config
    shape = head_shape(config)
    take_value = qkv_slicer(family.qkv_split, 2, shape)
    sites = []
    for block in base.get_submodule(family.blocks):
        sites.append(AttentionSite(
            block.get_submodule(family.value), take_value, block.get_submodule(family.out_proj),
            block.get_submodule(family.attn), shape,
        ))
    return sites


_SWAP_KEY = "_tokengeo_swap"  # in the output projection's __dict__: its LaplacianSwap
_TAP_KEY = "_tokengeo_value_tap"  # in the value projection's __dict__: keep(output)
_SWAPPING: dict[type, type] = {}  # module class -> its subclass that swaps / taps around calls
_SWAPPING_BASE: dict[type, type] = {}  # that subclass -> the module class


def _swapping_class(cls: type) -> type:
    """The subclass of ``cls`` whose ``__call__`` swaps the heads of its input (when the
    module holds a swap), runs ``cls.__call__`` (pre-hooks, forward, hooks), then hands the
    final output (what every forward hook left, i.e. what the model goes on with) to the
    module's value tap (when it holds one). Made once per class."""
    if cls not in _SWAPPING:
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            swap = self.__dict__.get(_SWAP_KEY)
            if swap is not None:
                args = swap.swap_heads(self, args)
            out = cls.__call__(self, *args, **kwargs)
            keep = self.__dict__.get(_TAP_KEY)
            if keep is not None:
                keep(out)
            return out

        def __reduce_ex__(self, protocol: int) -> tuple:
            # pickle (torch.save) names the plain class; loading makes the subclass again
            return (_swapping_instance, (cls,), *object.__reduce_ex__(self, protocol)[2:])

        _SWAPPING[cls] = type(f"Laplacian{cls.__name__}", (cls,),
                              {"__call__": __call__, "__reduce_ex__": __reduce_ex__})
        _SWAPPING_BASE[_SWAPPING[cls]] = cls
    return _SWAPPING[cls]


def _swapping_instance(cls: type) -> nn.Module:
    """An empty instance of ``cls``'s swapping subclass, for unpickling (state set after)."""
    return object.__new__(_swapping_class(cls))


class _ClassSwap:
    """Puts ``value`` under ``key`` in ``module.__dict__`` and gives the module the swapping
    subclass of its class (as ``torch.nn.utils.parametrize`` does), not a hook: a hook would
    put every call on the slow path of ``nn.Module.__call__`` (about 7 us per call), and the
    subclass's ``__call__`` runs outside every hook, whenever registered. :meth:`remove`
    gives the module its class back once it holds neither a swap nor a tap."""

    def __init__(self, module: nn.Module, key: str, value: Any) -> None:
        self.module, self.key = module, key
        self.cls = _SWAPPING_BASE.get(type(module), type(module))
        module.__class__ = _swapping_class(self.cls)
        module.__dict__[key] = value

    def remove(self) -> None:
        self.module.__dict__.pop(self.key, None)
        held = any(k in self.module.__dict__ for k in (_SWAP_KEY, _TAP_KEY))
        if not held and type(self.module) is _SWAPPING.get(self.cls):
            self.module.__class__ = self.cls


class _ValueTap(_ClassSwap):
    """Keeps the value projection's output *after* its forward hooks: an edit of ``V``
    (a ``hook_v`` replacement, an nnsight or TransformerLens intervention) is the ``V`` the
    Laplacian heads subtract from, as it is the ``V`` the attention kernel reads."""

    def __init__(self, module: nn.Module, keep: Callable[[Any], None]) -> None:
        super().__init__(module, _TAP_KEY, keep)


class _InputSwap(_ClassSwap):
    """Runs ``swap.swap_heads`` on the output projection's input before everything
    ``nn.Module.__call__`` does: every pre-hook of the module sees the swapped z."""

    def __init__(self, module: nn.Module, swap: LaplacianSwap) -> None:
        super().__init__(module, _SWAP_KEY, swap)


@dataclass(frozen=True)
class _Block:
    """``n`` KV heads from ``kv`` on, each read by ``r`` consecutive chosen query heads from
    ``head`` on: in (B, T, H*Dh) / (B, T, Hkv*Dh) a slice of z viewed (n, r, Dh) and a slice
    of V viewed (n, 1, Dh), so ``V - z`` is one broadcast subtraction of views."""

    head: int
    kv: int
    n: int
    r: int

    def slices(self, head_dim: int) -> tuple[slice, slice, tuple[int, ...], tuple[int, ...]]:
        z = slice(self.head * head_dim, (self.head + self.n * self.r) * head_dim)
        v = slice(self.kv * head_dim, (self.kv + self.n) * head_dim)
        return z, v, (self.n, self.r, head_dim), (self.n, 1, head_dim)


def head_blocks(heads: Sequence[int], groups: int) -> list[_Block]:
    """The chosen query heads as few :class:`_Block` as possible (query head h reads KV head
    ``h // groups``): runs of consecutive heads split where the KV head changes, and
    neighbouring runs that each cover a whole group of consecutive KV heads merged. The
    default "last k heads" is one block when k <= groups or k is a multiple of groups."""
    pieces: list[list[int]] = []  # [first head, kv head, count]
    for h in sorted(heads):
        last = pieces[-1] if pieces else None
        if last is not None and last[0] + last[2] == h and last[1] == h // groups:
            last[2] += 1
        else:
            pieces.append([h, h // groups, 1])
    blocks: list[_Block] = []
    for head, kv, r in pieces:
        prev = blocks[-1] if blocks else None
        if (prev is not None and r == groups and prev.r == groups
                and prev.head + prev.n * prev.r == head and prev.kv + prev.n == kv):
            blocks[-1] = _Block(prev.head, prev.kv, prev.n + 1, r)
        else:
            blocks.append(_Block(head, kv, 1, r))
    return blocks


class LaplacianSwap:
    """Hook pair of one layer: ``z_h <- V_g(h) - z_h`` (or ``a_h V + b_h z_h``) on ``heads``.

    ``z = P V`` is the output projection's input, so ``V - z = (I - P) V``
    (Zhang & Papyan, arXiv 2602.09297, the Laplacian head); with grouped KV heads query
    head ``h`` reads KV head ``g(h) = h // (H / Hkv)``. Laplacian heads touch only the
    chosen heads' slices (V of their KV heads, no expansion of all of V: the cost of a
    decoding step stays that of the k heads); mixed heads go through the kernels' ``combine_runs``.

    Laplacian heads without autograd (``generate``, ``no_grad``, ``inference_mode``) are
    written into z in place, one broadcast subtraction per :class:`_Block` of views
    precomputed here: z is a fresh tensor (the attention's reshaped output) that nothing
    else has seen, since the swap runs before the output projection's hooks. Under
    autograd z is left intact and a copy of it gets the same block subtraction.
    """

    def __init__(self, site: AttentionSite, heads: Sequence[int],
                 mix: nn.Parameter | None = None) -> None:
        self.site = site
        kind = LAPLACIAN if mix is None else MIXED
        kinds = [kind if h in heads else ATTENTION for h in range(site.n_heads)]
        self.kinds = HeadMixer(site.n_heads, kinds)  # not a submodule: moved on first use
        if mix is not None:
            self.kinds.mix_coef = mix  # the (k, 2) parameter saved with the attention module
        self.mixed = mix is not None
        shape = site.shape
        self.blocks = tuple(b.slices(shape.head_dim) for b in head_blocks(heads, shape.groups))
        self.z_width = shape.n_heads * shape.head_dim
        self.v_width = shape.n_kv_heads * shape.head_dim
        self._value: torch.Tensor | None = None

    def keep_value(self, output: torch.Tensor) -> None:
        self._value = self.site.take_value(output)  # (B, T, Hkv*Dh)

    def _check(self, z: torch.Tensor, value: torch.Tensor | None) -> None:
        if (value is None or value.shape[:-1] != z.shape[:-1]
                or value.shape[-1] != self.v_width or z.shape[-1] != self.z_width):
            got = None if value is None else tuple(value.shape)
            want = (*z.shape[:-1], self.v_width)
            raise RuntimeError(
                f"Laplacian hook: output projection called with z {tuple(z.shape)} but the "
                f"value projection gave {got} (expected {want}); the module was called outside "
                "its attention layer"
            )

    def subtract_in_place(self, z: torch.Tensor, value: torch.Tensor) -> None:
        """``z_h <- V_g(h) - z_h`` on the chosen heads of a contiguous z (B, T, H*Dh).

        Under autograd z must be a tensor nothing else uses (the caller's copy): each block
        is then replaced by ``V - z`` through ``copy_`` (``out=`` has no gradient).
        """
        differentiable = torch.is_grad_enabled() and (z.requires_grad or value.requires_grad)
        for z_cols, v_cols, z_view, v_view in self.blocks:
            z_block = z[..., z_cols].unflatten(-1, z_view)  # (B, T, n, r, Dh), a view of z
            v_block = value[..., v_cols].unflatten(-1, v_view)  # (B, T, n, 1, Dh)
            if differentiable:
                z_block.copy_(v_block - z_block)
            else:
                torch.sub(v_block, z_block, out=z_block)

    def swap_heads(self, module: nn.Module, args: tuple) -> tuple:
        """The output projection's positional arguments with z (the first) swapped."""
        z = args[0]  # (B, T, H*Dh)
        value, self._value = self._value, None
        self._check(z, value)
        if self.mixed or (torch.is_grad_enabled() and (z.requires_grad or value.requires_grad)):
            return (self._swapped(z, value), *args[1:])
        if z.is_contiguous():
            self.subtract_in_place(z, value)
            return args  # z edited in place
        z = z.contiguous()  # a copy: edit it
        self.subtract_in_place(z, value)
        return (z, *args[1:])

    def _swapped(self, z: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The out-of-place swap (autograd; mixed heads): a new (B, T, H*Dh)."""
        if not self.mixed:  # Laplacian heads: the same blocks, on a copy of z
            swapped = z.clone(memory_format=torch.contiguous_format)
            self.subtract_in_place(swapped, value)
            return swapped
        shape = self.site.shape
        z_heads = z.unflatten(-1, (shape.n_heads, shape.head_dim))  # (B, T, H, Dh)
        v_kv = value.unflatten(-1, (shape.n_kv_heads, shape.head_dim))  # (B, T, Hkv, Dh)
        if self.kinds.coef_fixed.device != z.device:
            self.kinds.to(z.device)
        v_heads = ungroup(v_kv, shape.groups)  # (B, T, H, Dh)
        a, b = self.kinds.head_coefficients()  # (H,) each
        z_new = combine_runs(v_heads, z_heads, a, b, self.kinds.head_runs)  # the kernels' own
        return z_new.to(z.dtype).flatten(-2)  # (B, T, H*Dh)

    def install(self) -> list[_ValueTap | _InputSwap]:
        return [_ValueTap(self.site.value_module, self.keep_value),
                _InputSwap(self.site.out_proj, self)]


def last_layers_heads(n_laplacian: Any, last_layers: Any, n_layers: int,
                      n_heads: int) -> HeadChoice:
    """``{layer: last k heads}`` for the last ``last_layers`` of ``n_layers`` layers only.

    Retrofitting Laplacian heads into the top of a trained stack leaves the lower layers'
    attention (and what the upper layers learnt to read from it) as it was; ``last_layers =
    n_layers`` is the paper's choice, every layer. Raises a ConfigError naming the range.
    """
    allowed = f"choose 1 <= last_layers <= {n_layers} (the model has {n_layers} layers)"
    if not is_whole(last_layers):
        raise ConfigError(f"last_layers={last_layers!r} must be an int; {allowed}")
    if not 1 <= last_layers <= n_layers:
        raise ConfigError(f"last_layers={last_layers} is out of range; {allowed}")
    heads = last_k_heads(n_heads, n_laplacian)
    return {layer: heads for layer in range(n_layers - last_layers, n_layers)}


def resolve_heads(n_laplacian: Any, heads: Any, n_layers: int, n_heads: int, *,
                  kind: str = LAPLACIAN, mixed_init: str = LAPLACIAN,
                  last_layers: Any = None) -> HeadSpec:
    """The head spec from exactly one of ``n_laplacian`` or ``heads`` (the rules of
    :meth:`tokengeo.nn.heads.HeadSpec.parse`, as for tokengeo's own models);
    ``last_layers=L`` keeps ``n_laplacian``'s heads to the last L layers
    (:func:`last_layers_heads`)."""
    if n_laplacian is None and heads is None:
        raise ConfigError(
            "pass exactly one of n_laplacian=k (the last k heads of every layer) or "
            "heads={layer: [head indices]}"
        )
    if last_layers is not None:
        if heads is not None:
            raise ConfigError("last_layers=L goes with n_laplacian=k (the last k heads of "
                              "the last L layers); heads={layer: [...]} names its layers itself")
        heads, n_laplacian = last_layers_heads(n_laplacian, last_layers, n_layers, n_heads), None
    return HeadSpec.parse(n_layers, n_heads, n_laplacian=n_laplacian, heads=heads, kind=kind,
                          mixed_init=mixed_init)


def _mix_parameter(site: AttentionSite, n_chosen: int, mixed_init: str) -> nn.Parameter:
    """(k, 2) learnable (a, b) initialised as the kind ``mixed_init``, on the attention module."""
    weight = next(site.out_proj.parameters())
    init = torch.tensor([kind_coefficients(mixed_init)] * n_chosen)  # (k, 2)
    mix = nn.Parameter(init.to(device=weight.device, dtype=weight.dtype))
    site.attention.register_parameter(MIX_NAME, mix)
    return mix


def laplacianize(
    model: Any,
    n_laplacian: int | None = None,
    *,
    heads: Mapping[int, Sequence[int]] | None = None,
    kind: str = LAPLACIAN,
    mixed_init: str = LAPLACIAN,
    last_layers: int | None = None,
) -> Any:
    """Make chosen heads of a Hugging Face model Laplacian, in place; returns ``model``.

    A Laplacian head outputs ``(I - P) V = V - P V`` instead of ``P V`` (Zhang & Papyan,
    arXiv 2602.09297). Choose heads with ``n_laplacian=k`` (the last ``k`` of ``H`` heads
    in every layer, as the authors; with ``last_layers=L`` in the last L layers only) or
    ``heads={layer: [head indices]}``. ``kind="mixed"``
    makes them ``a_h V + b_h P V`` with learnable ``(a_h, b_h)`` initialised as
    ``mixed_init`` (``"laplacian"``: (1, -1), ``"attention"``: (0, 1); the latter gives
    the unconverted model's outputs bit for bit, ``0 V + 1 P V = P V``). A new call replaces
    the previous patch; ``n_laplacian=0`` (or ``heads={}``) leaves the model exactly as
    unpatched. Supported: the model types in ``SUPPORTED``; refused ones raise with the reason.

    Raises :class:`~tokengeo.errors.ConfigError` on bad input.
    """
    check_choice("kind", kind, KINDS)
    modules = model.modules() if isinstance(model, nn.Module) else ()
    if any(type(m).__module__.startswith("transformer_lens.") for m in modules):
        raise ConfigError("laplacianize cannot patch a model wrapped by TransformerLens: "
                          "laplacianize first, then call tokengeo.to_transformer_lens")
    sites = attention_sites(model)
    chosen = resolve_heads(n_laplacian, heads, len(sites), sites[0].n_heads, kind=kind,
                           mixed_init=mixed_init, last_layers=last_layers).choice()
    unlaplacianize(model)
    handles, mixed_modules = [], []
    for layer, indices in chosen.items():
        mix = None
        if kind == MIXED:
            mix = _mix_parameter(sites[layer], len(indices), mixed_init)
            mixed_modules.append(sites[layer].attention)
        handles += LaplacianSwap(sites[layer], indices, mix).install()
    if chosen:
        patch = _Patch(chosen, handles, kind, tuple(mixed_modules))
        setattr(_base_model(model), _PATCH_ATTR, patch)
        setattr(model.config, CONFIG_KEY, {str(layer): idx for layer, idx in chosen.items()})
        if kind != LAPLACIAN:
            setattr(model.config, KIND_KEY, kind)
    return model


def unlaplacianize(model: Any) -> Any:
    """Remove the Laplacian heads of :func:`laplacianize`, in place; returns ``model``."""
    base = _base_model(model)
    patch = getattr(base, _PATCH_ATTR, None)
    if patch is not None:
        for handle in patch.handles:
            handle.remove()
        for module in patch.mixed_modules:
            delattr(module, MIX_NAME)
        delattr(base, _PATCH_ATTR)
    for key in (CONFIG_KEY, KIND_KEY):
        if hasattr(model.config, key):
            delattr(model.config, key)
    return model


def laplacian_heads(model: Any) -> HeadChoice:
    """The Laplacian heads active in a model, ``{layer: [heads]}`` (empty when unpatched)."""
    patch = getattr(_base_model(model), _PATCH_ATTR, None)
    return {} if patch is None else {layer: list(idx) for layer, idx in patch.heads.items()}


def mixed_coefficients(model: Any) -> dict[int, dict[int, tuple[float, float]]]:
    """The current ``(a_h, b_h)`` of the mixed heads, ``{layer: {head: (a, b)}}`` (empty
    when the model has no mixed heads): head h of that layer outputs ``a_h V + b_h P V``."""
    patch = getattr(_base_model(model), _PATCH_ATTR, None)
    if patch is None or patch.kind != MIXED:
        return {}
    out = {}
    for (layer, heads), module in zip(patch.heads.items(), patch.mixed_modules, strict=True):
        coef = getattr(module, MIX_NAME).detach().float().cpu().tolist()  # (k, 2)
        out[layer] = {h: (a, b) for h, (a, b) in zip(heads, coef, strict=True)}
    return out


def recorded_heads(config: Any) -> HeadChoice:
    """The Laplacian heads recorded in a (possibly reloaded) config, ``{layer: [heads]}``."""
    recorded = getattr(config, CONFIG_KEY, None) or {}
    return {int(layer): list(idx) for layer, idx in recorded.items()}


def _saved_class(config: Any) -> type:
    """The transformers class named first in ``config.architectures``."""
    transformers = require("transformers")
    names = getattr(config, "architectures", None) or []
    cls = getattr(transformers, names[0], None) if names else None
    if cls is None:
        raise ConfigError(
            f"the saved config names no loadable architecture ({names}); pass model_cls="
        )
    return cls


def _saved_mix(path: str | Path) -> dict[str, torch.Tensor]:
    """Every ``*.tokengeo_mix_coef`` tensor in the safetensors files of a saved model."""
    from safetensors import safe_open

    found = {}
    for file in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():
                if key.endswith("." + MIX_NAME):
                    found[key] = handle.get_tensor(key)
    return found


def _load_mix(model: Any, path: str | Path) -> None:
    """Copy the saved mixed coefficients into the freshly created ``tokengeo_mix_coef``."""
    saved = _saved_mix(path)
    for name, param in model.named_parameters():
        if not name.endswith("." + MIX_NAME):
            continue
        hits = [v for k, v in saved.items() if k == name or k.endswith("." + name)
                or name.endswith("." + k)]
        if len(hits) != 1:
            raise ConfigError(f"{path} records mixed heads but holds no saved {name}; save the "
                              "model with save_pretrained after laplacianize(kind='mixed')")
        with torch.no_grad():
            param.copy_(hits[0])


def from_pretrained(path: str, model_cls: type | None = None, **kwargs: Any) -> Any:
    """Load a saved model and re-apply the Laplacian heads recorded in its config.

    ``model_cls`` defaults to the class in ``config.architectures`` (the class that was
    saved); ``kwargs`` go to ``model_cls.from_pretrained`` (e.g. ``attn_implementation``).
    Mixed heads get their saved ``(a_h, b_h)`` back.
    """
    transformers = require("transformers")
    if model_cls is None:
        model_cls = _saved_class(transformers.AutoConfig.from_pretrained(path))
    with _load_report_dropped():
        model, info = model_cls.from_pretrained(path, output_loading_info=True, **kwargs)
    _warn_load_problems(path, info)
    recorded = recorded_heads(model.config)
    kind = getattr(model.config, KIND_KEY, LAPLACIAN)
    if recorded:
        laplacianize(model, heads=recorded, kind=kind)
        if kind == MIXED:
            _load_mix(model, path)
    return model


class _DropLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


@contextmanager
def _load_report_dropped():
    """transformers' load report, which calls the mixed coefficients (``tokengeo_mix_coef``,
    restored right after) "UNEXPECTED ... not ok", is dropped; :func:`_warn_load_problems`
    says what else it would have said."""
    logger = logging.getLogger("transformers.modeling_utils")
    drop = _DropLoadReport()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _warn_load_problems(path: str, info: Mapping[str, Any]) -> None:
    """A warning for every key transformers could not load, except tokengeo's own."""
    unexpected = [k for k in info.get("unexpected_keys", ()) if not k.endswith(MIX_NAME)]
    problems = {"missing (newly initialised)": list(info.get("missing_keys", ())),
                "unexpected (not loaded)": unexpected,
                "mismatched in shape": [str(k) for k in info.get("mismatched_keys", ())]}
    said = [f"{what}: {', '.join(sorted(map(str, keys))[:8])}"
            + (f" (+{len(keys) - 8} more)" if len(keys) > 8 else "")
            for what, keys in problems.items() if keys]
    if said:
        warnings.warn(f"loading {path}: weights {'; '.join(said)}", stacklevel=3)

