"""Reductions and scans: sum/mean/max/min/prod, any/all, argmax/argmin, cumsum and
cumprod, var, logsumexp and allclose."""

from __future__ import annotations

import numpy as np

from dy2stat.onnx.graph import Graph, value_info
from dy2stat.onnx.lowering import OpContext, rule
from dy2stat.runtime import dtypes, shapes


def _axes(ctx: OpContext, key: str = "axis"):
    """The reduced axes, non-negative (None: all)."""
    axis = ctx.attrs[key]
    return None if axis is None else list(shapes.axes_tuple(axis, len(ctx.meta().shape),
                                                            ctx.type))


_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "prod": "ReduceProd"}


@rule(*_REDUCE)
def _reduce(ctx: OpContext) -> None:
    dtype = ctx.dtype
    # bools and small ints reduce as int32 (ReduceMax has no bools, ReduceProd no int8);
    # sums of ints are int64
    work = dtypes.int32 if dtype in (dtypes.bool_, dtypes.int8, dtypes.uint8,
                                     dtypes.int16) else dtype
    out = ctx.g.reduce(_REDUCE[ctx.type], ctx.input(dtype=work), _axes(ctx),
                       ctx.attrs["keepdim"])
    ctx.output(_copy(ctx.g, out, ctx.input()), have=work)


def _copy(g: Graph, out: str, x: str) -> str:
    """``out``, or an Identity of it when a reduction over no axes handed back ``x``."""
    return g.op("Identity", out) if out == x else out


def _any(g: Graph, x: str, axes, keepdim: bool) -> str:
    """Whether any element of bool ``x`` is true, over ``axes`` (False when empty)."""
    count = g.reduce("ReduceSum", g.cast_to(x, dtypes.int64), axes, keepdim)
    return g.op("Greater", count, g.scalar(0, dtypes.int64))


@rule("any", "all")
def _any_all(ctx: OpContext) -> None:
    g = ctx.g
    x = ctx.input(dtype=dtypes.bool_)
    if ctx.type == "any":
        ctx.output(_any(g, x, _axes(ctx), ctx.attrs["keepdim"]))
    else:  # all: none is false
        ctx.output(g.op("Not", _any(g, g.op("Not", x), _axes(ctx), ctx.attrs["keepdim"])))


@rule("argmax", "argmin")
def _arg(ctx: OpContext) -> None:
    g = ctx.g
    meta = ctx.meta()
    work = dtypes.float64 if meta.dtype not in dtypes.FLOATS | {dtypes.int32} else meta.dtype
    x = ctx.input(dtype=work)
    op_type = "ArgMax" if ctx.type == "argmax" else "ArgMin"
    if ctx.attrs["axis"] is None:  # over the flattened input
        out = g.op(op_type, g.reshape(x, [-1]), axis=0, keepdims=0)
        if ctx.attrs["keepdim"]:
            out = g.reshape(out, [1] * len(meta.shape))
    else:
        axis = shapes.normalize_axis(ctx.attrs["axis"], len(meta.shape), ctx.type)
        out = g.op(op_type, x, axis=axis, keepdims=int(bool(ctx.attrs["keepdim"])))
    ctx.output(out)


def _flat_or(ctx: OpContext, x: str, key: str):
    """(x, axis): x flattened and axis 0 when the op's axis attr is None."""
    if ctx.attrs[key] is None:
        return ctx.g.reshape(x, [-1]), 0
    return x, shapes.normalize_axis(ctx.attrs[key], len(ctx.meta().shape), ctx.type)


@rule("cumsum")
def _cumsum(ctx: OpContext) -> None:
    dtype = ctx.dtype
    work = dtype if dtype in dtypes.FLOATS | {dtypes.int32, dtypes.int64} else dtypes.int64
    x, axis = _flat_or(ctx, ctx.input(dtype=work), "axis")
    out = ctx.g.op("CumSum", x, ctx.g.const(np.int64(axis)),
                   reverse=1 if ctx.attrs["reverse"] else None)
    ctx.output(out, have=work)


