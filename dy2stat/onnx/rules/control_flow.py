"""``cond`` becomes ``If`` and ``while`` becomes ``Loop``; ``print`` is left out (ONNX
has no output but the model's) and ``py_layer`` passes its forward's values on.

A branch or loop body is an ONNX sub-graph that reads the values around it by
name, as the sub-block reads its parents' variables. Loop-carried values are
declared by rank only: a dim may change from one iteration to the next.
"""

from __future__ import annotations

from dy2stat.onnx.graph import Graph, value_info
from dy2stat.onnx.lowering import OpContext, Scope, Unsupported, rule
from dy2stat.runtime import dtypes


def _any_dims(var) -> list:
    return [-1] * len(var.shape)


def _predicate(ctx: OpContext, graph: Graph, block_idx: int, name: str, scope: Scope) -> str:
    """A 0-D bool value of the predicate ``name`` (of one element) of a sub-block."""
    var = ctx.sub_block(block_idx).var(name)
    value = graph.cast(scope[name], var.dtype, dtypes.bool_)
    return value if tuple(var.shape) == () else graph.to_scalar(value)


def _yield(ctx: OpContext, graph: Graph, block_idx: int, names, scope: Scope) -> None:
    """The sub-graph's outputs: the values ``names`` in the sub-block, as the op's Out
    (each an own value of the sub-graph, of the dtype the op declares)."""
    block = ctx.sub_block(block_idx)
    for i, name in enumerate(names):
        out = ctx.out_meta("Out", i)
        value = graph.cast(scope[name], block.var(name).dtype, out.dtype)
        graph.outputs.append(value_info(graph.op("Identity", value), out.dtype,
                                        _any_dims(out)))


@rule("cond")
def _cond(ctx: OpContext) -> None:
    g, a = ctx.g, ctx.attrs
    branches = []
    for block_key, outs_key, name in (("true_block", "true_outs", "then"),
                                      ("false_block", "false_outs", "else")):
        branch, scope = g.subgraph(f"{g.label}_{name}"), ctx.scope.child()
        ctx.lower_block(a[block_key], branch, scope)
        _yield(ctx, branch, a[block_key], a[outs_key], scope)
        branches.append(branch)
    count = len(ctx.op.outputs.get("Out", []))
    if not count:  # nothing to compute (only prints)
        return
    pred = ctx.input("Cond", dtype=dtypes.bool_)
    if tuple(ctx.meta("Cond").shape) != ():
        pred = g.to_scalar(pred)
    results = g.op("If", pred, outputs=count, then_branch=branches[0], else_branch=branches[1])
    for i, value in enumerate([results] if count == 1 else results):
        ctx.output(value, "Out", i)


@rule("while")
def _while(ctx: OpContext) -> None:
    """Loop(cond = the test on the initial values): the body runs the loop's body block,
    then the test again on the new values."""
    g, a = ctx.g, ctx.attrs
    if ctx.op.outputs.get("Carries"):
        raise Unsupported("the loop saves its iterations for a gradient (a training "
                          "program); export the inference program")
    carried = [ctx.out_meta("Out", i) for i in range(len(ctx.op.outputs["Out"]))]
    if not carried:  # nothing comes out of it (a loop that only prints)
        return
    initial = [ctx.input("X", i, dtype=var.dtype) for i, var in enumerate(carried)]

    def test(graph: Graph, values) -> str:
        scope = ctx.scope.child()
        for arg, value in zip(a["cond_args"], values):
            scope.bind(arg, value)
        ctx.lower_block(a["cond_block"], graph, scope)
        return _predicate(ctx, graph, a["cond_block"], a["cond_out"], scope)

    first = test(g, initial)
    body = g.subgraph(f"{g.label}_body")
    step, again = g.model.fresh("iteration"), g.model.fresh("condition")
    body.inputs = [value_info(step, dtypes.int64, []), value_info(again, dtypes.bool_, [])]
    scope = ctx.scope.child()
    for arg, var in zip(a["body_args"], carried):
        name = g.model.fresh(arg)
        body.inputs.append(value_info(name, var.dtype, _any_dims(var)))
        scope.bind(arg, name)
    ctx.lower_block(a["body_block"], body, scope)
    block = ctx.sub_block(a["body_block"])
    new = [body.cast(scope[n], block.var(n).dtype, var.dtype)
           for n, var in zip(a["body_outs"], carried)]
    body.outputs = [value_info(body.op("Identity", test(body, new)), dtypes.bool_, [])]
    body.outputs += [value_info(body.op("Identity", v), var.dtype, _any_dims(var))
                     for v, var in zip(new, carried)]
    results = g.op("Loop", None, first, *initial, outputs=len(carried), body=body)
    for i, value in enumerate([results] if len(carried) == 1 else results):
        ctx.output(value, "Out", i)


@rule("print")
def _print(ctx: OpContext) -> None:
    """Left out: an ONNX model has no output but its results."""


@rule("py_layer")
def _py_layer(ctx: OpContext) -> None:
    """The forward's results (Y), computed by the ops before it, passed on."""
    for i in range(ctx.count("Y")):
        ctx.output(ctx.g.op("Identity", ctx.input("Y", i)), "Out", i)
