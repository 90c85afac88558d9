"""Token geometry of a trained classifier or language model on fixed evaluation examples.

``model`` is a tokengeo model with a ``hook_final`` hook point; ``task`` anything with
``eval_indices(split, n)`` and ``batch(split, idx) -> Batch(inputs, targets, attention_mask)``
(the tasks of :mod:`tokengeo.train`). Tokens are captured after the final norm and reduced
with :mod:`tokengeo.probes.geometry`; the same numbers of every block's output (the residual
stream after block l, ``blocks.{l}.hook_resid_post``) go under ``"layers"``, one dict per
block, for tokengeo models.
"""

from __future__ import annotations

import torch

FINAL = "hook_final"
LAYER_HOOK = "blocks.{}.hook_resid_post"  # the residual stream after block l


def layer_hooks(model) -> list[str]:
    """``blocks.{l}.hook_resid_post`` for every block of a tokengeo model, in order; empty
    for a model without them (a Hugging Face model: final-layer geometry only)."""
    names = {n for n, _ in model.named_modules()}
    out, layer = [], 0
    while LAYER_HOOK.format(layer) in names:
        out.append(LAYER_HOOK.format(layer))
        layer += 1
    return out


@torch.no_grad()
def captured_tokens(model, task, split: str, max_examples: int, names: list[str],
                    batch_size: int = 256):
    """Tokens at each hook point in ``names`` ({name: (N, T, d)}), their mask (N, T),
    inputs and targets of ``split``.

    Batches of different lengths (text trimmed to its longest sequence) are right-padded
    to a common T; the mask marks real tokens (a prepended cls token counts as real).
    """
    from tokengeo.probes.capture import capture

    model.eval()
    first = next(model.parameters(), None)
    device = torch.device("cpu") if first is None else first.device  # the model's device
    idx = task.eval_indices(split, max_examples)
    feats: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    masks, inputs, targets = [], [], []
    with capture(model, names) as cache:
        for chunk in idx.split(batch_size):
            b = task.batch(split, chunk)  # on the CPU
            run = b.to(device)
            model(run.inputs, run.attention_mask)
            for n in names:
                feats[n].append(cache[n].float().cpu())  # (B, T', d)
            masks.append(_token_mask(b.attention_mask, cache[names[0]].shape[:2]))
            inputs.append(b.inputs)
            targets.append(b.targets)
    T = max(m.shape[1] for m in masks)
    tokens = {n: torch.cat([_pad_tokens(x, T) for x in xs]) for n, xs in feats.items()}
    mask = torch.cat([torch.nn.functional.pad(m, (0, T - m.shape[1])) for m in masks])
    return tokens, mask, inputs, torch.cat(targets)


def _pad_tokens(x: torch.Tensor, T: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, 0, 0, T - x.shape[1]))  # (B, T, d)


def final_tokens(model, task, split: str, max_examples: int, batch_size: int = 256):
    """Final-layer tokens (N, T, d), their mask (N, T), inputs and targets of ``split``
    (:func:`captured_tokens` at ``hook_final``)."""
    tokens, mask, inputs, targets = captured_tokens(model, task, split, max_examples,
                                                    [FINAL], batch_size)
    return tokens[FINAL], mask, inputs, targets


def _with_layers(model, task, split: str, max_examples: int, batch_size: int,
                 metrics) -> dict:
    """``metrics(h, mask, inputs, targets)`` of the final tokens, and under ``"layers"`` the
    same metrics of every block's output (the paper's figures are per layer)."""
    hooks = layer_hooks(model)
    tokens, mask, inputs, y = captured_tokens(model, task, split, max_examples,
                                              [FINAL, *hooks], batch_size)
    out = metrics(tokens[FINAL], mask, inputs, y)
    if hooks:
        out["layers"] = [metrics(tokens[h], mask, inputs, y) for h in hooks]
    return out


def _token_mask(attention_mask, shape) -> torch.Tensor:
    B, T = shape
    if attention_mask is None:
        return torch.ones(B, T, dtype=torch.bool)
    m = attention_mask.bool().cpu()
    if m.shape[1] < T:  # tokens the model prepends (cls) are real
        m = torch.cat([torch.ones(B, T - m.shape[1], dtype=torch.bool), m], dim=1)
    return m


