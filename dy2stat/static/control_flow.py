"""``cond`` and ``while_loop``: Python control flow for eager values, ops for static ones."""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ir import Block, Operator
from dy2stat.runtime.registry import get_op
from dy2stat.static import framework, nest
from dy2stat.static.builder import capture, computes_no_gradient, recording, static_apply
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

_SCALARS = (int, float, bool)


def cond(pred, true_fn=None, false_fn=None, name=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``; a ``cond`` op when ``pred`` is static."""
    if not isinstance(pred, Variable):
        if pred:
            return true_fn() if true_fn is not None else None
        return false_fn() if false_fn is not None else None
    _check_predicate(pred, "cond")
    parent = framework.current_block()
    program = parent.program
    branches = []
    for fn in (true_fn, false_fn):
        block = program.create_block(parent.idx)
        with framework.block_guard(block):
            result = fn() if fn is not None else None
            branches.append((block, result, _as_variables(block, nest.flatten(result), "cond")))
    (true_block, true_result, true_flat), (false_block, false_result, false_flat) = branches
    if not nest.same_structure(true_result, false_result):
        raise ValueError(
            f"cond: true_fn returns {nest.describe(true_result)} but false_fn returns "
            f"{nest.describe(false_result)}; both branches must return the same structure"
        )
    outs = []
    where = _leaf_names("output", true_result)
    for i, (t, f) in enumerate(zip(true_flat, false_flat)):
        if t is None or f is None:
            if t is not f:
                raise ValueError(f"cond: {where[i]} is None in one branch only")
            continue
        td, fd = t.desc, f.desc
        if td.dtype != fd.dtype:
            raise TypeError(
                f"cond: {where[i]} is {td.dtype} in true_fn but {fd.dtype} in false_fn"
            )
        if len(td.shape) != len(fd.shape):
            raise ValueError(
                f"cond: {where[i]} has shape {shapes.fmt(td.shape)} in true_fn but "
                f"{shapes.fmt(fd.shape)} in false_fn (different ranks)"
            )
        outs.append((i, t, f, shapes.join(td.shape, fd.shape)))
    true_outs = [t.name for _, t, _, _ in outs]
    false_outs = [f.name for _, _, f, _ in outs]
    captured = _free_names(true_block, true_outs) | _free_names(false_block, false_outs)
    # An output is stop_gradient when both branches computed it without gradients.
    out_vars = [parent.create_var(shape, t.desc.dtype, name=program.unique_name("cond"),
                                  stop_gradient=computes_no_gradient(t.desc)
                                  and computes_no_gradient(f.desc))
                for _, t, f, shape in outs]
    parent.append_op(framework.scoped(Operator(
        "cond",
        {"Cond": [pred.name], "Input": sorted(captured)},
        {"Out": [v.name for v in out_vars]},
        {"true_block": true_block.idx, "false_block": false_block.idx,
         "true_outs": true_outs, "false_outs": false_outs},
    )))
    results = [None] * len(true_flat)
    for (i, *_), var in zip(outs, out_vars):
        results[i] = Variable(parent, var.name)
    return nest.pack_as(true_result, results)


def while_loop(cond, body, loop_vars, name=None):
    """``while cond(*vars): vars = body(*vars)``; a ``while`` op when the loop is static."""
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError("while_loop: loop_vars must be a list or tuple")
    if not any(isinstance(v, Variable) for v in nest.flatten(loop_vars)):
        pred = cond(*loop_vars)
        if not isinstance(pred, Variable):
            while pred:
                loop_vars = _as_list(body(*loop_vars), loop_vars)
                pred = cond(*loop_vars)
            return loop_vars
    parent = framework.current_block()
    program = parent.program
    initial = _as_variables(parent, nest.flatten(loop_vars), "while_loop")
    arg_shapes = [v.desc.shape for v in initial]
    cond_block, body_block = program.create_block(parent.idx), program.create_block(parent.idx)
    for _ in range(2):  # a second trace when a carried shape turned out to vary
        pred, body_flat, cond_args, body_args = _trace_loop(
            cond, body, loop_vars, initial, arg_shapes, cond_block, body_block)
        joined = []
        where = _leaf_names("loop variable", list(loop_vars))
        for i, (v, out) in enumerate(zip(initial, body_flat)):
            if out.desc.dtype != v.desc.dtype:
                raise TypeError(
                    f"while_loop: {where[i]} changes dtype from {v.desc.dtype} to "
                    f"{out.desc.dtype} in the body"
                )
            if len(out.desc.shape) != len(v.desc.shape):
                raise ValueError(
                    f"while_loop: {where[i]} changes rank from "
                    f"{shapes.fmt(v.desc.shape)} to {shapes.fmt(out.desc.shape)} in the body"
                )
            joined.append(shapes.join(arg_shapes[i], out.desc.shape))
        if joined == [tuple(s) for s in arg_shapes]:
            break
        arg_shapes = joined
    body_outs = [v.name for v in body_flat]
    captured = (_free_names(cond_block, [pred.name]) | _free_names(body_block, body_outs))
    # An output is stop_gradient when the body computes it without gradients and so was
    # its initial value (or the loop is inside no_grad).
    out_vars = [parent.create_var(shape, v.desc.dtype, name=program.unique_name("while"),
                                  stop_gradient=computes_no_gradient(out.desc) and (
                                      computes_no_gradient(v.desc) or not recording.grad))
                for v, out, shape in zip(initial, body_flat, arg_shapes)]
    parent.append_op(framework.scoped(Operator(
        "while",
        {"X": [v.name for v in initial], "Input": sorted(captured)},
        {"Out": [v.name for v in out_vars], "Carries": []},
        {"cond_block": cond_block.idx, "body_block": body_block.idx,
         "cond_args": cond_args, "cond_out": pred.name,
         "body_args": body_args, "body_outs": body_outs},
    )))
    return nest.pack_as(list(loop_vars), [Variable(parent, v.name) for v in out_vars])


def _trace_loop(cond, body, loop_vars, initial, arg_shapes, cond_block, body_block):
    for block in (cond_block, body_block):
        block.ops.clear()
        block.vars.clear()
    cond_args = _declare_args(cond_block, initial, arg_shapes)
    cond_arg_names = [v.name for v in cond_args]
    with framework.block_guard(cond_block):
        pred = cond(*nest.pack_as(list(loop_vars), cond_args))
        if not isinstance(pred, Variable):
            pred = static_apply(get_op("full"), [], {"shape": [], "value": float(bool(pred)),
                                                     "dtype": "bool"})
    _check_predicate(pred, "while_loop")
    body_args = _declare_args(body_block, initial, arg_shapes)
    # Names now: the body may rebind its argument Variables (``x[i] = v``).
    body_arg_names = [v.name for v in body_args]
    with framework.block_guard(body_block):
        result = _as_list(body(*nest.pack_as(list(loop_vars), body_args)), loop_vars)
        flat = nest.flatten(result)
        if len(flat) != len(initial):
            raise ValueError(
                f"while_loop: body returns {len(flat)} values but there are "
                f"{len(initial)} loop variables"
            )
        body_flat = _as_variables(body_block, flat, "while_loop")
    return pred, body_flat, cond_arg_names, body_arg_names


def _leaf_names(what: str, structure) -> list[str]:
    """``output 0``, ``output 1 ([1]['a'])``, ...: one name per flattened leaf."""
    return [f"{what} {i}" + (f" ({p})" if p not in ("", f"[{i}]") else "")
            for i, p in enumerate(nest.paths(structure))]


def _declare_args(block: Block, initial, arg_shapes) -> list:
    args = []
    for v, shape in zip(initial, arg_shapes):
        var = block.create_var(shape, v.desc.dtype, name=block.program.unique_name("loop_var"))
        args.append(Variable(block, var.name))
    return args


def _as_list(result, loop_vars):
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]


def _as_variables(block: Block, leaves, where):
    """Leaves as Variables of a static program (scalars become constants)."""
    out = []
    with framework.block_guard(block):
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Variable):
                out.append(leaf.read())  # what a branch yields or a loop carries is read
            elif leaf is None:
                out.append(leaf)
            elif isinstance(leaf, Tensor):
                out.append(Variable(block.program.global_block(), capture(leaf).name))
            elif type(leaf) in _SCALARS:
                dtype = dtypes.scalar_dtype(leaf)
                out.append(static_apply(get_op("full"), [], {
                    "shape": [], "value": float(leaf), "dtype": str(dtype)}))
            else:
                raise TypeError(
                    f"{where}: value {i} is {nest.describe(leaf)}, which a static program "
                    "cannot hold (use tensors, numbers, or lists/tuples/dicts of them)"
                )
    return out


def _check_predicate(pred, where):
    desc = pred.desc
    if desc.dtype != dtypes.bool_:
        raise TypeError(f"{where}: the predicate must be a bool tensor, got {desc.dtype}")
    if shapes.numel(desc.shape) not in (1, -1):
        raise ValueError(
            f"{where}: the predicate must hold one element, got shape {shapes.fmt(desc.shape)}"
        )


def _free_names(block: Block, yielded) -> set:
    """Names a block (with its sub-blocks) reads or yields but does not define."""
    program = block.program
    defined = set(block.vars)
    read = set(yielded)
    for op in block.ops:
        read.update(op.input_names())
        for idx in op.sub_blocks():
            read |= _free_names(program.blocks[idx], [])
    return read - defined
