"""Dead code in every block: ops whose results nothing reads are dropped.

``eliminate_dead_code(program, keep=())`` returns a new program (the input is
not changed). The global block goes through ``prune.dead_code_elimination``
(whole control-flow ops, with the blocks only they own); then, in every
sub-block, an op is dropped when no op of the program reads any of its
outputs, no control-flow op names one in its attrs (branch and loop outs,
``saved`` values, ``cond_out``) and none is in ``keep`` -- unless it has an
effect: no outputs (``print``, ``assert``), a persistable output, a random
draw, an unknown type, or a sub-block. Names are read program-wide, so a
value a ``while_grad`` reads from its loop's body stays. Repeated until
nothing more is dropped.
"""

from __future__ import annotations

from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.prune import dead_code_elimination
from dy2stat.runtime.registry import OPS

__all__ = ["eliminate_dead_code"]


def eliminate_dead_code(program: Program, keep=()) -> Program:
    """``program`` without the ops nothing needs, in every block (see the module doc)."""
    keep = [k if isinstance(k, str) else k.name for k in keep]
    result = dead_code_elimination(program, keep)  # a new program
    while True:
        needed = set(keep)
        for block in result.blocks:
            for op in block.ops:
                needed.update(op.input_names())
                needed |= attr_names(op)
        dropped = False
        for block in result.blocks[1:]:
            kept = [op for op in block.ops if _has_effect(block, op)
                    or any(n in needed for n in op.output_names())]
            if len(kept) < len(block.ops):
                dead = {n for op in block.ops if op not in kept for n in op.output_names()}
                for name in dead:
                    block.vars.pop(name, None)
                block.ops = kept
                dropped = True
        if not dropped:
            break
    result.bump()
    return result


def _has_effect(block, op: Operator) -> bool:
    opdef = OPS.get(op.type)
    if opdef is None or opdef.random or op.sub_blocks() or not op.output_names():
        return True
    return any((var := block.find_var(n)) is not None and var.persistable
               for n in op.output_names())
