"""Elementwise fusion: groups of elementwise ops become one ``fused_elementwise`` op.

``fuse_elementwise(program, keep=())`` returns a new program (the input is
not changed). In every block it finds groups of elementwise ops (registry
``elementwise=True`` with a form in ``kernels.fusion.OPS``; earlier fused ops
too, whose steps are inlined) such that every value computed inside a group
except its result is read only by ops of the group. Such a value must also
be defined in the block, not be persistable, not be in ``keep`` (fetched
values: pass the fetch names) and not be named by a control-flow op's attrs
or read from a sub-block. Each group of two or more ops becomes one op at the
place of its last op, reading the group's outside values (``X``) and writing
the group's result (``Out``), with the steps in its ``expr`` attr. Groups are
trees or DAGs with one result.

0-d constants (``full`` with shape ``[]``: how Python scalars enter a
program) are inlined as literal steps; a constant that nothing reads any
more is dropped.

Not fused: float16 values (no CUDA path yet), ops whose promoted inputs
disagree in dtype (hand-built programs; the builder always casts), ops that
write a persistable variable, and groups with no outside input (constant
folding's business). An op reading a persistable variable joins a group only
when nothing between it and the group's last op writes that variable.

The pass is meant to run after backward is appended (deployment, executor);
``fused_elementwise`` still has a gradient rule, so running it before is
correct too.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from dy2stat.kernels import fusion
from dy2stat.runtime import dtypes
from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.ops.fused import FUSED
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import OPS

__all__ = ["fuse_elementwise"]


def fuse_elementwise(program: Program, keep=()) -> Program:
    """``program`` with its elementwise groups fused (see the module doc)."""
    result, keep = copy_for_pass(program, keep, "fuse_elementwise")
    ctx = _Context(result, keep)
    for block in result.blocks:
        _fuse_block(ctx, block)
    _drop_unused_constants(ctx)
    result.bump()
    return result


class _Context:
    """What the pass knows of the whole program."""

    def __init__(self, program: Program, keep: set):
        self.program = program
        self.pinned = set(keep) | _control_flow_names(program)
        self.reads = _read_counts(program)
        self.constants = _constants(program)
        self.inlined: set[str] = set()




def _control_flow_names(program: Program) -> set:
    """Names that control-flow ops refer to in attrs (branch outs, loop args ...)."""
    return {n for block in program.blocks for op in block.ops for n in attr_names(op)}


def _read_counts(program: Program) -> Counter:
    return Counter(n for block in program.blocks for op in block.ops for n in op.input_names())


def _constants(program: Program) -> dict:
    """name -> (block index, value, dtype) of every 0-d ``full`` constant."""
    found = {}
    for block in program.blocks:
        for op in block.ops:
            if op.type != "full" or list(op.attrs.get("shape", [])) != []:
                continue
            (name,) = op.output_names()
            var = block.vars.get(name)
            if var is None or var.persistable or var.is_data or var.dtype == dtypes.float16:
                continue
            value = op.attrs.get("value", 0.0)
            found[name] = (block.idx, _plain(value), var.dtype)
    return found


def _plain(value):
    """A JSON number from a Python or NumPy scalar."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value)


def _owner(block: Block, name: str) -> int:
    """The index of the block (``block`` or an enclosing one) that declares ``name``."""
    while block is not None:
        if name in block.vars:
            return block.idx
        block = block.parent
    return -1


# ------------------------------------------------------------------ groups


def _fusable(block: Block, op: Operator) -> bool:
    outs = op.output_names()
    if len(outs) != 1:
        return False
    if op.type != FUSED:
        opdef = OPS.get(op.type)
        if opdef is None or not opdef.elementwise or op.type not in fusion.OPS:
            return False
        promoted = [op.inputs.get(opdef.inputs[i].name, []) for i in opdef.promote]
        promoted_dtypes = {block.var(n).dtype for names in promoted for n in names}
        if len(promoted_dtypes) > 1:
            return False
    out = block.vars.get(outs[0])
    if out is None or out.persistable or out.is_data:
        return False
    return all(block.var(n).dtype != dtypes.float16 for n in op.input_names() + outs)


