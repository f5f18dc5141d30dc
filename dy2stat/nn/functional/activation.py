"""Activations. relu, sigmoid, tanh, gelu and the softmaxes are ops; the rest are
written with elementwise ops, so their gradients (and second derivatives) come from
the ops' rules and they run eagerly, in static programs and in converted code alike."""

from __future__ import annotations

from dy2stat import ops
from dy2stat.dispatch import apply

relu = ops.relu
sigmoid = ops.sigmoid
tanh = ops.tanh


def gelu(x, approximate: bool = False):
    """x·Φ(x); ``approximate`` uses the tanh form."""
    return apply("gelu", x, approximate=bool(approximate))


def _cast(x, dtype):
    return x if dtype is None else ops.cast(x, dtype)


def softmax(x, axis: int = -1, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``axis`` (computed without overflow), after casting to
    ``dtype`` when given."""
    return apply("softmax", _cast(x, dtype), axis=int(axis))


def log_softmax(x, axis: int = -1, dtype=None):
    """``log(softmax(x))`` along ``axis``, computed stably, after casting to ``dtype`` when
    given."""
    return apply("log_softmax", _cast(x, dtype), axis=int(axis))


def leaky_relu(x, negative_slope: float = 0.01):
    """x where x >= 0, else ``negative_slope * x``."""
    return ops.where(ops.greater_equal(x, 0.0), x, ops.scale(x, float(negative_slope)))


def elu(x, alpha: float = 1.0):
    """x where x > 0, else ``alpha * (exp(x) - 1)``."""
    negative = ops.scale(ops.exp(ops.minimum(x, 0.0)), float(alpha), -float(alpha))
    return ops.where(ops.greater_than(x, 0.0), x, negative)


def silu(x):
    """x·sigmoid(x) (also called swish)."""
    return ops.multiply(x, ops.sigmoid(x))


def softplus(x, beta: float = 1.0, threshold: float = 20.0):
    """``log(1 + exp(beta * x)) / beta``; x itself where ``beta * x > threshold``."""
    z = ops.scale(x, float(beta))
    # The log branch reads z clipped at the threshold: it never overflows, and where it
    # is not taken its (finite) gradient is multiplied by zero.
    soft = ops.scale(ops.log(ops.scale(ops.exp(ops.minimum(z, float(threshold))), 1.0, 1.0)),
                     1.0 / float(beta))
    return ops.where(ops.greater_than(z, float(threshold)), x, soft)


def mish(x):
    """x·tanh(softplus(x))."""
    return ops.multiply(x, ops.tanh(softplus(x)))


def relu6(x):
    """min(max(x, 0), 6)."""
    return ops.clip(x, 0.0, 6.0)


def hardswish(x):
    """x·relu6(x + 3) / 6."""
    return ops.multiply(x, ops.scale(ops.clip(ops.scale(x, 1.0, 3.0), 0.0, 6.0), 1.0 / 6.0))


def softsign(x):
    """x / (1 + |x|)."""
    return ops.divide(x, ops.scale(ops.abs(x), 1.0, 1.0))


def prelu(x, weight, data_format: str = "NCHW"):
    """x where x > 0, else ``weight * x``; ``weight`` has one element, or one per channel
    (the channel axis is 1, or the last one for channel-last ``data_format``)."""
    size = weight.shape[0] if len(weight.shape) == 1 else -1
    if len(weight.shape) != 1:
        raise ValueError(f"prelu: weight must be 1-D, got shape {list(weight.shape)}")
    if size != 1:
        ndim = len(x.shape)
        if ndim < 2:
            raise ValueError(f"prelu: a per-channel weight needs an input of rank >= 2, got "
                             f"shape {list(x.shape)}")
        axis = ndim - 1 if data_format in ("NHWC", "NLC", "NDHWC") else 1
        if x.shape[axis] not in (size, -1):
            raise ValueError(f"prelu: weight has {size} values but the input has "
                             f"{x.shape[axis]} channels (shape {list(x.shape)})")
        shape = [1] * ndim
        shape[axis] = size
        weight = ops.reshape(weight, shape)
    return ops.where(ops.greater_than(x, 0.0), x, ops.multiply(weight, x))
