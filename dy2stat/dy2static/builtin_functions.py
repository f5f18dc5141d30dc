"""`len`, `x.shape`, `int`/`float`/`bool`, `isinstance`, `max`/`min`, `print`, `assert` and
`a[i]` on static values.

Each helper is the builtin for anything that is not a static Variable. On a Variable,
`len(x)` and `x.shape` give Python ints for known dims and 0-D int64 tensors for unknown ones
(so code that reads the batch size keeps working with a -1 dim), casts are `cast` ops, and
`print`/`assert` become ops that act when the program runs (where the runtime has them).
"""

from __future__ import annotations

import builtins
import functools
import warnings

import numpy as np

from dy2stat import ops
from dy2stat.creation import to_tensor
from dy2stat.dy2static import ifelse, values
from dy2stat.dy2static.tensor_array import TensorArray
from dy2stat.mode import state
from dy2stat.runtime.registry import OPS
from dy2stat.static.builder import static_apply
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor


def convert_len(value):
    """`len(value)`; for a static tensor its first dim (a tensor when unknown)."""
    if isinstance(value, TensorArray):
        return value.length()
    if values.is_static(value):
        if not value.shape:
            raise TypeError("len() of a 0-D tensor")
        n = value.shape[0]
        return n if n >= 0 else ops.shape(value)[0]
    return builtins.len(value)


def convert_getitem(value, index):
    """`value[index]`; a Python list or tuple indexed by a static tensor gives the item the
    program picks when it runs: from a constant of its numbers (in the dtype a Python
    number takes as a tensor), or from its tensors stacked."""
    if not (values.is_static(index) and type(value) in (list, tuple)):
        return value[index]
    items = list(value)
    if items and all(values.is_number(v) for v in items):
        dtype = functools.reduce(values.promote, [values.dtype_of(v) for v in items])
        return to_tensor(np.asarray(items, dtype))[index]
    tensors = [v for v in items if isinstance(v, (Tensor, Variable))]
    if items and len(tensors) == len(items) and len(
            {(tuple(v.shape), np.dtype(v.dtype)) for v in tensors}) == 1:
        return ops.stack(tensors)[index]
    raise TypeError(
        f"a Python {type(value).__name__} indexed by a tensor ({index.name}) must hold "
        "numbers, or tensors of one shape and dtype, for the program to pick the item when "
        f"it runs; this one holds {', '.join(values.describe(v) for v in items) or 'nothing'}")


def convert_shape(value):
    """`value.shape`; for a static tensor, unknown dims are 0-D int64 tensors."""
    if not values.is_static(value):
        return value.shape
    dims = value.shape
    if all(d >= 0 for d in dims):
        return dims
    full = ops.shape(value)
    return [d if d >= 0 else full[i] for i, d in enumerate(dims)]


def convert_isinstance(value, classinfo):
    """`isinstance(value, classinfo)`; a static Variable is a Tensor (it stands for the
    tensor the program computes), as eagerly."""
    if values.is_static(value):
        classes = classinfo if isinstance(classinfo, tuple) else (classinfo,)
        if Tensor in classes:
            return True
    return builtins.isinstance(value, classinfo)


def convert_max(*args, **kwargs):
    """`max(a, b, ...)` (or of one list); one-element static tensors give their maximum."""
    return _extreme(builtins.max, ops.maximum, args, kwargs)


def convert_min(*args, **kwargs):
    """`min(a, b, ...)` (or of one list); one-element static tensors give their minimum."""
    return _extreme(builtins.min, ops.minimum, args, kwargs)


def _extreme(builtin, elementwise, args, kwargs):
    items = args[0] if len(args) == 1 else args
    if kwargs or not isinstance(items, (list, tuple)) or not any(
            values.is_static(v) for v in items):
        return builtin(*args, **kwargs)
    # Python compares one-element tensors by value and returns the winner itself (the
    # first of equals): the program picks it with a cond, so it keeps its own gradient
    # and stop_gradient. Operands of another dtype or rank: the elementwise extreme.
    if not items or not all(values.is_number(v) or _one_element(v) for v in items):
        return builtin(*args, **kwargs)
    where = values.caller_location(3)
    out = items[0]
    for v in items[1:]:
        if not (values.is_static(out) or values.is_static(v)):
            out = builtin(out, v)
        elif _alike(out, v):
            beats = v < out if builtin is builtins.min else v > out
            out = ifelse.select(values.as_predicate(beats), lambda v=v: v,
                                lambda out=out: out, where, f"{builtin.__name__}()")
        else:
            out = elementwise(out, v)
    return out


def _alike(a, b) -> bool:
    """Operands a cond may choose between: tensors of one dtype and rank, or a tensor
    and a number its dtype holds."""
    if values.is_number(a) or values.is_number(b):
        number, tensor = (a, b) if values.is_number(a) else (b, a)
        return values.fits(number, values.dtype_of(tensor))
    return values.dtype_of(a) == values.dtype_of(b) and len(a.shape) == len(b.shape)


def _one_element(value) -> bool:
    shape = values.shape_of(value)
    return shape is not None and all(d == 1 for d in shape)


_CASTS = {"int": ("int64", builtins.int), "float": ("float32", builtins.float),
          "bool": ("bool", builtins.bool)}


def convert_cast(value, kind: str):
    """`int(value)`, `float(value)` or `bool(value)` (kind names the builtin)."""
    dtype, builtin = _CASTS[kind]
    if not values.is_static(value):
        return builtin(value)
    if kind == "bool":
        return values.as_predicate(value)
    # A Python number has no gradient: neither has the cast standing for it.
    return ops.cast(value.detach(), dtype)


def convert_print(*args, sep=" ", end="\n", file=None, flush=False):
    """`print(...)`; static tensors are printed by a `print` op when the program runs."""
    if not any(values.is_static(a) for a in args) and not (state.static and file is None):
        print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    op = OPS.get("print")
    if op is not None and file is None:
        static = [a for a in args if values.is_static(a)]
        texts = [None if values.is_static(a) else str(a) for a in args]
        static_apply(op, [static], {"texts": texts, "sep": sep, "end": end})
        return
    _warn_once("print", "print() of a static tensor shows its description while tracing; "
               "its values are printed only where the runtime has a `print` op")
    print(*args, sep=sep, end=end, file=file, flush=flush)


def convert_assert(test, message=None):
    """`assert test, message()`; a static test is checked by an `assert` op at run time."""
    if not __debug__:
        return
    if not values.is_static(test):
        if not test:
            raise AssertionError(message()) if message is not None else AssertionError
        return
    op = OPS.get("assert")
    text = str(message()) if message is not None else ""
    if op is not None:
        static_apply(op, [values.as_predicate(test)], {"message": text})
        return
    _warn_once("assert", "assert on a static tensor is not checked: the runtime has no "
               "`assert` op")


_warned: set[str] = set()


def _warn_once(key: str, text: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(text, stacklevel=3)
