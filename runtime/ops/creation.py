"""Ops that make new tensors: constants, ranges and random draws.

Shapes are attrs (lists of ints, all known); dtypes are attrs naming a dtype
("float32"), and the output has exactly that dtype. A shape known only at run
time goes through ``full_like`` or ``bernoulli_mask``, which read it from X.
"""

from __future__ import annotations

import math

import numpy as np

from dy2stat.kernels import random
from dy2stat.kernels.backend import to_host
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import (
    BOOL,
    DTYPE,
    INT,
    NONE,
    NUMBER,
    Meta,
    defop,
    int_at_least,
    ints,
    number_in,
)


def _shape(op, shape) -> tuple:
    shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(
            f"{op}: shape {shapes.fmt(shape)} must hold known dims >= 0; for a shape known only "
            "at run time, derive the tensor from one that has it (full_like)"
        )
    return shape


def _required(op, **attrs):
    for name, value in attrs.items():
        if value is None:
            raise ValueError(f"{op}: the {name} attr is required")


def _full_infer(shape, value=0.0, dtype="float32"):
    return Meta(_shape("full", shape), dtypes.as_dtype(dtype, where="full"))


defop(
    "full",
    inputs=(),
    attrs={"shape": [], "value": 0.0, "dtype": "float32"},
    attr_types={"shape": ints(0), "value": BOOL | NUMBER, "dtype": DTYPE},
    kernel=lambda xp, shape, value=0.0, dtype="float32": xp.full(tuple(shape), value, dtype=dtype),
    infer=_full_infer,
)


def _full_shaped_kernel(xp, shape, static_shape=(), value=0.0, dtype="float32"):
    dims = tuple(int(d) for d in to_host(shape).reshape(-1))
    return xp.full(dims, value, dtype=dtype)


def _full_shaped_infer(shape, static_shape=(), value=0.0, dtype="float32"):
    if len(shape.shape) != 1 or shape.shape[0] not in (-1, len(static_shape)):
        raise ValueError(f"full_shaped: Shape must be 1-D with {len(static_shape)} dims, "
                         f"got {shapes.fmt(shape.shape)}")
    return Meta(tuple(static_shape), dtypes.as_dtype(dtype, where="full_shaped"))


defop(
    "full_shaped",
    inputs=("Shape",),
    attrs={"static_shape": [], "value": 0.0, "dtype": "float32"},
    attr_types={"static_shape": ints(-1), "value": BOOL | NUMBER, "dtype": DTYPE},
    kernel=_full_shaped_kernel,
    infer=_full_shaped_infer,
    no_grad=("Shape",),
    dtypes=dtypes.INTS,
    doc="full() whose shape is only known when the program runs (a 1-D int64 tensor).",
)


def _full_like_infer(x, value=0.0, dtype=None):
    dtype = x.dtype if dtype is None else dtypes.as_dtype(dtype, where="full_like")
    return Meta(tuple(x.shape), dtype)


defop(
    "full_like",
    attrs={"value": 0.0, "dtype": None},
    attr_types={"value": BOOL | NUMBER, "dtype": NONE | DTYPE},
    kernel=lambda xp, x, value=0.0, dtype=None: xp.full(x.shape, value, dtype=dtype or x.dtype),
    infer=_full_like_infer,
    doc="A tensor of X's shape filled with value (zeros_like, ones_like).",
)


def _number_dtype(op, dtype):
    """A range's dtype: a number dtype (NumPy makes no bool ranges past 2 elements)."""
    dtype = dtypes.as_dtype(dtype, where=op)
    if dtype not in dtypes.NUMERIC:
        raise TypeError(f"{op}: dtype must be a number dtype, got {dtype}")
    return dtype


def _arange_len(start, end, step):
    _required("arange", end=end)
    if step == 0:
        raise ValueError("arange: step cannot be zero")
    return max(0, math.ceil((end - start) / step))


def _arange_kernel(xp, start=0, end=None, step=1, dtype="int64"):
    _arange_len(start, end, step)
    return xp.arange(start, end, step, dtype=dtype)


defop(
    "arange",
    inputs=(),
    attrs={"start": 0, "end": None, "step": 1, "dtype": "int64"},
    attr_types={"start": NUMBER, "end": NUMBER, "step": NUMBER, "dtype": DTYPE},
    kernel=_arange_kernel,
    infer=lambda start=0, end=None, step=1, dtype="int64": Meta(
        (_arange_len(start, end, step),), _number_dtype("arange", dtype)
    ),
    doc="[start, end) in steps of step.",
)


def _range_kernel(xp, start, end, step, dtype="int64"):
    start, end, step = (to_host(v).item() for v in (start, end, step))
    return _arange_kernel(xp, start, end, step, dtype)


def _range_infer(start, end, step, dtype="int64"):
    for name, bound in (("Start", start), ("End", end), ("Step", step)):
        if bound.shape not in ((), (1,), (-1,)):
            raise ValueError(f"range: {name} must hold one number, got shape "
                             f"{shapes.fmt(bound.shape)}")
    return Meta((-1,), _number_dtype("range", dtype))


