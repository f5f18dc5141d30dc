"""Forwarding copies: ``t = f(...); o = assign(t)`` becomes ``o = f(...)``.

A gradient gets its ``@GRAD`` name through an ``assign``, and a traced training step
writes each parameter and accumulator through one (``set_value`` of the update's
result): every such copy duplicates an array that nothing else reads. When ``t`` is
read by that ``assign`` alone (in every block), is defined once, is not kept,
persistable or data, nor named by a control-flow op, has ``o``'s shape and dtype, and
no op between the two reads or writes ``o``, the op that computes ``t`` writes ``o``
itself and the copy goes (``f`` reads its inputs before its result is stored, so it
may read ``o`` too: an update reading the accumulator it replaces). The values are
the same bits.

``forward_assigns(program, keep=())`` returns a new program.
"""

from __future__ import annotations

from collections import Counter

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.prune import copy_for_pass

__all__ = ["forward_assigns"]

_CONTROL_FLOW = frozenset({"cond", "while", "while_grad"})


def forward_assigns(program: Program, keep=()) -> Program:
    """``program`` with each forwardable ``assign`` folded into its producer."""
    result, keep = copy_for_pass(program, keep, "forward_assigns")
    ops = list(result.all_ops())
    readers = Counter(n for op in ops for n in op.input_names())
    writers = Counter(n for op in ops for n in op.output_names())
    named = set().union(*(attr_names(op) for op in ops))

    def movable(block: Block, name: str) -> bool:
        var = block.vars.get(name)
        return (var is not None and not var.persistable and not var.is_data
                and readers[name] == 1 and writers[name] == 1 and name not in keep
                and name not in named)

    for block in result.blocks:
        _forward_block(result, block, movable)
    result.bump()
    return result


def _forward_block(program: Program, block: Block, movable) -> None:
    producer: dict[str, int] = {}  # name -> index of the op of this block that wrote it
    removed = set()
    for i, op in enumerate(block.ops):
        if op.type == "assign":
            (source,), (target,) = op.inputs["X"], op.outputs["Out"]
            j = producer.get(source)
            if j is not None and movable(block, source) and _fits(block, source, target) \
                    and not any(_touches(program, block.ops[k], target)
                                for k in range(j + 1, i)):
                maker = block.ops[j]
                for slot, names in maker.outputs.items():
                    maker.outputs[slot] = [target if n == source else n for n in names]
                del block.vars[source]
                removed.add(i)
                producer[target] = j
                continue
        if op.type not in _CONTROL_FLOW:
            for name in op.output_names():
                producer[name] = i
        else:
            for name in op.output_names():
                producer.pop(name, None)
    block.ops = [op for i, op in enumerate(block.ops) if i not in removed]


def _fits(block: Block, source: str, target: str) -> bool:
    a, b = block.find_var(source), block.find_var(target)
    return a is not None and b is not None and a.dtype == b.dtype and \
        tuple(a.shape) == tuple(b.shape)


def _touches(program: Program, op: Operator, name: str) -> bool:
    """Whether ``op`` (its sub-blocks included) reads or writes ``name``."""
    if name in op.input_names() or name in op.output_names():
        return True
    return any(_touches(program, inner, name) for idx in op.sub_blocks()
               for inner in program.blocks[idx].ops)
