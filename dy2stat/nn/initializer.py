"""Parameter initializers (``nn.initializer``).

Calling an initializer with ``(shape, dtype, xp)`` draws an array from the
global generator of ``dy2stat.kernels.random``, so ``d2s.seed(n)`` makes
layer construction reproducible. ``static_op(shape)`` gives the same draw as
``(op_type, attrs)`` of a creation op, for the startup program of a layer
built in static mode; an initializer that no creation op draws (``Assign``,
``TruncatedNormal``) returns None there, and its startup program assigns the
values drawn when the layer was built.
"""

from __future__ import annotations

import math

import numpy as np

from dy2stat.kernels import backend, random
from dy2stat.tensor import Tensor

__all__ = [
    "Assign", "Constant", "Initializer", "KaimingNormal", "KaimingUniform", "Normal",
    "TruncatedNormal", "Uniform", "XavierNormal", "XavierUniform", "calculate_gain",
]


def _fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) in Paddle's convention: Linear weights are [in, out];
    conv filters are [out, in, *kernel]."""
    shape = list(shape)
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for an activation (as in Paddle and PyTorch)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


class Initializer:
    """Base: a distribution described once, drawn eagerly or as a startup op."""

    def __call__(self, shape, dtype, xp=np):
        op_type, attrs = self.static_op(shape)
        shape = [int(d) for d in shape]
        if op_type == "full":
            return xp.full(tuple(shape), attrs["value"], dtype=dtype)
        if op_type == "uniform":
            return random.uniform(xp, shape, attrs["min"], attrs["max"], dtype)
        return random.normal(xp, shape, attrs["mean"], attrs["std"], dtype)

    def static_op(self, shape) -> tuple[str, dict] | None:
        """``(op_type, attrs)`` of the creation op that draws this, or None when none does
        (the startup program then assigns values drawn as the parameter is made)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Constant(Initializer):
    """Every element ``value``."""

    def __init__(self, value: float = 0.0):
        self.value = float(value)

    def static_op(self, shape):
        return "full", {"value": self.value}


class Uniform(Initializer):
    """Uniform on [low, high)."""

    def __init__(self, low: float = -1.0, high: float = 1.0):
        if high < low:
            raise ValueError(f"Uniform: high {high} is below low {low}")
        self.low, self.high = float(low), float(high)

    def static_op(self, shape):
        return "uniform", {"min": self.low, "max": self.high}


class Normal(Initializer):
    """Normal random values of ``mean`` and standard deviation ``std``."""

    def __init__(self, mean: float = 0.0, std: float = 1.0):
        if std < 0:
            raise ValueError(f"Normal: std must be >= 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def static_op(self, shape):
        return "normal", {"mean": self.mean, "std": self.std}


class TruncatedNormal(Initializer):
    """Normal(mean, std) restricted to ``[mean + a * std, mean + b * std]`` (values
    outside are drawn again)."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0):
        if std < 0:
            raise ValueError(f"TruncatedNormal: std must be >= 0, got {std}")
        if not a < b:
            raise ValueError(f"TruncatedNormal: a ({a}) must be below b ({b})")
        self.mean, self.std, self.a, self.b = float(mean), float(std), float(a), float(b)

    def __call__(self, shape, dtype, xp=np):
        shape = [int(d) for d in shape]
        z = random.normal(xp, shape, 0.0, 1.0, "float64")
        outside = (z < self.a) | (z > self.b)
        while bool(outside.any()):
            z[outside] = random.normal(xp, [int(outside.sum())], 0.0, 1.0, "float64")
            outside = (z < self.a) | (z > self.b)
        return (z * self.std + self.mean).astype(dtype)

    def static_op(self, shape):
        return None


class XavierUniform(Initializer):
    """Uniform on ±gain·sqrt(6 / (fan_in + fan_out)) (Glorot)."""

    def __init__(self, fan_in: int | None = None, fan_out: int | None = None, gain: float = 1.0):
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, float(gain)

    def static_op(self, shape):
        fan_in, fan_out = _fans(shape)
        fan_in = self.fan_in or fan_in
        fan_out = self.fan_out or fan_out
        limit = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return "uniform", {"min": -limit, "max": limit}


class XavierNormal(Initializer):
    """Normal with std gain·sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, fan_in: int | None = None, fan_out: int | None = None, gain: float = 1.0):
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, float(gain)

    def static_op(self, shape):
        fan_in, fan_out = _fans(shape)
        std = self.gain * math.sqrt(2.0 / ((self.fan_in or fan_in) + (self.fan_out or fan_out)))
        return "normal", {"mean": 0.0, "std": std}


class KaimingUniform(Initializer):
    """Uniform on ±gain·sqrt(3 / fan_in) (He); gain from the nonlinearity."""

    def __init__(self, fan_in: int | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu"):
        self.fan_in, self.negative_slope, self.nonlinearity = fan_in, negative_slope, nonlinearity

    def static_op(self, shape):
        gain = calculate_gain(self.nonlinearity, self.negative_slope)
        limit = gain * math.sqrt(3.0 / (self.fan_in or _fans(shape)[0]))
        return "uniform", {"min": -limit, "max": limit}


class KaimingNormal(Initializer):
    """Normal with std gain / sqrt(fan_in) (He)."""

    def __init__(self, fan_in: int | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu"):
        self.fan_in, self.negative_slope, self.nonlinearity = fan_in, negative_slope, nonlinearity

    def static_op(self, shape):
        gain = calculate_gain(self.nonlinearity, self.negative_slope)
        return "normal", {"mean": 0.0, "std": gain / math.sqrt(self.fan_in or _fans(shape)[0])}


class Assign(Initializer):
    """Exactly the given values (an array, list or Tensor)."""

    def __init__(self, value):
        # kept on the host: a Tensor's or a CuPy array's values are copied here
        self.value = backend.to_host(value._data if isinstance(value, Tensor) else value)

    def __call__(self, shape, dtype, xp=np):
        if list(self.value.shape) != [int(d) for d in shape]:
            raise ValueError(f"Assign: value shape {list(self.value.shape)} does not match the "
                             f"parameter shape {list(shape)}")
        return xp.asarray(self.value, dtype=dtype).copy()

    def static_op(self, shape):
        return None

    def __repr__(self) -> str:
        return f"Assign(shape={list(self.value.shape)})"
