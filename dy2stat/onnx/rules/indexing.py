"""Indexing and ordering: ``x[index]`` and ``x[index] = value`` (NumPy's rules, basic and
advanced), gather_nd, scatter, masked_select, nonzero, take_along_axis, argsort, topk,
and the stacked tensor arrays' ``array_write``."""

from __future__ import annotations

import numpy as np

from dy2stat.onnx.graph import INT64_MAX, INT64_MIN, Graph
from dy2stat.onnx.lowering import OpContext, Unsupported, rule
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.indexing import index_shape
from dy2stat.runtime.registry import Meta

_SLICE, _ARRAY = "slice", "array"


def _normalized(g: Graph, x: str, rank: int, encoded, tensors, metas):
    """(x with a new axis for each None, its rank, entries, gaps): each entry ("slice",
    start, stop, step), ("int", value), ("array", int64 value, its rank) or a bool mask
    spelled as the index arrays of its true elements; one entry per dim it indexes.
    ``gaps``: the entries that an Ellipsis of no dims comes before (it still parts
    advanced indices, in NumPy)."""
    def consumed(item):
        if isinstance(item, int):
            return 1
        tag = item[0]
        if tag == "list":
            return np.asarray(item[1]).ndim if np.asarray(item[1]).dtype == bool else 1
        if tag == "tensor":
            meta = metas[item[1]]
            return len(meta.shape) if meta.dtype == dtypes.bool_ else 1
        return 1 if tag == "slice" else 0

    full = ["slice", None, None, None]
    items = []
    for item in encoded:
        if isinstance(item, list) and item[0] == "ellipsis":
            spans = rank - sum(consumed(i) for i in encoded)
            items += [full] * spans if spans else [["gap"]]
        elif isinstance(item, list) and item[0] == "bool":
            raise Unsupported("an index that is a Python bool has no ONNX form")
        else:
            items.append(item)
    entries, gaps = [], set()
    for item in items:
        dim = len(entries)
        if isinstance(item, list) and item[0] == "gap":
            gaps.add(dim)
        elif isinstance(item, int):
            entries.append(("int", item))
        elif item[0] == "none":
            x = g.unsqueeze(x, [dim])
            entries.append((_SLICE, None, None, None))
        elif item[0] == "slice":
            entries.append((_SLICE, *item[1:]))
        elif item[0] == "list":
            array = np.asarray(item[1])
            if array.dtype == bool:
                entries += [(_ARRAY, g.const(rows), 1) for rows in np.nonzero(array)]
            else:
                entries.append((_ARRAY, g.const(array.astype(np.int64)), array.ndim))
        else:  # a tensor: int -> an index array; bool -> its true elements' coordinates
            value, meta = tensors[item[1]], metas[item[1]]
            if meta.dtype != dtypes.bool_:
                entries.append((_ARRAY, g.cast(value, meta.dtype, dtypes.int64),
                                len(meta.shape)))
                continue
            coords = g.op("NonZero", value)
            k = len(meta.shape)
            rows = g.split(coords, 0, k, [1] * k) if k > 1 else (coords,)
            entries += [(_ARRAY, g.squeeze(r, [0]), 1) for r in rows]
    rank += sum(1 for i in items if isinstance(i, list) and i[0] == "none")
    return x, rank, entries, gaps


def select(g: Graph, x: str, rank: int, encoded, tensors, metas) -> str:
    """``x[index]`` for an encoded index (runtime/ops/indexing.py) whose tensors are the
    ONNX values ``tensors`` described by ``metas``."""
    x, rank, entries, gaps = _normalized(g, x, rank, encoded, tensors, metas)
    x = _slices(g, x, entries, tensors, metas)
    advanced = [d for d, e in enumerate(entries) if e[0] == _ARRAY]
    ints = [d for d, e in enumerate(entries) if e[0] == "int"]
    if not advanced:
        for d in reversed(ints):  # the last first: earlier dims keep their place
            x = g.op("Gather", x, g.const(np.int64(entries[d][1])), axis=d)
        return x
    if len(advanced) == 1 and not ints:
        _, value, _ = entries[advanced[0]]
        return g.op("Gather", x, value, axis=advanced[0])
    return _gather_advanced(g, x, rank, entries, sorted(advanced + ints), gaps)


