"""Static backward: gradient ops appended to a program.

``append_backward(program, loss)`` appends to block 0 the gradient ops of
every op on a path from a parameter to ``loss`` and returns
``[(param, grad)]``; ``gradients(program, targets, inputs)`` does the same
for any variables (data included). Both apply the registry's gradient rules
through a ``BlockEmitter`` (the emitter interface of ``registry.py``), so the
rules that serve eager backward serve static backward too.

Gradient variables are named ``<name>@GRAD`` (``<name>@GRAD_<n>`` when that
name is taken, e.g. after a second ``append_backward``).

What flows where
    Only float values carry gradients. An op whose type has no rule
    (``grad`` None: comparisons, argmax, floor, ...) stops the flow; so do
    the slots a rule lists as ``no_grad`` and any variable marked
    ``stop_gradient`` that is not itself asked for (a target marked so
    passes nothing on: what ``no_grad`` computed is a constant). Ops not on
    a path from a wanted variable to a target get no gradient ops.

Control flow (the ops of ``ops/control_flow.py``)
    ``cond``: the gradient is a new ``cond`` on the same predicate. Each of
    its branches is a new sub-block that first recomputes the forward
    branch (a renamed copy of its ops: the forward branch's intermediates
    are not visible outside it), then runs the gradient ops of that branch,
    seeded with the output gradients (captured from outside), down to the
    captured inputs. Both branches yield one gradient per float captured
    input that needs one (zeros where a branch does not use it). Nested
    control flow in a branch is handled by the same code (recursion).

    ``while``: the forward op gets a ``Carries`` output (a variable
    ``while_carries_<n>``, declared float32 ``[]`` but opaque: at run time it
    holds the stack of each iteration's carried values), and a
    ``while_grad`` op is appended. Its ``grad_block`` is a sub-block of the
    loop body (the executor runs the body and then ``grad_block`` in one
    scope per iteration, in reverse, from the saved carries); ``grad_args``
    are bound to the gradients of ``body_outs`` of that iteration,
    ``grad_outs`` are the gradients of ``body_args`` (the next iteration's
    ``grad_args``, and finally ``DX``) and ``grad_inputs`` the gradients of
    the float captured inputs (summed over iterations into ``DInput``). So
    gradients flow through loops whose trip count depends on the data.

    Recomputation means a random op (dropout) inside a branch or loop body
    draws again in backward unless it has a fixed seed. ``while_grad`` has
    no rule of its own, so a second-order gradient through a loop stops
    there (through ``cond`` and plain ops it works).
"""

from __future__ import annotations

import copy

from dy2stat.runtime import build, dtypes
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.registry import get_op

__all__ = ["BlockEmitter", "append_backward", "backward_path", "gradients", "requires_grad",
           "GRAD_SUFFIX"]

GRAD_SUFFIX = "@GRAD"

# Attrs of control-flow ops that hold variable names, and the sub-block the
# names belong to (they are renamed with it when a block is copied).
_NAME_ATTRS = {
    "true_outs": "true_block", "false_outs": "false_block",
    "cond_args": "cond_block", "cond_out": "cond_block",
    "body_args": "body_block", "body_outs": "body_block", "saved": "body_block",
    "grad_args": "grad_block", "grad_outs": "grad_block", "grad_inputs": "grad_block",
}


class BlockEmitter:
    """The emitter of gradient rules for static code: ``e(type, *inputs, **attrs)``.

    Appends one op to ``block`` through ``build.append`` and returns its
    output ``Var`` (or Vars, by slot). Inputs are ``Var``s visible from
    ``block``, lists of them for variadic slots, Python scalars or None.
    """

    def __init__(self, block: Block):
        self.block = block

    def __call__(self, type: str, *inputs, **attrs):
        return build.append(self.block, type, inputs, attrs)


# ------------------------------------------------------------- public API


def append_backward(program: Program, loss, parameter_names=None) -> list[tuple[Var, Var]]:
    """Append the gradient ops of ``loss`` to block 0; return ``[(param, grad)]``.

    ``loss`` is a float ``Var`` of block 0 (or its name); its gradient is
    seeded with ones. ``parameter_names`` (names or Vars) defaults to every
    persistable float variable of block 0 with ``stop_gradient`` False.
    Parameters that do not lead to ``loss`` get no pair; the pairs follow the
    order of ``parameter_names``.
    """
    block = program.global_block()
    loss_var = _resolve(block, loss, "append_backward: loss")
    if parameter_names is None:
        params = [v for v in block.vars.values()
                  if v.persistable and dtypes.is_float(v.dtype) and not v.stop_gradient]
    else:
        params = [_resolve(block, p, "append_backward: parameter") for p in parameter_names]
    grads = _backward_from(program, [loss_var], None, [p.name for p in params], "append_backward")
    return [(p, grads[p.name]) for p in params if grads.get(p.name) is not None]


