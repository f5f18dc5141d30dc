"""Fused ops, made by plan passes from ops of a program: ``fused_elementwise`` and the
convolution that shares its columns with its filter gradient.

``fused_elementwise``: a chain of elementwise ops run as one kernel.

Made by the fusion pass (``runtime.passes.fusion``). Inputs ``X`` (the
chain's outside values), output ``Out``; attrs ``expr``, the chain as JSON
data (see ``kernels.fusion``: steps ``[op, refs, attrs, dtype]``), and
``dtype``, the result's dtype.

Inference replays the registry's inference of every step, so a malformed or
inconsistent expr (unknown op, bad ref, a dtype that disagrees with the
step's op) fails ``verify`` and loading, naming the step. The result's shape
is the broadcast of the inputs' shapes.

The gradient rule re-emits the steps through the emitter (recomputing the
intermediates the steps' own rules read) and applies each step's gradient
rule in reverse, so a fused program can still be differentiated. The pass is
meant to run after backward has been appended, as a deployment and executor
optimization; the rule keeps backward correct when it runs before.

``conv2d_keeping_columns`` (X, Filter -> Out, Columns) is ``conv2d`` that also
gives the im2col columns it multiplied, and ``conv2d_grad_filter_from_columns``
(Columns, DOut, Filter -> Out) is ``conv2d_grad_filter`` of the same input
computed from them (``runtime.passes.share_conv_columns`` makes the pair, in a
training program that has both): the same products, one copy of the columns
fewer. They have no gradient rule (the pass runs after backward is built).
"""

from __future__ import annotations

from dy2stat.kernels import conv as conv_kernels
from dy2stat.kernels import fusion
from dy2stat.runtime import dtypes
from dy2stat.runtime.ops import conv  # noqa: F401  (declares conv2d, read below)
from dy2stat.runtime.registry import (
    CHECKED_BY_INFER,
    DTYPE,
    InputDtypeError,
    Meta,
    defop,
    get_op,
)

FUSED = "fused_elementwise"


def _kernel(xp, xs, expr=(), dtype="float32"):
    return fusion.run(xp, expr, xs)


def _parse(expr) -> fusion.Expr:
    try:
        return fusion.parse(expr)
    except ValueError as exc:
        raise ValueError(f"{FUSED}: {exc}") from None


def _infer(xs, expr=(), dtype="float32"):
    e = _parse(expr)
    if e.arity != len(xs):
        raise ValueError(f"{FUSED}: the expr reads {e.arity} inputs, the op has {len(xs)}")
    metas = list(xs)
    for k, step in enumerate(e.steps):
        where = f"{FUSED}, step {k} ({step.op})"
        if step.op == "full":
            metas.append(Meta((), step.dtype))
            continue
        opdef = get_op(step.op)
        args = [metas[a] for a in step.args]
        try:
            meta = opdef.infer(*args, **opdef.full_attrs(step.attrs))
        except (TypeError, ValueError) as exc:
            # (a step's slot is none of this op's: the error names the step instead)
            kind = TypeError if isinstance(exc, InputDtypeError) else type(exc)
            raise kind(f"{where}: {exc}") from None
        if meta.dtype != step.dtype:
            raise TypeError(f"{where}: computes {meta.dtype}, the expr says {step.dtype}")
        metas.append(meta)
    out = metas[-1]
    if out.dtype != dtypes.as_dtype(dtype, where=FUSED):
        raise TypeError(f"{FUSED}: the expr computes {out.dtype}, the dtype attr says {dtype}")
    return Meta(tuple(out.shape), out.dtype)


def _grad(e, ins, outs, douts, attrs, need):
    """Replay the steps through the emitter, then run their rules in reverse."""
    if not need[0]:
        return [None]
    steps = _parse(attrs["expr"]).steps
    xs = list(ins[0])
    n = len(xs)
    values = list(xs)
    # Which values a gradient can flow to: float inputs, and float steps of them.
    diff = [dtypes.is_float(x.dtype) for x in xs]
    for k, step in enumerate(steps):
        args = [values[a] for a in step.args]
        if k == len(steps) - 1:
            values.append(outs[0])  # the op's own output: no need to recompute it
        elif step.op == "full":
            values.append(e("full", shape=[], value=float(step.attrs.get("value", 0.0)),
                            dtype=step.dtype.name))
        else:
            values.append(e(step.op, *args, **step.attrs))
        diff.append(dtypes.is_float(step.dtype) and get_op(step.op).grad is not None
                    and any(diff[a] for a in step.args))
    grads = {n + len(steps) - 1: douts[0]}
    for k in range(len(steps) - 1, -1, -1):
        step, slot = steps[k], n + k
        g = grads.pop(slot, None)
        if g is None or not diff[slot]:
            continue
        opdef = get_op(step.op)
        need_k = [diff[a] and s.name not in opdef.no_grad for s, a in zip(opdef.inputs, step.args)]
        args = [values[a] for a in step.args]
        results = opdef.grad(e, args, [values[slot]], [g], opdef.full_attrs(step.attrs), need_k)
        for a, ga, wanted in zip(step.args, results, need_k):
            if wanted and ga is not None:
                grads[a] = ga if a not in grads else e("add", grads[a], ga)
    return [[grads.get(i) for i in range(n)]]


defop(
    FUSED,
    inputs=("X*",),
    attrs={"expr": [], "dtype": "float32"},
    attr_types={"expr": CHECKED_BY_INFER, "dtype": DTYPE},
    kernel=_kernel,
    infer=_infer,
    eager_infer=True,  # each step's dtypes are checked as its own op checks them
    grad=_grad,
    elementwise=True,
    doc="A chain of elementwise ops (attr expr) computed in one kernel (see kernels.fusion).",
)


# ------------------------------------------- convolution sharing its columns

_CONV = get_op("conv2d")


def _keeping_columns_infer(x, w, **attrs):
    out = _CONV.infer(x, w, **attrs)
    columns = conv_kernels.conv2d_columns_shape(tuple(x.shape), tuple(w.shape), **attrs)
    return out, Meta(columns, out.dtype)


def _from_columns_infer(columns, dy, w_ref, **attrs):
    if len(dy.shape) != 4:
        raise ValueError("conv2d_grad_filter_from_columns: the output gradient must be 4-D, "
                         f"got shape {list(dy.shape)}")
    if len(columns.shape) != 3:
        raise ValueError("conv2d_grad_filter_from_columns: Columns must be the 3-D columns "
                         f"of conv2d_keeping_columns, got shape {list(columns.shape)}")
    return Meta(w_ref.shape, dtypes.promote(columns.dtype, dy.dtype))


defop(
    "conv2d_keeping_columns",
    inputs=("X", "Filter"),
    outputs=("Out", "Columns"),
    attrs=_CONV.attrs,
    attr_types=_CONV.attr_types,
    kernel=conv_kernels.conv2d_keeping_columns,
    infer=_keeping_columns_infer,
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="conv2d, and the im2col columns it multiplied (for the filter gradient).",
)
defop(
    "conv2d_grad_filter_from_columns",
    inputs=("Columns", "DOut", "Filter"),
    attrs=_CONV.attrs,
    attr_types=_CONV.attr_types,
    kernel=conv_kernels.conv2d_grad_filter_from_columns,
    infer=_from_columns_infer,
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="conv2d_grad_filter from the columns conv2d_keeping_columns gave for its input.",
)
