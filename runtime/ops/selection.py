"""Selecting and placing elements: ``gather_nd``, ``scatter``, ``masked_select``,
``nonzero``, ``repeat_interleave`` and ``roll``.

``masked_select`` and ``nonzero`` (and ``repeat_interleave`` by a tensor of
repeats) have an output length known only when the program runs: inference
gives -1 for it, and the ops after them infer with that -1.
"""

from __future__ import annotations

from dy2stat.kernels import gather
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import AXES, INT, NONE, Meta, defop, ints

fmt = shapes.fmt


# ---------------------------------------------------------------- gather_nd


def _gather_nd_infer(x, index):
    if not index.shape or index.shape[-1] < 1:
        raise ValueError(f"gather_nd: the index {fmt(index.shape)} needs a last dim of known "
                         "size >= 1 (how many leading dims of x it addresses)")
    depth = index.shape[-1]
    if depth > len(x.shape):
        raise ValueError(f"gather_nd: the index addresses {depth} dims of a "
                         f"{len(x.shape)}-D input {fmt(x.shape)}")
    return Meta(tuple(index.shape[:-1]) + tuple(x.shape[depth:]), x.dtype)


defop(
    "gather_nd",
    inputs=("X", "Index"),
    kernel=gather.gather_nd,
    infer=_gather_nd_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("gather_nd_grad", douts[0], ins[0], ins[1]), None],
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS},
    doc="out[i] = X[Index[i]]: each row of Index's last dim addresses leading dims of X.",
)
defop(
    "gather_nd_grad",
    inputs=("G", "X", "Index"),
    kernel=gather.gather_nd_grad,
    infer=lambda g, x, index: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("gather_nd", douts[0], ins[2]), None, None],
    no_grad=("X", "Index"),
    dtypes={"G": dtypes.FLOATS, "Index": dtypes.INTS},
    doc="Zeros like X with G added where gather_nd read (the gradient of gather_nd).",
)

# ------------------------------------------------------------------ scatter


def _scatter_infer(x, index, updates, overwrite=True):
    if len(index.shape) > 1:
        raise ValueError(f"scatter: the index must be 1-D, got shape {fmt(index.shape)}")
    if not x.shape:
        raise ValueError("scatter: the input must be at least 1-D")
    want = (index.shape[0] if index.shape else 1,) + tuple(x.shape[1:])
    if not shapes.same(tuple(updates.shape), want):
        raise ValueError(f"scatter: updates of shape {fmt(updates.shape)} do not fit index "
                         f"{fmt(index.shape)} into x {fmt(x.shape)} (expected {fmt(want)})")
    return Meta(tuple(x.shape), x.dtype)


def _scatter_grad(e, ins, outs, douts, attrs, need):
    x, index, updates = ins
    g = douts[0]
    gx = gu = None
    if need[0]:  # the scattered rows were replaced: nothing of x reaches them
        gx = e("scatter", g, index, e("full_like", updates, value=0.0))
    if need[2]:
        gu = e("gather", g, e("reshape", index, shape=[-1]))
        if attrs["overwrite"]:  # an overwritten update reaches nothing
            kept = e("scatter_winners", index)
            gu = e("where", e("unsqueeze", kept, axis=list(range(1, len(x.shape)))), gu, 0.0)
        gu = e("reshape_like", gu, updates)
    return [gx, None, gu]


defop(
    "scatter",
    inputs=("X", "Index", "Updates"),
    attrs={"overwrite": True},
    kernel=gather.scatter,
    infer=_scatter_infer,
    grad=_scatter_grad,
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS},
    doc="X with rows Index set to Updates (overwrite: the last of repeated indices wins) "
        "or to the sum of their Updates (overwrite=False).",
)
defop(
    "scatter_winners",
    inputs=("Index",),
    kernel=gather.scatter_winners,
    infer=lambda index: Meta((shapes.numel(index.shape),), dtypes.bool_),
    dtypes=dtypes.INTS,
    doc="Which updates an overwriting scatter keeps: the last written to each row.",
)

# ------------------------------------------------------- masked_select, nonzero


def _masked_select_infer(x, mask):
    shapes.broadcast(x.shape, mask.shape, "masked_select")
    return Meta((-1,), x.dtype)


