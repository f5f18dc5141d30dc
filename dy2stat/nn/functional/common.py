"""linear, dropout, embedding, cosine_similarity and label_smooth."""

from __future__ import annotations

from dy2stat import creation, ops
from dy2stat.dispatch import apply
from dy2stat.tensor import Tensor

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


def cosine_similarity(x1, x2, axis: int = 1, eps: float = 1e-8):
    """``sum(x1 * x2) / sqrt(max(sum(x1^2) * sum(x2^2), eps^2))`` along ``axis``
    (Paddle's form: the product of the squared norms is clipped, not each norm)."""
    axis = int(axis)
    dot = ops.sum(ops.multiply(x1, x2), axis=axis)
    squares = ops.multiply(ops.sum(ops.multiply(x1, x1), axis=axis),
                           ops.sum(ops.multiply(x2, x2), axis=axis))
    return ops.divide(dot, ops.sqrt(ops.maximum(squares, float(eps) ** 2)))


def label_smooth(label, prior_dist=None, epsilon: float = 0.1):
    """``(1 - epsilon) * label + epsilon * prior_dist`` for one-hot (or soft) labels;
    the prior defaults to uniform over the last axis."""
    epsilon = float(epsilon)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"label_smooth: epsilon must be in [0, 1], got {epsilon}")
    if prior_dist is None:
        classes = label.shape[-1]
        if classes < 0:
            raise ValueError("label_smooth: the number of classes (the last dim) must be "
                             "known; pass prior_dist")
        return ops.scale(label, 1.0 - epsilon, epsilon / classes)
    return ops.add(ops.scale(label, 1.0 - epsilon), ops.scale(prior_dist, epsilon))


def batch_zeros(x, tail, dtype=None):
    """Zeros [batch, *tail] with ``x``'s batch (dim 0, which may be known only when the
    program runs), device and dtype (or ``dtype``)."""
    first = ops.flatten(x, 1)[:, 0:1] if len(x.shape) > 1 else ops.unsqueeze(x, 1)
    zeros = creation.full_like(first, 0.0, dtype)  # [batch, 1]
    zeros = ops.reshape(zeros, [0] + [1] * len(tail))
    return ops.tile(zeros, [1, *[int(d) for d in tail]])


def constant_like(values, like):
    """A constant tensor of ``values`` (an array) on ``like``'s device; a static program
    holds it as a constant."""
    if isinstance(like, Tensor):
        return creation.to_tensor(values, place=like.place)
    return creation.to_tensor(values)
