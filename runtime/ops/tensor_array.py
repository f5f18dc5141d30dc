"""``array_write``: a tensor array held stacked, written at a run-time index.

A tensor array of n elements of shape E is one tensor of shape [n, *E]
(``dy2stat.dy2static.tensor_array``). Writing element I replaces row I, or
grows the array when I >= n (rows between stay zeros). An empty array's
element shape is taken from the first write, so an array created before its
elements' shape is known (a -1 batch dim) starts as a [0, 1, ...] placeholder.
"""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import Meta, defop

fmt = shapes.fmt


def _index(xp, i) -> int:
    return int(i.reshape(()).item()) if hasattr(i, "reshape") else int(i)


def _array_write_kernel(xp, array, x, i):
    i = _index(xp, i)
    if i < 0:
        raise IndexError(f"array_write: index {i} is negative")
    n = array.shape[0]
    x = x.astype(array.dtype, copy=False)
    if n and tuple(array.shape[1:]) != tuple(x.shape):
        raise ValueError(f"array_write: an element of shape {list(x.shape)} written to an "
                         f"array of elements of shape {list(array.shape[1:])}")
    if i < n:
        out = array.copy()
    else:
        out = xp.zeros((i + 1,) + tuple(x.shape), dtype=array.dtype)
        out[:n] = array
    out[i] = x
    return out


def _array_write_infer(array, x, i):
    if shapes.numel(i.shape) not in (1, -1):
        raise ValueError(f"array_write: the index must be one int, got shape {fmt(i.shape)}")
    if len(array.shape) != len(x.shape) + 1:
        raise ValueError(f"array_write: an element of shape {fmt(x.shape)} does not fit an "
                         f"array of shape {fmt(array.shape)}")
    return Meta((-1,) + shapes.join(tuple(array.shape[1:]), tuple(x.shape)), array.dtype)


def _array_write_grad(e, ins, outs, douts, attrs, need):
    array, x, i = ins
    g = douts[0]
    row = e("reshape", i, shape=[])
    gx = e("getitem", g, [row], index=[["tensor", 0]]) if need[1] else None
    ga = None
    if need[0]:  # the rows the array had, without the one written over
        length = e("getitem", e("shape", array), [], index=[0])
        ga = e("getitem", e("setitem", g, 0.0, [row], index=[["tensor", 0]]), [length],
               index=[["slice", None, ["tensor", 0], None]])
    return [ga, gx, None]


defop(
    "array_write",
    inputs=("Array", "X", "I"),
    kernel=_array_write_kernel,
    infer=_array_write_infer,
    grad=_array_write_grad,
    no_grad=("I",),
    dtypes={"I": dtypes.INTS},
    doc="The stacked tensor array Array with element I set to X (growing it when I is "
        "past its end).",
)
