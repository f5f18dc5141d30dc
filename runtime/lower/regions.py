"""Which ops of a block lower to one native function: regions.

An op lowers on a target when the table has a rule for it there
(``rules.rule_for``), the rule accepts this use of it (dtypes, axes,
shapes), it writes no persistable variable, and -- for ``cond`` and
``while`` -- every op of its blocks lowers too. A region is a run of
consecutive such ops of one block; it is compiled when it pays: it holds
control flow (a whole loop becomes one machine-code function) or at least
``MIN_OPS`` ops (below that, the native call costs what the kernel calls it
replaces do).
"""

from __future__ import annotations

from dataclasses import dataclass

from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.lower.rules import rule_for
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW

__all__ = ["MIN_OPS", "Lowering", "lowerable", "spans"]

MIN_OPS = 4
# What native code handles: no float16 (no IEEE half arithmetic there), no complex.
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64"})


@dataclass(frozen=True)
class Lowering:
    """What a plan lowers to: the target, and the loosest rounding its rules may
    have (``rules.ROUNDINGS``)."""

    target: str = "cpu"
    rounding: str = "order"


def lowerable(program: Program, op: Operator, var_of, lowering: Lowering) -> bool:
    """Whether ``op`` (its names looked up with ``var_of``) lowers on the target."""
    rule = rule_for(op.type, lowering.target, lowering.rounding)
    if rule is None:
        return False
    names = op.input_names() + op.output_names()
    for name in names:
        var = var_of(name)
        if var is None or var.dtype.name not in DTYPES:
            return False
    if any(var_of(n).persistable for n in op.output_names()):
        return False
    if rule.accepts is not None and not rule.accepts(op, _with_blocks(program, op, var_of),
                                                     lowering.rounding):
        return False
    if op.type in CONTROL_FLOW:
        for idx in op.sub_blocks():
            block = program.blocks[idx]
            if not all(lowerable(program, inner, block.find_var, lowering) for inner in block.ops):
                return False
    return True


def _with_blocks(program: Program, op: Operator, var_of):
    """``var_of``, which for a control-flow op also finds the names of its blocks
    (a rule may ask about a loop's predicate)."""
    blocks = [program.blocks[idx] for idx in op.sub_blocks()]
    if not blocks:
        return var_of

    def lookup(name):
        return var_of(name) or next((v for b in blocks if (v := b.find_var(name))), None)

    return lookup


def spans(program: Program, ops: list[Operator], var_of, lowering: Lowering) -> list[tuple]:
    """``(start, stop)`` of each region of ``ops`` worth compiling."""
    found, start = [], None
    flags = [lowerable(program, op, var_of, lowering) for op in ops] + [False]
    for i, ok in enumerate(flags):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            run = ops[start:i]
            if len(run) >= MIN_OPS or any(op.type in CONTROL_FLOW for op in run):
                found.append((start, i))
            start = None
    return found
