"""Elementwise ops: arithmetic, comparisons, logic, unary math, casts, and the fused
chains the fusion pass makes of them.

Operands are cast to the dtype the op computes in (the promoted dtype the program
declares), as the kernels' NumPy promotion does. Integer division and remainder
follow NumPy (floor, and the divisor's sign), not C.
"""

from __future__ import annotations

import numpy as np

from dy2stat.kernels.fusion_expr import parse as parse_expr
from dy2stat.onnx.lowering import Lowering, OpContext, Unsupported, rule
from dy2stat.runtime import dtypes
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.registry import Meta, get_op

# Small ints compute in int32 (ONNX Runtime has no int8/int16/uint8 arithmetic), then
# are cast back: the same wrap-around as NumPy's.
_WIDER = {dtypes.int8: dtypes.int32, dtypes.int16: dtypes.int32, dtypes.uint8: dtypes.int32}

_ARITHMETIC = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div",
               "pow": "Pow", "maximum": "Max", "minimum": "Min"}


@rule(*_ARITHMETIC)
def _arithmetic(ctx: OpContext) -> None:
    dtype = ctx.dtype
    if dtype == dtypes.bool_:  # multiply of bools is their logical and
        ctx.output(ctx.g.op("And", ctx.input("X", dtype=dtype), ctx.input("Y", dtype=dtype)))
        return
    work = _WIDER.get(dtype, dtype)
    x, y = ctx.input("X", dtype=work), ctx.input("Y", dtype=work)
    ctx.output(ctx.g.op(_ARITHMETIC[ctx.type], x, y), have=work)


@rule("floor_divide")
def _floor_divide(ctx: OpContext) -> None:
    g, dtype = ctx.g, ctx.dtype
    work = _WIDER.get(dtype, dtype)
    x, y = ctx.input("X", dtype=work), ctx.input("Y", dtype=work)
    if dtype in dtypes.INTS:  # exact: (x - x mod y) / y, with mod of the divisor's sign
        y, by_zero = _nonzero_divisor(g, y, work)
        out = g.op("Div", g.op("Sub", x, g.op("Mod", x, y)), y)
        out = g.op("Where", by_zero, g.scalar(0, work), out)
    else:
        out = _float_floor_divide(g, x, y, work)
    ctx.output(out, have=work)


def _nonzero_divisor(g, y, dtype):
    """``(y with 1 for 0, where y is 0)``: an integer divided by 0 is 0 in NumPy (with a
    warning), where ONNX Runtime stops the run."""
    by_zero = g.op("Equal", y, g.scalar(0, dtype))
    return g.op("Where", by_zero, g.scalar(1, dtype), y), by_zero


def _float_floor_divide(g, x, y, dtype):
    """NumPy's float floor division (npy_divmod): from fmod, so that 1 // 0.1 == 9."""
    mod = g.op("Mod", x, y, fmod=1)
    div = g.op("Div", g.op("Sub", x, mod), y)
    zero = g.scalar(0, dtype)
    adjust = g.op("And", g.op("Not", g.op("Equal", mod, zero)),
                  g.op("Xor", g.op("Less", y, zero), g.op("Less", mod, zero)))
    div = g.op("Sub", div, g.cast_to(adjust, dtype))
    floor = g.op("Floor", div)
    up = g.op("Greater", g.op("Sub", div, floor), g.scalar(0.5, dtype))
    floor = g.op("Add", floor, g.cast_to(up, dtype))
    return g.op("Where", g.op("Equal", y, zero), g.op("Div", x, y), floor)


