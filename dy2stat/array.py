"""Tensor arrays as Paddle exposes them: ``create_array``, ``array_write``,
``array_read`` and ``array_length``.

Eagerly an array is a Python list of tensors. In converted code a list that a
tensor-dependent loop writes to is carried by the ``while`` op as a
``TensorArray`` (its elements stacked in one tensor, see
``dy2stat.dy2static.tensor_array``): writes and reads at a tensor index happen
when the program runs, and gradients flow through them.
"""

from __future__ import annotations

from dy2stat import ops
from dy2stat.dispatch import apply
from dy2stat.dy2static.tensor_array import TensorArray

__all__ = ["array_length", "array_read", "array_write", "create_array"]


def create_array(dtype="float32", initialized_list=None) -> list:
    """A new tensor array (a Python list), holding ``initialized_list`` when given. (The
    elements keep the dtype they are written with; ``dtype`` is Paddle's argument.)"""
    return list(initialized_list) if initialized_list is not None else []


def array_write(x, i, array=None):
    """Write ``x`` at position ``i`` of ``array`` (a new array when None) and return the
    array. ``i`` may be at most the array's length: writing at the length appends."""
    if array is None:
        array = create_array()
    if isinstance(array, TensorArray):
        array.write(i, x)
        return array
    if not isinstance(array, list):
        raise TypeError(f"array_write: array must be a tensor array (a list), got "
                        f"{type(array).__name__}")
    if getattr(i, "is_static", False):
        # The position is known only when the program runs (a loop's trial run gets
        # here too): a Python list can only grow at its end, which the program checks.
        _check_appends(i, len(array))
        array.append(x)
        return array
    k = _python_index(i, "array_write")
    if k > len(array):
        raise IndexError(f"array_write: index {k} is past the end of an array of "
                         f"{len(array)} elements; write the elements in order")
    if k == len(array):
        array.append(x)
    else:
        array[k] = x
    return array


def array_read(array, i):
    """The element at position ``i`` of ``array``."""
    if isinstance(array, TensorArray):
        return array.read(i)
    if getattr(i, "is_static", False):
        return TensorArray.from_list(array).read(i)
    return array[_python_index(i, "array_read")]


def array_length(array):
    """The number of elements: a Python int, or (for an array a tensor-dependent loop
    grows) a 0-D int64 tensor."""
    if isinstance(array, TensorArray):
        return array.length()
    return len(array)


def _python_index(i, where) -> int:
    if hasattr(i, "numpy"):
        i = i.numpy().reshape(-1)
        if i.size != 1:
            raise ValueError(f"{where}: the index must hold one element, got {i.size}")
        i = i[0]
    k = int(i)
    if k < 0:
        raise IndexError(f"{where}: index {k} is negative")
    return k


def _check_appends(i, length: int) -> None:
    at_end = ops.equal(ops.reshape(ops.cast(i, "int64"), []), length)
    apply("assert", at_end, message=f"array_write: a tensor index into an array of {length} "
          "elements outside a tensor-dependent loop must be its length (an append)")