def _bound(g: Graph, value, tensors, metas):
    """A slice bound as a 1-D int64 value (a tensor of one element, or an int)."""
    if isinstance(value, list):
        meta = metas[value[1]]
        return g.reshape(g.cast(tensors[value[1]], meta.dtype, dtypes.int64), [1])
    return g.ints([value])


def _default(g: Graph, step, step_value: str, forward: int, backward: int) -> str:
    """An omitted slice bound: ``forward`` for a positive step, ``backward`` for a
    negative one (a tensor step's sign decides when the model runs)."""
    if isinstance(step, list):
        negative = g.op("Less", step_value, g.ints([0]))
        return g.op("Where", negative, g.ints([backward]), g.ints([forward]))
    return g.ints([backward if step is not None and step < 0 else forward])


def _may_be_negative(bound) -> bool:
    """Whether a slice bound (None, an int, or a tensor's place) may be below 0."""
    return isinstance(bound, list) or (bound is not None and bound < 0)


def _slices(g: Graph, x: str, entries, tensors, metas) -> str:
    """One Slice node for every slice entry that is not ``:``."""
    starts, ends, steps, axes = [], [], [], []
    for d, entry in enumerate(entries):
        if entry[0] != _SLICE or entry[1:] in ((None, None, None), (None, None, 1)):
            continue
        start, stop, step = entry[1:]
        step_value = _bound(g, 1 if step is None else step, tensors, metas)
        start_value = (_default(g, step, step_value, 0, INT64_MAX) if start is None
                       else _bound(g, start, tensors, metas))
        stop_value = (_default(g, step, step_value, INT64_MAX, INT64_MIN) if stop is None
                      else _bound(g, stop, tensors, metas))
        if _may_be_negative(start) and _may_be_negative(step):
            # Stepping back from before the first element selects nothing in NumPy; ONNX
            # would start at the first element: stop there instead.
            before = g.op("And", g.op("Less", step_value, g.ints([0])),
                          g.op("Less", g.op("Add", start_value, g.dim(x, d)), g.ints([0])))
            stop_value = g.op("Where", before, g.ints([0]), stop_value)
        starts.append(start_value)
        ends.append(stop_value)
        steps.append(step_value)
        axes.append(d)
    if not axes:
        return x
    return g.slice(x, g.concat_dims(starts), g.concat_dims(ends), axes, g.concat_dims(steps))


def _gather_advanced(g: Graph, x: str, rank: int, entries, dims, gaps) -> str:
    """Several advanced indices (ints among them): broadcast together, gathered at once
    (GatherND over the indexed dims moved first), their dims placed as NumPy does."""
    others = [d for d in range(rank) if d not in dims]
    moved = g.op("Transpose", x, perm=dims + others)
    values, ranks = [], []
    for d in dims:
        entry = entries[d]
        value = g.const(np.int64(entry[1])) if entry[0] == "int" else entry[1]
        ranks.append(0 if entry[0] == "int" else entry[2])
        size = g.to_scalar(g.dim(x, d))
        values.append(g.op("Where", g.op("Less", value, g.const(np.int64(0))),
                           g.op("Add", value, size), value))
    zero = values[0]
    for v in values[1:]:  # a value of the broadcast shape of all of them
        zero = g.op("Add", zero, v)
    common = g.shape(zero)
    stacked = g.op("Concat", *[g.unsqueeze(g.op("Expand", v, common), [-1]) for v in values],
                   axis=-1)
    out = g.op("GatherND", moved, stacked)
    contiguous = dims == list(range(dims[0], dims[-1] + 1)) and not any(
        dims[0] < gap <= dims[-1] for gap in gaps)
    if not contiguous or dims[0] == 0:
        return out  # split up (or leading): the broadcast dims lead, as in NumPy
    nb, before = max(ranks), dims[0]  # next to each other: they stay in place
    perm = [nb + i for i in range(before)] + list(range(nb)) + list(
        range(nb + before, nb + len(others)))
    return g.op("Transpose", out, perm=perm)


