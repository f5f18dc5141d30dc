"""Loop-invariant code motion: what a ``while`` computes the same in every
iteration is computed once, before the loop.

``hoist_loop_invariants(program, keep=())`` returns a new program (the input
is not changed). In the cond and body blocks of every ``while`` (inner loops
first, so what leaves an inner loop may leave the outer one too), an op is
invariant when it

- cannot fail or draw: an elementwise op or an op without inputs (``full``,
  ``arange``, ...), not random, owning no sub-block, with outputs;
- reads only values defined outside the loop that nothing in the loop
  writes (parameters an optimizer updates inside it are not), or values of
  ops hoisted before it;
- writes no persistable variable and no value the loop yields (``body_outs``,
  ``cond_out``, ``saved``: they are per iteration).

Such ops move, in order, to right before the ``while`` in its block; their
variables move with them and the loop lists them as captured inputs
(``Input``). A loop that runs zero times then computes them once more than
before, which an op that cannot fail or draw does not show. Ops of branches
inside the loop stay (they run only when taken), and so do loops whose body
a ``while_grad`` also reads (its gradient would have to find the hoisted
values where it runs).
"""

from __future__ import annotations

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import OPS

__all__ = ["hoist_loop_invariants"]


def hoist_loop_invariants(program: Program, keep=()) -> Program:
    """``program`` with its loops' invariant ops computed before them (see the module doc)."""
    result, _ = copy_for_pass(program, keep, "hoist_loop_invariants")
    differentiated = {op.attrs.get("body_block") for block in result.blocks for op in block.ops
                      if op.type == "while_grad"}
    _hoist_in(result, result.global_block(), differentiated)
    result.bump()
    return result


def _hoist_in(program: Program, block: Block, differentiated: set) -> None:
    """Hoist out of every loop in ``block`` and the blocks below it, inner loops first."""
    i = 0
    while i < len(block.ops):
        op = block.ops[i]
        for idx in op.sub_blocks():
            _hoist_in(program, program.blocks[idx], differentiated)
        moved = []
        if op.type == "while" and op.attrs["body_block"] not in differentiated:
            moved = _invariants(program, block, op)
            block.ops[i:i] = moved
        i += len(moved) + 1


def _invariants(program: Program, parent: Block, loop: Operator) -> list[Operator]:
    """Take the invariant ops out of ``loop``'s blocks; return them in order."""
    a = loop.attrs
    written = program.writes(loop)
    yielded = {a["cond_out"], *a["body_outs"], *a.get("saved", [])}
    moved: list[Operator] = []
    hoisted: set[str] = set()
    for key in ("cond_block", "body_block"):
        block = program.blocks[a[key]]
        kept = []
        for op in block.ops:
            if _invariant(block, op, written, yielded, hoisted, parent):
                for name in op.output_names():
                    parent.vars[name] = block.vars.pop(name)
                    hoisted.add(name)
                moved.append(op)
            else:
                kept.append(op)
        block.ops = kept
    reads = {n for key in ("cond_block", "body_block")
             for n in _reads_below(program, program.blocks[a[key]])}
    captured = loop.inputs.setdefault("Input", [])
    captured += [n for op in moved for n in op.output_names()
                 if n in reads and n not in captured]
    return moved


def _invariant(block: Block, op: Operator, written: set, yielded: set, hoisted: set,
               parent: Block) -> bool:
    opdef = OPS.get(op.type)
    if (opdef is None or opdef.random or op.type in CONTROL_FLOW or op.sub_blocks()
            or not op.output_names() or not (opdef.elementwise or not op.input_names())):
        return False
    for name in op.output_names():
        var = block.vars.get(name)
        if (var is None or var.persistable or var.is_data or name in yielded
                or parent.find_var(name) is not None):
            return False
    for name in op.input_names():
        if name in hoisted:
            continue
        if name in written or name in block.vars or block.find_var(name) is not parent.find_var(
                name) or parent.find_var(name) is None:
            return False
    return True


def _reads_below(program: Program, block: Block) -> set:
    names = set()
    for op in block.ops:
        names.update(op.input_names())
        for idx in op.sub_blocks():
            names |= _reads_below(program, program.blocks[idx])
    return names