@rule("remainder")
def _remainder(ctx: OpContext) -> None:
    g, dtype = ctx.g, ctx.dtype
    work = _WIDER.get(dtype, dtype)
    x, y = ctx.input("X", dtype=work), ctx.input("Y", dtype=work)
    if dtype in dtypes.INTS:
        y, by_zero = _nonzero_divisor(g, y, work)
        ctx.output(g.op("Where", by_zero, g.scalar(0, work), g.op("Mod", x, y)), have=work)
        return
    # NumPy: fmod, moved into the divisor's sign
    mod = g.op("Mod", x, y, fmod=1)
    zero = g.scalar(0, work)
    move = g.op("And", g.op("Not", g.op("Equal", mod, zero)),
                g.op("Xor", g.op("Less", y, zero), g.op("Less", mod, zero)))
    ctx.output(g.op("Where", move, g.op("Add", mod, y), mod), have=work)


_COMPARE = {"equal": "Equal", "not_equal": "Equal", "less_than": "Less",
            "less_equal": "LessOrEqual", "greater_than": "Greater",
            "greater_equal": "GreaterOrEqual"}


@rule(*_COMPARE)
def _compare(ctx: OpContext) -> None:
    common = dtypes.promote(ctx.meta("X").dtype, ctx.meta("Y").dtype)
    if common == dtypes.bool_ and ctx.type not in ("equal", "not_equal"):
        common = dtypes.int32  # ordering bools: False < True
    out = ctx.g.op(_COMPARE[ctx.type], ctx.input("X", dtype=common),
                   ctx.input("Y", dtype=common))
    ctx.output(ctx.g.op("Not", out) if ctx.type == "not_equal" else out)


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@rule(*_LOGICAL)
def _logical(ctx: OpContext) -> None:  # numbers count as their truth (non-zero)
    ctx.output(ctx.g.op(_LOGICAL[ctx.type], ctx.input("X", dtype=dtypes.bool_),
                        ctx.input("Y", dtype=dtypes.bool_)))


@rule("logical_not")
def _logical_not(ctx: OpContext) -> None:
    ctx.output(ctx.g.op("Not", ctx.input(dtype=dtypes.bool_)))


_BITWISE = {"bitwise_and": ("BitwiseAnd", "And"), "bitwise_or": ("BitwiseOr", "Or"),
            "bitwise_xor": ("BitwiseXor", "Xor"), "bitwise_not": ("BitwiseNot", "Not")}


@rule(*_BITWISE)
def _bitwise(ctx: OpContext) -> None:
    on_ints, on_bools = _BITWISE[ctx.type]
    dtype = ctx.dtype
    args = [ctx.input(slot, dtype=dtype) for slot in ("X", "Y") if ctx.has(slot)]
    if dtype == dtypes.bool_:
        ctx.output(ctx.g.op(on_bools, *args))
        return
    if ctx.g.opset < 18:
        raise Unsupported(f"bitwise ops on integers need opset_version 18 or newer "
                          f"(exporting with {ctx.g.opset})")
    ctx.output(ctx.g.op(on_ints, *args))


_UNARY = {"exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh", "sigmoid": "Sigmoid",
          "sin": "Sin", "cos": "Cos", "floor": "Floor", "ceil": "Ceil", "round": "Round",
          "neg": "Neg", "abs": "Abs", "sign": "Sign", "relu": "Relu"}


@rule(*_UNARY)
def _unary(ctx: OpContext) -> None:
    work = _WIDER.get(ctx.dtype, ctx.dtype)
    ctx.output(ctx.g.op(_UNARY[ctx.type], ctx.input(dtype=work)), have=work)


@rule("rsqrt")
def _rsqrt(ctx: OpContext) -> None:
    ctx.output(ctx.g.op("Reciprocal", ctx.g.op("Sqrt", ctx.input())))


@rule("isnan", "isinf", "isfinite")
def _float_test(ctx: OpContext) -> None:
    g, x = ctx.g, ctx.input()
    if ctx.meta().dtype not in dtypes.FLOATS:  # integers are never nan or inf
        ctx.output(g.fill(g.shape(x), ctx.type == "isfinite", dtypes.bool_))
        return
    dtype = ctx.meta().dtype
    if ctx.type == "isnan":
        ctx.output(g.op("IsNaN", x))
    elif ctx.type == "isinf":
        ctx.output(g.is_inf(x, dtype))
    else:
        ctx.output(g.op("Not", g.op("Or", g.op("IsNaN", x), g.is_inf(x, dtype))))


