"""First-class "no value here" values for names that some path leaves unassigned.

Generated code binds `y = _jst.Undefined('y')` before an `if` or loop that may leave `y`
unassigned, so that the bodies can declare `nonlocal y`. On the Python path a use of such a
value raises what Python raises (UnboundLocalError naming `y`). On the static path a branch
that defines `y` while the other does not yields an Undefined that carries the reason; using
it raises an UndefinedVariableError naming `y`, the branch or loop and the user's line.
"""

from __future__ import annotations

from dy2stat.dy2static.errors import Dy2StaticError


class UndefinedVariableError(Dy2StaticError, UnboundLocalError):
    """A variable used where a tensor-dependent branch or loop may have left it unassigned."""


class Undefined:
    """The value of a name that no executed assignment has bound; every use raises."""

    __slots__ = ("name", "reason", "where")

    def __init__(self, name: str, reason: str | None = None, where=None) -> None:
        self.name = name
        # reason: why the static path has no value (None: plain Python "not assigned yet").
        self.reason = reason
        # where: (filename, lineno, source line) of the `if`/loop that left it undefined.
        self.where = where

    def error(self) -> Exception:
        """The exception a use of this value raises."""
        if self.reason is None:
            return UnboundLocalError(
                f"cannot access local variable '{self.name}' where it is not associated "
                "with a value"
            )
        filename, lineno, source = self.where or (None, None, None)
        return UndefinedVariableError(
            f"'{self.name}' is used here, but {self.reason}",
            filename,
            lineno,
            source,
            f"Assign '{self.name}' before the statement, or on every path through it.",
        )

    def __repr__(self) -> str:
        return f"<undefined {self.name!r}>"

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self.error()

    def _raise(self, *args, **kwargs):
        raise self.error()

    __bool__ = __len__ = __iter__ = __call__ = __getitem__ = __setitem__ = _raise
    __int__ = __float__ = __index__ = __neg__ = __pos__ = __abs__ = __invert__ = _raise
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _raise
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _raise
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _raise
    __lt__ = __le__ = __gt__ = __ge__ = _raise
    __array__ = _raise

    def __eq__(self, other):
        raise self.error()

    __ne__ = __eq__
    __hash__ = object.__hash__


class UndefinedReturnValue:
    """The return value of a converted function before any `return` ran.

    On the static path a branch that returns while the other does not is merged with a
    placeholder of the same type: the `do_return` flag guarantees it is never observed.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no return value yet>"


def is_undefined(value) -> bool:
    """True for Undefined and UndefinedReturnValue."""
    return isinstance(value, (Undefined, UndefinedReturnValue))
