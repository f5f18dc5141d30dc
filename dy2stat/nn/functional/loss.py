"""Losses. cross_entropy is an op; the others are written with elementwise ops and
reductions, so their gradients come from the ops' rules.

``reduction`` is 'mean' (the default), 'sum' or 'none' (the elementwise losses).
"""

from __future__ import annotations

from dy2stat import creation, ops
from dy2stat.dispatch import apply
from dy2stat.nn.functional.activation import softplus

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, where, allowed=_REDUCTIONS):
    if reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed)
        raise ValueError(f"{where}: reduction must be one of {names}, got {reduction!r}")


def _reduce(loss, reduction):
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    return loss


def cross_entropy(input, label, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  soft_label: bool = False, axis: int = -1, use_softmax: bool = True):
    """Softmax cross entropy of logits ``input`` against integer (or soft) labels.

    Integer labels may keep a size-1 class axis. ``weight`` ([num_classes])
    weighs each sample by its label's class (a soft label: the label-weighted
    sum), and the mean is then divided by the total weight, as in Paddle.
    Labels equal to ``ignore_index`` add nothing. ``use_softmax=False`` takes
    ``input`` as probabilities. With ``reduction='none'`` the loss keeps the
    class axis (size 1) when the label has it (soft labels always do), as in
    Paddle: ``loss * per_sample_weight`` then multiplies sample by sample.
    """
    _check_reduction(reduction, "cross_entropy")
    axis = int(axis)
    if not use_softmax:
        input = ops.log(input)
    loss = apply("cross_entropy", input, label, soft_label=bool(soft_label),
                 ignore_index=int(ignore_index),
                 reduction=reduction if weight is None else "none", axis=axis)
    if weight is not None:
        per_sample = _sample_weights(input, label, weight, ignore_index, soft_label, axis)
        loss = ops.multiply(loss, per_sample)
        if reduction != "none":
            total = ops.sum(loss)
            return total if reduction == "sum" else ops.divide(total, ops.sum(per_sample))
    if reduction == "none" and len(label.shape) == len(input.shape):
        loss = ops.unsqueeze(loss, axis % len(input.shape))
    return loss


def _sample_weights(input, label, weight, ignore_index, soft_label, axis):
    """Each sample's weight: its class's weight (0 where the label is ignored)."""
    ndim = len(input.shape)
    axis = axis % ndim
    if soft_label:
        moved = label if axis == ndim - 1 else ops.transpose(
            label, [d for d in range(ndim) if d != axis] + [axis])
        return ops.squeeze(ops.matmul(moved, ops.unsqueeze(weight, -1)), -1)
    if len(label.shape) == ndim:
        label = ops.squeeze(label, axis)
    valid = ops.not_equal(label, ignore_index)
    safe = ops.where(valid, label, creation.zeros_like(label))
    # embedding picks weight[label] for labels of any shape.
    picked = ops.squeeze(apply("embedding", safe, ops.unsqueeze(weight, -1)), -1)
    return ops.multiply(picked, ops.cast(valid, picked.dtype))


def mse_loss(input, label, reduction: str = "mean"):
    """Mean (or sum, or elementwise) squared difference."""
    _check_reduction(reduction, "mse_loss")
    diff = ops.subtract(input, label)
    return _reduce(ops.multiply(diff, diff), reduction)


def l1_loss(input, label, reduction: str = "mean"):
    """|input - label|, reduced."""
    _check_reduction(reduction, "l1_loss")
    return _reduce(ops.abs(ops.subtract(input, label)), reduction)


def smooth_l1_loss(input, label, reduction: str = "mean", delta: float = 1.0):
    """Huber loss: ``0.5 z^2`` where ``z = |input - label| < delta``, else
    ``delta * z - 0.5 * delta^2`` (Paddle's form)."""
    _check_reduction(reduction, "smooth_l1_loss")
    delta = float(delta)
    z = ops.abs(ops.subtract(input, label))
    quadratic = ops.scale(ops.multiply(z, z), 0.5)
    linear = ops.scale(z, delta, -0.5 * delta * delta)
    return _reduce(ops.where(ops.less_than(z, delta), quadratic, linear), reduction)


