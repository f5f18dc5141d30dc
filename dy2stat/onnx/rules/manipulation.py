"""Shapes and layout: reshapes, transposes, joining and splitting, gather, expand, tile,
flip, roll, repeat_interleave, one_hot, meshgrid, sequence_mask, shape and numel.

Dims known when the program was built are constants here; the others are read
from the tensors when the model runs (``Shape``), so a -1 dim stays free.
"""

from __future__ import annotations

import numpy as np

from dy2stat.onnx.graph import INT64_MAX, INT64_MIN
from dy2stat.onnx.lowering import OpContext, rule
from dy2stat.runtime import dtypes, shapes


def _rank(ctx: OpContext, slot: str = "X") -> int:
    return len(ctx.meta(slot).shape)


@rule("reshape")
def _reshape(ctx: OpContext) -> None:
    """0 keeps the input's dim (where the input has one), -1 is inferred."""
    g, x, rank = ctx.g, ctx.input(), _rank(ctx)
    target = list(ctx.attrs["shape"])
    if all(d != 0 or i < rank for i, d in enumerate(target)):
        ctx.output(g.reshape(x, target))  # ONNX's 0 is the same rule
        return
    dims = [g.dim(x, i) if d == 0 and i < rank else d for i, d in enumerate(target)]
    ctx.output(g.reshape(x, g.concat_dims(dims), allowzero=True))


@rule("reshape_shaped")
def _reshape_shaped(ctx: OpContext) -> None:
    ctx.output(ctx.g.reshape(ctx.input(), ctx.input("Shape", dtype=dtypes.int64)))


@rule("reshape_like")
def _reshape_like(ctx: OpContext) -> None:
    ctx.output(ctx.g.reshape(ctx.input(), ctx.g.shape(ctx.input("Like")), allowzero=True))


@rule("squeeze")
def _squeeze(ctx: OpContext) -> None:
    """The dims of size 1 (an unknown listed dim counts as 1, as inference takes it)."""
    shape = ctx.meta().shape
    axes = shapes.axes_tuple(ctx.attrs["axis"], len(shape), "squeeze")
    drop = [a for a in axes if shape[a] in (1, -1)] if ctx.attrs["axis"] is not None else [
        a for a in axes if shape[a] == 1]
    ctx.output(ctx.g.squeeze(ctx.input(), drop) if drop else ctx.g.op("Identity", ctx.input()))


@rule("unsqueeze")
def _unsqueeze(ctx: OpContext) -> None:
    axis = ctx.attrs["axis"]
    axes = [axis] if isinstance(axis, int) else list(axis)
    n = _rank(ctx) + len(axes)
    ctx.output(ctx.g.unsqueeze(ctx.input(), sorted(a % n for a in axes)))


@rule("flatten")
def _flatten(ctx: OpContext) -> None:
    g, x, rank = ctx.g, ctx.input(), _rank(ctx)
    if rank == 0:
        ctx.output(g.reshape(x, [1]))
        return
    start = shapes.normalize_axis(ctx.attrs["start_axis"], rank, "flatten")
    stop = shapes.normalize_axis(ctx.attrs["stop_axis"], rank, "flatten")
    merged = g.reduce("ReduceProd", g.shape(x, start, stop + 1), [0], True)
    parts = ([g.shape(x, 0, start)] if start else []) + [merged] + (
        [g.shape(x, stop + 1)] if stop + 1 < rank else [])
    ctx.output(g.reshape(x, g.concat_dims(parts), allowzero=True))


@rule("transpose")
def _transpose(ctx: OpContext) -> None:
    rank = _rank(ctx)
    ctx.output(ctx.g.op("Transpose", ctx.input(), perm=[p % rank for p in ctx.attrs["perm"]]))


@rule("swapaxes_last")
def _swapaxes_last(ctx: OpContext) -> None:
    perm = list(range(_rank(ctx)))
    perm[-2:] = perm[-1], perm[-2]
    ctx.output(ctx.g.op("Transpose", ctx.input(), perm=perm))


