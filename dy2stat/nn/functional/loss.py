"""Losses: cross_entropy and mse_loss."""

from __future__ import annotations

from dy2stat import creation, ops
from dy2stat.dispatch import apply

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, where):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(input, label, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  soft_label: bool = False, axis: int = -1, use_softmax: bool = True):
    """Softmax cross entropy of logits ``input`` against integer (or soft) labels.

    Integer labels may keep a size-1 class axis. ``weight`` ([num_classes])
    weighs each sample by its label's class (a soft label: the label-weighted
    sum), and the mean is then divided by the total weight, as in Paddle.
    Labels equal to ``ignore_index`` add nothing. ``use_softmax=False`` takes
    ``input`` as probabilities.
    """
    _check_reduction(reduction, "cross_entropy")
    axis = int(axis)
    if not use_softmax:
        input = ops.log(input)
    if weight is None:
        return apply("cross_entropy", input, label, soft_label=bool(soft_label),
                     ignore_index=int(ignore_index), reduction=reduction, axis=axis)
    loss = apply("cross_entropy", input, label, soft_label=bool(soft_label),
                 ignore_index=int(ignore_index), reduction="none", axis=axis)
    per_sample = _sample_weights(input, label, weight, ignore_index, soft_label, axis)
    loss = ops.multiply(loss, per_sample)
    if reduction == "none":
        return loss
    total = ops.sum(loss)
    return total if reduction == "sum" else ops.divide(total, ops.sum(per_sample))


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
    loss = ops.multiply(diff, diff)
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    return loss