@rule("cumprod")
def _cumprod(ctx: OpContext) -> None:
    """A Loop along the axis that carries the running product and stacks each step's
    (the same products, in the same order, as the kernel's)."""
    g, dtype = ctx.g, ctx.dtype
    x, axis = _flat_or(ctx, ctx.input(), "dim")
    rank = 1 if ctx.attrs["dim"] is None else len(ctx.meta().shape)
    perm = [axis] + [i for i in range(rank) if i != axis]
    front = g.op("Transpose", x, perm=perm)
    body = g.subgraph("cumprod_body")
    step, cond, running = (g.model.fresh(n) for n in ("step", "cond", "running"))
    body.inputs = [value_info(step, dtypes.int64, []), value_info(cond, dtypes.bool_, []),
                   value_info(running, dtype, [-1] * (rank - 1))]
    product = body.op("Mul", running, body.op("Gather", front, step, axis=0))
    body.outputs = [value_info(body.op("Identity", cond), dtypes.bool_, []),
                    value_info(product, dtype, [-1] * (rank - 1)),
                    value_info(body.op("Identity", product), dtype, [-1] * (rank - 1))]
    ones = g.fill(g.shape(front, 1), 1, dtype)
    _, stacked = g.op("Loop", g.to_scalar(g.dim(front, 0)), None, ones, outputs=2, body=body)
    inverse = [perm.index(i) for i in range(rank)]
    ctx.output(g.op("Transpose", stacked, perm=inverse))


def _count(g: Graph, x: str, reduced: str, dtype) -> str:
    """How many elements of ``x`` each element of ``reduced`` (kept dims) stands for."""
    return g.op("Div", g.cast_to(g.op("Size", x), dtype), g.cast_to(g.op("Size", reduced), dtype))


@rule("var")
def _var(ctx: OpContext) -> None:
    """sum((x - mean)^2) / (n - ddof), as NumPy's var."""
    g, dtype = ctx.g, ctx.dtype
    x, axes = ctx.input(), _axes(ctx)
    mean = g.reduce("ReduceMean", x, axes, True)
    centered = g.op("Sub", x, mean)
    total = g.reduce("ReduceSum", g.op("Mul", centered, centered), axes, True)
    n = _count(g, x, mean, dtype)
    if ctx.attrs["unbiased"]:
        n = g.op("Sub", n, g.scalar(1, dtype))
    out = g.op("Div", total, n)
    if not ctx.attrs["keepdim"]:
        out = g.squeeze(out, axes if axes is not None else range(len(ctx.meta().shape)))
    ctx.output(out)


@rule("logsumexp")
def _logsumexp(ctx: OpContext) -> None:
    """log(sum(exp(x - top))) + top, top the max where it is finite (else 0)."""
    g, dtype = ctx.g, ctx.dtype
    x, axes = ctx.input(), _axes(ctx)
    top = g.reduce("ReduceMax", x, axes, True)
    finite = g.op("Not", g.op("Or", g.op("IsNaN", top), g.is_inf(top, dtype)))
    top = g.op("Where", finite, top, g.scalar(0, dtype))
    total = g.reduce("ReduceSum", g.op("Exp", g.op("Sub", x, top)), axes, True)
    out = g.op("Add", g.op("Log", total), top)
    if not ctx.attrs["keepdim"]:
        out = g.squeeze(out, axes if axes is not None else range(len(ctx.meta().shape)))
    ctx.output(out)


@rule("allclose")
def _allclose(ctx: OpContext) -> None:
    """|x - y| <= atol + rtol * |y| everywhere (equal infinities are close), as NumPy."""
    g = ctx.g
    common = dtypes.promote(ctx.meta("X").dtype, ctx.meta("Y").dtype)
    work = common if common in dtypes.FLOATS else dtypes.float64
    x, y = ctx.input("X", dtype=work), ctx.input("Y", dtype=work)
    bound = g.op("Add", g.scalar(ctx.attrs["atol"], work),
                 g.op("Mul", g.scalar(ctx.attrs["rtol"], work), g.op("Abs", y)))
    close = g.op("Or", g.op("Equal", x, y),
                 g.op("LessOrEqual", g.op("Abs", g.op("Sub", x, y)), bound))
    if ctx.attrs["equal_nan"]:
        close = g.op("Or", close, g.op("And", g.op("IsNaN", x), g.op("IsNaN", y)))
    ctx.output(g.op("Not", _any(g, g.op("Not", close), None, False)))
