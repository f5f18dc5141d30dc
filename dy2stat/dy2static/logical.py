"""`and`, `or`, `not` and chained comparisons at run time.

Operands arrive as zero-argument functions, so Python values short-circuit exactly as in
the original (`a or f()` does not call `f` when `a` is truthy). Once an operand is a static
Variable the result is a bool tensor (`logical_and`/`logical_or`) and the later operands are
evaluated to build it.
"""

from __future__ import annotations

import operator

from dy2stat.dy2static import values


def convert_logical_and(*operands):
    """`a and b and ...` with each operand given as a function."""
    value = operands[0]()
    for operand in operands[1:]:
        if values.is_static(value):
            value = _predicate(value) & _predicate(operand())
        elif not value:
            return value
        else:
            value = operand()
    return value


def convert_logical_or(*operands):
    """`a or b or ...` with each operand given as a function."""
    value = operands[0]()
    for operand in operands[1:]:
        if values.is_static(value):
            value = _predicate(value) | _predicate(operand())
        elif value:
            return value
        else:
            value = operand()
    return value


def convert_logical_not(value):
    """`not value`: a bool tensor for a static value."""
    if values.is_static(value):
        return ~values.as_predicate(value)
    return not value


_COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "is": operator.is_,
    "is not": operator.is_not,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


def convert_compare(left, *rest):
    """`left op1 b op2 c ...` given as `left, 'op1', lambda: b, 'op2', lambda: c`.

    Each middle operand is evaluated once; like Python, a false Python result stops the
    chain, and static results are combined with `logical_and`.
    """
    value = None
    for op, operand in zip(rest[::2], rest[1::2]):
        right = operand()
        result = _COMPARISONS[op](left, right)
        if value is None or not (values.is_static(value) or values.is_static(result)):
            value = result
        else:
            value = _predicate(value) & _predicate(result)
        if not values.is_static(value) and not value:
            return value
        left = right
    return value


def _predicate(value):
    """A bool tensor for a static value, a Python bool otherwise."""
    if values.is_static(value):
        return values.as_predicate(value)
    return bool(value)
