"""linear, dropout and embedding."""

from __future__ import annotations

from dy2stat import ops
from dy2stat.dispatch import apply

_DROPOUT_MODES = ("upscale_in_train", "downscale_in_infer")


def linear(x, weight, bias=None):
    """``x @ weight + bias`` with ``weight`` of shape [in_features, out_features]."""
    out = ops.matmul(x, weight)
    return out if bias is None else ops.add(out, bias)


def dropout(x, p: float = 0.5, axis=None, training: bool = True,
            mode: str = "upscale_in_train"):
    """Zero each element with probability ``p`` while training.

    ``upscale_in_train`` scales the kept values by 1/(1-p) while training and
    is the identity otherwise; ``downscale_in_infer`` keeps them as they are
    while training and scales by (1-p) otherwise.
    """
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if mode not in _DROPOUT_MODES:
        raise ValueError(f"dropout: unknown mode {mode!r} (use {' or '.join(_DROPOUT_MODES)})")
    if axis is not None:
        raise NotImplementedError("dropout: axis is not supported; drop elementwise (axis=None)")
    if not training:
        return x if mode == "upscale_in_train" or p == 0.0 else ops.scale(x, 1.0 - p)
    if p == 0.0:
        return x
    mask = apply("bernoulli_mask", x, p=p)
    return apply("dropout", x, mask, p=p, mode=mode)


def embedding(x, weight, padding_idx: int | None = None, sparse: bool = False):
    """Rows of ``weight`` [num_embeddings, dim] picked by the integer ids ``x``;
    ids equal to ``padding_idx`` give zero rows (and no gradient)."""
    if padding_idx is not None:
        padding_idx = int(padding_idx)
    return apply("embedding", x, weight, padding_idx=padding_idx)