def gradients(program: Program, targets, inputs, target_gradients=None) -> list[Var | None]:
    """Gradients of ``sum(targets)`` (weighted by ``target_gradients``) w.r.t. ``inputs``.

    ``targets`` and ``inputs`` are Vars (or names) of block 0, one or a list;
    any variable may be an input (data included, whatever its
    ``stop_gradient``). ``target_gradients``: one seed Var (or None for ones)
    per target. Returns one gradient Var per input, None where the input does
    not lead to any target.
    """
    block = program.global_block()
    targets = [_resolve(block, t, "gradients: target") for t in _as_list(targets)]
    inputs = [_resolve(block, x, "gradients: input") for x in _as_list(inputs)]
    seeds = None
    if target_gradients is not None:
        seeds = _as_list(target_gradients)
        if len(seeds) != len(targets):
            raise ValueError(
                f"gradients: got {len(targets)} targets but {len(seeds)} target gradients")
        seeds = [None if s is None else _resolve(block, s, "gradients: target gradient")
                 for s in seeds]
    grads = _backward_from(program, targets, seeds, [x.name for x in inputs], "gradients")
    return [grads.get(x.name) for x in inputs]


def requires_grad(program: Program, sources, taken=None) -> set[str]:
    """The names of block 0 whose values depend differentiably on ``sources`` (names):
    those a gradient flows through (not marked ``stop_gradient``, not past an op
    without a gradient rule). ``taken``: {(block index, op index) of a cond op: the
    branch a run took}; that branch alone decides its outputs (as eagerly: the other
    never ran)."""
    block = program.global_block()
    return _requires(block.ops, block, set(sources), taken)


def gradient_deciding_ops(program: Program, sources) -> list[tuple[int, int]]:
    """(block index, op index) of the ops whose run may decide what of block 0 needs a
    gradient: the cond ops (of block 0 or nested in the branches of others) and the
    while ops outside loops -- all of them when one of them decides alone (a cond whose
    branches disagree, one computing an output from a source and the other a constant
    or under no_grad; a while whose outputs need one only if it runs at least once),
    since their choices combine (a later `if` passing on what an earlier one chose);
    else none. Branches disagree too when their outputs depend on different sources
    (``self.a(x)`` in one, ``self.b(x)`` in the other): eagerly, only the parameters of
    the branch that ran get a gradient."""
    block = program.global_block()
    choices = list(_choices(program, block, ()))
    memo = _ReachMemo(program)
    bits = _bits(sources)
    for key, path in choices:
        around = dict(path)  # the conds around it, each taking the branch it is in
        alike = _reach(block.ops, block, bits, around, memo)
        if any(_reach(block.ops, block, bits, {**around, key: branch}, memo) != alike
               for branch in (True, False)):
            return [k for k, _ in choices]
    return []


def _bits(sources) -> dict[str, int]:
    """A bit of its own for each source name (the masks of ``_reach``)."""
    return {name: 1 << k for k, name in enumerate(dict.fromkeys(sources))}


def sources_reaching(program: Program, sources, targets, taken=None) -> set[str]:
    """The ``sources`` (names) on which some name of ``targets`` (of block 0) depends
    differentiably, along the branches ``taken`` (see ``requires_grad``): the sources a
    backward from ``targets`` gives a gradient, as eagerly (where the run went)."""
    block = program.global_block()
    bits = _bits(sources)
    return _named(bits, _mask_of(_reach(block.ops, block, bits, taken), targets))


def sources_some_branches_reach(program: Program, sources, targets) -> set[str]:
    """The ``sources`` a backward from ``targets`` reaches along some branches of the
    program's tensor-dependent conds and not along others: eagerly, a run taking the
    others leaves them without a gradient. (Loops are left out: whether one runs at all
    decides too, but a loop that never runs is rare, and a loop over a batch's time
    steps would be refused for it.)"""
    block = program.global_block()
    memo = _ReachMemo(program)
    bits = _bits(sources)
    differ = 0
    for key, path in _choices(program, block, ()):
        if program.blocks[key[0]].ops[key[1]].type != "cond" or _in_loop(program, path):
            continue
        around = dict(path)
        taken, not_taken = (_mask_of(_reach(block.ops, block, bits, {**around, key: branch},
                                            memo), targets) for branch in (True, False))
        differ |= taken ^ not_taken
    return _named(bits, differ)


