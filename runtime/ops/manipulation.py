"""Shape manipulation, joining and splitting, gather/where and friends.

Indexing (``x[idx]`` and ``x[idx] = v``: ``getitem``/``setitem``) is in
``indexing.py``.
"""

from __future__ import annotations

import numpy as np

from dy2stat.kernels import select
from dy2stat.kernels.backend import to_host
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import AXES, INT, NONE, Meta, defop, int_at_least, ints

fmt = shapes.fmt


def _same_as_input(x, **_):
    return Meta(tuple(x.shape), x.dtype)


def _reshape_like_grad(e, ins, outs, douts, attrs, need):
    """Ops that only regroup elements: the gradient takes the input's shape back."""
    return [e("reshape_like", douts[0], ins[0])]


def _add_at(xp, out, idx, g):
    """Unbuffered ``out[idx] += g``: repeated indices accumulate.

    ``ufunc.at`` is in NumPy and in CuPy >= 12 (which deprecates the older
    ``cupyx.scatter_add``), so one call serves both backends.
    """
    xp.add.at(out, idx, g)
    return out


# ------------------------------------------------------------------ reshape


def _reshape_target(shape, target):
    """0 in the target keeps that dim of the input (Paddle's rule)."""
    return tuple(shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target))


defop(
    "reshape",
    attrs={"shape": []},
    attr_types={"shape": ints(-1)},
    kernel=lambda xp, x, shape: x.reshape(_reshape_target(x.shape, shape)),
    infer=lambda x, shape: Meta(shapes.reshape(x.shape, shape, "reshape"), x.dtype),
    grad=_reshape_like_grad,
)


def _reshape_shaped_kernel(xp, x, shape, static_shape=()):
    dims = tuple(int(d) for d in to_host(shape).reshape(-1))
    return x.reshape(_reshape_target(x.shape, dims))


def _reshape_shaped_infer(x, shape, static_shape=()):
    if len(shape.shape) != 1 or shape.shape[0] not in (-1, len(static_shape)):
        raise ValueError(f"reshape_shaped: Shape must be 1-D with {len(static_shape)} dims, "
                         f"got {fmt(shape.shape)}")
    return Meta(shapes.reshape(x.shape, static_shape, "reshape"), x.dtype)


defop(
    "reshape_shaped",
    inputs=("X", "Shape"),
    attrs={"static_shape": []},
    attr_types={"static_shape": ints(-1)},
    kernel=_reshape_shaped_kernel,
    infer=_reshape_shaped_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("reshape_like", douts[0], ins[0]), None],
    no_grad=("Shape",),
    dtypes={"Shape": dtypes.INTS},
    doc="reshape() to a shape of which several dims are only known when the program runs "
        "(a 1-D int64 tensor; -1 and 0 as in reshape).",
)


def _reshape_like_infer(x, like):
    a, b = shapes.numel(x.shape), shapes.numel(like.shape)
    if a >= 0 and b >= 0 and a != b:
        raise ValueError(
            f"reshape_like: cannot reshape {fmt(x.shape)} ({a} elements) into "
            f"{fmt(like.shape)} ({b} elements)"
        )
    return Meta(tuple(like.shape), x.dtype)


defop(
    "reshape_like",
    inputs=("X", "Like"),
    kernel=lambda xp, x, like: x.reshape(like.shape),
    infer=_reshape_like_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("reshape_like", douts[0], ins[0]), None],
    no_grad=("Like",),
    doc="Reshape X to Like's run-time shape (the gradient of every reshaping op).",
)


def _squeeze_shape(shape, axis, op="squeeze"):
    """Drop size-1 dims: all of them, or the listed ones that are 1 (as Paddle does).

    A listed dim of unknown size is taken to be 1. ``axis=None`` on a shape
    with unknown dims is refused: the result's rank would be a guess.
    """
    if axis is None:
        if -1 in shape:
            raise ValueError(f"{op}: which dims of {fmt(shape)} to drop is unknown until run "
                             "time; pass axis")
        return tuple(d for d in shape if d != 1)
    axes = shapes.axes_tuple(axis, len(shape), op)
    return tuple(d for i, d in enumerate(shape) if i not in axes or d not in (1, -1))


