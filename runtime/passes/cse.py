"""Common-subexpression elimination: an op computed twice in a block is computed once.

``eliminate_common_subexpressions(program, keep=())`` returns a new program
(the input is not changed). Within each block, in op order, an op is a
duplicate of an earlier op of the same block when both have the same type,
read the same values (the same names, after the renames made so far, with
no write of a persistable input in between) and have equal attrs (defaults
filled in). Only ops that are not random, own no sub-block, have outputs
(``print``/``assert`` are effects) and write variables declared once in the
program, defined by this op alone and neither persistable nor data take
part. Blocks are never merged with each other.

A duplicate is removed and every later read of its outputs, in its block,
in sub-blocks and in control-flow attrs (``true_outs``, ``body_outs``,
``cond_out``, ``saved`` ...) reads the first op's outputs instead. An output named in
``keep`` (pass the fetch names) survives: the duplicate becomes an
``assign`` from the first op's output.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import OPS

__all__ = ["eliminate_common_subexpressions"]


def eliminate_common_subexpressions(program: Program, keep=()) -> Program:
    """``program`` without its repeated computations (see the module doc)."""
    result, keep = copy_for_pass(program, keep, "eliminate_common_subexpressions")
    ctx = _Context(result, keep)
    _cse_block(ctx, result.global_block())
    for block in result.blocks:  # blocks no op runs, and attrs of ops renamed later
        for op in block.ops:
            _rename(op, ctx.renamed)
    result.bump()
    return result


class _Context:
    """What the pass knows of the whole program, and the renames made so far."""

    def __init__(self, program: Program, keep: set):
        self.program = program
        self.keep = keep
        self.declared = Counter(n for block in program.blocks for n in block.vars)
        self.writes = Counter(n for block in program.blocks for op in block.ops
                              for n in op.output_names())
        self.renamed: dict[str, str] = {}
        self.done: set[int] = set()




def _cse_block(ctx: _Context, block: Block) -> None:
    ctx.done.add(block.idx)
    first: dict[tuple, Operator] = {}
    version: Counter = Counter()  # writes so far, per name (persistables change)
    ops = []
    for op in block.ops:
        _rename(op, ctx.renamed)
        for idx in op.sub_blocks():
            if idx not in ctx.done:
                _cse_block(ctx, ctx.program.blocks[idx])
        key = _key(ctx, block, op, version)
        earlier = first.get(key) if key is not None else None
        if earlier is not None and _same_vars(block, earlier, op):
            ops.extend(_merge(ctx, block, earlier, op))
            continue
        if key is not None:
            first[key] = op
        version.update(ctx.program.writes(op))
        ops.append(op)
    block.ops = ops


def _key(ctx: _Context, block: Block, op: Operator, version: Counter) -> tuple | None:
    """What makes two ops compute the same values, or None when ``op`` may not merge."""
    opdef = OPS.get(op.type)
    if opdef is None or opdef.random or op.type in CONTROL_FLOW or op.sub_blocks():
        return None
    outs = op.output_names()
    if not outs:
        return None
    for n in outs:
        var = block.vars.get(n)
        if (var is None or var.persistable or var.is_data or ctx.declared[n] != 1
                or ctx.writes[n] != 1):
            return None
    reads = tuple((slot.name, tuple((n, version[n]) for n in op.inputs.get(slot.name, [])))
                  for slot in opdef.inputs)
    return op.type, reads, _freeze(opdef.full_attrs(op.attrs))


def _freeze(value):
    """A hashable form of an attr value; values of different types never compare equal."""
    if isinstance(value, dict):
        return "dict", tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return type(value).__name__, tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return "ndarray", value.dtype.str, value.shape, value.tobytes()
    return type(value).__name__, repr(value)


def _same_vars(block: Block, a: Operator, b: Operator) -> bool:
    """Outputs slot by slot of the same count, dtype and shape."""
    if {k: len(v) for k, v in a.outputs.items()} != {k: len(v) for k, v in b.outputs.items()}:
        return False
    for x, y in zip(a.output_names(), b.output_names()):
        vx, vy = block.vars[x], block.vars[y]
        if vx.dtype != vy.dtype or tuple(vx.shape) != tuple(vy.shape):
            return False
    return True


def _merge(ctx: _Context, block: Block, earlier: Operator, dup: Operator) -> list[Operator]:
    """Rename ``dup``'s outputs to ``earlier``'s; the ops left in its place (kept names)."""
    ops = []
    for old, new in zip(dup.output_names(), earlier.output_names()):
        ctx.renamed[old] = new
        if old in ctx.keep:
            ops.append(Operator("assign", {"X": [new]}, {"Out": [old]}, {},
                                origin=dup.origin, scope=dup.scope))
        else:
            del block.vars[old]
    return ops


def _resolve(name: str, renamed: dict) -> str:
    while name in renamed:
        name = renamed[name]
    return name


def _rename(op: Operator, renamed: dict) -> None:
    """Apply the renames to ``op``'s reads (and a control-flow op's name attrs)."""
    if not renamed:
        return
    for slot, names in op.inputs.items():
        names = [_resolve(n, renamed) for n in names]
        if slot == "Input" and op.type in ("cond", "while"):
            names = list(dict.fromkeys(names))  # a captured value listed once
        op.inputs[slot] = names
    if op.type not in CONTROL_FLOW:
        return
    for key, value in op.attrs.items():
        if key.endswith(("_block", "_args")):
            continue  # sub-block indices, and names the sub-block itself declares
        if isinstance(value, str):
            op.attrs[key] = _resolve(value, renamed)
        elif isinstance(value, list):
            value = [_resolve(v, renamed) if isinstance(v, str) else v for v in value]
            # A while and its while_grad list the same saved values: each saved once.
            op.attrs[key] = list(dict.fromkeys(value)) if key == "saved" else value