def _mask_of(reached: dict, targets) -> int:
    """The sources (a mask of ``_bits``) some name of ``targets`` depends on."""
    mask = 0
    for name in targets:
        mask |= reached.get(name, 0)
    return mask


def _named(bits: dict, mask: int) -> set[str]:
    """The names of ``bits`` whose bit ``mask`` has."""
    return {name for name, bit in bits.items() if mask & bit}


class _ReachMemo:
    """What ``_reach`` found for a sub-block, by the names it started from and the
    branches taken by the conds and loops inside that block: the same for every choice
    elsewhere, so each sub-block is walked once per such case instead of once per choice
    of the whole program (which made large programs' backward take minutes)."""

    def __init__(self, program: Program):
        self.found: dict = {}
        self.within: dict[int, set] = {}  # block index -> it and the blocks nested in it
        for b in program.blocks:
            idx = b.idx
            while idx >= 0:
                self.within.setdefault(idx, set()).add(b.idx)
                idx = program.blocks[idx].parent_idx

    def key(self, block: Block, start: dict, taken) -> tuple:
        inside = self.within.get(block.idx, ())
        chosen = sorted((k, v) for k, v in (taken or {}).items() if k[0] in inside)
        return block.idx, frozenset(start.items()), tuple(chosen)


def _choices(program: Program, block: Block, path: tuple, in_loop: bool = False):
    """((block index, op index), ((key, branch) of each cond or loop around it, outer
    first)) of each cond op of ``block`` and of their branches, of each while op outside
    loops whose test can be run again (it has no effects), and of the conds in the bodies
    of loops. A loop around is (key, True) where it is itself a choice (the ops in its
    body run only if it ran), else (key, None); a cond in a loop chooses per iteration:
    what counts is which branches it took over all of them (see ``expose_predicates``)."""
    for i, op in enumerate(block.ops):
        key = (block.idx, i)
        if op.type == "cond":
            yield key, path
            for branch in (True, False):
                inner = program.blocks[op.attrs["true_block" if branch else "false_block"]]
                yield from _choices(program, inner, (*path, (key, branch)), in_loop)
        elif op.type == "while":
            chosen = not in_loop and all(
                not get_op(inner.type).random and inner.output_names() and
                not inner.sub_blocks()
                for inner in program.blocks[op.attrs["cond_block"]].ops)
            if chosen:
                yield key, path
            body = program.blocks[op.attrs["body_block"]]
            yield from _choices(program, body, (*path, (key, True if chosen else None)), True)


def _in_loop(program: Program, path: tuple) -> bool:
    """Whether a choice with ``path`` (see ``_choices``) is in the body of a loop."""
    return any(program.blocks[b].ops[i].type == "while" for (b, i), _ in path)


def expose_predicates(program: Program, keys) -> dict[tuple[int, int], str | int]:
    """What each op of ``keys`` (see ``gradient_deciding_ops``: the conds around a nested
    one are among them) chose when it ran. A name of block 0, for a cond's predicate or
    whether a while ran at least once (its test on its first values, run again after
    it); a nested op's becomes one more output of each cond around it (False from the
    other branch, which the cond around it says ran). For a cond in a loop's body, an
    int: the index of a ``hand_out`` of its predicate, appended to its block, which
    hands out what each iteration chose (see ``loop_choice``). Changes ``program``."""
    parent = {}  # sub-block index -> (block index, op index, branch: "true" / "false")
    in_loop = set()
    for (b, i), path in _choices(program, program.global_block(), ()):
        op = program.blocks[b].ops[i]
        if _in_loop(program, path):
            in_loop.add((b, i))
        elif op.type == "cond":
            for which in ("true", "false"):
                parent[op.attrs[f"{which}_block"]] = (b, i, which)
    names = {}
    for key in keys:
        b, i = key
        op = program.blocks[b].ops[i]
        if key in in_loop:  # (appended: the ops' indices that keys name stay as they are)
            names[key] = len(names)
            program.blocks[b].append_op(Operator("hand_out", {"X": op.inputs["Cond"]}, {},
                                                 {"index": names[key]}))
            continue
        name = op.inputs["Cond"][0] if op.type == "cond" else _first_test(program, b, op)
        while b != 0:
            b, i, which = parent[b]
            name = _output_of_branch(program, b, program.blocks[b].ops[i], which, name)
        names[key] = name
    return names


def loop_choice(taken: set) -> bool | None:
    """What a cond in a loop chose, for ``_reach``, from the predicates its ``hand_out``
    handed out (``taken``): one branch in every iteration, or either (None; also where
    it never ran, which the loop's own choice then says)."""
    return next(iter(taken)) if len(taken) == 1 else None


