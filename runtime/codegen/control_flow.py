"""Control flow in generated code: ``cond`` an ``if``, ``while`` a Python ``while``.

``cond`` calls one of its two branch functions; ``while`` runs its cond and
body functions (pushing each iteration's carried values onto the
``Carries`` list when it is wanted); ``while_grad`` calls a runner that pops
the saved carries in reverse and runs the loop body and its gradient block
as one function (``while_grad_runner``).
"""

from __future__ import annotations

from dy2stat.runtime import shapes
from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW

__all__ = ["cond_lines", "dinput_sources", "needed_ops", "pred", "tuple_text", "targets",
           "while_grad_runner", "while_lines"]


def pred(value) -> bool:
    """A cond/while predicate, read on the host."""
    try:
        return bool(value)
    except ValueError:
        raise ValueError("a cond/while predicate must hold exactly one element, got shape "
                         f"{shapes.fmt(value.shape)}") from None


def tuple_text(items) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def targets(items) -> str:
    """The left-hand side of an assignment from a tuple (empty: no assignment)."""
    if not items:
        return ""
    return f"{items[0]}, = " if len(items) == 1 else f"{', '.join(items)} = "


def cond_lines(predicate: str, outs: list[str], call_true: str, call_false: str) -> list[str]:
    lhs = targets(outs)
    return [f"    if {predicate}:", f"        {lhs}{call_true}",
            "    else:", f"        {lhs}{call_false}"]


def while_lines(index: int, op: Operator, initial: list[str], carried: list[str],
                stack: str | None, cond: str, body: str) -> list[str]:
    """The loop: ``carried`` start as ``initial``; ``cond`` and ``body`` are the
    calls of the cond and body functions (``cond`` already a predicate)."""
    lines = [f"    {targets(carried)}{tuple_text(initial)}" if carried else "    pass"]
    if stack:
        lines.append(f"    {stack} = []")
    lines.append(f"    while {cond}:")
    n_saved = len(op.attrs.get("saved", [])) if stack else 0
    if stack and n_saved:
        # The body also returns the values the gradient reads: save them too.
        res = f"_r{index}"
        lines.append(f"        {res} = {body}")
        lines.append(f"        {stack}.append({tuple_text(carried)} + {res}[{len(carried)}:])")
        lines.append(f"        {targets(carried)}{res}[:{len(carried)}]")
    elif stack:
        lines.append(f"        {stack}.append({tuple_text(carried)})")
        lines.append(f"        {targets(carried)}{body}")
    else:
        lines.append(f"        {targets(carried)}{body}")
    return lines


def needed_ops(program: Program, ops: list[Operator], outs: list[str], block: Block):
    """``ops`` without those whose outputs nothing needs (for body recomputation)."""
    needed, kept = set(outs), []
    for op in reversed(ops):
        writes_scope = any((v := block.find_var(n)) is not None and v.persistable
                           for n in op.output_names())
        if op.type in CONTROL_FLOW or writes_scope or needed & set(op.output_names()):
            kept.append(op)
            needed |= set(op.input_names()) | _sub_block_reads(program, op)
    return kept[::-1]


def _sub_block_reads(program: Program, op: Operator) -> set:
    names = set()
    for idx in op.sub_blocks():
        if isinstance(idx, int) and 0 < idx < len(program.blocks):
            for inner in program.blocks[idx].ops:
                names |= set(inner.input_names()) | _sub_block_reads(program, inner)
    return names


def dinput_sources(op: Operator, lookup) -> list[int]:
    """For each DInput, the index of its captured Input (the float ones, in order)."""
    captured = op.inputs.get("Input", [])
    n = len(op.outputs.get("DInput", []))
    floats = [k for k, name in enumerate(captured)
              if (var := lookup(name)) is not None and var.dtype.kind == "f"]
    if len(floats) == n:
        return floats
    if len(captured) == n:
        return list(range(n))
    raise ValueError(f"while_grad: {n} DInput for {len(floats)} float captured inputs")


def while_grad_runner(ns: dict, fn_name: str, n_entry: int, n_grads: int, dtypes: list, xp):
    """The reverse loop of a while: pop each saved entry (carry, then saved values;
    a later gradient of the same loop may have appended more), apply the gradient."""
    n_in = len(dtypes)

    def while_grad(S, stack, inputs, douts, *free):
        fn = ns[fn_name]
        grads, acc = douts, [None] * n_in
        for entry in reversed(stack):
            res = fn(S, *entry[:n_entry], *grads, *free)
            grads = res[:n_grads]
            for j in range(n_in):
                g = res[n_grads + j]
                acc[j] = g if acc[j] is None else acc[j] + g
        for j in range(n_in):
            if acc[j] is None:  # the loop ran zero times
                x = inputs[j]
                acc[j] = xp.zeros(getattr(x, "shape", ()), dtype=dtypes[j] or x.dtype)
        return (*grads, *acc)

    return while_grad
