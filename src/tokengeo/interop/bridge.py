"""tokengeo's models as TransformerLens models (a ``TransformerBridge``).

TransformerLens' bridge wraps a Hugging Face model and re-runs its attention with named
hook points (``blocks.{l}.attn.hook_z``, ``hook_result``, ``hook_pattern``, ...). It knows
attention heads only: wrapped around a laplacianized model it would skip tokengeo's
patch. :func:`to_transformer_lens` wraps the *unpatched* model and computes the head
kinds inside the bridge's own hook points (:mod:`tokengeo.interop.heads`), so every
TransformerLens tool sees each head's ``a V + b P V``.
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.interop import heads as _heads
from tokengeo.interop.imports import side_effects_undone, transformer_lens
from tokengeo.models.hf.families import head_shape
from tokengeo.models.hf.patch import (
    CONFIG_KEY,
    KIND_KEY,
    MIX_NAME,
    attention_sites,
    laplacian_heads,
    unlaplacianize,
)
from tokengeo.nn.heads import ATTENTION, LAPLACIAN, MIXED, HeadMixer

_ENCODER_HINT = {  # HF classes TransformerLens cannot take -> the one it takes instead
    "BertModel": "BertForMaskedLM",
    "BertForSequenceClassification": "BertForMaskedLM",
    "GPT2Model": "GPT2LMHeadModel",
    "LlamaModel": "LlamaForCausalLM",
}


def is_wrapped(model: nn.Module) -> bool:
    """Whether ``model`` is, or holds, a TransformerLens bridge component."""
    return any(type(m).__module__.startswith("transformer_lens.") for m in model.modules())


def _hf_source(model: nn.Module) -> tuple[nn.Module, dict[int, HeadMixer]]:
    """A laplacianized HF model unpatched (its (a, b) parameters and recorded heads kept)
    and its non-attention layers' head kinds."""
    chosen = laplacian_heads(model)
    kind = getattr(model.config, KIND_KEY, LAPLACIAN)
    sites = attention_sites(model)
    mix = {layer: getattr(sites[layer].attention, MIX_NAME) for layer in chosen
           if kind == MIXED}
    recorded = {key: getattr(model.config, key) for key in (CONFIG_KEY, KIND_KEY)
                if hasattr(model.config, key)}
    unlaplacianize(model)
    for key, value in recorded.items():
        setattr(model.config, key, value)
    mixers = {}
    for layer, indices in chosen.items():
        n_heads = sites[layer].n_heads
        mixer = HeadMixer(n_heads, [kind if h in indices else ATTENTION for h in range(n_heads)])
        if layer in mix:
            sites[layer].attention.register_parameter(MIX_NAME, mix[layer])
            mixer.mix_coef = mix[layer]
        mixers[layer] = mixer.to(mix[layer].device if layer in mix else "cpu")
    return model, mixers


def _gpt_source(model: nn.Module) -> tuple[nn.Module, dict[int, HeadMixer]]:
    """tokengeo's GPT as a HF GPT-2 copy, its learnable (a, b) registered on that copy."""
    from tokengeo.interop.gpt import head_mixers, to_gpt2

    hf = to_gpt2(model)
    mixers = head_mixers(model)
    for layer, mixer in mixers.items():
        if mixer.mix_coef is not None:
            hf.transformer.h[layer].attn.register_parameter(MIX_NAME, mixer.mix_coef)
    return hf, mixers


def _source(model: nn.Module) -> tuple[nn.Module, dict[int, HeadMixer]]:
    """The HF model to wrap and ``{layer: head kinds}``, or a ConfigError naming why not."""
    from tokengeo.models.gpt import GPT
    from tokengeo.probes.capture import is_hf_model, wrapped_hf_model

    if is_wrapped(model):
        raise ConfigError("the model is already wrapped by TransformerLens: call "
                          "to_transformer_lens on the model itself, once")
    if isinstance(model, GPT):
        return _gpt_source(model)
    hf = model if is_hf_model(model) else wrapped_hf_model(model)
    if hf is None:
        raise ConfigError(
            f"to_transformer_lens takes tokengeo's GPT models (create_model('gpt-tiny')) and "
            f"Hugging Face models (laplacianized or not); {type(model).__name__} is neither")
    return _hf_source(hf)


