"""Pool before ReLU: ``max_pool2d(relu(x))`` becomes ``relu(max_pool2d(x))``.

The two are equal (ReLU is monotonic, so it commutes with a max), and so are
their gradients: a window's gradient goes to its first maximum either way,
and where that maximum is not positive the ReLU gradient is zero in both. The
ReLU, and later its gradient, then run on the pooled map, which is several
times smaller (4x for 2x2 windows). A training program should be rewritten
before its backward is built, so that the gradient follows.

``pool_before_relu(program, keep=())`` returns a new program. A ``relu`` is
moved only when the ``max_pool2d`` in the same block is the one op of the
program that reads its output, and that output is not in ``keep``, not
persistable or data and not named by a control-flow op.

``pool_before_relu_in_place(program)`` rewrites block 0 of a program still being
built (a traced training step, before its backward is appended): ops appended
later may still read a moved ReLU's output, so its op stays, and dead-code
elimination drops it from the plan when nothing reads it.
"""

from __future__ import annotations

from collections import Counter

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.prune import copy_for_pass

__all__ = ["pool_before_relu", "pool_before_relu_in_place"]


def pool_before_relu(program: Program, keep=()) -> Program:
    """``program`` with each movable ReLU after the max pooling it feeds."""
    result, keep = copy_for_pass(program, keep, "pool_before_relu")
    ops = list(result.all_ops())
    readers = Counter(n for op in ops for n in op.input_names())
    named = set().union(*(attr_names(op) for op in ops))
    for block in result.blocks:
        _rewrite_block(result, block, lambda n: readers[n] == 1 and n not in keep
                       and n not in named)
    result.bump()
    return result


def pool_before_relu_in_place(program: Program) -> None:
    """Move block 0's movable ReLUs after their pooling, keeping their ops (see above)."""
    ops = list(program.all_ops())
    readers = Counter(n for op in ops for n in op.input_names())
    named = set().union(*(attr_names(op) for op in ops))
    _rewrite_block(program, program.global_block(),
                   lambda n: readers[n] == 1 and n not in named, keep_relu=True)
    program.bump()


def _rewrite_block(program: Program, block: Block, movable, keep_relu=False) -> None:
    relus = {op.outputs["Out"][0]: op for op in block.ops
             if op.type == "relu" and _plain(block, op.outputs["Out"][0]) and
             movable(op.outputs["Out"][0])}
    ops, moved = [], set()
    for op in block.ops:
        relu = relus.get(op.inputs["X"][0]) if op.type == "max_pool2d" else None
        if relu is None:
            ops.append(op)
            continue
        (activated,), (pooled,) = relu.outputs["Out"], op.outputs["Out"]
        out = block.vars[pooled]
        pre = block.create_var(out.shape, out.dtype, name=program.unique_name(f"{pooled}.pre"),
                               stop_gradient=out.stop_gradient)
        if not keep_relu:
            del block.vars[activated]
            moved.add(id(relu))
        ops.append(Operator("max_pool2d", {"X": list(relu.inputs["X"])}, {"Out": [pre.name]},
                            dict(op.attrs), origin=op.origin, scope=op.scope))
        ops.append(Operator("relu", {"X": [pre.name]}, {"Out": [pooled]}, {},
                            origin=relu.origin, scope=relu.scope))
    block.ops = [op for op in ops if id(op) not in moved]


def _plain(block: Block, name: str) -> bool:
    var = block.vars.get(name)
    return var is not None and not var.persistable and not var.is_data
