"""layer_norm and batch_norm (ops), group_norm and instance_norm (written with
reductions and elementwise ops)."""

from __future__ import annotations

import numbers

from dy2stat import ops
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


def _normalize(x, axes, epsilon):
    """``(x - mean) / sqrt(var + epsilon)`` over ``axes`` (the biased variance)."""
    centered = ops.subtract(x, ops.mean(x, axis=axes, keepdim=True))
    var = ops.mean(ops.multiply(centered, centered), axis=axes, keepdim=True)
    return ops.divide(centered, ops.sqrt(ops.add(var, float(epsilon))))


def _affine(y, weight, bias):
    """Per-channel scale and shift of a channel-first ``y``."""
    shape = [1, -1] + [1] * (len(y.shape) - 2)
    if weight is not None:
        y = ops.multiply(y, ops.reshape(weight, shape))
    if bias is not None:
        y = ops.add(y, ops.reshape(bias, shape))
    return y


def group_norm(x, num_groups: int, epsilon: float = 1e-5, weight=None, bias=None,
               data_format: str = "NCHW"):
    """Normalize each sample over groups of ``C / num_groups`` channels (and all spatial
    positions), then scale and shift per channel."""
    if data_format not in ("NCHW", "NCL", "NC", "NCDHW"):
        raise ValueError(f"group_norm: only channel-first data formats are supported, got "
                         f"{data_format!r}")
    if len(x.shape) < 2:
        raise ValueError(f"group_norm: expected an input [N, C, ...], got shape "
                         f"{list(x.shape)}")
    channels, groups = x.shape[1], int(num_groups)
    if groups < 1 or (channels >= 0 and channels % groups):
        raise ValueError(f"group_norm: {channels} channels are not divisible into "
                         f"{groups} groups")
    grouped = ops.reshape(x, [0, groups, -1])
    y = apply("reshape_like", _normalize(grouped, [2], epsilon), x)
    return _affine(y, weight, bias)


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.9, eps: float = 1e-5,
                  data_format: str = "NCHW"):
    """Normalize each sample's channels over their spatial positions, then scale and
    shift per channel. Running statistics are not kept (``use_input_stats`` only)."""
    if not use_input_stats or running_mean is not None or running_var is not None:
        raise NotImplementedError("instance_norm: only input statistics are supported "
                                  "(use_input_stats=True, no running statistics)")
    if data_format not in ("NCHW", "NCL", "NCDHW"):
        raise ValueError(f"instance_norm: only channel-first data formats are supported, "
                         f"got {data_format!r}")
    if len(x.shape) < 3:
        raise ValueError(f"instance_norm: expected an input [N, C, ...spatial], got shape "
                         f"{list(x.shape)}")
    y = _normalize(x, list(range(2, len(x.shape))), eps)
    return _affine(y, weight, bias)