@rule("concat")
def _concat(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], _rank(ctx, "Xs"), "concat")
    ctx.output(ctx.g.op("Concat", *ctx.inputs("Xs", dtype=ctx.dtype), axis=axis))


@rule("stack")
def _stack(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], _rank(ctx, "Xs") + 1, "stack")
    parts = [ctx.g.unsqueeze(x, [axis]) for x in ctx.inputs("Xs", dtype=ctx.dtype)]
    ctx.output(ctx.g.op("Concat", *parts, axis=axis))


@rule("unstack")
def _unstack(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], _rank(ctx), "unstack")
    count = len(ctx.op.outputs["Outs"])
    parts = ctx.g.split(ctx.input(), axis, count, [1] * count)
    for i, part in enumerate(parts):
        ctx.output(ctx.g.squeeze(part, [axis]), "Outs", i)


@rule("split")
def _split(ctx: OpContext) -> None:
    g, x, shape = ctx.g, ctx.input(), ctx.meta().shape
    axis = shapes.normalize_axis(ctx.attrs["axis"], len(shape), "split")
    sections = ctx.attrs["num_or_sections"]
    count = len(ctx.op.outputs["Outs"])
    sizes = [ctx.out_meta("Outs", i).shape[axis] for i in range(count)]
    if -1 not in sizes:
        parts = g.split(x, axis, count, sizes)
    elif isinstance(sections, int):
        parts = g.split(x, axis, count)
    else:  # one section of -1 takes the rest of a dim known only when the model runs
        rest = g.op("Sub", g.dim(x, axis), g.ints([sum(s for s in sections if s != -1)]))
        parts = g.split(x, axis, count, g.concat_dims(
            [rest if s == -1 else s for s in sections]))
    for i, part in enumerate(parts):
        ctx.output(part, "Outs", i)


@rule("gather")
def _gather(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], _rank(ctx), "gather")
    ctx.output(ctx.g.op("Gather", ctx.input(), ctx.input("Index", dtype=dtypes.int64),
                        axis=axis))


@rule("expand")
def _expand(ctx: OpContext) -> None:
    # Expand broadcasts: a dim of 1 keeps the input's, as expand's -1 does
    target = [1 if d == -1 else d for d in ctx.attrs["shape"]]
    ctx.output(ctx.g.op("Expand", ctx.input(), ctx.g.ints(target)))


@rule("expand_as")
def _expand_as(ctx: OpContext) -> None:
    ctx.output(ctx.g.op("Expand", ctx.input(), ctx.g.shape(ctx.input("Like"))))


@rule("tile")
def _tile(ctx: OpContext) -> None:
    g, x, rank = ctx.g, ctx.input(), _rank(ctx)
    reps = list(ctx.attrs["repeat_times"])
    if len(reps) > rank:  # new leading dims, as NumPy's tile adds them
        x = g.unsqueeze(x, list(range(len(reps) - rank)))
    reps = [1] * (max(rank, len(reps)) - len(reps)) + reps
    ctx.output(g.op("Tile", x, g.ints(reps)))


@rule("flip")
def _flip(ctx: OpContext) -> None:
    axes = list(shapes.axes_tuple(ctx.attrs["axis"], _rank(ctx), "flip"))
    n = len(axes)
    ctx.output(ctx.g.slice(ctx.input(), [-1] * n, [INT64_MIN] * n, axes, [-1] * n)
               if axes else ctx.g.op("Identity", ctx.input()))


