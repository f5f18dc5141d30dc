"""Creation functions: to_tensor, zeros, ones, full, arange, random, ..."""

from __future__ import annotations

import numpy as np

from dy2stat import device, ops
from dy2stat.default_dtype import default_float
from dy2stat.dispatch import apply
from dy2stat.kernels import backend
from dy2stat.kernels import random as random_kernels
from dy2stat.ops import _dtype_name as _name_of
from dy2stat.runtime import dtypes
from dy2stat.tensor import Tensor


def to_tensor(data, dtype=None, stop_gradient: bool = True, place=None) -> Tensor:
    """A Tensor from a Python scalar or list, a NumPy/CuPy array or a Tensor.

    Python floats become the default dtype (float32 unless ``set_default_dtype``
    changed it) and ints int64; arrays keep their dtype
    unless ``dtype`` is given. The result lives on ``place`` when given;
    otherwise a CuPy array (or a GPU tensor) stays on its GPU and anything
    else goes to the current device. The data is always copied.

    In a program being built (converted code) a static value -- or a list holding
    static values -- becomes a copy of it in the program (an ``assign``, a ``stack``).
    """
    if _holds_static(data):
        return _static_tensor(data, dtype, stop_gradient)
    if isinstance(data, Tensor):
        array = data._data
    elif isinstance(data, np.ndarray) or (
        backend.has_cupy() and isinstance(data, backend.cupy.ndarray)
    ):
        array = data
    else:
        array = np.asarray(data)
        if array.dtype == np.float64 and not _has_numpy_floats(data):
            array = array.astype(default_float())
        if array.dtype.kind in "US" or array.dtype == object:
            raise TypeError(f"to_tensor: cannot make a tensor from {type(data).__name__} data")
    if dtype is not None:
        array = array.astype(dtypes.as_dtype(dtype, where="to_tensor"))
    elif array.dtype not in dtypes.ALL:
        raise TypeError(f"to_tensor: unsupported dtype {array.dtype}")
    if place is not None:
        array = device.move(array, place, "to_tensor")
    elif backend.array_module(array) is np:
        array = device.current.xp.asarray(array)
    if array is getattr(data, "_data", data):
        array = _copy(array)
    return Tensor(array, stop_gradient=stop_gradient)


def _holds_static(data) -> bool:
    if getattr(data, "is_static", False):
        return True
    return isinstance(data, (list, tuple)) and any(_holds_static(v) for v in data)


def _static_tensor(data, dtype, stop_gradient):
    """``to_tensor`` of static data: ``assign`` of a Variable, ``stack`` of a list."""
    if getattr(data, "is_static", False):
        out = apply("assign", data)
    else:
        parts = [v if getattr(v, "is_static", False) or isinstance(v, (list, tuple))
                 else to_tensor(v) for v in data]
        out = ops.stack([_static_tensor(v, None, True) if isinstance(v, (list, tuple)) else v
                         for v in parts])
    if dtype is not None:
        out = apply("cast", out, dtype=_name_of(dtype))
    out.stop_gradient = bool(stop_gradient)  # True (the default) cuts the gradient, as eagerly
    return out


def _dtype_name(dtype) -> str:
    """The name of ``dtype``; None is the default float dtype."""
    return str(default_float()) if dtype is None else _name_of(dtype)


def _copy(array):
    """A copy on the array's own device (CuPy copies to the current device)."""
    if backend.array_module(array) is np:
        return array.copy()
    with array.device:
        return array.copy()


def _has_numpy_floats(data) -> bool:
    return isinstance(data, np.floating) or (
        isinstance(data, (list, tuple)) and any(isinstance(v, np.float64) for v in data)
    )


def full(shape, fill_value, dtype=None):
    """A tensor of ``shape`` filled with ``fill_value``; the dtype defaults to bool, int64
    or the default float by the value's type. Dims may be tensors (sizes known only when the
    program runs)."""
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else (
            "int64" if isinstance(fill_value, int) else default_float())
    if getattr(fill_value, "is_static", False):  # a value the program has when it runs
        value = ops.cast(fill_value.detach().reshape([]), _dtype_name(dtype))  # float(value)
        return ops.broadcast_to(value, [shape] if isinstance(shape, int) else list(shape))
    if not isinstance(shape, int) and any(getattr(d, "is_static", False) for d in shape):
        # A dim known only when the program runs (``x.shape[0]`` in converted code).
        dims = [ops.cast(d, "int64").reshape([1]) if getattr(d, "is_static", False)
                else full([1], int(d), "int64") for d in shape]
        static_shape = [-1 if getattr(d, "is_static", False) else int(d) for d in shape]
        return apply("full_shaped", ops.concat(dims), static_shape=static_shape,
                     value=float(fill_value), dtype=_dtype_name(dtype))
    return apply("full", shape=_dims(shape), value=float(fill_value), dtype=_dtype_name(dtype))