def _fuse_block(ctx: _Context, block: Block) -> None:
    ops = block.ops
    readers = defaultdict(set)
    local = Counter()
    for i, op in enumerate(ops):
        for n in op.input_names():
            readers[n].add(i)
            local[n] += 1
    group: list[int | None] = [None] * len(ops)
    members: dict[int, list[int]] = {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if not _fusable(block, op):
            continue
        (out,) = op.output_names()
        root = _consumer_group(ctx, block, i, out, readers[out], local[out], group)
        if root is None:
            root = i
            members[i] = []
        group[i] = root
        members[root].append(i)
    replaced: dict[int, Operator] = {}
    removed: set[int] = set()
    for root, idxs in members.items():
        if len(idxs) < 2:
            continue
        fused = _fused_op(ctx, block, sorted(idxs))
        if fused is None:
            continue
        replaced[root] = fused
        for i in idxs:
            if i != root:
                removed.add(i)
                (out,) = ops[i].output_names()
                del block.vars[out]
    if replaced:
        block.ops = [replaced.get(i, op) for i, op in enumerate(ops) if i not in removed]


def _consumer_group(ctx, block, i, out, consumers, local_reads, group) -> int | None:
    """The group op ``i`` joins: its output's readers' one group, if ``out`` may vanish."""
    if not consumers or out in ctx.pinned or ctx.reads[out] != local_reads:
        return None  # fetched, named by control flow, read from a sub-block or unread
    roots = {group[c] for c in consumers}
    if len(roots) != 1 or None in roots:
        return None
    (root,) = roots
    # Moving op i down to its group's last op must not let it read a newer
    # value of a persistable variable (the only kind written more than once).
    state = {n for n in block.ops[i].input_names() if block.var(n).persistable}
    if state:
        for j in range(i + 1, root + 1):
            if state & ctx.program.writes(block.ops[j]):
                return None
    return root



# ------------------------------------------------------------- the fused op


def _fused_op(ctx: _Context, block: Block, idxs: list[int]) -> Operator | None:
    """The ``fused_elementwise`` op computing ops ``idxs`` (in order) of ``block``."""
    steps: list[list] = []
    inputs: list[str] = []
    refs: dict[str, str] = {}
    constants: list[str] = []

    def ref(name: str) -> str:
        if name not in refs:
            const = ctx.constants.get(name)
            if const is not None and _owner(block, name) == const[0]:
                _, value, dtype = const
                steps.append(["full", [], {"value": value}, dtype.name])
                refs[name] = f"t{len(steps) - 1}"
                constants.append(name)
            else:
                inputs.append(name)
                refs[name] = f"x{len(inputs) - 1}"
        return refs[name]

    for i in idxs:
        op = block.ops[i]
        if op.type == FUSED:
            _inline(op, steps, ref)
        else:
            opdef = OPS[op.type]
            args = [ref(op.inputs[slot.name][0]) for slot in opdef.inputs]
            (out,) = op.output_names()
            steps.append([op.type, args, _step_attrs(opdef.full_attrs(op.attrs)),
                          block.var(out).dtype.name])
        (out,) = op.output_names()
        refs[out] = f"t{len(steps) - 1}"
    if not inputs:
        return None
    ctx.inlined.update(constants)
    (out,) = block.ops[idxs[-1]].output_names()
    return Operator(FUSED, {"X": inputs}, {"Out": [out]},
                    {"expr": steps, "dtype": block.var(out).dtype.name})


def _inline(op: Operator, steps: list, ref) -> None:
    """Append an earlier fused op's steps, its refs renamed into ``steps``."""
    xs = op.inputs.get("X", [])
    base = len(steps)
    for op_type, args, attrs, dtype in op.attrs["expr"]:
        renamed = [ref(xs[int(a[1:])]) if a[0] == "x" else f"t{base + int(a[1:])}"
                   for a in args]
        steps.append([op_type, renamed, dict(attrs), dtype])


def _step_attrs(attrs: dict) -> dict:
    """An op's attrs as JSON data (dtype names, plain numbers)."""
    out = {}
    for key, value in attrs.items():
        if key == "dtype":
            out[key] = dtypes.as_dtype(value, where="fuse_elementwise").name
        elif value is None or isinstance(value, str):
            out[key] = value
        else:
            out[key] = _plain(value)
    return out


def _drop_unused_constants(ctx: _Context) -> None:
    """Remove the inlined constants that nothing reads any more."""
    reads = _read_counts(ctx.program)
    dead = {n for n in ctx.inlined if reads[n] == 0 and n not in ctx.pinned}
    if not dead:
        return
    for block in ctx.program.blocks:
        drop = {id(op) for op in block.ops if op.type == "full" and op.output_names()[0] in dead}
        if drop:
            block.ops = [op for op in block.ops if id(op) not in drop]
            for name in dead:
                block.vars.pop(name, None)