defop(
    "range",
    inputs=("Start", "End", "Step"),
    attrs={"dtype": "int64"},
    attr_types={"dtype": DTYPE},
    kernel=_range_kernel,
    infer=_range_infer,
    no_grad=("Start", "End", "Step"),
    doc="arange() whose bounds are only known when the program runs (one-number tensors).",
)


def _linspace_infer(start=0.0, stop=None, num=None, dtype="float32"):
    _required("linspace", stop=stop, num=num)
    if num < 0:
        raise ValueError(f"linspace: num must be >= 0, got {num}")
    return Meta((num,), dtypes.as_dtype(dtype, where="linspace"))


def _linspace_kernel(xp, start=0.0, stop=None, num=None, dtype="float32"):
    _linspace_infer(start, stop, num, dtype)
    return xp.linspace(start, stop, num, dtype=dtype)


defop(
    "linspace",
    inputs=(),
    attrs={"start": 0.0, "stop": None, "num": None, "dtype": "float32"},
    attr_types={"stop": NUMBER, "num": int_at_least(0), "dtype": DTYPE},
    kernel=_linspace_kernel,
    infer=_linspace_infer,
    doc="num evenly spaced values from start to stop, both included.",
)


def _eye_infer(num_rows=None, num_columns=None, dtype="float32"):
    _required("eye", num_rows=num_rows)
    cols = num_rows if num_columns is None else num_columns
    return Meta(_shape("eye", (num_rows, cols)), dtypes.as_dtype(dtype, where="eye"))


defop(
    "eye",
    inputs=(),
    attrs={"num_rows": None, "num_columns": None, "dtype": "float32"},
    attr_types={"num_rows": int_at_least(0), "num_columns": NONE | int_at_least(0),
                "dtype": DTYPE},
    kernel=lambda xp, num_rows=None, num_columns=None, dtype="float32": xp.eye(
        *_eye_infer(num_rows, num_columns, dtype).shape, dtype=dtype
    ),
    infer=_eye_infer,
)

# ------------------------------------------------------------------ random
# seed=0 draws from the global generator (d2s.seed); any other seed makes the
# op deterministic. The registry's random=True keeps passes from folding them.


def _random_infer(op, float_only=True):
    def infer(shape, dtype, **attrs):
        dtype = dtypes.as_dtype(dtype, where=op)
        if float_only and not dtypes.is_float(dtype):
            raise TypeError(f"{op}: dtype must be a float dtype, got {dtype}")
        if not float_only and dtype not in dtypes.INTS:
            raise TypeError(f"{op}: dtype must be an int dtype, got {dtype}")
        if op == "randint":
            _required(op, high=attrs["high"])
            if attrs["high"] <= attrs["low"]:
                raise ValueError(f"randint: low {attrs['low']} must be below high {attrs['high']}")
        return Meta(_shape(op, shape), dtype)

    return infer


defop(
    "uniform",
    inputs=(),
    attrs={"shape": [], "min": -1.0, "max": 1.0, "dtype": "float32", "seed": 0},
    attr_types={"shape": ints(0), "dtype": DTYPE, "seed": int_at_least(0)},
    kernel=lambda xp, shape, min=-1.0, max=1.0, dtype="float32", seed=0: random.uniform(
        xp, shape, min, max, dtype, seed
    ),
    infer=_random_infer("uniform"),
    random=True,
    doc="Uniform on [min, max).",
)
defop(
    "normal",
    inputs=(),
    attrs={"shape": [], "mean": 0.0, "std": 1.0, "dtype": "float32", "seed": 0},
    attr_types={"shape": ints(0), "dtype": DTYPE, "seed": int_at_least(0)},
    kernel=lambda xp, shape, mean=0.0, std=1.0, dtype="float32", seed=0: random.normal(
        xp, shape, mean, std, dtype, seed
    ),
    infer=_random_infer("normal"),
    random=True,
)
defop(
    "randint",
    inputs=(),
    attrs={"shape": [], "low": 0, "high": None, "dtype": "int64", "seed": 0},
    attr_types={"shape": ints(0), "high": INT, "dtype": DTYPE, "seed": int_at_least(0)},
    kernel=lambda xp, shape, low=0, high=None, dtype="int64", seed=0: random.randint(
        xp, shape, low, high, dtype, seed
    ),
    infer=_random_infer("randint", float_only=False),
    random=True,
    doc="Integers on [low, high).",
)


def _bernoulli_mask_infer(x, p=0.5, seed=0):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli_mask: p must be in [0, 1], got {p}")
    return Meta(tuple(x.shape), x.dtype)


defop(
    "bernoulli_mask",
    attrs={"p": 0.5, "seed": 0},
    attr_types={"p": number_in(0, 1), "seed": int_at_least(0)},
    kernel=lambda xp, x, p=0.5, seed=0: random.bernoulli(xp, x.shape, 1.0 - p, x.dtype, seed),
    infer=_bernoulli_mask_infer,
    random=True,
    doc="A 0/1 mask like X (X's dtype) that drops each element with probability p (dropout).",
)