def _first_test(program: Program, block_index: int, op: Operator) -> str:
    """The test of the while ``op`` on its first values, as ops appended to its block
    (after the loop: its inputs are unchanged there); the name of its result."""
    block = program.blocks[block_index]
    start = len(block.ops)
    mapping = _copy_ops_into(program, program.blocks[op.attrs["cond_block"]], block, {})
    block.ops[start:start] = [Operator("assign", {"X": [x]}, {"Out": [mapping[arg]]})
                              for x, arg in zip(op.inputs["X"], op.attrs["cond_args"])]
    return mapping[op.attrs["cond_out"]]


def _output_of_branch(program: Program, block_index: int, op: Operator, which: str,
                      name: str) -> str:
    """``name`` (a bool of ``op``'s ``which`` branch) as a new output of the cond ``op``
    of block ``block_index``: False where the other branch runs."""
    other = "false" if which == "true" else "true"
    other_block = program.blocks[op.attrs[f"{other}_block"]]
    placeholder = other_block.create_var([], "bool", name=program.unique_name("not_taken"))
    other_block.append_op(Operator("full", {}, {"Out": [placeholder.name]},
                                   {"shape": [], "value": False, "dtype": "bool"}))
    out = program.blocks[block_index].create_var([], "bool",
                                                 name=program.unique_name(f"{name}.taken"))
    op.attrs[f"{which}_outs"] = [*op.attrs[f"{which}_outs"], name]
    op.attrs[f"{other}_outs"] = [*op.attrs[f"{other}_outs"], placeholder.name]
    op.outputs["Out"] = [*op.outputs.get("Out", []), out.name]
    return out.name


def backward_path(program: Program, targets, sources) -> tuple[list[int], set[str]]:
    """What a backward from ``targets`` to ``sources`` (names) goes through in block 0:
    the indices of the ops it differentiates, last first, and the sources it reaches.
    (The ops ``gradients`` emits gradient ops for; an eager backward frees those.)"""
    block = program.global_block()
    req = _requires(block.ops, block, set(sources))
    needed = {t for t in targets if t in req}
    path = []
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        if not any(n in needed for n in _diff_outputs(op)):
            continue
        inputs = [n for n in _diff_inputs(op) if n in req]
        if inputs:
            path.append(i)
            needed.update(inputs)
    return path, needed & set(sources)


# ---------------------------------------------------------- block 0 driver


def _as_list(values):
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _resolve(block: Block, value, what: str) -> Var:
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if name is None:
        raise TypeError(f"{what} must be a Var or a variable name, got {type(value).__name__}")
    var = block.vars.get(name)
    if var is None:
        raise ValueError(f"{what} {name!r} is not a variable of block 0")
    return var


def _backward_from(program, targets, seeds, wanted, where) -> dict[str, Var]:
    block = program.global_block()
    e = BlockEmitter(block)
    n_ops = len(block.ops)  # the forward ops: those present before we append
    pairs = []
    for i, t in enumerate(targets):
        if not dtypes.is_float(t.dtype):
            raise TypeError(f"{where}: target {t.name!r} has dtype {t.dtype}; "
                            "only float values have gradients")
        seed = seeds[i] if seeds is not None else None
        if seed is None:
            seed = e("full_like", t, value=1.0)
        elif tuple(seed.shape) != tuple(t.shape) and -1 not in (*seed.shape, *t.shape):
            raise ValueError(f"{where}: the gradient for {t.name!r} has shape "
                             f"{list(seed.shape)}, but the target has {list(t.shape)}")
        pairs.append((t.name, seed))
    ops = block.ops[:n_ops]
    grads = _backward_ops(program, ops, block, block, pairs, set(wanted))
    result = {}
    for name in dict.fromkeys(wanted):
        g = grads.get(name)
        if g is None:
            continue
        var = block.var(name)
        if g.dtype != var.dtype:
            g = e("cast", g, dtype=str(var.dtype))
        result[name] = _named_copy(block, g, name + GRAD_SUFFIX)
    return result


def _named_copy(block: Block, g: Var, name: str) -> Var:
    """``assign`` g into a variable called ``name`` (or ``name_<n>`` when taken)."""
    out = build.append(block, "assign", [g], {})
    program = block.program
    if name in program._taken_names():
        name = program.unique_name(name)
    del block.vars[out.name]
    out.name = name
    block.add_var(out)
    block.ops[-1].outputs["Out"] = [name]
    return out


# ------------------------------------------------------------- the sweep


def _is_float(var) -> bool:
    return var is not None and dtypes.is_float(var.dtype)