def _index_values(ctx: OpContext):
    return ctx.inputs("Index"), [Meta(m.shape, m.dtype) for m in ctx.metas("Index")]


@rule("getitem")
def _getitem(ctx: OpContext) -> None:
    tensors, metas = _index_values(ctx)
    out = select(ctx.g, ctx.input(), len(ctx.meta().shape), ctx.attrs["index"], tensors, metas)
    ctx.output(ctx.g.op("Identity", out) if out == ctx.input() else out)


@rule("setitem")
def _setitem(ctx: OpContext) -> None:
    """x with the elements x[index] selects replaced: their flat positions are the same
    index applied to the positions of x, and one ScatterND writes value there."""
    g, x, meta = ctx.g, ctx.input(), ctx.meta()
    tensors, metas = _index_values(ctx)
    index = ctx.attrs["index"]
    positions = g.reshape(g.op("Range", g.const(np.int64(0)), g.op("Size", x),
                               g.const(np.int64(1))), g.shape(x), allowzero=True)
    chosen = select(g, positions, len(meta.shape), index, tensors, metas)
    value = ctx.input("Value", dtype=meta.dtype)
    extra = len(ctx.meta("Value").shape) - len(index_shape(meta.shape, index, metas))
    if extra > 0:  # leading dims of 1 that NumPy drops
        value = g.reshape(value, g.shape(value, extra), allowzero=True)
    updates = g.reshape(g.op("Expand", value, g.shape(chosen)), [-1])
    flat = g.op("ScatterND", g.reshape(x, [-1]), g.unsqueeze(g.reshape(chosen, [-1]), [-1]),
                updates)
    ctx.output(g.reshape(flat, g.shape(x), allowzero=True))


@rule("gather_nd")
def _gather_nd(ctx: OpContext) -> None:
    g = ctx.g
    index = ctx.input("Index", dtype=dtypes.int64)
    depth = ctx.meta("Index").shape[-1]
    sizes = g.shape(ctx.input(), 0, depth)
    index = g.op("Where", g.op("Less", index, g.const(np.int64(0))),
                 g.op("Add", index, sizes), index)
    ctx.output(g.op("GatherND", ctx.input(), index))


def _winners(g: Graph, index: str) -> str:
    """For each position of 1-D ``index``: no later position holds the same value."""
    positions = g.op("Range", g.const(np.int64(0)), g.to_scalar(g.shape(index)),
                     g.const(np.int64(1)))
    same = g.op("Equal", g.unsqueeze(index, [1]), g.unsqueeze(index, [0]))
    later = g.op("Greater", g.unsqueeze(positions, [0]), g.unsqueeze(positions, [1]))
    clash = g.reduce("ReduceMax", g.cast_to(g.op("And", same, later), dtypes.int32), [1],
                     False)
    return g.op("Not", g.cast_to(clash, dtypes.bool_))


@rule("scatter_winners")
def _scatter_winners(ctx: OpContext) -> None:
    ctx.output(_winners(ctx.g, ctx.g.reshape(ctx.input("Index", dtype=dtypes.int64), [-1])))


@rule("scatter")
def _scatter(ctx: OpContext) -> None:
    """Rows Index of X set to Updates: the rows are zeroed, then the updates added (only
    the last of repeated indices when overwriting)."""
    g, dtype = ctx.g, ctx.dtype
    # ONNX Runtime adds no float16, small ints or bools: those add as float32 / int32
    # (exact when overwriting, one update per row; accumulated, float16 rounds once)
    work = (dtype if dtype in {dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64}
            else dtypes.float32 if dtype == dtypes.float16 else dtypes.int32)
    x = ctx.input(dtype=work)
    index = g.reshape(ctx.input("Index", dtype=dtypes.int64), [-1])
    index = g.op("Where", g.op("Less", index, g.const(np.int64(0))),
                 g.op("Add", index, g.dim(x, 0)), index)
    rows = g.unsqueeze(index, [1])
    shape = g.concat_dims([g.shape(index), g.shape(x, 1)])
    updates = g.reshape(ctx.input("Updates", dtype=work), shape, allowzero=True)
    zero = g.scalar(0, work)
    cleared = g.op("ScatterND", x, rows, g.op("Expand", zero, shape))
    if ctx.attrs["overwrite"]:
        keep = g.reshape(_winners(g, index), g.concat_dims(
            [g.shape(index)] + [1] * (len(ctx.meta().shape) - 1)))
        updates = g.op("Where", keep, updates, zero)
    out = g.op("ScatterND", cleared, rows, updates, reduction="add")
    ctx.output(out, have=work)