def _architecture(hf: nn.Module) -> str:
    """The TransformerLens adapter name of ``hf``, or a ConfigError naming what it takes."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    name = type(hf).__name__
    if name in SUPPORTED_ARCHITECTURES:
        return name
    hint = _ENCODER_HINT.get(name)
    fix = (f"load it as {hint} (TransformerLens needs the model with its head, e.g. "
           f"transformers.{hint}.from_pretrained(path))" if hint else
           "see transformer_lens.factories.architecture_adapter_factory.SUPPORTED_ARCHITECTURES")
    raise ConfigError(f"TransformerLens has no adapter for {name}: {fix}")


def _eager(hf: nn.Module) -> None:
    """Switch ``hf`` to eager attention: where TransformerLens runs the model's own attention
    (BERT), it reads ``hook_pattern`` from the attention weights, which fused kernels (sdpa,
    flash) do not return; the bridge would then cache no pattern, without a word."""
    if getattr(hf.config, "_attn_implementation", "eager") != "eager":
        hf.set_attn_implementation("eager")


def _post_ln(bridge: Any) -> bool:
    """Whether the wrapped model normalises after the residual add (BERT's post-LN)."""
    return type(bridge.original_model).__name__.startswith(("Bert", "Roberta", "Electra"))


def _guard_weight_processing(bridge: Any, non_attention: bool) -> None:
    """Give the bridge ``enable_compatibility_mode`` / ``process_weights`` that are exact for
    every head kind: ``fold_value_biases`` moves b_V into b_O, which holds for attention heads
    (rows of P sum to 1: P (V + b) = P V + b) but not for a head writing a V + b P V (it
    carries (a + b) b_V: none for a Laplacian head), so it defaults to False there and True
    is refused. Folding LayerNorms into the next layer is refused on post-LN models."""
    def checked(method, *args, fold_value_biases=None, **kwargs):
        no_processing = kwargs.get("no_processing", False)
        if _post_ln(bridge) and not no_processing and (kwargs.get("fold_ln", True) or
                                                       kwargs.get("center_writing_weights", True)):
            raise ConfigError(
                f"{type(bridge.original_model).__name__} normalises after the residual add "
                "(post-LN): folding LayerNorms and centering writing weights would change what "
                "the model computes, and its residual stream has no exact decomposition into "
                "head outputs; use it without compatibility mode, or pass no_processing=True")
        if fold_value_biases and non_attention:
            raise ConfigError(
                "fold_value_biases=True is exact only for attention heads; this model has "
                "Laplacian or mixed heads (their a V + b P V carries (a + b) b_V): leave it "
                "False")
        return method(*args, fold_value_biases=bool(fold_value_biases if fold_value_biases
                                                    is not None else not non_attention),
                      **kwargs)

    for name in ("enable_compatibility_mode", "process_weights"):
        original = getattr(bridge, name)
        object.__setattr__(bridge, name, functools.wraps(original)(
            functools.partial(checked, original)))


def to_transformer_lens(model: nn.Module, *, tokenizer: Any = None, compat: bool = False,
                        **compat_options: Any) -> Any:
    """``model`` as a TransformerLens ``TransformerBridge`` whose every head is exact.

    Takes a Hugging Face model (laplacianized by :func:`tokengeo.laplacianize` or not,
    with its head: ``LlamaForCausalLM``, ``GPT2LMHeadModel``, ``BertForMaskedLM``, ... any
    architecture TransformerLens has an adapter for) or a tokengeo GPT
    (``create_model("gpt-tiny")``, converted to a GPT-2 copy). Head h of every layer writes
    ``a_h V + b_h P V`` (Zhang & Papyan, arXiv 2602.09297): ``hook_z``, ``hook_result``,
    ``stack_head_results``, ``decompose_resid``, activation patching and ablations all see
    it. A Hugging Face model is wrapped in place (TransformerLens replaces its submodules;
    its attention is switched to eager): use the returned bridge from then on. ``compat=True`` runs
    ``enable_compatibility_mode(**compat_options)`` (LayerNorm folding, weight centering),
    with ``fold_value_biases`` off where a head is not an attention head.
    ``tokenizer``: the model's tokenizer, for ``to_tokens`` / ``to_string`` / ``generate``.
    Raises :class:`~tokengeo.errors.ConfigError` on what it cannot take.
    """
    transformer_lens()  # the extra, or an error naming it
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    hf, mixers = _source(model)
    architecture = _architecture(hf)
    _eager(hf)
    config = hf.config.get_text_config() if hasattr(hf.config, "get_text_config") else hf.config
    shape = head_shape(config)
    with side_effects_undone():
        bridge = build_bridge_from_module(hf, architecture, hf_config=hf.config,
                                          tokenizer=tokenizer)
    points = bridge.hook_dict
    for layer, mixer in mixers.items():
        state = _heads.LayerHeads(mixer, shape.n_heads, shape.n_kv_heads, shape.head_dim)
        _heads.install(points[f"blocks.{layer}.attn.hook_v"],
                       points[f"blocks.{layer}.attn.hook_z"], state)
    _guard_weight_processing(bridge, non_attention=bool(mixers))
    if compat:
        with side_effects_undone():
            bridge.enable_compatibility_mode(**compat_options)
    elif compat_options:
        raise ConfigError(f"{sorted(compat_options)} are options of compatibility mode: "
                          "pass compat=True with them")
    return bridge
