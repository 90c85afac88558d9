"""Dataclass configs of the model families, validated in one place."""

from __future__ import annotations

from dataclasses import dataclass

from tokengeo.checks import (
    check_choice,
    check_memory,
    check_positive,
    check_range,
    check_types,
)
from tokengeo.errors import ConfigError
from tokengeo.nn.heads import LAPLACIAN, HeadSpec
from tokengeo.nn.kernels.table import check_kernel_name


@dataclass
class TransformerConfig:
    """What every family shares: the block stack and its head kinds.

    ``n_laplacian``: the last k heads of every layer are Laplacian (Zhang & Papyan);
    ``laplacian_heads``: explicit ``{layer: [head indices]}`` (or one list per layer) instead;
    ``head_kind``: what the selected heads become (``laplacian`` or learnable ``mixed``);
    ``kernel``: the attention kernel every block runs, ``auto`` (the kernel table's choice
    per input) or a name of :data:`~tokengeo.nn.kernels.KERNELS` (as Hugging Face's
    ``attn_implementation``: saved with the model, it changes speed and memory, not what
    is computed).
    """

    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    mlp_ratio: float = 4.0
    dropout: float = 0.0
    attn_dropout: float = 0.0
    bias: bool = True
    norm_eps: float = 1e-5
    n_laplacian: int = 0
    laplacian_heads: dict[int, list[int]] | list[list[int]] | None = None
    head_kind: str = LAPLACIAN
    mixed_init: str = LAPLACIAN
    kernel: str = "auto"

    def validate(self) -> None:
        check_types(self)  # ints are ints, floats finite, bias a bool, ...
        check_kernel_name(self.kernel)
        for name in ("d_model", "n_layers", "n_heads", "mlp_ratio", "norm_eps"):
            check_positive(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        check_range("dropout", self.dropout, 0.0, 1.0)
        check_range("attn_dropout", self.attn_dropout, 0.0, 1.0)
        n = self.block_parameter_estimate()  # before per-layer lists are built
        check_memory(f"a model with {self.size_summary()} (~{n:.3g} parameters; the fp32 "
                     "weights of its blocks)", 4 * n, "choose smaller sizes")
        self.head_spec()  # validates n_laplacian, laplacian_heads, head_kind, mixed_init

    SIZE_FIELDS = ("d_model", "n_layers")  # what the parameter count grows with

    def parameter_estimate(self) -> int:
        """About how many parameters the model has (for a memory check before allocating):
        ``n_layers (4 + 2 r) d^2`` for attention (Q, K, V, O) and the MLP of ratio ``r``,
        plus :meth:`embedding_parameters`. Biases and norms (O(d) per layer) are left out."""
        return self.block_parameter_estimate() + self.embedding_parameters()

    def block_parameter_estimate(self) -> int:
        """``n_layers (4 + 2 r) d^2``: the weights of the block stack."""
        return self.n_layers * int((4 + 2 * self.mlp_ratio) * self.d_model**2)

    def embedding_parameters(self) -> int:
        return 0

    def size_summary(self) -> str:
        """``d_model=64, n_layers=4, ...``: the fields :meth:`parameter_estimate` grows with."""
        return ", ".join(f"{n}={getattr(self, n)}" for n in self.SIZE_FIELDS)

    def head_spec(self) -> HeadSpec:
        """Which heads of which layer are of which kind (:class:`~tokengeo.nn.heads.HeadSpec`)."""
        return HeadSpec.parse(
            self.n_layers, self.n_heads, n_laplacian=self.n_laplacian,
            heads=self.laplacian_heads, kind=self.head_kind, mixed_init=self.mixed_init,
            field="laplacian_heads",
        )

    def head_kinds(self) -> list[tuple[str, ...]]:
        return self.head_spec().kinds()


@dataclass
class ViTConfig(TransformerConfig):
    """Vision transformer (Dosovitskiy et al. 2021) on small grey or colour images."""

    image_size: int = 28
    patch_size: int = 4
    in_chans: int = 1
    num_classes: int = 10
    pool: str = "cls"

    def validate(self) -> None:
        super().validate()
        for name in ("image_size", "patch_size", "in_chans", "num_classes"):
            check_positive(name, getattr(self, name))
        if self.image_size % self.patch_size:
            raise ConfigError(
                f"image_size={self.image_size} is not divisible by patch_size={self.patch_size}"
            )
        check_choice("pool", self.pool, ("cls", "mean"))

    SIZE_FIELDS = ("d_model", "n_layers", "image_size", "patch_size")

    def embedding_parameters(self) -> int:
        """Patch embedding, position embeddings and the classifier."""
        n_patches = (self.image_size // self.patch_size) ** 2
        patch = self.in_chans * self.patch_size**2
        return self.d_model * (patch + n_patches + 1 + self.num_classes)


@dataclass
class GPTConfig(TransformerConfig):
    """Causal language model (GPT-2 layout, Radford et al. 2019)."""

    vocab_size: int = 256
    block_size: int = 256
    tie_weights: bool = True

    def validate(self) -> None:
        super().validate()
        check_positive("vocab_size", self.vocab_size)
        check_positive("block_size", self.block_size)

    SIZE_FIELDS = ("d_model", "n_layers", "vocab_size", "block_size")

    def embedding_parameters(self) -> int:
        """Token and position embeddings, and the LM head unless tied."""
        heads = 1 if self.tie_weights else 2
        return self.d_model * (heads * self.vocab_size + self.block_size)


@dataclass
class EncoderConfig(TransformerConfig):
    """Bidirectional text encoder with a classification head (BERT-like, pre-LN)."""

    vocab_size: int = 256
    max_len: int = 128
    num_classes: int = 2
    pool: str = "mean"
    pad_id: int = 0

    def validate(self) -> None:
        super().validate()
        for name in ("vocab_size", "max_len", "num_classes"):
            check_positive(name, getattr(self, name))
        check_choice("pool", self.pool, ("cls", "mean"))

    SIZE_FIELDS = ("d_model", "n_layers", "vocab_size", "max_len")

    def embedding_parameters(self) -> int:
        """Token and position embeddings and the classifier."""
        return self.d_model * (self.vocab_size + self.max_len + self.num_classes)




POSITIONS = ("learned", "sinusoidal")


@dataclass
class TextEncoderConfig(EncoderConfig):
    """The ``encoder`` family's config: an :class:`EncoderConfig` with its embedding options.

    ``positions``: ``learned`` (a trained table, BERT) or ``sinusoidal`` (the fixed code of
    Vaswani et al. 2017, Sec. 3.5, computed by :func:`tokengeo.nn.lposition.sinusoid`);
    ``embed_scale``: multiply token embeddings by √d (Vaswani et al. 2017, Sec. 3.4). With
    ``embed_scale=True, positions="sinusoidal"`` the encoder embeds tokens as the
    L-Transformer does before its transform (the fair baseline of El Ichi et al.,
    arXiv 2603.05727).
    """

    embed_scale: bool = False
    positions: str = "learned"

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.embed_scale, bool):
            raise ConfigError(f"embed_scale={self.embed_scale!r} must be true or false")
        check_choice("positions", self.positions, POSITIONS)