@rule("masked_select")
def _masked_select(ctx: OpContext) -> None:
    g, x, mask = ctx.g, ctx.input(), ctx.input("Mask")
    both = g.where(mask, x, x, ctx.dtype)  # x broadcast with the mask
    mask = g.op("Expand", mask, g.shape(both))
    ctx.output(g.op("Compress", g.reshape(both, [-1]), g.reshape(mask, [-1]), axis=0))


@rule("nonzero")
def _nonzero(ctx: OpContext) -> None:
    # (as a bool: ONNX Runtime's NonZero takes few dtypes)
    coords = ctx.g.op("NonZero", ctx.input(dtype=dtypes.bool_))
    ctx.output(ctx.g.op("Transpose", coords, perm=[1, 0]))


@rule("take_along_axis")
def _take_along_axis(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], len(ctx.meta().shape), ctx.type)
    ctx.output(ctx.g.op("GatherElements", ctx.input(), ctx.input("Index", dtype=dtypes.int64),
                        axis=axis))


def _sortable(dtype):
    """The dtype TopK compares in (no bool or small ints there)."""
    return dtype if dtype in dtypes.FLOATS | {dtypes.int32, dtypes.int64} else dtypes.int32


@rule("argsort")
def _argsort(ctx: OpContext) -> None:
    """A TopK of every element: ties keep their order, as the stable sort does."""
    g, meta = ctx.g, ctx.meta()
    axis = shapes.normalize_axis(ctx.attrs["axis"], len(meta.shape), ctx.type)
    x = ctx.input(dtype=_sortable(meta.dtype))
    _, order = g.op("TopK", x, g.dim(x, axis), axis=axis,
                    largest=int(bool(ctx.attrs["descending"])), sorted=1, outputs=2)
    ctx.output(order)


@rule("topk")
def _topk(ctx: OpContext) -> None:
    g, meta = ctx.g, ctx.meta()
    axis = shapes.normalize_axis(ctx.attrs["axis"], len(meta.shape), ctx.type)
    work = _sortable(meta.dtype)
    values, indices = g.op("TopK", ctx.input(dtype=work), g.ints([ctx.attrs["k"]]), axis=axis,
                           largest=int(bool(ctx.attrs["largest"])), sorted=1, outputs=2)
    ctx.output(values, "Out", have=work)
    ctx.output(indices, "Indices")


@rule("array_write")
def _array_write(ctx: OpContext) -> None:
    """The array with row I set to X, grown with rows of zeros when I is past its end.
    An empty array's rows take X's shape (its own may be a placeholder)."""
    g, dtype = ctx.g, ctx.dtype
    array, x = ctx.input("Array"), ctx.input("X", dtype=dtype)
    i = g.reshape(ctx.input("I", dtype=dtypes.int64), [1])
    length, row = g.dim(array, 0), g.shape(x)
    grown = g.op("Max", length, g.op("Add", i, g.ints([1])))
    base = g.fill(g.concat_dims([grown, row]), 0, dtype)
    old = g.reshape(array, g.concat_dims([length, row]), allowzero=True)
    kept = g.unsqueeze(g.op("Range", g.const(np.int64(0)), g.to_scalar(length),
                            g.const(np.int64(1))), [1])
    base = g.op("ScatterND", base, kept, old)
    ctx.output(g.op("ScatterND", base, g.unsqueeze(i, [0]), g.unsqueeze(x, [0])))
