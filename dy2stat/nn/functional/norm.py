"""layer_norm and batch_norm."""

from __future__ import annotations

import numbers

from dy2stat.autograd import no_grad
from dy2stat.dispatch import apply
from dy2stat.mode import state
from dy2stat.nn import static_mode
from dy2stat.tensor import Tensor


def layer_norm(x, normalized_shape, weight=None, bias=None, epsilon: float = 1e-5):
    """Normalize over the trailing dims ``normalized_shape``, then scale and shift."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = [int(normalized_shape)]
    normalized_shape = [int(d) for d in normalized_shape]
    begin = len(x.shape) - len(normalized_shape)
    trailing = list(x.shape[begin:]) if begin >= 0 else None
    if trailing is None or any(a != b and a != -1 for a, b in zip(trailing, normalized_shape)):
        raise ValueError(f"layer_norm: normalized_shape {normalized_shape} does not match the "
                         f"trailing dims of input shape {list(x.shape)}")
    y, _, _ = apply("layer_norm", x, weight, bias, epsilon=float(epsilon),
                    begin_norm_axis=begin)
    return y


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.9, epsilon: float = 1e-5, data_format: str = "NCHW",
               use_global_stats: bool | None = None):
    """Batch normalization over every axis but the channel axis.

    With batch statistics (``training`` and not ``use_global_stats``) the
    running statistics are updated in place:
    ``running = momentum * running + (1 - momentum) * batch`` (the variance
    unbiased). Otherwise the running statistics normalize and stay as they are.
    """
    use_batch = training if use_global_stats is None else not use_global_stats
    y, mean_out, var_out, _, _ = apply(
        "batch_norm", x, _read(running_mean, x), _read(running_var, x), weight, bias,
        training=bool(use_batch),
        momentum=float(momentum), epsilon=float(epsilon), data_format=data_format)
    if use_batch:
        update_state(running_mean, mean_out)
        update_state(running_var, var_out)
    return y


def _read(stat, x):
    """The running statistic as the op reads it.

    Eagerly that is a detached alias: ``update_state`` then rebinds the
    buffer to a new array, and the op recorded on the tape keeps an input
    that never changed (its version check stays quiet). A static program
    must read the buffer itself, so that its variable is the one updated.
    """
    if isinstance(stat, Tensor) and isinstance(x, Tensor) and not state.static:
        return stat.detach()
    return stat


def update_state(target, value) -> None:
    """Write ``value`` into the state tensor ``target`` (a buffer), without gradient.

    Eager values are copied now; a static value (the op was appended to a
    program) is written by an ``assign`` op when the program runs.
    """
    if getattr(value, "is_static", False):
        static_mode.assign_to(target, value)
        return
    with no_grad():
        target.set_value(value)
