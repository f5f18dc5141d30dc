"""Linear algebra: matmul (with its transposes), einsum, tril/triu and diag."""

from __future__ import annotations

import numpy as np

from dy2stat.onnx.lowering import OpContext, rule
from dy2stat.runtime import dtypes

# the dtypes ONNX Runtime multiplies matrices in (smaller ints go through int32)
_MATMUL = frozenset({dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int32,
                     dtypes.int64})


def _swap_last(g, x: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-2:] = perm[-1], perm[-2]
    return g.op("Transpose", x, perm=perm)


@rule("matmul")
def _matmul(ctx: OpContext) -> None:
    g, dtype = ctx.g, ctx.dtype
    work = dtype if dtype in _MATMUL else dtypes.int32
    x, y = ctx.input("X", dtype=work), ctx.input("Y", dtype=work)
    for key, slot in (("transpose_x", "X"), ("transpose_y", "Y")):
        rank = len(ctx.meta(slot).shape)
        if ctx.attrs[key] and rank > 1:
            if slot == "X":
                x = _swap_last(g, x, rank)
            else:
                y = _swap_last(g, y, rank)
    ctx.output(g.op("MatMul", x, y), have=work)


@rule("einsum")
def _einsum(ctx: OpContext) -> None:
    dtype = ctx.dtype
    work = dtype if dtype in _MATMUL else dtypes.int32
    ctx.output(ctx.g.op("Einsum", *ctx.inputs("Xs", dtype=work),
                        equation=ctx.attrs["equation"]), have=work)


@rule("tril", "triu")
def _triangle(ctx: OpContext) -> None:
    dtype = ctx.dtype
    work = dtypes.int32 if dtype in (dtypes.int8, dtypes.uint8, dtypes.int16) else dtype
    out = ctx.g.op("Trilu", ctx.input(dtype=work), ctx.g.const(np.int64(ctx.attrs["diagonal"])),
                   upper=1 if ctx.type == "triu" else 0)
    ctx.output(out, have=work)


@rule("diag")
def _diag(ctx: OpContext) -> None:
    """1-D: a square matrix with x on diagonal ``offset`` (padding_value elsewhere);
    2-D: that diagonal of x."""
    g, offset = ctx.g, ctx.attrs["offset"]
    x = ctx.input()
    zero, one = g.const(np.int64(0)), g.const(np.int64(1))
    if len(ctx.meta().shape) == 1:
        n = g.to_scalar(g.shape(x))
        side = g.op("Add", n, g.const(np.int64(abs(offset))))
        count = g.op("Range", zero, side, one)
        rows, cols = g.unsqueeze(count, [1]), g.unsqueeze(count, [0])
        on = g.op("Equal", g.op("Sub", cols, rows), g.const(np.int64(offset)))
        # the element at (r, r + offset) is x[r], at (c - offset, c) it is x[c]
        along = rows if offset >= 0 else cols
        last = g.op("Sub", n, one)
        picked = g.op("Gather", x, g.op("Min", g.op("Max", along, zero), last), axis=0)
        ctx.output(g.where(on, picked, g.scalar(ctx.attrs["padding_value"], ctx.dtype),
                           ctx.dtype))
        return
    rows, cols = (g.to_scalar(g.dim(x, a)) for a in (0, 1))
    start_row, start_col = g.const(np.int64(max(-offset, 0))), g.const(np.int64(max(offset, 0)))
    length = g.op("Max", zero, g.op("Min", g.op("Sub", rows, start_row),
                                    g.op("Sub", cols, start_col)))
    count = g.op("Range", zero, length, one)
    where = g.op("Concat", g.unsqueeze(g.op("Add", count, start_row), [1]),
                 g.unsqueeze(g.op("Add", count, start_col), [1]), axis=1)
    ctx.output(g.op("GatherND", x, where))
