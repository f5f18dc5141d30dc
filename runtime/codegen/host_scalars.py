"""Loop counters that stay Python ints: an analysis of ``while`` ops.

A carried value of a ``while`` is a *counter* when it starts as a 0-d int64
constant (how ``i = 0`` enters a program), the cond block only compares it
with int constants, and the body only compares it and steps it by an int
constant (``i += 1``) into its next value. Its comparisons' results may only
be combined by logical ops, be the loop's predicate or a ``cond``'s.

A plan then keeps the counter a Python int for the whole loop (``v2 = v2 +
1``, ``v3 = v2 < 100``: no array call per iteration) and makes it a 0-d
array once the loop ends. Python ints do not wrap at 2**63 as int64 does; a
counter starts and steps by less than 2**31 in magnitude, so it would need
billions of iterations to get there.
"""

from __future__ import annotations

from dy2stat.runtime.ir import Block, Operator, Program

__all__ = ["COMPARE", "HOST_OPS", "STEP", "loop_counters"]

COMPARE = {"less_than": "<", "less_equal": "<=", "greater_than": ">", "greater_equal": ">=",
           "equal": "==", "not_equal": "!="}
STEP = {"add": "+", "subtract": "-"}
HOST_OPS = frozenset(COMPARE) | frozenset(STEP)  # what a plan computes on a counter
_LOGICAL = frozenset({"logical_and", "logical_or", "logical_xor", "logical_not"})
_SMALL = 2 ** 31


def loop_counters(program: Program, op: Operator, constant) -> set[int]:
    """The positions of ``op``'s carried values that are counters.

    ``constant(block, name)`` is the compile-time value of ``name`` as read
    in ``block`` (an array), or None."""
    if op.type != "while" or op.outputs.get("Carries"):
        return set()
    a = op.attrs
    cond_block, body = program.blocks[a["cond_block"]], program.blocks[a["body_block"]]
    parent = program.blocks[cond_block.parent_idx] if cond_block.parent_idx >= 0 else None
    found = set()
    for k, x in enumerate(op.inputs.get("X", [])):
        if not _small_int(constant(parent, x) if parent is not None else None):
            continue
        if (_only_compared(cond_block, a["cond_args"][k], {a["cond_out"]}, constant)
                and _stepped(body, a["body_args"][k], a["body_outs"], k, constant)):
            found.add(k)
    return found


def _small_int(value) -> bool:
    return (value is not None and value.shape == () and value.dtype.name == "int64"
            and abs(int(value)) < _SMALL)


def _readers(block: Block, name: str) -> list[Operator] | None:
    """The ops of ``block`` reading ``name``; None when a nested block reads it."""
    readers = []
    for op in block.ops:
        if name in op.input_names():
            readers.append(op)
        for idx in op.sub_blocks():
            if _read_below(block.program, idx, name):
                return None
    return readers


def _read_below(program: Program, idx: int, name: str) -> bool:
    for op in program.blocks[idx].ops:
        if name in op.input_names() or any(_read_below(program, i, name)
                                           for i in op.sub_blocks()):
            return True
    return False


def _named_by_attrs(block: Block, name: str) -> bool:
    """Whether a control-flow op of ``block`` names ``name`` in its attrs."""
    for op in block.ops:
        for key, value in op.attrs.items():
            if key.endswith("_block"):
                continue
            if value == name or (isinstance(value, list) and name in value):
                return True
    return False


def _comparison(op: Operator, name: str, block: Block, constant) -> bool:
    """``op`` compares ``name`` with an int constant."""
    if op.type not in COMPARE:
        return False
    x, y = op.inputs["X"][0], op.inputs["Y"][0]
    other = y if x == name else x
    return other != name and _small_int(constant(block, other))


def _only_compared(block: Block, name: str, predicates: set, constant) -> bool:
    """``name`` is only compared with int constants in ``block``, and the
    comparisons' results are only combined by logical ops or used as predicates."""
    readers = _readers(block, name)
    if readers is None or _named_by_attrs(block, name) or name in predicates:
        return False
    for op in readers:
        if not _comparison(op, name, block, constant):
            return False
        if not _predicate_only(block, op.output_names()[0]):
            return False
    return True


def _predicate_only(block: Block, name: str) -> bool:
    """``name`` (a comparison's result) is only combined by logical ops or used as
    a ``cond``'s predicate in ``block`` (or yielded as the loop's, by the caller)."""
    users = _readers(block, name)
    if users is None or _named_by_attrs(block, name):
        return False
    return all(u.type in _LOGICAL or (u.type == "cond" and u.inputs["Cond"] == [name])
               for u in users)


def _stepped(body: Block, name: str, body_outs: list, k: int, constant) -> bool:
    """In the loop body, ``name`` is compared (as above) and stepped by an int
    constant into ``body_outs[k]``, which nothing else reads."""
    readers = _readers(body, name)
    if readers is None or _named_by_attrs(body, name) or name in body_outs:
        return False
    steps = [op for op in readers if op.type in STEP]
    if len(steps) != 1:
        return False
    (step,) = steps
    x, y = step.inputs["X"][0], step.inputs["Y"][0]
    other = y if x == name else x
    if other == name or not _small_int(constant(body, other)) or (
            step.type == "subtract" and x != name):
        return False
    (out,) = step.output_names()
    if body_outs.count(out) != 1 or body_outs.index(out) != k or _readers(body, out) != []:
        return False
    if _named_by_attrs(body, out):
        return False
    others = [op for op in readers if op is not step]
    for op in others:
        if not _comparison(op, name, body, constant):
            return False
        (cmp_out,) = op.output_names()
        if cmp_out in body_outs or not _predicate_only(body, cmp_out):
            return False
    return True