@rule("roll")
def _roll(ctx: OpContext) -> None:
    """x[-k:] then x[:-k] along each axis, k = shift mod the dim (read when it runs)."""
    g, x = ctx.g, ctx.input()
    shifts, axis = ctx.attrs["shifts"], ctx.attrs["axis"]
    flat = axis is None
    if flat:
        x, axes, shifts = g.reshape(x, [-1]), [0], [shifts]
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    for shift, a in zip(shifts, axes):
        a = shapes.normalize_axis(a, 1 if flat else _rank(ctx), "roll")
        dim = g.dim(x, a)
        cut = g.op("Sub", dim, g.op("Mod", g.ints([shift]), dim))
        x = g.op("Concat", g.slice(x, cut, [INT64_MAX], [a]), g.slice(x, [0], cut, [a]),
                 axis=a)
    ctx.output(g.reshape(x, g.shape(ctx.input()), allowzero=True) if flat else x)


@rule("repeat_interleave")
def _repeat_interleave(ctx: OpContext) -> None:
    """Each element repeated: owner[j] = how many cumulative repeats are <= j."""
    g, x = ctx.g, ctx.input()
    axis = ctx.attrs["axis"]
    if axis is None:
        x, axis = g.reshape(x, [-1]), 0
    else:
        axis = shapes.normalize_axis(axis, _rank(ctx), "repeat_interleave")
    dim = g.dim(x, axis)
    if ctx.has("Repeats"):  # one count per element, or one for all
        repeats = g.op("Expand", g.reshape(ctx.input("Repeats", dtype=dtypes.int64), [-1]),
                       dim)
    else:
        repeats = g.op("Expand", g.ints([ctx.attrs["times"]]), dim)
    ends = g.op("CumSum", repeats, g.const(np.int64(0)))
    total = g.reduce("ReduceSum", repeats, [0], False)
    positions = g.op("Range", g.const(np.int64(0)), total, g.const(np.int64(1)))
    passed = g.op("LessOrEqual", g.unsqueeze(ends, [0]), g.unsqueeze(positions, [1]))
    owner = g.reduce("ReduceSum", g.cast_to(passed, dtypes.int64), [1], False)
    ctx.output(g.op("Gather", x, owner, axis=axis))


@rule("one_hot")
def _one_hot(ctx: OpContext) -> None:
    g = ctx.g
    classes = g.const(np.arange(ctx.attrs["num_classes"], dtype=np.int64))
    hit = g.op("Equal", g.unsqueeze(ctx.input(dtype=dtypes.int64), [-1]), classes)
    ctx.output(hit, have=dtypes.bool_)


@rule("shape")
def _shape(ctx: OpContext) -> None:
    ctx.output(ctx.g.shape(ctx.input()))


@rule("numel")
def _numel(ctx: OpContext) -> None:
    ctx.output(ctx.g.op("Size", ctx.input()))


@rule("assign")
def _assign(ctx: OpContext) -> None:
    ctx.output(ctx.g.op("Identity", ctx.input()))


@rule("meshgrid")
def _meshgrid(ctx: OpContext) -> None:
    g = ctx.g
    vectors = [g.reshape(x, [-1]) for x in ctx.inputs("Xs")]
    full = g.concat_dims([g.shape(v) for v in vectors])
    for i, v in enumerate(vectors):
        along = [1] * len(vectors)
        along[i] = -1
        ctx.output(g.op("Expand", g.reshape(v, along), full), "Outs", i)


@rule("sequence_mask")
def _sequence_mask(ctx: OpContext) -> None:
    """mask[..., j] = j < X[...], j below MaxLen, limit, or the largest length."""
    g = ctx.g
    lengths = ctx.input(dtype=dtypes.int64)
    if ctx.has("MaxLen"):
        limit = g.to_scalar(ctx.input("MaxLen", dtype=dtypes.int64))
    elif ctx.attrs["limit"] is not None:
        limit = g.const(np.int64(ctx.attrs["limit"]))
    else:  # the largest length (0 for no lengths)
        flat = g.op("Concat", g.reshape(lengths, [-1]), g.ints([0]), axis=0)
        limit = g.reduce("ReduceMax", flat, None, False)
    steps = g.op("Range", g.const(np.int64(0)), limit, g.const(np.int64(1)))
    mask = g.op("Less", steps, g.unsqueeze(lengths, [-1]))
    ctx.output(mask, have=dtypes.bool_)