defop(
    "masked_select",
    inputs=("X", "Mask"),
    kernel=gather.masked_select,
    infer=_masked_select_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        unbroadcast(e, e("masked_select_grad", douts[0], ins[0], ins[1]), ins[0]), None],
    no_grad=("Mask",),
    dtypes={"Mask": dtypes.BOOLS},
    doc="The elements of X where Mask (broadcast with X) holds, as a 1-D tensor.",
)
defop(
    "masked_select_grad",
    inputs=("G", "X", "Mask"),
    kernel=gather.masked_select_grad,
    infer=lambda g, x, mask: Meta(shapes.broadcast(x.shape, mask.shape, "masked_select_grad"),
                                  g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("masked_select", douts[0], ins[2]), None, None],
    no_grad=("X", "Mask"),
    dtypes={"G": dtypes.FLOATS, "Mask": dtypes.BOOLS},
    doc="G placed where Mask holds, zeros elsewhere (the gradient of masked_select).",
)


def _nonzero_infer(x):
    if not x.shape:
        raise ValueError("nonzero: the input must be at least 1-D")
    return Meta((-1, len(x.shape)), dtypes.int64)


defop(
    "nonzero",
    kernel=lambda xp, x: xp.stack(xp.nonzero(x), axis=1).astype(xp.int64, copy=False),
    infer=_nonzero_infer,
    doc="The coordinates of X's non-zero elements, one row each ([count, ndim] int64).",
)

# ------------------------------------------------------ repeat_interleave, roll


def _repeat_interleave_infer(x, repeats, times=1, axis=None):
    if repeats is None and times < 0:
        raise ValueError(f"repeat_interleave: repeats must be >= 0, got {times}")
    if axis is None:
        shape, ax = (shapes.numel(x.shape),), 0
    else:
        shape, ax = tuple(x.shape), shapes.normalize_axis(axis, len(x.shape),
                                                         "repeat_interleave")
    dim = shape[ax]
    size = dim * times if repeats is None and dim >= 0 else -1
    return Meta(shape[:ax] + (size,) + shape[ax + 1:], x.dtype)


def _repeat_interleave_grad(e, ins, outs, douts, attrs, need):
    x, repeats = ins
    return [e("repeat_interleave_grad", douts[0], x, repeats, **attrs), None]


defop(
    "repeat_interleave",
    inputs=("X", "Repeats?"),
    attrs={"times": 1, "axis": None},
    attr_types={"axis": (NONE | INT).of_input("X")},
    kernel=lambda xp, x, repeats, times=1, axis=None: gather.repeat_interleave(
        xp, x, times if repeats is None else repeats, axis),
    infer=_repeat_interleave_infer,
    grad=_repeat_interleave_grad,
    no_grad=("Repeats",),
    dtypes={"Repeats": dtypes.INTS},
    doc="Each element of X along axis repeated (times, or Repeats[i] for element i); "
        "axis None: over the flattened input.",
)
defop(
    "repeat_interleave_grad",
    inputs=("G", "X", "Repeats?"),
    attrs={"times": 1, "axis": None},
    attr_types={"axis": (NONE | INT).of_input("X")},
    kernel=lambda xp, g, x, repeats, times=1, axis=None: gather.repeat_interleave_grad(
        xp, g, x, times if repeats is None else repeats, axis),
    infer=lambda g, x, repeats, times=1, axis=None: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("repeat_interleave", douts[0], ins[2], **attrs), None, None],
    no_grad=("X", "Repeats"),
    dtypes={"G": dtypes.FLOATS, "Repeats": dtypes.INTS},
    doc="Sum G's repeats back into X's shape (the gradient of repeat_interleave).",
)


def _roll_kernel(xp, x, shifts, axis=None):
    if axis is None:
        return xp.roll(x.reshape(-1), shifts).reshape(x.shape)
    return xp.roll(x, shifts, axis=axis)


def _roll_infer(x, shifts, axis=None):
    if axis is not None:
        axes = [axis] if isinstance(axis, int) else list(axis)
        count = 1 if isinstance(shifts, int) else len(shifts)
        if len(axes) != count:
            raise ValueError(f"roll: {count} shifts for {len(axes)} axes")
        for a in axes:
            shapes.normalize_axis(a, len(x.shape), "roll")
    return Meta(tuple(x.shape), x.dtype)


def _negated(shifts):
    return -shifts if isinstance(shifts, int) else [-s for s in shifts]


defop(
    "roll",
    attrs={"shifts": 0, "axis": None},
    attr_types={"shifts": INT | ints(), "axis": AXES.of_input("X")},
    kernel=_roll_kernel,
    infer=_roll_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("roll", douts[0], shifts=_negated(attrs["shifts"]), axis=attrs["axis"])],
    doc="X shifted circularly by shifts along axis (None: over the flattened input).",
)
