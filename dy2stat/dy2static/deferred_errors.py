"""Errors a tensor-dependent branch raises while it is traced, raised when it runs.

Eagerly a branch raises only on the calls that take it: a `raise` that validates the
input, a shape that does not fit there, a read of a name no path assigned. Traced, both
branches run; such an error ends its branch's block with an `assert` op that raises it
when the program runs that branch (`ifelse` decides when, `raise_when_run` builds it).
"""

from __future__ import annotations

import builtins

from dy2stat.dy2static import error_map
from dy2stat.dy2static.errors import Dy2StaticError, Retrace
from dy2stat.dy2static.undefined import UndefinedVariableError
from dy2stat.runtime.registry import get_op
from dy2stat.static.builder import error_location, static_apply


def deferrable(error: Exception) -> bool:
    """Whether a branch that raised `error` while the program was built may raise it
    when the program runs that branch instead: an error of the user's code or of an op
    it called (a read of a name no path assigned, a shape that does not fit), not a limit
    of conversion (the other Dy2StaticErrors: those are reported at once) or a signal to
    trace again."""
    if isinstance(error, UndefinedVariableError):
        return True
    return not isinstance(error, (Dy2StaticError, Retrace))


def raise_when_run(error: Exception) -> None:
    """An `assert` op that raises `error` (its type if builtin or dy2stat's, else the
    nearest such type it derives from; its message) when the program runs, at the user's
    line that raised it while the program was built."""
    kind = next(_error_name(c) for c in type(error).__mro__ if _error_name(c))
    error_map.map_error(error)  # notes the user's line and excerpt, as when raised at once
    one = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else None
    never = static_apply(get_op("full"), [], {"shape": [], "value": 0.0, "dtype": "bool"})
    static_apply(get_op("assert"), [never], {
        "message": str(error) if one is None else one,  # (a KeyError's str quotes it)
        "error": kind, "note": "\n".join(getattr(error, "__notes__", ()))})
    op = never.block.ops[-1]
    op.origin = error_location(error) or op.origin


def _error_name(kind: type) -> str | None:
    """What an `assert` op calls exception class `kind`, if it can raise it."""
    if getattr(builtins, kind.__name__, None) is kind:
        return kind.__name__
    if kind.__module__.startswith("dy2stat.") and "." not in kind.__qualname__:
        return f"{kind.__module__}.{kind.__qualname__}"
    return None
