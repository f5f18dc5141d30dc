"""Pruning a program to what some values need, and dead-code elimination.

Both work on the global block and return a new Program; the input is never
changed.

- ``prune(program, feeds, fetches)`` is for saving an inference model: it
  keeps the ops needed to compute the fetches from the feeds and the
  persistable variables, and nothing else. Feeds cut the graph: the ops that
  computed a fed value are dropped (unless something else still needs them),
  and a fed variable becomes a data variable of the pruned program. Variables
  no kept op uses are dropped, parameters included, so the pruned program's
  persistables are exactly the parameters the fetches need.
- ``dead_code_elimination(program, keep_names)`` is a pass: it drops ops whose
  outputs nothing needs. Ops that write a persistable variable (parameter
  updates), random ops (they advance the generator), ops without outputs and
  ops of unknown type are effects, not dead code, and stay; so do the data and
  persistable variables.

Sub-blocks are kept whole for every kept control-flow op (a control-flow op is
kept or dropped as one unit); blocks no kept op refers to are dropped and the
rest renumbered in their original order, with ``*_block`` attrs and
``parent_idx`` rewritten. What a sub-block reads from the global block (its
explicit inputs, and outer names its ops read directly) counts as read by the
control-flow op that owns it.
"""

from __future__ import annotations

import copy
import dataclasses

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.registry import OPS


def clone_program(program: Program) -> Program:
    """A deep copy of ``program`` (blocks, vars, ops, attrs)."""
    return _rebuild(program, {}, {}, keep_all_blocks=True)


def prune(program: Program, feed_names, fetch_names) -> Program:
    """The part of ``program`` that computes ``fetch_names`` from ``feed_names``
    and the persistable variables, as a new Program. Output-less ops (``print``,
    ``assert``) that can run on those values stay, with what they read.

    Raises ``ValueError`` naming the fetch when one cannot be computed (it needs
    a value that is neither fed, a parameter, nor computed by an op) and naming
    any feed or fetch that is not a variable of the global block.
    """
    feeds = [_name(n) for n in feed_names]
    fetches = [_name(n) for n in fetch_names]
    glob = program.global_block()
    for what, names in (("feed", feeds), ("fetch", fetches)):
        for n in names:
            if n not in glob.vars:
                raise ValueError(f"prune: {what} {n!r} is not a variable of the program's "
                                 "global block")
    if not fetches:
        raise ValueError("prune: nothing to fetch (fetch_names is empty)")

    kept = _live_ops(program, set(fetches), cut=set(feeds))
    problem = _unavailable(program, kept, feeds, fetches)
    if problem is not None:
        # Find a fetch that needs the missing value, to name it.
        for fetch in fetches:
            one = _unavailable(program, _live_ops(program, {fetch}, set(feeds)), feeds, [fetch])
            if one is not None:
                missing, _ = one
                raise ValueError(f"prune: cannot compute fetch {fetch!r}: "
                                 + _why_missing(glob, missing, feeds))
        raise ValueError("prune: cannot compute the fetches: "
                         + _why_missing(glob, problem[0], feeds))

    kept = _with_checks(program, kept, feeds)
    used = set(feeds) | set(fetches)
    for i in kept:
        used.update(_reads(program, glob.ops[i]))
        used.update(glob.ops[i].output_names())
    result = _rebuild(program, {0: [glob.ops[i] for i in kept]},
                      {0: [n for n in glob.vars if n in used]})
    new_glob = result.global_block()
    for n in feeds:
        var = new_glob.vars[n]
        if not var.persistable:
            var.is_data = True
    return result


def dead_code_elimination(program: Program, keep_names) -> Program:
    """``program`` without the ops nothing needs, as a new Program.

    Needed: the ops that compute ``keep_names`` (transitively), ops that write
    a persistable variable, random ops, and what those read. Variables that no
    kept op uses are dropped, except data, persistable and kept variables.
    """
    keep = {_name(n) for n in keep_names}
    glob = program.global_block()
    for n in keep:
        if glob.find_var(n) is None:
            raise ValueError(f"dead_code_elimination: {n!r} is not a variable of the program's "
                             "global block")
    kept = _live_ops(program, keep, cut=set(), forced=_has_effect)
    used = set(keep)
    for i in kept:
        used.update(_reads(program, glob.ops[i]))
        used.update(glob.ops[i].output_names())
    names = [n for n, v in glob.vars.items() if n in used or v.persistable or v.is_data]
    return _rebuild(program, {0: [glob.ops[i] for i in kept]}, {0: names})


# ---------------------------------------------------------------- liveness


def copy_for_pass(program: Program, keep, pass_name: str) -> tuple[Program, set]:
    """The copy a pass rewrites, and the names in ``keep`` (each must be a variable)."""
    result = clone_program(program)
    names = set()
    for value in keep:
        name = value if isinstance(value, str) else getattr(value, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"{pass_name}: expected a variable or its name, got {value!r}")
        if not any(name in block.vars for block in result.blocks):
            raise ValueError(f"{pass_name}: {name!r} (in keep) is not a variable of the "
                             "program")
        names.add(name)
    return result, names


def _name(value) -> str:
    if not isinstance(value, str) and hasattr(value, "name"):
        value = value.name
    if not isinstance(value, str):
        raise TypeError(f"expected a variable or its name, got {value!r}")
    return value


