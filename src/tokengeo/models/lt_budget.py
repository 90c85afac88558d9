"""What an L-Transformer costs, and the standard encoders it is compared with.

El Ichi et al. (arXiv 2603.05727) compare an L-Transformer of width d and p slices with a
standard encoder of the same width: encoder parameters and projection/FFN FLOPs ~1/p, total
model size -41 % at d = 768 with BERT's 30,522-token vocabulary. Two baselines are built here
from an :class:`~tokengeo.models.ltransformer.LTransformerConfig`:

- :func:`fair_baseline`: the same width, embedding (√d-scaled tokens, sinusoidal positions),
  pooling, depth and heads (p·H heads of the same width d_s / H);
- :func:`param_matched_baseline`: a *narrower* standard encoder whose block parameters equal
  the L-Transformer's encoder parameters within 2 % (width ≈ d / √p): does the L-Transformer
  beat a plain transformer of its own size?

Counts are formulas, checked in the tests against the modules' parameters and against
``torch.utils.flop_counter.FlopCounterMode``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokengeo.errors import ConfigError
from tokengeo.models.config import TextEncoderConfig
from tokengeo.models.ltransformer import LTransformerConfig, encoder_parameter_count

MATCH_TOLERANCE = 0.02  # relative difference of encoder parameters allowed
BERT_VOCAB = 30_522


def standard_block_parameters(width: int, cfg: LTransformerConfig | TextEncoderConfig) -> int:
    """Parameters of a stack of ``cfg.n_layers`` standard pre-LN blocks of ``width`` w, with
    h = ⌊r·w⌋: per layer 4w² + 2wh weights, 5w + h biases and 4w LayerNorm entries (2w
    without bias); the p = 1 case of :func:`encoder_parameter_count`."""
    h = int(cfg.mlp_ratio * width)
    per_layer = 4 * width**2 + 2 * width * h + 2 * width
    if cfg.bias:
        per_layer += 5 * width + h + 2 * width
    return cfg.n_layers * per_layer


def _attention_only(cfg: LTransformerConfig) -> None:
    if cfg.n_laplacian or cfg.laplacian_heads:
        raise ConfigError("the L-Transformer baselines are defined for attention heads only: "
                          "use n_laplacian=0 and no laplacian_heads")


def _encoder_fields(cfg: LTransformerConfig) -> dict:
    keep = ("n_layers", "mlp_ratio", "dropout", "attn_dropout", "bias", "norm_eps",
            "head_kind", "mixed_init", "vocab_size", "max_len", "num_classes", "pool", "pad_id")
    return {name: getattr(cfg, name) for name in keep}


def fair_baseline(cfg: LTransformerConfig) -> TextEncoderConfig:
    """The standard encoder of the same width d: p·H heads of width d_s / H (the same heads
    as the L-Transformer's p slices), √d-scaled token embeddings and sinusoidal positions."""
    cfg.validate()
    _attention_only(cfg)
    out = TextEncoderConfig(d_model=cfg.d_model, n_heads=cfg.n_heads * cfg.p,
                            embed_scale=True, positions="sinusoidal", **_encoder_fields(cfg))
    out.validate()
    return out


@dataclass(frozen=True)
class MatchedWidth:
    """A standard encoder's width and heads matching a parameter budget."""

    width: int
    n_heads: int
    parameters: int
    target: int

    @property
    def relative_error(self) -> float:
        return self.parameters / self.target - 1.0


def matched_width(cfg: LTransformerConfig) -> MatchedWidth:
    """The width w whose standard block stack has about the L-Transformer's encoder
    parameters: among widths within :data:`MATCH_TOLERANCE`, the closest one whose heads
    keep ``cfg``'s head width d_s / H; failing that, the closest width overall, with the
    divisor of w nearest w / head width as its heads."""
    target = encoder_parameter_count(cfg)
    head_dim = cfg.d_slice // cfg.n_heads

    def key(m: MatchedWidth) -> tuple[bool, bool, int]:
        close = abs(m.relative_error) <= MATCH_TOLERANCE
        return (not close, m.width != m.n_heads * head_dim or not close,
                abs(m.parameters - target))

    candidates = []
    for width in range(1, cfg.d_model + 1):
        divisors = [h for h in range(1, width + 1) if width % h == 0]
        heads = min(divisors, key=lambda h: abs(width / h - head_dim))
        candidates.append(MatchedWidth(width, heads, standard_block_parameters(width, cfg),
                                       target))
    return min(candidates, key=key)


def param_matched_baseline(cfg: LTransformerConfig) -> TextEncoderConfig:
    """A narrower standard encoder whose block parameters equal ``cfg``'s encoder
    parameters within 2 % (:data:`MATCH_TOLERANCE`); embedding as :func:`fair_baseline`.

    Its width w solves 4w² + 2wh + O(w) ≈ p (4d_s² + 2d_s h_s + O(d_s)), so w ≈ d / √p
    (arXiv 2603.05727's 1/p encoder, spent on one transformer instead of p). Raises
    :class:`ConfigError` when no width is within the tolerance (tiny models).
    """
    cfg.validate()
    _attention_only(cfg)
    match = matched_width(cfg)
    if abs(match.relative_error) > MATCH_TOLERANCE:
        raise ConfigError(
            f"no standard encoder of width <= {cfg.d_model} has {match.target} block "
            f"parameters within {MATCH_TOLERANCE:.0%} (closest: width {match.width}, "
            f"{match.parameters}); choose a larger d_model"
        )
    out = TextEncoderConfig(d_model=match.width, n_heads=match.n_heads, embed_scale=True,
                            positions="sinusoidal", **_encoder_fields(cfg))
    out.validate()
    return out


def total_parameter_count(cfg: LTransformerConfig | TextEncoderConfig,
                          vocab_size: int = BERT_VOCAB) -> int:
    """All parameters of the model with ``vocab_size`` tokens: token embedding V·d, a learned
    position table (``positions="learned"`` only), a cls token (``pool="cls"``), the
    encoder, the final norm and the classifier d·C + C (arXiv 2603.05727 reports -41 % at
    d = 768, V = 30,522)."""
    d = cfg.d_model
    norm = 2 * d if cfg.bias else d
    head = d * cfg.num_classes + cfg.num_classes
    cls = d if cfg.pool == "cls" else 0
    if isinstance(cfg, LTransformerConfig):
        encoder = encoder_parameter_count(cfg)
        encoder += cfg.p if cfg.alpha == "learnable" else 0  # the p position rates
    else:
        encoder = standard_block_parameters(d, cfg)
        encoder += cfg.max_len * d if cfg.positions == "learned" else 0
    return vocab_size * d + encoder + norm + head + cls


@dataclass(frozen=True)
class ProjectionFlops:
    """Forward FLOPs (2 per multiply-add) of one model's linear maps over ``n_tokens``."""

    projections: int  # Q, K, V and output projections
    ffn: int
    folding: int  # LayerNorm gains/shifts folded into the next map, once per call
    transform: int  # X ×₃ Z in and Z⁻¹ out (0 for a standard encoder)

    @property
    def projections_and_ffn(self) -> int:
        return self.projections + self.ffn + self.folding


def projection_flops(cfg: LTransformerConfig | TextEncoderConfig,
                     n_tokens: int) -> ProjectionFlops:
    """Analytic forward FLOPs of the projections and FFN (arXiv 2603.05727: ≈ 1/p).

    Per layer and slice, with N tokens, width w (d_s, or d for a standard encoder) and
    h = ⌊r·w⌋: Q, K, V, O cost 2N·4w², the FFN 2N·2wh. An L-block folds its slice LN's
    shift β into the next map's bias, β Ŵ: 2·(3w² + wh) per slice, independent of N
    (with ``bias``). The transform in and out costs 2N·p·d each (a p×p mix per feature).
    Attention scores and P V are the same for both models (same heads) and not counted.
    """
    sliced = isinstance(cfg, LTransformerConfig)
    p = cfg.p if sliced else 1
    w = cfg.d_model // p
    h = int(cfg.mlp_ratio * w)
    layers = cfg.n_layers * p  # slice-layers
    return ProjectionFlops(
        projections=layers * 2 * n_tokens * 4 * w * w,
        ffn=layers * 2 * n_tokens * 2 * w * h,
        folding=layers * 2 * (3 * w * w + w * h) if sliced and cfg.bias else 0,
        transform=2 * (2 * n_tokens * p * cfg.d_model) if sliced else 0,
    )