@rule("scale")
def _scale(ctx: OpContext) -> None:
    """scale * x + bias, the numbers converted to x's dtype first (as the kernel does)."""
    g, dtype = ctx.g, ctx.dtype
    work = _WIDER.get(dtype, dtype)
    x = ctx.input(dtype=work)
    out = g.op("Mul", x, g.const(np.asarray(dtype.type(ctx.attrs["scale"])).astype(work)))
    if ctx.attrs["bias"]:
        out = g.op("Add", out, g.const(np.asarray(dtype.type(ctx.attrs["bias"])).astype(work)))
    ctx.output(out, have=work)


@rule("clip")
def _clip(ctx: OpContext) -> None:
    g, dtype = ctx.g, ctx.dtype
    work = _WIDER.get(dtype, dtype)

    def bound(value):
        if value is None or (dtype not in dtypes.FLOATS and not np.isfinite(value)):
            return None
        return g.const(np.asarray(dtype.type(value)).astype(work))

    out = g.op("Clip", ctx.input(dtype=work), bound(ctx.attrs["min"]), bound(ctx.attrs["max"]))
    ctx.output(out, have=work)


@rule("cast")
def _cast(ctx: OpContext) -> None:
    ctx.output(ctx.input(dtype=ctx.dtype))


@rule("where")
def _where(ctx: OpContext) -> None:
    dtype = ctx.dtype
    ctx.output(ctx.g.where(ctx.input("Cond", dtype=dtypes.bool_), ctx.input("X", dtype=dtype),
                           ctx.input("Y", dtype=dtype), dtype))


@rule("masked_fill")
def _masked_fill(ctx: OpContext) -> None:
    dtype = ctx.dtype
    ctx.output(ctx.g.where(ctx.input("Mask"), ctx.input("Value", dtype=dtype),
                           ctx.input("X", dtype=dtype), dtype))


@rule("add_n")
def _add_n(ctx: OpContext) -> None:
    dtype = ctx.dtype
    work = _WIDER.get(dtype, dtype)
    values = ctx.inputs("Xs", dtype=work)
    total = values[0]
    for value in values[1:]:  # in order, as the kernel adds
        total = ctx.g.op("Add", total, value)
    ctx.output(ctx.g.op("Identity", total) if len(values) == 1 else total, have=work)


@rule("fused_elementwise")
def _fused(ctx: OpContext) -> None:
    """The chain the fusion pass made, lowered step by step with the steps' own rules."""
    expr = parse_expr(ctx.attrs["expr"])
    program = Program()
    block = program.global_block()
    scope = ctx.scope.child()
    names, label = [], ctx.g.label
    for i, meta in enumerate(ctx.metas("X")):
        names.append(block.create_var(meta.shape, meta.dtype, name=f"{label}.x{i}").name)
        scope.bind(names[-1], ctx.input("X", i))
    for k, step in enumerate(expr.steps):
        name = f"{label}.t{k}"
        if step.op == "full":
            op = Operator("full", {}, {"Out": [name]},
                          {"shape": [], "value": float(step.attrs.get("value", 0.0)),
                           "dtype": step.dtype.name})
            shape = ()
        else:
            opdef = get_op(step.op)
            args = [block.var(names[a]) for a in step.args]
            attrs = opdef.full_attrs(step.attrs)
            meta: Meta = opdef.infer(*[Meta(v.shape, v.dtype) for v in args], **attrs)
            shape = meta.shape
            op = Operator(step.op, {s.name: [v.name] for s, v in zip(opdef.inputs, args)},
                          {opdef.outputs[0].name: [name]}, attrs)
        op.origin = ctx.op.origin
        names.append(block.create_var(shape, step.dtype, name=name).name)
        block.append_op(op)
    Lowering(program, set(names)).block(ctx.g, 0, scope)
    ctx.output(scope[names[-1]])