def _diff_inputs(op: Operator) -> list[str]:
    """The input names a gradient can flow to through ``op`` (empty: none)."""
    if op.type == "cond":
        return list(op.inputs.get("Input", []))
    if op.type == "while":
        return list(op.inputs.get("X", [])) + list(op.inputs.get("Input", []))
    opdef = get_op(op.type)
    if opdef.grad is None:
        return []
    return [n for slot in opdef.inputs if slot.name not in opdef.no_grad
            for n in op.inputs.get(slot.name, [])]


def _diff_outputs(op: Operator) -> list[str]:
    if op.type == "while":
        return list(op.outputs.get("Out", []))
    return op.output_names()


def _requires(ops, block: Block, sources: set, taken=None, memo=None) -> set:
    """Names that depend (differentiably) on a source: forward reachability (through a
    cond's or while's blocks, output by output; through only the branch ``taken`` gives
    for a cond's index, where it gives one). ``memo`` (a ``_ReachMemo``) keeps what
    it found for sub-blocks."""
    return set(_reach(ops, block, dict.fromkeys(sources, 1), taken, memo))


def _reach(ops, block: Block, start: dict, taken=None, memo=None) -> dict:
    """``_requires`` that also says which sources reach each name: ``start`` maps each
    source to a bit mask (its own bit, say), the result each name reached to the union
    of the masks of the sources it depends on."""
    if memo is not None and block.idx != 0 and ops is block.ops:
        key = memo.key(block, start, taken)
        found = memo.found.get(key)
        if found is None:
            found = memo.found[key] = _walk_reach(ops, block, start, taken, memo)
        return found
    return _walk_reach(ops, block, start, taken, memo)


def _walk_reach(ops, block: Block, start: dict, taken, memo) -> dict:
    req = {n: m for n, m in start.items() if _is_float(block.find_var(n))}
    for index, op in enumerate(ops):
        mask = 0
        for n in _diff_inputs(op):
            mask |= req.get(n, 0)
        if not mask:
            continue
        branch = taken.get((block.idx, index)) if taken else None
        reached = (_sub_block_reach(op, block, req, branch, taken, memo)
                   if op.type in ("cond", "while") else dict.fromkeys(_diff_outputs(op), mask))
        for n, m in reached.items():
            var = block.find_var(n)
            if _is_float(var) and (not var.stop_gradient or n in start):
                req[n] = req.get(n, 0) | m
    return req


def _sub_block_reach(op: Operator, block: Block, req: dict, branch=None, taken=None,
                     memo=None) -> dict:
    """The outputs of a cond or while op that a name of ``req`` reaches, with the masks
    reaching them: those its branches (the one ``branch`` says, if not None) or loop body
    compute from one (a loop to a fixed point over its carries; with ``branch`` False, a
    loop that never ran passes its inputs on; with True, one that ran gives what its
    body made of them, its last iteration's outputs)."""
    blocks = block.program.blocks
    outer = {n: req[n] for n in op.inputs.get("Input", []) if n in req}
    if op.type == "while" and branch is False:  # it never ran: its outputs are its inputs
        return {n: req[x] for n, x in zip(op.outputs.get("Out", []), op.inputs.get("X", []))
                if x in req}
    if op.type == "cond":
        outs = op.outputs.get("Out", [])
        reached: dict[int, int] = {}
        for which in ("true", "false") if branch is None else ("true" if branch else "false",):
            sub = blocks[op.attrs[f"{which}_block"]]
            inside = _reach(sub.ops, sub, outer, taken, memo)
            for i, n in enumerate(op.attrs[f"{which}_outs"]):
                if n in inside:
                    reached[i] = reached.get(i, 0) | inside[n]
        return {outs[i]: reached[i] for i in sorted(reached)}
    body = blocks[op.attrs["body_block"]]
    carried = {i: req[n] for i, n in enumerate(op.inputs.get("X", [])) if n in req}
    while True:
        start = {**outer, **{op.attrs["body_args"][i]: m for i, m in carried.items()}}
        inside = _reach(body.ops, body, start, taken, memo)
        more = dict(carried)
        for i, n in enumerate(op.attrs["body_outs"]):
            if n in inside:
                more[i] = more.get(i, 0) | inside[n]
        if more == carried:
            break
        carried = more
    outs = op.outputs.get("Out", [])
    if branch:  # (`inside`: the body run on every carry it may start an iteration with)
        return {outs[i]: inside[n] for i, n in enumerate(op.attrs["body_outs"]) if n in inside}
    return {outs[i]: carried[i] for i in sorted(carried)}


class _Grads:
    """Gradient contributions per name, summed with ``add`` as they arrive."""

    def __init__(self, e: BlockEmitter):
        self.e = e
        self.map: dict[str, Var] = {}

    def add(self, name: str, g: Var) -> None:
        prev = self.map.get(name)
        self.map[name] = g if prev is None else self.e("add", prev, g)

    def get(self, name: str) -> Var | None:
        return self.map.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.map