def _dims(shape) -> list:
    return [int(shape)] if isinstance(shape, int) else [int(d) for d in shape]


def zeros(shape, dtype=None):
    """A tensor of ``shape`` filled with 0 (the default float dtype unless ``dtype`` is
    given)."""
    return full(shape, 0.0, dtype)


def ones(shape, dtype=None):
    """A tensor of ``shape`` filled with 1 (the default float dtype unless ``dtype`` is
    given)."""
    return full(shape, 1.0, dtype)


def full_like(x, fill_value, dtype=None):
    """A tensor of ``x``'s shape (and dtype, unless ``dtype`` is given) filled with
    ``fill_value``."""
    return apply("full_like", x, value=float(fill_value),
                 dtype=None if dtype is None else _dtype_name(dtype))


def zeros_like(x, dtype=None):
    """A tensor of ``x``'s shape (and dtype, unless ``dtype`` is given) filled with 0."""
    return full_like(x, 0.0, dtype)


def ones_like(x, dtype=None):
    """A tensor of ``x``'s shape (and dtype, unless ``dtype`` is given) filled with 1."""
    return full_like(x, 1.0, dtype)


def arange(start=0, end=None, step=1, dtype=None):
    """The numbers from ``start`` up to (not including) ``end`` in steps of ``step``
    (``arange(n)``: 0 to n-1); int64 when all are ints, else the default float. Bounds may
    be tensors."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) or getattr(v, "dtype", None) in dtypes.INTS
                   for v in (start, end, step))
        dtype = "int64" if ints else default_float()
    bounds = (start, end, step)
    if any(getattr(v, "is_static", False) for v in bounds):
        # A bound known only when the program runs (``x.shape[1]`` in converted code).
        bounds = [v if getattr(v, "is_static", False) else full([], v, _dtype_name(dtype))
                  for v in bounds]
        return apply("range", *bounds, dtype=_dtype_name(dtype))
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in bounds)
    return apply("arange", start=start, end=end, step=step, dtype=_dtype_name(dtype))


def linspace(start, stop, num, dtype=None):
    """``num`` evenly spaced numbers from ``start`` to ``stop``, both included."""
    return apply("linspace", start=float(start), stop=float(stop), num=int(num),
                 dtype=_dtype_name(dtype))


def eye(num_rows, num_columns=None, dtype=None):
    """A [num_rows, num_columns] matrix with ones on the diagonal (square by default)."""
    return apply("eye", num_rows=int(num_rows), num_columns=num_columns,
                 dtype=_dtype_name(dtype))


def rand(shape, dtype=None):
    """Uniform on [0, 1)."""
    return apply("uniform", shape=_dims(shape), min=0.0, max=1.0,
                 dtype=_dtype_name(dtype))


def uniform(shape, dtype=None, min=-1.0, max=1.0, seed=0):
    """Uniform random numbers on [min, max) of ``shape``; a nonzero ``seed`` draws from a
    generator of its own."""
    return apply("uniform", shape=_dims(shape), min=float(min), max=float(max),
                 dtype=_dtype_name(dtype), seed=int(seed))


def randn(shape, dtype=None):
    """Standard normal random numbers of ``shape``."""
    return apply("normal", shape=_dims(shape), dtype=_dtype_name(dtype))


def normal(mean=0.0, std=1.0, shape=(1,), dtype=None):
    """Normal random numbers of ``shape`` with ``mean`` and standard deviation ``std``."""
    return apply("normal", shape=_dims(shape), mean=float(mean), std=float(std),
                 dtype=_dtype_name(dtype))


def randint(low=0, high=None, shape=(1,), dtype="int64"):
    """Random integers on [low, high) of ``shape`` (``randint(n)``: on [0, n))."""
    if high is None:
        low, high = 0, low
    return apply("randint", shape=_dims(shape), low=int(low), high=int(high),
                 dtype=_dtype_name(dtype))


def seed(n: int) -> None:
    """Seed the global random generators (NumPy and, when present, CuPy)."""
    random_kernels.seed(int(n))
