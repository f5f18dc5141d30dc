"""Sorting and selection by order: ``argsort``, ``topk`` and ``take_along_axis``.

``d2s.sort`` is ``take_along_axis(x, argsort(x))``: its gradient is that of
``take_along_axis``, which scatters back to where each value came from.
"""

from __future__ import annotations

from dy2stat.kernels import sorting
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import Meta, defop

fmt = shapes.fmt


def _argsort_infer(x, axis=-1, descending=False):
    shapes.normalize_axis(axis, len(x.shape), "argsort")
    return Meta(tuple(x.shape), dtypes.int64)


defop(
    "argsort",
    attrs={"axis": -1, "descending": False},
    kernel=lambda xp, x, axis=-1, descending=False: sorting.argsort(xp, x, axis, descending),
    infer=_argsort_infer,
    dtypes=dtypes.NUMERIC | {dtypes.bool_},
    doc="Indices that sort X along axis (stable: ties keep their order).",
)


def _topk_infer(x, k=1, axis=-1, largest=True):
    ax = shapes.normalize_axis(axis, len(x.shape), "topk")
    dim = x.shape[ax]
    if k < 0 or (dim >= 0 and k > dim):
        raise ValueError(f"topk: k={k} is out of range for axis {axis} of shape {fmt(x.shape)}")
    shape = tuple(k if i == ax else d for i, d in enumerate(x.shape))
    return Meta(shape, x.dtype), Meta(shape, dtypes.int64)


def _topk_grad(e, ins, outs, douts, attrs, need):
    return [e("take_along_axis_grad", douts[0], ins[0], outs[1], axis=attrs["axis"])]


defop(
    "topk",
    outputs=("Out", "Indices"),
    attrs={"k": 1, "axis": -1, "largest": True},
    kernel=lambda xp, x, k=1, axis=-1, largest=True: sorting.topk(xp, x, k, axis, largest),
    infer=_topk_infer,
    grad=_topk_grad,
    dtypes=dtypes.NUMERIC,
    doc="The k largest (largest=False: smallest) values along axis, sorted, and their "
        "indices (ties: the earlier first).",
)


def _along_axis_infer(x, index, axis, op):
    if len(index.shape) != len(x.shape):
        raise ValueError(f"{op}: the index {fmt(index.shape)} and the input {fmt(x.shape)} "
                         "must have the same rank")
    ax = shapes.normalize_axis(axis, len(x.shape), op)
    out = []
    for i, (d, n) in enumerate(zip(x.shape, index.shape)):
        if i != ax and d >= 0 and n >= 0 and d != n:
            raise ValueError(f"{op}: the index {fmt(index.shape)} and the input "
                             f"{fmt(x.shape)} differ outside axis {axis}")
        out.append(n if n >= 0 or i == ax else d)
    return tuple(out)


defop(
    "take_along_axis",
    inputs=("X", "Index"),
    attrs={"axis": 0},
    kernel=lambda xp, x, index, axis=0: xp.take_along_axis(x, index, axis=axis),
    infer=lambda x, index, axis=0: Meta(_along_axis_infer(x, index, axis, "take_along_axis"),
                                        x.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("take_along_axis_grad", douts[0], ins[0], ins[1], axis=attrs["axis"]), None],
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS},
    doc="out[..., i, ...] = X[..., Index[..., i, ...], ...] along axis.",
)
defop(
    "take_along_axis_grad",
    inputs=("G", "X", "Index"),
    attrs={"axis": 0},
    kernel=lambda xp, g, x, index, axis=0: sorting.add_along_axis(xp, x, index, g, axis),
    infer=lambda g, x, index, axis=0: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("take_along_axis", douts[0], ins[2], axis=attrs["axis"]), None, None],
    no_grad=("X", "Index"),
    dtypes={"G": dtypes.FLOATS, "Index": dtypes.INTS},
    doc="Zeros like X with G added at Index along axis (the gradient of take_along_axis).",
)
