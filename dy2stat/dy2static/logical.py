"""`and`, `or`, `not` and chained comparisons at run time.

Operands arrive as zero-argument functions, so Python values short-circuit exactly as in
the original (`a or f()` does not call `f` when `a` is truthy). That holds after a static
operand too: a later Python operand that decides the result (truthy for `or`, falsy for
`and`) is returned and nothing after it runs, one that does not is skipped. Static operands
are combined into a bool tensor (`logical_and`/`logical_or`); a lone static operand is the
result as it is.
"""

from __future__ import annotations

import operator

from dy2stat.dy2static import ifelse, values
from dy2stat.dy2static.tensor_array import truth
from dy2stat.runtime import dtypes


def convert_logical_and(*operands, condition=False):
    """`a and b and ...` with each operand given as a function; `condition`: only its
    truth is used (the test of an `if` or `while`)."""
    return _chain(operands, False, operator.and_, condition)


def convert_logical_or(*operands, condition=False):
    """`a or b or ...` with each operand given as a function (see convert_logical_and)."""
    return _chain(operands, True, operator.or_, condition)


def _chain(operands, decisive: bool, combine, condition: bool):
    """Evaluate operands in order until a Python one whose truth is `decisive`."""
    static = value = None
    for operand in operands:
        value = operand()
        if values.is_static(value):
            static = value if static is None else _combine(combine, static, value, condition)
        elif bool(value) is decisive:
            return value
    return value if static is None else static


def _combine(combine, a, b, condition: bool):
    if condition or (values.dtype_of(a) == dtypes.bool_ and values.dtype_of(b) == dtypes.bool_):
        return combine(values.as_predicate(a), values.as_predicate(b))
    # A value keeps Python's meaning: `a and b` is b where a holds, else a.
    where = values.caller_location(4)  # the user's expression, past _chain and its caller
    pred = values.as_predicate(a)
    if combine is operator.and_:
        return ifelse.select(pred, lambda: b, lambda: a, where, "the value of `and`")
    return ifelse.select(pred, lambda: a, lambda: b, where, "the value of `or`")


def convert_logical_not(value):
    """`not value`: a bool tensor for a static value."""
    value = truth(value)
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
    chain (also after a static one: it decides the result), and static results are combined
    with `logical_and`.
    """
    static = result = None
    for op, operand in zip(rest[::2], rest[1::2]):
        right = operand()
        result = _COMPARISONS[op](left, right)
        if values.is_static(result):
            static = result if static is None else _combine(operator.and_, static, result, True)
        elif not result:
            return result
        left = right
    return result if static is None else static
