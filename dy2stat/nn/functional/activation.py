"""Activations: relu, sigmoid, tanh, gelu, softmax, log_softmax."""

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
    return apply("softmax", _cast(x, dtype), axis=int(axis))


def log_softmax(x, axis: int = -1, dtype=None):
    return apply("log_softmax", _cast(x, dtype), axis=int(axis))
