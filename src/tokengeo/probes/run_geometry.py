"""Token geometry of a trained classifier or language model on fixed evaluation examples.

``model`` is a tokengeo model with a ``hook_final`` hook point; ``task`` anything with
``eval_indices(split, n)`` and ``batch(split, idx) -> Batch(inputs, targets, attention_mask)``
(the tasks of :mod:`tokengeo.train`). Tokens are captured after the final norm and reduced
with :mod:`tokengeo.probes.geometry`.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def final_tokens(model, task, split: str, max_examples: int, batch_size: int = 256):
    """Final-layer tokens (N, T, d), their mask (N, T), inputs and targets of ``split``.

    Batches of different lengths (text trimmed to its longest sequence) are right-padded
    to a common T; the mask marks real tokens (a prepended cls token counts as real).
    """
    from tokengeo.probes.capture import capture

    model.eval()
    idx = task.eval_indices(split, max_examples)
    feats, masks, inputs, targets = [], [], [], []
    with capture(model, ["hook_final"]) as cache:
        for chunk in idx.split(batch_size):
            b = task.batch(split, chunk)
            model(b.inputs, b.attention_mask)
            h = cache["hook_final"].float().cpu()  # (B, T', d)
            feats.append(h)
            masks.append(_token_mask(b.attention_mask, h.shape[:2]))
            inputs.append(b.inputs)
            targets.append(b.targets)
    T = max(h.shape[1] for h in feats)
    h = torch.cat([torch.nn.functional.pad(x, (0, 0, 0, T - x.shape[1])) for x in feats])
    mask = torch.cat([torch.nn.functional.pad(m, (0, T - m.shape[1])) for m in masks])
    return h, mask, inputs, torch.cat(targets)


def _token_mask(attention_mask, shape) -> torch.Tensor:
    B, T = shape
    if attention_mask is None:
        return torch.ones(B, T, dtype=torch.bool)
    m = attention_mask.bool().cpu()
    if m.shape[1] < T:  # tokens the model prepends (cls) are real
        m = torch.cat([torch.ones(B, T - m.shape[1], dtype=torch.bool), m], dim=1)
    return m


def classification_geometry(model, task, split: str, max_examples: int) -> dict[str, float]:
    """Variance shares, neural collapse of sequence means, spectrum of tokens (arXiv 2602.09297,
    Sec. 4: Laplacian heads lower within-sequence variance, raise between-class variance and
    align the sequence means with the simplex ETF of neural collapse, NC2).

    ``components_99`` pools every image's tokens in one cloud; ``components_99_per_image``
    counts each image's tokens (centred by the image's mean) and averages over images, the
    paper's per-image spectrum. NC2: ``nc2_equinorm`` = std / mean of the centred class-mean
    norms, ``nc2_max_angle`` = mean |cos + 1/(C-1)| over class pairs, ``nc2_etf_error`` the
    distance of their normalised Gram matrix to the ETF's (:mod:`tokengeo.probes.collapse`).
    """
    from tokengeo.probes.geometry import (
        neural_collapse_sequences,
        spectral_decay,
        variance_decomposition,
    )
    from tokengeo.probes.spectrum import per_item_components

    h, mask, _, y = final_tokens(model, task, split, max_examples)  # (N, T, d), (N, T), (N,)
    var = variance_decomposition(h, y, mask)
    nc = neural_collapse_sequences(h, y, mask)
    spec = spectral_decay(h, mask)
    return {
        "within_sequence_share": var.within_sequence / var.total,
        "between_class_share": var.between_class / var.total,
        "nc1": nc.nc1, "nc2_etf_error": nc.nc2_etf_error, "ncc_accuracy": nc.ncc_accuracy,
        "nc2_equinorm": nc.nc2_equinorm, "nc2_max_angle": nc.nc2_max_angle,
        "components_99": spec.n_components_99, "decay_alpha": spec.decay_alpha,
        "components_99_per_image": per_item_components(h, 0.99),  # images are unpadded
        "n_examples": int(h.shape[0]),
    }


def language_geometry(model, task, split: str, max_examples: int) -> dict[str, float]:
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

    h, _, x, _ = final_tokens(model, task, split, max_examples, batch_size=32)  # (N, T, d)
    x = torch.cat(x)  # (N, T) token ids: language windows all have block_size tokens
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


GEOMETRY = {"classification": classification_geometry, "language": language_geometry}
