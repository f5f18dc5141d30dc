"""How one op becomes one Python call in generated code.

Ops whose kernel is exactly one array-module function (``BINARY``,
``UNARY``, ``relu``, ``matmul`` on small ranks) are called directly
(``fast_call``), and so are NumPy's reductions (``sum``, ``mean``, ``max``,
``min`` as ``add.reduce`` and the like: what ``np.sum`` calls after its
Python wrapper, so the same bits; a full reduction then gives a NumPy scalar,
as a ufunc on 0-d arrays does). Every other op calls its kernel with the
attrs it does not already default to bound once (``bind``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math

import numpy

__all__ = ["BINARY", "UNARY", "bind", "fast_call"]

# Ops whose kernel is exactly one array-module function: called directly.
BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "pow": "power",
    "maximum": "maximum", "minimum": "minimum", "equal": "equal", "not_equal": "not_equal",
    "less_than": "less", "less_equal": "less_equal", "greater_than": "greater",
    "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
}
UNARY = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
    "floor": "floor", "ceil": "ceil", "neg": "negative", "abs": "absolute", "sign": "sign",
    "logical_not": "logical_not", "bitwise_not": "invert",
}


# Reductions run as the ufunc's reduce; mean divides the sum by the count as np.mean does.
REDUCE = {"sum": "add", "mean": "add", "max": "maximum", "min": "minimum"}
# np.mean divides by the count in float64 and rounds to the input's dtype, which
# equals dividing in that dtype (an innocuous double rounding) while the count is
# exact in it.
_EXACT_COUNT = {numpy.dtype("float32"): 2 ** 24, numpy.dtype("float64"): 2 ** 53}


def fast_call(mod, step, ins, out_kw) -> str | None:
    """The direct array-module call computing ``step``'s op, or None.

    ``ins`` are the operands' slot names by input slot; ``out_kw`` is
    ``", out=v<n>"`` when the result is written in place."""
    t = step.op.type
    if t in BINARY:
        return f"{mod.ufunc(BINARY[t])}({ins[0][0]}, {ins[1][0]}{out_kw})"
    if t in UNARY:
        return f"{mod.ufunc(UNARY[t])}({ins[0][0]}{out_kw})"
    if t == "relu" and step.ins[0][0].var is not None:
        # A 0-d array: NumPy converts a scalar operand on every call.
        zero = mod.const(mod.xp.zeros((), dtype=step.ins[0][0].var.dtype))
        return f"{mod.ufunc('maximum')}({ins[0][0]}, {zero}{out_kw})"
    if t == "matmul":
        x, y = (v.var for v in step.reads[:2])
        # dot equals matmul on 1-D and 2-D operands, and is faster for small ones.
        two_d = x is not None and y is not None and {len(x.shape), len(y.shape)} <= {1, 2}
        tx, ty = step.attrs["transpose_x"], step.attrs["transpose_y"]
        if not tx and not ty:
            return f"{mod.ufunc('dot' if two_d else 'matmul')}({ins[0][0]}, {ins[1][0]})"
        if two_d and len(x.shape) == 2 and len(y.shape) == 2:
            # The gradients' transposed products: .T is a view, dot reads it as is.
            a = f"{ins[0][0]}.T" if tx else ins[0][0]
            b = f"{ins[1][0]}.T" if ty else ins[1][0]
            return f"{mod.ufunc('dot')}({a}, {b})"
    if t in REDUCE and mod.xp is numpy:
        return _reduce_call(mod, step, ins[0][0])
    return None


def _reduce_call(mod, step, x: str) -> str | None:
    """``sum``/``mean``/``max``/``min`` as one ufunc reduce (and a division for mean)."""
    var, out = step.ins[0][0].var, step.outs[0][0].var
    if var is None or out is None or (var.dtype != out.dtype and step.op.type != "sum"):
        return None
    axis, keepdim = step.attrs["axis"], step.attrs["keepdim"]
    ndim = len(var.shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        if ndim == 0 or not all(isinstance(a, int) and -ndim <= a < ndim for a in axes):
            return None  # the kernel's own rules (and errors)
        axes = tuple(a % ndim for a in axes)
    ufunc = mod.ufunc(REDUCE[step.op.type])
    # An integer sum adds in the dtype inference gave it (NumPy's own pick for uint8 is uint64).
    dtype = "None" if var.dtype == out.dtype else mod.const(out.dtype)
    call = f"{ufunc}.reduce({x}, {mod.const(None if axis is None else axes)}, {dtype}, None, " \
           f"{bool(keepdim)})"
    if step.op.type != "mean":
        return call
    count = 1
    for a in axes:
        count *= max(var.shape[a], 0)
    if var.dtype not in _EXACT_COUNT or not 0 < count <= _EXACT_COUNT[var.dtype]:
        return None  # unknown dims, float16, empty: np.mean's own path
    return f"{mod.ufunc('true_divide')}({call}, {count})"


def _same(a, b) -> bool:
    """An attr equal to the kernel's default (so it need not be bound); -0.0 is not 0.0."""
    try:
        if type(a) is float and type(b) is float:
            return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


@functools.cache
def _kernel_defaults(kernel) -> dict:
    try:
        params = inspect.signature(kernel).parameters
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def bind(kernel, attrs: dict):
    """The kernel with the attrs it does not already default to bound."""
    defaults = _kernel_defaults(kernel)
    bound = {k: copy.deepcopy(v) for k, v in attrs.items()
             if not (k in defaults and _same(defaults[k], v))}
    return functools.partial(kernel, **bound) if bound else kernel