def _backward_ops(program, ops, fwd_block, emit_block, seeds, sources) -> dict[str, Var]:
    """Emit into ``emit_block`` the gradient ops of ``ops`` (which live in ``fwd_block``).

    ``emit_block`` is ``fwd_block`` or a block that sees it (a child).
    ``seeds``: (name, gradient Var) pairs; ``sources``: the names whose
    gradients are wanted. Returns the gradient of every name reached.
    """
    e = BlockEmitter(emit_block)
    grads = _Grads(e)
    for name, g in seeds:
        grads.add(name, g)
    req = _requires(ops, fwd_block, sources)
    for op in reversed(ops):
        # Only outputs in `req` pass a gradient on: one marked stop_gradient does not,
        # even when it is a target itself.
        if not any(n in grads and n in req for n in _diff_outputs(op)):
            continue
        if not any(n in req for n in _diff_inputs(op)):
            continue
        if op.type == "cond":
            _cond_grad(program, op, emit_block, grads, req)
        elif op.type == "while":
            _while_grad(program, op, fwd_block, emit_block, grads, req)
        else:
            _op_grad(op, emit_block, e, grads, req)
    return grads.map


def _zeros_like(e: BlockEmitter, var: Var) -> Var:
    return e("full_like", var, value=0.0)


def _as_dtype(e: BlockEmitter, g: Var, var: Var) -> Var:
    return g if g.dtype == var.dtype else e("cast", g, dtype=str(var.dtype))


def _op_grad(op: Operator, block: Block, e: BlockEmitter, grads: _Grads, req: set) -> None:
    """Apply a registry rule: the inputs, outputs and output grads in the rule's layout."""
    opdef = get_op(op.type)
    ins, need = [], []
    for slot in opdef.inputs:
        names = op.inputs.get(slot.name, [])
        if slot.variadic:
            ins.append([block.var(n) for n in names])
        else:
            ins.append(block.var(names[0]) if names else None)
        need.append(slot.name not in opdef.no_grad and any(n in req for n in names))
    outs = [block.var(n) for n in op.output_names()]
    douts = [grads.get(v.name) if v.name in grads and v.name in req else _zeros_like(e, v)
             for v in outs]
    if len(opdef.outputs) == 1 and opdef.outputs[0].variadic:
        douts = [douts]
    attrs = {**opdef.attrs, **op.attrs}
    results = opdef.grad(e, ins, outs, douts, attrs, need)
    if len(results) != len(opdef.inputs):
        raise RuntimeError(f"the gradient rule of {op.type} returned {len(results)} "
                           f"gradients for {len(opdef.inputs)} input slots")
    for slot, g, needed in zip(opdef.inputs, results, need):
        if not needed or g is None:
            continue
        names = op.inputs.get(slot.name, [])
        pairs = zip(names, g) if slot.variadic else [(names[0], g)]
        for name, gi in pairs:
            if gi is not None and name in req:
                grads.add(name, gi)


# ------------------------------------------------------------------ cond


def _cond_grad(program, op, emit_block, grads: _Grads, req: set) -> None:
    pred = op.inputs["Cond"][0]
    captured = list(op.inputs.get("Input", []))
    outs = op.outputs.get("Out", [])
    wanted = [n for n in dict.fromkeys(captured) if n in req]
    douts = [(i, grads.get(n)) for i, n in enumerate(outs)
             if n in grads and n in req and _is_float(emit_block.find_var(n))]
    if not wanted or not douts:
        return
    branches = []
    for block_attr, outs_attr in (("true_block", "true_outs"), ("false_block", "false_outs")):
        src = program.blocks[op.attrs[block_attr]]
        gblock = program.create_block(emit_block.idx)
        mapping = _copy_ops_into(program, src, gblock, {})
        copied = list(gblock.ops)
        branch_outs = [mapping.get(n, n) for n in op.attrs[outs_attr]]
        seeds = [(branch_outs[i], g) for i, g in douts]
        sub = _backward_ops(program, copied, gblock, gblock, seeds, set(wanted))
        ge = BlockEmitter(gblock)
        results = []
        for name in wanted:
            var = gblock.var(name)
            g = sub.get(name)
            results.append(_zeros_like(ge, var) if g is None else _as_dtype(ge, g, var))
        _prune(gblock, copied, {r.name for r in results})
        branches.append((gblock, [r.name for r in results]))
    # What the gradient branches read from outside: the forward captures
    # they use first, then the output gradients and anything else.
    free: dict[str, None] = {}
    for gblock, result_names in branches:
        free.update(dict.fromkeys(_free_names(program, gblock, result_names)))
    order = [n for n in captured if n in free] + [g.name for _, g in douts if g.name in free]
    inputs = list(dict.fromkeys(order + list(free)))
    out_vars = []
    for name in wanted:
        var = emit_block.var(name)
        out_vars.append(emit_block.create_var(
            var.shape, var.dtype, name=program.unique_name(name + GRAD_SUFFIX)))
    (tblock, tnames), (fblock, fnames) = branches
    emit_block.append_op(Operator(
        "cond",
        {"Cond": [pred], "Input": inputs},
        {"Out": [v.name for v in out_vars]},
        {"true_block": tblock.idx, "false_block": fblock.idx,
         "true_outs": tnames, "false_outs": fnames},
    ))
    for name, g in zip(wanted, out_vars):
        grads.add(name, g)