def binary_cross_entropy(input, label, weight=None, reduction: str = "mean"):
    """``-(label * log(p) + (1 - label) * log(1 - p))`` of probabilities ``input``; each
    log is clipped at -100 (as Paddle's kernel does) so that p = 0 or 1 stays finite.
    ``weight`` scales the elementwise loss (broadcast)."""
    _check_reduction(reduction, "binary_cross_entropy")
    log_p = ops.maximum(ops.log(input), -100.0)
    log_not_p = ops.maximum(ops.log(ops.scale(input, -1.0, 1.0)), -100.0)
    loss = ops.neg(ops.add(ops.multiply(label, log_p),
                           ops.multiply(ops.scale(label, -1.0, 1.0), log_not_p)))
    if weight is not None:
        loss = ops.multiply(loss, weight)
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(logit, label, weight=None, reduction: str = "mean",
                                     pos_weight=None):
    """Sigmoid cross entropy of ``logit`` against ``label`` in [0, 1], computed without
    forming the sigmoid: ``(1 - label) * x + w * softplus(-x)`` with
    ``w = 1 + (pos_weight - 1) * label`` (1 without ``pos_weight``)."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    log_weight = 1.0 if pos_weight is None else ops.add(
        ops.multiply(ops.scale(pos_weight, 1.0, -1.0), label), 1.0)
    loss = ops.add(ops.multiply(ops.scale(label, -1.0, 1.0), logit),
                   ops.multiply(softplus(ops.neg(logit)), log_weight))
    if weight is not None:
        loss = ops.multiply(loss, weight)
    return _reduce(loss, reduction)


def nll_loss(input, label, weight=None, ignore_index: int = -100, reduction: str = "mean"):
    """Negative log likelihood of log-probabilities ``input`` [N, C] (or [N, C, d1, ...])
    at integer ``label`` [N] (or [N, d1, ...]): ``-weight[label] * input[label]``.
    The mean divides by the total weight of the labels not ignored."""
    _check_reduction(reduction, "nll_loss")
    ndim = len(input.shape)
    if ndim < 2:
        raise ValueError(f"nll_loss: input must be [N, C] or [N, C, d1, ...], got shape "
                         f"{list(input.shape)}")
    if len(label.shape) != ndim - 1:
        raise ValueError(f"nll_loss: label must have one dim less than input (no class "
                         f"axis), got shapes {list(label.shape)} and {list(input.shape)}")
    classes = input.shape[1]
    moved = input if ndim == 2 else ops.transpose(input, [0, *range(2, ndim), 1])
    valid = ops.not_equal(label, int(ignore_index))
    safe = ops.where(valid, label, creation.zeros_like(label))
    picked = ops.sum(ops.multiply(moved, ops.cast(ops.one_hot(safe, classes), moved.dtype)),
                     axis=-1)
    sample_w = ops.cast(valid, moved.dtype)
    if weight is not None:
        class_w = ops.squeeze(apply("embedding", safe, ops.unsqueeze(weight, -1)), -1)
        sample_w = ops.multiply(sample_w, class_w)
    loss = ops.neg(ops.multiply(picked, sample_w))
    if reduction == "mean":
        return ops.divide(ops.sum(loss), ops.sum(sample_w))
    return _reduce(loss, reduction)


def kl_div(input, label, reduction: str = "mean", log_target: bool = False):
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``label``:
    ``label * (log(label) - input)``, 0 where the label is 0 (``log_target``: the label
    is given as log-probabilities, ``exp(label) * (label - input)``). 'batchmean' divides
    the sum by the batch size."""
    _check_reduction(reduction, "kl_div", ("mean", "batchmean", "sum", "none"))
    if log_target:
        loss = ops.multiply(ops.exp(label), ops.subtract(label, input))
    else:
        positive = ops.greater_than(label, 0.0)
        safe = ops.where(positive, label, creation.ones_like(label))  # log(0) never formed
        loss = ops.where(positive, ops.multiply(label, ops.subtract(ops.log(safe), input)),
                         0.0)
    if reduction == "batchmean":
        batch = input.shape[0] if input.shape and input.shape[0] >= 0 else ops.cast(
            ops.shape(input)[0], loss.dtype)
        return ops.divide(ops.sum(loss), batch) if input.shape else ops.sum(loss)
    return _reduce(loss, reduction)


def margin_ranking_loss(input, other, label, margin: float = 0.0, reduction: str = "mean"):
    """``max(0, -label * (input - other) + margin)`` with labels ±1."""
    _check_reduction(reduction, "margin_ranking_loss")
    diff = ops.subtract(input, other)
    return _reduce(ops.relu(ops.add(ops.neg(ops.multiply(label, diff)), float(margin))),
                   reduction)