def _unsqueeze_shape(shape, axis, op="unsqueeze"):
    """Insert size-1 dims; axes count in the output (numpy's expand_dims)."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    n = len(shape) + len(axes)
    where = sorted({shapes.normalize_axis(a, n, op) for a in axes})
    if len(where) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axes} for input shape {fmt(shape)}")
    out = list(shape)
    for a in where:
        out.insert(a, 1)
    return tuple(out)


def _flatten_shape(shape, start_axis, stop_axis, op="flatten"):
    n = len(shape)
    if n == 0:
        return (1,)
    start = shapes.normalize_axis(start_axis, n, op)
    stop = shapes.normalize_axis(stop_axis, n, op)
    if start > stop:
        raise ValueError(
            f"{op}: start_axis {start_axis} is after stop_axis {stop_axis} for shape {fmt(shape)}"
        )
    return (
        tuple(shape[:start]) + (shapes.numel(shape[start : stop + 1]),) + tuple(shape[stop + 1 :])
    )


defop(
    "squeeze",
    attrs={"axis": None},
    attr_types={"axis": AXES},
    kernel=lambda xp, x, axis=None: x.reshape(_squeeze_shape(x.shape, axis)),
    infer=lambda x, axis=None: Meta(_squeeze_shape(tuple(x.shape), axis), x.dtype),
    grad=_reshape_like_grad,
)


def _unsqueeze_infer(x, axis):
    if axis is None:
        raise ValueError(f"unsqueeze: axis is required (input shape {fmt(x.shape)})")
    return Meta(_unsqueeze_shape(tuple(x.shape), axis), x.dtype)


defop(
    "unsqueeze",
    attrs={"axis": None},
    attr_types={"axis": AXES},
    kernel=lambda xp, x, axis: x.reshape(_unsqueeze_shape(x.shape, axis)),
    infer=_unsqueeze_infer,
    grad=_reshape_like_grad,
)
defop(
    "flatten",
    attrs={"start_axis": 0, "stop_axis": -1},
    kernel=lambda xp, x, start_axis=0, stop_axis=-1: x.reshape(
        _flatten_shape(x.shape, start_axis, stop_axis)
    ),
    infer=lambda x, start_axis=0, stop_axis=-1: Meta(
        _flatten_shape(tuple(x.shape), start_axis, stop_axis), x.dtype
    ),
    grad=_reshape_like_grad,
)

# ---------------------------------------------------------------- transpose


def _perm(perm, ndim, op="transpose"):
    norm = [p % ndim if ndim and -ndim <= p < ndim else None for p in perm]
    if len(perm) != ndim or sorted(p for p in norm if p is not None) != list(range(ndim)):
        raise ValueError(f"{op}: perm {list(perm)} is not a permutation of the {ndim} axes")
    return norm


def _transpose_infer(x, perm):
    return Meta(tuple(x.shape[p] for p in _perm(perm, len(x.shape))), x.dtype)


def _transpose_grad(e, ins, outs, douts, attrs, need):
    perm = _perm(attrs["perm"], len(ins[0].shape))
    inverse = [perm.index(i) for i in range(len(perm))]
    return [e("transpose", douts[0], perm=inverse)]


defop(
    "transpose",
    attrs={"perm": []},
    attr_types={"perm": ints()},
    kernel=lambda xp, x, perm: xp.transpose(x, perm),
    infer=_transpose_infer,
    grad=_transpose_grad,
)


def _swapaxes_last_infer(x):
    if len(x.shape) < 2:
        raise ValueError(f"swapaxes_last: needs at least 2 dims, got shape {fmt(x.shape)}")
    return Meta(tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]), x.dtype)


defop(
    "swapaxes_last",
    kernel=lambda xp, x: xp.swapaxes(x, -1, -2),
    infer=_swapaxes_last_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("swapaxes_last", douts[0])],
    doc="Swap the last two axes (matmul's transposes).",
)

# ------------------------------------------------------- concat, stack, split


def _concat_infer(xs, axis=0):
    if not xs:
        raise ValueError("concat: needs at least one input")
    listed = ", ".join(fmt(x.shape) for x in xs)
    ndim = len(xs[0].shape)
    if ndim == 0:
        raise ValueError(f"concat: 0-D inputs cannot be concatenated (shapes {listed})")
    ax = shapes.normalize_axis(axis, ndim, "concat")
    out, dtype = list(xs[0].shape), xs[0].dtype
    for x in xs[1:]:
        if len(x.shape) != ndim or any(
            i != ax and a != b and a != -1 and b != -1 for i, (a, b) in enumerate(zip(out, x.shape))
        ):
            raise ValueError(f"concat: shapes {listed} differ outside axis {axis}")
        out = [b if a == -1 else a for a, b in zip(out, x.shape)]
        dtype = dtypes.promote(dtype, x.dtype)
    sizes = [x.shape[ax] for x in xs]
    out[ax] = -1 if min(sizes) < 0 else sum(sizes)
    return Meta(tuple(out), dtype)


def _concat_kernel(xp, xs, axis=0):
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = dtypes.promote(dtype, x.dtype)
    return xp.concatenate([x.astype(dtype, copy=False) for x in xs], axis=axis)


defop(
    "concat",
    inputs=("Xs*",),
    attrs={"axis": 0},
    kernel=_concat_kernel,
    infer=_concat_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("split_like", douts[0], ins[0], axis=attrs["axis"])
    ],
)


def _split_like_kernel(xp, g, xs, axis=0):
    ax = shapes.normalize_axis(axis, g.ndim, "split_like")
    ends = np.cumsum([x.shape[ax] for x in xs])
    return xp.split(g, [int(i) for i in ends[:-1]], axis=ax)


def _split_like_infer(g, xs, axis=0):
    ax = shapes.normalize_axis(axis, len(g.shape), "split_like")
    outs = []
    for x in xs:
        if len(x.shape) != len(g.shape):
            raise ValueError(
                f"split_like: part shape {fmt(x.shape)} does not match gradient "
                f"shape {fmt(g.shape)}"
            )
        shape = list(g.shape)
        shape[ax] = x.shape[ax]
        outs.append(Meta(tuple(shape), g.dtype))
    return outs


defop(
    "split_like",
    inputs=("G", "Xs*"),
    outputs=("Outs*",),
    attrs={"axis": 0},
    kernel=_split_like_kernel,
    infer=_split_like_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("concat", douts[0], axis=attrs["axis"]), None],
    no_grad=("Xs",),
    doc="Split G along axis at the run-time sizes of Xs (the gradient of concat).",
)


def _stack_infer(xs, axis=0):
    if not xs:
        raise ValueError("stack: needs at least one input")
    shape, dtype = tuple(xs[0].shape), xs[0].dtype
    for x in xs[1:]:
        if not shapes.same(shape, x.shape):
            listed = ", ".join(fmt(x.shape) for x in xs)
            raise ValueError(f"stack: inputs must have the same shape, got {listed}")
        shape = tuple(b if a == -1 else a for a, b in zip(shape, x.shape))
        dtype = dtypes.promote(dtype, x.dtype)
    ax = shapes.normalize_axis(axis, len(shape) + 1, "stack")
    return Meta(shape[:ax] + (len(xs),) + shape[ax:], dtype)


def _stack_kernel(xp, xs, axis=0):
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = dtypes.promote(dtype, x.dtype)
    return xp.stack([x.astype(dtype, copy=False) for x in xs], axis=axis)


defop(
    "stack",
    inputs=("Xs*",),
    attrs={"axis": 0},
    kernel=_stack_kernel,
    infer=_stack_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("unstack", douts[0], axis=attrs["axis"], num=len(ins[0]))
    ],
)


def _unstack_infer(x, axis=0, num=None):
    ax = shapes.normalize_axis(axis, len(x.shape), "unstack")
    n = x.shape[ax] if num is None else num
    if n < 0:
        raise ValueError(f"unstack: the size of axis {axis} of {fmt(x.shape)} is unknown; pass num")
    if x.shape[ax] not in (-1, n):
        raise ValueError(
            f"unstack: num={num} but axis {axis} of {fmt(x.shape)} has size {x.shape[ax]}"
        )
    rest = tuple(x.shape[:ax]) + tuple(x.shape[ax + 1 :])
    return [Meta(rest, x.dtype) for _ in range(n)]


def _unstack_kernel(xp, x, axis=0, num=None):
    ax = shapes.normalize_axis(axis, x.ndim, "unstack")
    lead = (slice(None),) * ax
    return [x[lead + (i,)] for i in range(x.shape[ax])]


defop(
    "unstack",
    outputs=("Outs*",),
    attrs={"axis": 0, "num": None},
    attr_types={"num": NONE | int_at_least(0)},
    kernel=_unstack_kernel,
    infer=_unstack_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("stack", douts[0], axis=attrs["axis"])],
)


def _split_sizes(shape, num_or_sections, axis, op="split"):
    """The size of each part along ``axis`` (-1 where unknown)."""
    ax = shapes.normalize_axis(axis, len(shape), op)
    dim = shape[ax]
    bad = f"{op}: cannot split shape {fmt(shape)} along axis {axis} into {num_or_sections}"
    if isinstance(num_or_sections, int):
        n = num_or_sections
        if n <= 0 or (dim >= 0 and dim % n):
            raise ValueError(bad)
        return [dim // n if dim >= 0 else -1] * n
    sizes = list(num_or_sections)
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes) or not sizes:
        raise ValueError(bad)
    known = sum(s for s in sizes if s != -1)
    if dim >= 0:
        if -1 in sizes and known <= dim:
            sizes[sizes.index(-1)] = dim - known
        elif -1 in sizes or known != dim:
            raise ValueError(bad)
    return sizes


def _split_infer(x, num_or_sections, axis=0):
    ax = shapes.normalize_axis(axis, len(x.shape), "split")
    outs = []
    for size in _split_sizes(x.shape, num_or_sections, axis):
        shape = list(x.shape)
        shape[ax] = size
        outs.append(Meta(tuple(shape), x.dtype))
    return outs


def _split_kernel(xp, x, num_or_sections, axis=0):
    ax = shapes.normalize_axis(axis, x.ndim, "split")
    ends = np.cumsum(_split_sizes(x.shape, num_or_sections, axis))
    return xp.split(x, [int(i) for i in ends[:-1]], axis=ax)


defop(
    "split",
    outputs=("Outs*",),
    attrs={"num_or_sections": 1, "axis": 0},
    attr_types={"num_or_sections": int_at_least(1) | ints(-1)},
    kernel=_split_kernel,
    infer=_split_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("concat", douts[0], axis=attrs["axis"])],
)

# ----------------------------------------------------------- gather, where


def _gather_infer(x, index, axis=0):
    ax = shapes.normalize_axis(axis, len(x.shape), "gather")
    return Meta(tuple(x.shape[:ax]) + tuple(index.shape) + tuple(x.shape[ax + 1 :]), x.dtype)


defop(
    "gather",
    inputs=("X", "Index"),
    attrs={"axis": 0},
    kernel=lambda xp, x, index, axis=0: xp.take(x, index, axis=axis),
    infer=_gather_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("gather_grad", douts[0], ins[0], ins[1], axis=attrs["axis"]),
        None,
    ],
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS},
)


def _gather_grad_kernel(xp, g, x, index, axis=0):
    ax = shapes.normalize_axis(axis, x.ndim, "gather_grad")
    out = xp.zeros(x.shape, dtype=g.dtype)
    return _add_at(xp, out, (slice(None),) * ax + (index,), g)


defop(
    "gather_grad",
    inputs=("G", "X", "Index"),
    attrs={"axis": 0},
    kernel=_gather_grad_kernel,
    infer=lambda g, x, index, axis=0: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("gather", douts[0], ins[2], axis=attrs["axis"]),
        None,
        None,
    ],
    no_grad=("X", "Index"),
    dtypes={"G": dtypes.FLOATS, "Index": dtypes.INTS},
    doc="Zeros like X with G added at index along axis (the gradient of gather).",
)


def _where_kernel(xp, cond, x, y):
    # The dispatcher passes a Python scalar through; give it the other side's dtype.
    if not hasattr(x, "dtype"):
        x = xp.asarray(x, dtype=y.dtype) if hasattr(y, "dtype") else xp.asarray(x)
    if not hasattr(y, "dtype"):
        y = xp.asarray(y, dtype=x.dtype)
    if not hasattr(cond, "dtype"):
        cond = xp.asarray(cond, dtype=bool)
    return select.where(xp, cond, x, y)


def _where_infer(cond, x, y):
    shape = shapes.broadcast(shapes.broadcast(cond.shape, x.shape, "where"), y.shape, "where")
    return Meta(shape, dtypes.promote(x.dtype, y.dtype))


def _where_grad(e, ins, outs, douts, attrs, need):
    cond, x, y = ins
    g = douts[0]
    return [
        None,
        unbroadcast(e, e("where", cond, g, 0.0), x) if need[1] else None,
        unbroadcast(e, e("where", cond, 0.0, g), y) if need[2] else None,
    ]


defop(
    "where",
    inputs=("Cond", "X", "Y"),
    kernel=_where_kernel,
    infer=_where_infer,
    grad=_where_grad,
    no_grad=("Cond",),
    dtypes={"Cond": dtypes.BOOLS},
    elementwise=True,
    promote=(1, 2),
)

# ------------------------------------------------------- expand, tile, flip


def _expand_shape(shape, target, op="expand"):
    """Paddle's expand: -1 keeps the input's dim; new dims lead."""
    lead = len(target) - len(shape)
    bad = f"{op}: cannot expand shape {fmt(shape)} to {fmt(target)}"
    if lead < 0:
        raise ValueError(bad)
    out = []
    for i, t in enumerate(target):
        d = shape[i - lead] if i >= lead else None
        if t == -1:
            if d is None:
                raise ValueError(bad + " (-1 only keeps an existing dim)")
            out.append(d)
        elif t < 0 or (d is not None and d not in (1, -1, t)):
            raise ValueError(bad)
        else:
            out.append(t)
    return tuple(out)


defop(
    "expand",
    attrs={"shape": []},
    attr_types={"shape": ints(-1)},
    kernel=lambda xp, x, shape: xp.broadcast_to(x, _expand_shape(x.shape, shape)),
    infer=lambda x, shape: Meta(_expand_shape(tuple(x.shape), shape), x.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [unbroadcast(e, douts[0], ins[0])],
    doc="Broadcast X to shape (broadcast_to); the result is a read-only view.",
)


def _tile_layout(shape, repeat_times, op="tile"):
    """Shape and repeats, both padded with leading 1s to one length."""
    if any(r < 0 for r in repeat_times):
        raise ValueError(f"{op}: repeat_times {list(repeat_times)} must be >= 0")
    n = max(len(shape), len(repeat_times))
    dims = (1,) * (n - len(shape)) + tuple(shape)
    reps = (1,) * (n - len(repeat_times)) + tuple(repeat_times)
    return dims, reps


def _tile_infer(x, repeat_times):
    dims, reps = _tile_layout(x.shape, repeat_times)
    return Meta(tuple(-1 if d < 0 else d * r for d, r in zip(dims, reps)), x.dtype)


def _tile_grad_kernel(xp, g, x, repeat_times):
    dims, reps = _tile_layout(x.shape, repeat_times, "tile_grad")
    interleaved = [v for r, d in zip(reps, dims) for v in (r, d)]
    summed = g.reshape(interleaved).sum(axis=tuple(range(0, len(interleaved), 2)))
    return summed.reshape(x.shape)


defop(
    "tile",
    attrs={"repeat_times": []},
    attr_types={"repeat_times": ints(0)},
    kernel=lambda xp, x, repeat_times: xp.tile(x, tuple(repeat_times)),
    infer=_tile_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("tile_grad", douts[0], ins[0], repeat_times=attrs["repeat_times"])
    ],
)
defop(
    "tile_grad",
    inputs=("G", "X"),
    attrs={"repeat_times": []},
    attr_types={"repeat_times": ints(0)},
    kernel=_tile_grad_kernel,
    infer=lambda g, x, repeat_times: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("tile", douts[0], repeat_times=attrs["repeat_times"]),
        None,
    ],
    no_grad=("X",),
    dtypes={"G": dtypes.FLOATS},
    doc="Sum the tiles of G back into X's shape (the gradient of tile).",
)


def _flip_kernel(xp, x, axis):
    axes = shapes.axes_tuple(axis, x.ndim, "flip")
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


def _flip_infer(x, axis):
    shapes.axes_tuple(axis, len(x.shape), "flip")  # checks the axes
    return _same_as_input(x)


defop(
    "flip",
    attrs={"axis": []},
    attr_types={"axis": INT | ints()},
    kernel=_flip_kernel,
    infer=_flip_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("flip", douts[0], axis=attrs["axis"])],
)

# ------------------------------------------------ one_hot, shape, numel, assign


def _one_hot_infer(x, num_classes):
    if num_classes is None or num_classes <= 0:
        raise ValueError(f"one_hot: num_classes must be positive, got {num_classes}")
    return Meta(tuple(x.shape) + (num_classes,), dtypes.float32)


defop(
    "one_hot",
    attrs={"num_classes": None},
    attr_types={"num_classes": int_at_least(1)},
    kernel=lambda xp, x, num_classes: (
        x[..., None] == xp.arange(num_classes, dtype=x.dtype)
    ).astype(xp.float32),
    infer=_one_hot_infer,
    dtypes=dtypes.INTS,
)
defop(
    "shape",
    kernel=lambda xp, x: xp.asarray(x.shape, dtype=xp.int64),
    infer=lambda x: Meta((len(x.shape),), dtypes.int64),
    doc="X's shape as a 1-D int64 tensor (known at run time).",
)
defop(
    "numel",
    kernel=lambda xp, x: xp.asarray(x.size, dtype=xp.int64),
    infer=lambda x: Meta((), dtypes.int64),
)
defop(
    "assign",
    kernel=lambda xp, x: x.copy(),
    infer=_same_as_input,
    grad=lambda e, ins, outs, douts, attrs, need: [e("assign", douts[0])],
    doc="A copy of X (clone).",
)