def _free_names(program, block: Block, yielded=()) -> list[str]:
    """Names ``block`` (with its sub-blocks) reads or yields but does not define."""
    names = []
    for op in block.ops:
        names += op.input_names()
        if op.type == "while_grad":
            # grad_block runs in the scope of the recomputed body: body names are bound.
            body = program.blocks[op.attrs["body_block"]]
            names += _free_names(program, body)
            names += [n for n in _free_names(program, program.blocks[op.attrs["grad_block"]])
                      if n not in body.vars]
        else:
            for idx in op.sub_blocks():
                names += _free_names(program, program.blocks[idx])
    names += list(yielded)
    return [n for n in dict.fromkeys(names) if n not in block.vars]


def _prune(block: Block, copied, live: set) -> None:
    """Drop the recomputed ops in ``block`` whose results nothing reads."""
    copied_ids = {id(op) for op in copied}
    live = set(live)
    for op in block.ops:
        if id(op) not in copied_ids:
            live.update(op.input_names())
    kept = []
    for op in reversed(copied):
        if op.sub_blocks() or any(n in live for n in op.output_names()):
            kept.append(op)
            live.update(op.input_names())
    kept_ids = {id(op) for op in kept}
    dropped = [op for op in copied if id(op) not in kept_ids]
    block.ops = [op for op in block.ops if id(op) not in copied_ids or id(op) in kept_ids]
    for op in dropped:
        for n in op.output_names():
            if n not in live:
                block.vars.pop(n, None)
    block.program.bump()


def _copy_ops_into(program: Program, src: Block, dst: Block, mapping: dict,
                   copied_blocks: dict | None = None) -> dict:
    """Append renamed copies of ``src``'s vars and ops to ``dst`` (sub-blocks copied too).

    Returns the name mapping (outer names not defined in ``src`` map to
    themselves). ``copied_blocks`` maps an old block index to its copy and
    that copy's name mapping (a copied ``while_grad`` reuses the copy of its
    loop's body and hangs its ``grad_block`` under it).
    """
    copied_blocks = {} if copied_blocks is None else copied_blocks
    m = dict(mapping)
    for name, var in src.vars.items():
        new = program.unique_name(name.split("@")[0] + "@r")
        dst.create_var(var.shape, var.dtype, name=new, persistable=var.persistable,
                       is_data=var.is_data, stop_gradient=var.stop_gradient)
        m[name] = new
    for op in src.ops:
        attrs, sub_maps = {}, {}
        block_keys = sorted((k for k, v in op.attrs.items()
                             if k.endswith("_block") and isinstance(v, int) and v >= 0),
                            key=lambda k: k != "body_block")
        for key in block_keys:
            old = op.attrs[key]
            if op.type == "while_grad" and key == "body_block" and old in copied_blocks:
                attrs[key], sub_maps[key] = copied_blocks[old]
                continue
            parent, outer = dst.idx, m
            if op.type == "while_grad" and key == "grad_block" and "body_block" in sub_maps:
                parent, outer = attrs["body_block"], sub_maps["body_block"]
            nb = program.create_block(parent)
            sub = _copy_ops_into(program, program.blocks[old], nb, outer, copied_blocks)
            copied_blocks[old] = (nb.idx, sub)
            attrs[key], sub_maps[key] = nb.idx, sub
        for key, value in op.attrs.items():
            if key in attrs:
                continue
            if key in _NAME_ATTRS:
                names = sub_maps.get(_NAME_ATTRS[key], m)
                attrs[key] = (names.get(value, value) if isinstance(value, str)
                              else [names.get(n, n) for n in value])
            else:
                attrs[key] = copy.deepcopy(value)
        dst.append_op(Operator(
            op.type,
            {k: [m.get(n, n) for n in v] for k, v in op.inputs.items()},
            {k: [m.get(n, n) for n in v] for k, v in op.outputs.items()},
            {k: attrs[k] for k in op.attrs},
        ))
    return m


