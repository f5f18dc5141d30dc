"""Ops that make tensors: constants (full, arange, linspace, eye: computed by the ops'
own kernels when exporting), and tensors of a shape known when the model runs."""

from __future__ import annotations

import numpy as np

from dy2stat.onnx.lowering import OpContext, rule
from dy2stat.runtime import dtypes
from dy2stat.runtime.registry import OPS


@rule("full", "arange", "linspace", "eye")
def _constant(ctx: OpContext) -> None:
    value = OPS[ctx.type].kernel(np, **ctx.attrs)
    ctx.output(ctx.g.op("Identity", ctx.g.const(np.asarray(value, dtype=ctx.dtype))))


@rule("full_shaped")
def _full_shaped(ctx: OpContext) -> None:
    shape = ctx.input("Shape", dtype=dtypes.int64)
    ctx.output(ctx.g.fill(ctx.g.reshape(shape, [-1]), ctx.attrs["value"], ctx.dtype))


@rule("full_like")
def _full_like(ctx: OpContext) -> None:
    ctx.output(ctx.g.fill(ctx.g.shape(ctx.input()), ctx.attrs["value"], ctx.dtype))


# the dtypes ONNX's Range counts in (others count in int64 or float32, then are cast)
_RANGE = frozenset({dtypes.int16, dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64})


@rule("range")
def _range(ctx: OpContext) -> None:
    g, dtype = ctx.g, ctx.dtype
    work = dtype if dtype in _RANGE else dtypes.float32 if dtype in dtypes.FLOATS else dtypes.int64
    bounds = [g.to_scalar(ctx.input(slot, dtype=work)) for slot in ("Start", "End", "Step")]
    ctx.output(g.op("Range", *bounds), have=work)