def _has_effect(program: Program, op: Operator) -> bool:
    """Kept by DCE whatever is needed: writes state, draws random numbers, or has
    no outputs at all (an op run only for what it does, like a print) -- itself or an
    op of its sub-blocks (a cond whose branch updates running statistics)."""
    glob = program.global_block()
    if not op.output_names():
        return True
    for n in op.output_names():
        var = glob.vars.get(n)
        if var is not None and var.persistable:
            return True
    opdef = OPS.get(op.type)
    if opdef is None or opdef.random:
        return True
    return any(_has_effect(program, inner) for idx in op.sub_blocks()
               for inner in program.blocks[idx].ops)


def _live_ops(program: Program, roots: set, cut: set, forced=None) -> list[int]:
    """Indices of the global-block ops needed for ``roots`` (in program order).

    Names in ``cut`` are provided from outside: their producers are not needed
    for them.
    """
    ops = program.global_block().ops
    needed = set(roots) - cut
    kept = []
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        outs = op.output_names()
        if any(n in needed for n in outs) or (forced is not None and forced(program, op)):
            kept.append(i)
            needed.difference_update(outs)
            needed.update(n for n in _reads(program, op) if n not in cut)
    kept.reverse()
    return kept


def _with_checks(program: Program, kept: list[int], feeds) -> list[int]:
    """``kept`` and the output-less ops (``print``, ``assert``) of the global block
    that can run from the feeds and parameters, with what they need: a pruned
    program still prints and checks what the original did on those values."""
    ops, taken = program.global_block().ops, set(kept)
    for i, op in enumerate(ops):
        if op.output_names() or i in taken:
            continue
        needed = _live_ops(program, set(_reads(program, op)), cut=set(feeds))
        with_op = sorted(taken | {j for j in needed if j < i} | {i})
        if _unavailable(program, with_op, feeds, []) is None:
            taken = set(with_op)
    return sorted(taken)


def _reads(program: Program, op: Operator) -> list[str]:
    """Global-block names ``op`` reads: its inputs and its sub-blocks' outer reads."""
    names = list(op.input_names())
    glob = program.global_block()
    seen = set()
    stack = list(op.sub_blocks())
    while stack:
        idx = stack.pop()
        if idx in seen:
            continue
        seen.add(idx)
        block = program.blocks[idx]
        for inner in block.ops:
            for n in inner.input_names():
                if _resolves_to_global(block, n, glob):
                    names.append(n)
            stack.extend(inner.sub_blocks())
    return names


def _resolves_to_global(block: Block, name: str, glob: Block) -> bool:
    while block is not None and block is not glob:
        if name in block.vars:
            return False
        block = block.parent
    return name in glob.vars


def _unavailable(program: Program, kept: list[int], feeds, fetches):
    """``(name, where)`` of the first value the kept ops or fetches lack, else None."""
    glob = program.global_block()
    available = set(feeds) | {n for n, v in glob.vars.items() if v.persistable}
    for i in kept:
        op = glob.ops[i]
        for n in _reads(program, op):
            if n not in available:
                return n, i
        available.update(op.output_names())
    for n in fetches:
        if n not in available:
            return n, None
    return None


def _why_missing(glob: Block, name: str, feeds) -> str:
    var = glob.vars.get(name)
    fed = ", ".join(repr(f) for f in feeds) or "none"
    if var is not None and var.is_data:
        return f"it needs the data variable {name!r}, which is not fed (feeds: {fed})"
    return (f"it needs {name!r}, which is not fed (feeds: {fed}), not a parameter and not "
            "computed by any op before it is read")


# ---------------------------------------------------------------- rebuild


def _rebuild(program: Program, ops_by_block: dict, var_names_by_block: dict,
             keep_all_blocks: bool = False) -> Program:
    """A new Program: the blocks with the given ops and var names (a block not in
    the dicts is copied whole), keeping block 0 and every sub-block the kept ops
    refer to, renumbered in original order."""
    if keep_all_blocks:
        ops_by_block, reachable, stack = {}, set(range(len(program.blocks))), []
    else:
        reachable = {0}
        stack = [idx for op in ops_by_block.get(0, program.blocks[0].ops)
                 for idx in op.sub_blocks()]
    while stack:
        idx = stack.pop()
        if idx in reachable:
            continue
        reachable.add(idx)
        block = program.blocks[idx]
        if block.parent_idx >= 0:
            stack.append(block.parent_idx)
        stack.extend(i for op in ops_by_block.get(idx, block.ops) for i in op.sub_blocks())
    order = sorted(reachable)
    new_idx = {old: new for new, old in enumerate(order)}

    result = Program()
    result.random_seed = program.random_seed
    result.blocks = []
    result._forget_names()
    for old in order:
        src = program.blocks[old]
        parent = new_idx[src.parent_idx] if src.parent_idx >= 0 else -1
        block = Block(result, new_idx[old], parent)
        for name in var_names_by_block.get(old, list(src.vars)):
            block.add_var(dataclasses.replace(src.vars[name]))
        for op in ops_by_block.get(old, src.ops):
            block.ops.append(_copy_op(op, new_idx))
        result.blocks.append(block)
    result.bump()
    return result


def _copy_op(op: Operator, new_idx: dict) -> Operator:
    attrs = {}
    for key, value in op.attrs.items():
        attrs[key] = new_idx[value] if key.endswith("_block") else copy.deepcopy(value)
    return Operator(
        op.type,
        {slot: list(names) for slot, names in op.inputs.items()},
        {slot: list(names) for slot, names in op.outputs.items()},
        attrs,
        origin=op.origin,
        scope=op.scope,
    )