# ----------------------------------------------------------------- while


def _carries(program, op: Operator, fwd_block: Block) -> str:
    """The while op's stack of saved carries; adds the output when it is missing."""
    names = op.outputs.get("Carries") or []
    if names:
        return names[0]
    var = fwd_block.create_var((), "float32", name=program.unique_name("while_carries"))
    op.outputs["Carries"] = [var.name]
    program.bump()
    return var.name


def _saved_values(program, body: Block, gblock: Block, yielded) -> list[str]:
    """The body values the gradient block reads: the forward loop saves them.

    Every output of an op that defines one is saved (so no op is half
    recomputed); values written to the scope are left to recomputation.
    """
    read = set(yielded) | _reads(program, gblock)
    saved = []
    for op in body.ops:
        names = op.output_names()
        if read & set(names) and not any(body.var(n).persistable for n in names):
            saved += names
    return saved


def _reads(program, block: Block) -> set:
    names = set()
    for op in block.ops:
        names.update(op.input_names())
        for idx in op.sub_blocks():
            names |= _reads(program, program.blocks[idx])
    return names


def _while_grad(program, op, fwd_block, emit_block, grads: _Grads, req: set) -> None:
    e = BlockEmitter(emit_block)
    xs = list(op.inputs.get("X", []))
    captured = list(op.inputs.get("Input", []))
    outs = list(op.outputs.get("Out", []))
    attrs = op.attrs
    body = program.blocks[attrs["body_block"]]
    body_args, body_outs = list(attrs["body_args"]), list(attrs["body_outs"])
    carries = _carries(program, op, fwd_block)

    # Float captured inputs: one DInput each (a repeated name counts once).
    float_caps = [n for n in captured if _is_float(emit_block.find_var(n))]
    seen, wanted_caps = set(), []
    for n in float_caps:
        wanted_caps.append(n in req and n not in seen)
        seen.add(n)

    gblock = program.create_block(body.idx)
    ge = BlockEmitter(gblock)
    grad_args = []
    for o in body_outs:
        var = gblock.var(o)
        grad_args.append(gblock.create_var(
            var.shape, var.dtype, name=program.unique_name(o.split("@")[0] + GRAD_SUFFIX)))
    seeds = [(o, g) for o, g in zip(body_outs, grad_args) if _is_float(gblock.var(o))]
    sources = {a for a in body_args if _is_float(body.var(a))}
    sources |= {n for n, w in zip(float_caps, wanted_caps) if w}
    sub = _backward_ops(program, list(body.ops), body, gblock, seeds, sources)

    grad_outs = []
    for a in body_args:
        var = body.var(a)
        g = sub.get(a) if _is_float(var) else None
        grad_outs.append(_zeros_like(ge, var) if g is None else _as_dtype(ge, g, var))
    grad_inputs = []
    for n, w in zip(float_caps, wanted_caps):
        var = gblock.var(n)
        g = sub.get(n) if w else None
        grad_inputs.append(_zeros_like(ge, var) if g is None else _as_dtype(ge, g, var))

    saved = _saved_values(program, body, gblock, [g.name for g in grad_outs + grad_inputs])
    # A second gradient of the same loop extends the list: entries keep their order.
    earlier = list(op.attrs.get("saved", []))
    op.attrs["saved"] = earlier + [n for n in saved if n not in earlier]
    program.bump()
    douts = [grads.get(n) if n in grads and n in req else _zeros_like(e, emit_block.var(n))
             for n in outs]
    dx = [emit_block.create_var(v.shape, v.dtype, name=program.unique_name(n + GRAD_SUFFIX))
          for n in xs for v in [emit_block.var(n)]]
    dinput = [emit_block.create_var(v.shape, v.dtype, name=program.unique_name(n + GRAD_SUFFIX))
              for n in float_caps for v in [emit_block.var(n)]]
    emit_block.append_op(Operator(
        "while_grad",
        {"Carries": [carries], "Input": captured, "DOut": [d.name for d in douts]},
        {"DX": [v.name for v in dx], "DInput": [v.name for v in dinput]},
        {"body_block": body.idx, "body_args": body_args, "saved": saved,
         "grad_block": gblock.idx,
         "grad_args": [g.name for g in grad_args], "grad_outs": [g.name for g in grad_outs],
         "grad_inputs": [g.name for g in grad_inputs]},
    ))
    for n, g in zip(xs, dx):
        if n in req:
            grads.add(n, g)
    for n, w, g in zip(float_caps, wanted_caps, dinput):
        if w:
            grads.add(n, g)
