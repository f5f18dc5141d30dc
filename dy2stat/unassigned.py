"""The base of values that stand for a name no executed assignment has bound.

Converted code binds such a value (dy2static's `Undefined`) where a path may leave a name
unassigned. Ops, eager or static, given one raise its `error()`: what Python raises
reading the name, not a complaint about the input's type.
"""

from __future__ import annotations


class Unassigned:
    """A value that must never be used: every use raises `error()`."""

    __slots__ = ()

    def error(self) -> Exception:
        return UnboundLocalError("a local variable is used before it is assigned")
