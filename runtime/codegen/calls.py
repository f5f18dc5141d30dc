"""How one op becomes one Python call in generated code.

Ops whose kernel is exactly one array-module function (``BINARY``,
``UNARY``, ``relu``, ``matmul`` on small ranks) are called directly
(``fast_call``); every other op calls its kernel with the attrs it does not
already default to bound once (``bind``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math

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
    return None


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
