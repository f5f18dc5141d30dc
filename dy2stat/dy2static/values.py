"""What the runtime helpers need to know about values: static or not, tensor-like or not.

A *static* value is a Variable of a program being built; everything else (eager Tensors,
Python numbers, lists) takes the Python path. A *tensor-like* value can be an output of a
`cond` or a carried value of a `while`: a Variable, an eager Tensor (captured), a Python
number (a constant) or a list/tuple/dict of them.
"""

from __future__ import annotations

import linecache
import sys

import numpy as np

from dy2stat.dy2static.undefined import MaybeUndefined
from dy2stat.runtime import dtypes
from dy2stat.runtime.registry import get_op
from dy2stat.static import framework, nest
from dy2stat.static.builder import static_apply
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

_NUMBERS = (bool, int, float)


def is_static(value) -> bool:
    """True for a Variable of a program being built."""
    return isinstance(value, Variable)


def is_tensor_like(value) -> bool:
    """Whether `value` can be an output of `cond` or carried by `while`."""
    if isinstance(value, (Variable, Tensor)) or type(value) in _NUMBERS:
        return True
    if isinstance(value, (list, tuple)):
        return all(is_tensor_like(v) for v in value)
    if isinstance(value, dict):
        return all(is_tensor_like(v) for v in value.values())
    return False


def dtype_of(value) -> np.dtype | None:
    """The dtype `value` has (or would have as a tensor); None for non-tensors."""
    if isinstance(value, (Variable, Tensor)):
        return np.dtype(value.dtype)
    if type(value) in _NUMBERS:
        return dtypes.scalar_dtype(value)
    return None


def shape_of(value) -> list | None:
    if isinstance(value, (Variable, Tensor)):
        return list(value.shape)
    if type(value) in _NUMBERS:
        return []
    return None


def is_number(value) -> bool:
    """A Python bool, int or float (not a NumPy scalar)."""
    return type(value) in _NUMBERS


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype two values of dtypes `a` and `b` share (the framework's promotion)."""
    return dtypes.promote(a, b)


def promote_scalar(dtype: np.dtype, number) -> np.dtype:
    """The dtype of a tensor of `dtype` combined with the Python `number`."""
    return dtypes.promote_scalar(np.dtype(dtype), number)


# When a Python number can stand for a tensor of a dtype (DESIGN.md "Dtypes": a tensor
# combined with a Python number keeps its dtype, except as said here).
FITS = "a bool fits any dtype, an int an int or float dtype, a float a float dtype"


def fits(number, dtype: np.dtype) -> bool:
    """Whether the Python `number` takes the dtype of a tensor of `dtype` it meets, as in
    eager arithmetic (so it can become a tensor of that dtype: its value is kept)."""
    return promote_scalar(dtype, number) == np.dtype(dtype)


class Spec:
    """The shape and dtype of a value, kept after the block that made it is gone."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype) -> None:
        self.shape, self.dtype = list(shape), np.dtype(dtype)

    @classmethod
    def of(cls, value) -> Spec:
        return cls(shape_of(value), dtype_of(value))


def describe(value) -> str:
    """A short description for error messages: 'a float32[-1, 3] tensor', 'None', 'a str'."""
    if isinstance(value, (Variable, Tensor)):
        dims = ", ".join(str(d) for d in value.shape)
        dtype = str(np.dtype(value.dtype))
        return f"{'an' if dtype[0] in 'aeiou' else 'a'} {dtype}[{dims}] tensor"
    if value is None:
        return "None"
    if type(value) in _NUMBERS:
        return f"the Python {type(value).__name__} {value!r}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def snapshot(value):
    """A copy whose later in-place changes (list.append, x[i] = v) do not show in `value`."""
    if isinstance(value, MaybeUndefined):
        return MaybeUndefined.of(value, value.assigned, value.label, value.causes)
    if isinstance(value, Variable):
        return Variable(value.block, value.name)
    if hasattr(type(value), "snapshot"):  # a TensorArray
        return value.snapshot()
    if isinstance(value, list):
        return [snapshot(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(snapshot(v) for v in value)
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    return value


def as_predicate(pred):
    """A static predicate as a bool Variable (a number tensor tests non-zero, like Python)."""
    pred = pred.read()
    if np.dtype(pred.dtype) != dtypes.bool_:
        pred = pred != 0
    return pred


def constant(value, dtype=None, shape=()):
    """A constant Variable in the block being built."""
    dtype = np.dtype(dtype) if dtype is not None else dtypes.scalar_dtype(value)
    return static_apply(
        get_op("full"), [], {"shape": list(shape), "value": float(value), "dtype": str(dtype)}
    )


def placeholder(like):
    """Zeros with the dtype and rank of `like` (a value or a Spec; unknown dims as 1): a
    value that is never observed."""
    spec = like if isinstance(like, Spec) else Spec.of(like)
    return constant(0, spec.dtype, [d if d >= 0 else 1 for d in spec.shape])


def placeholders(like):
    """`placeholder` of each leaf of the structure `like` (a value, list, tuple or dict)."""
    return nest.pack_as(like, [placeholder(leaf) for leaf in nest.flatten(like)])


def state_accessors(get_state, set_state):
    """The state functions generated code passed, or ones for no state (None, None)."""
    if get_state is None:
        return (lambda: ()), (lambda state: None)
    return get_state, set_state


def current_program():
    return framework.current_block().program


def caller_location(depth: int = 2) -> tuple[str, int, str]:
    """(file, line, source line) of the generated code calling a helper.

    Generated code is compiled with the user's file and line numbers, so this is the user's
    `if`/`while`/`for` statement.
    """
    frame = sys._getframe(depth)
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    return filename, lineno, linecache.getline(filename, lineno).strip()