def classification_geometry(model, task, split: str, max_examples: int) -> dict:
    """Variance shares, neural collapse of sequence means, spectrum of tokens (arXiv 2602.09297,
    Sec. 4: Laplacian heads lower within-sequence variance, raise between-class variance and
    align the sequence means with the simplex ETF of neural collapse, NC2).

    ``components_99`` pools every image's tokens in one cloud; ``components_99_per_image``
    counts each image's tokens (centred by the image's mean) and averages over images, the
    paper's per-image spectrum. NC2: ``nc2_equinorm`` = std / mean of the centred class-mean
    norms, ``nc2_max_angle`` = mean |cos + 1/(C-1)| over class pairs, ``nc2_etf_error`` the
    distance of their normalised Gram matrix to the ETF's (:mod:`tokengeo.probes.collapse`).
    On images (a ViT on an image task): ``object_share`` etc., how far the foreground
    patches' tokens (a raw pixel > 0) cluster apart from the background's
    (:mod:`tokengeo.probes.objects`).
    """
    from tokengeo.probes.geometry import (
        neural_collapse_sequences,
        spectral_decay,
        variance_decomposition,
    )
    from tokengeo.probes.spectrum import per_item_components

    def metrics(h, mask, _inputs, y) -> dict:  # (N, T, d), (N, T), (N,)
        var = variance_decomposition(h, y, mask)
        nc = neural_collapse_sequences(h, y, mask)
        spec = spectral_decay(h, mask)
        return {
            "within_sequence_share": var.within_sequence / var.total,
            "between_class_share": var.between_class / var.total,
            "nc1": nc.nc1, "nc2_etf_error": nc.nc2_etf_error, "ncc_accuracy": nc.ncc_accuracy,
            "nc2_equinorm": nc.nc2_equinorm, "nc2_max_angle": nc.nc2_max_angle,
            "components_99": spec.n_components_99, "decay_alpha": spec.decay_alpha,
            "components_99_interp": spec.components_99_interp,
            "components_99_per_image": per_item_components(h, 0.99),  # images are unpadded
            "n_examples": int(h.shape[0]),
            **objects(h),
        }

    objects = object_metrics(model, task, split, max_examples)
    return _with_layers(model, task, split, max_examples, 256, metrics)


def object_metrics(model, task, split: str, max_examples: int):
    """``tokens (N, T, d) -> {object_share, object_images, foreground_fraction}`` for a ViT
    on an image task (the foreground mask of the same evaluation images, from their raw
    pixels: :func:`tokengeo.probes.objects.patch_foreground`); for any other model or task,
    a function giving ``{}``."""
    patch = getattr(getattr(model, "config", None), "patch_size", None)
    if getattr(task, "kind", "") != "image-classification" or patch is None:
        return lambda h: {}
    from tokengeo.probes.objects import object_separation, patch_foreground

    images, _ = task.data.split(split)[task.eval_indices(split, max_examples)]  # uint8
    foreground = patch_foreground(images, int(patch))  # (N, P)
    prefix = int(getattr(model, "num_prefix", 0))
    return lambda h: object_separation(h, foreground, prefix)


def language_geometry(model, task, split: str, max_examples: int) -> dict:
    """Spectrum of token representations and next-token separability (arXiv 2602.09297,
    Sec. 5.2: fewer components for 99% variance with Laplacian heads).

    ``components_99_per_sequence`` is the paper's measure (each window's tokens centred by
    its own mean, counted, averaged over windows: non-integer); ``components_99`` the pooled
    one (all windows' tokens in one cloud), kept as a second measure."""
    from tokengeo.probes.geometry import (
        next_token_separability,
        per_item_components,
        spectral_decay,
        variance_decomposition,
    )

    def metrics(h, _mask, inputs, _y) -> dict:  # h (N, T, d)
        x = torch.cat(inputs)  # (N, T) token ids: language windows all have block_size tokens
        spec = spectral_decay(h)
        sep = next_token_separability(h, x)
        var = variance_decomposition(h)
        return {
            "components_99_per_sequence": per_item_components(h, 0.99),
            "components_99": spec.n_components_99, "decay_alpha": spec.decay_alpha,
            "cdnv_mean": sep.cdnv_mean, "next_token_nm_accuracy": sep.nearest_mean_accuracy,
            "within_sequence_share": var.within_sequence / var.total,
            "n_sequences": int(h.shape[0]),
        }

    return _with_layers(model, task, split, max_examples, 32, metrics)


GEOMETRY = {"classification": classification_geometry, "language": language_geometry}
