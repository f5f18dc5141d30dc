"""First-class "no value here" values for names that some path leaves unassigned.

Generated code binds `y = _jst.Undefined('y')` before an `if` or loop that may leave `y`
unassigned, so that the bodies can declare `nonlocal y`. On the Python path a use of such a
value raises what Python raises (UnboundLocalError naming `y`). On the static path a branch
that gives `y` a string or other non-number Python value while the other does not assign
it yields an Undefined that carries the reason; using it raises an UndefinedVariableError
naming `y`, the branch and the user's line.

A name first assigned in a tensor-dependent loop is assigned only if the loop runs, and a
name only one branch of a tensor-dependent `if` assigns only if that branch runs, which is
known when the program runs: after the loop or `if` it is a `MaybeUndefined`, a Variable
that carries a bool Variable `assigned`. Where it is read, an `assert` op checks the flag
and raises UnboundLocalError naming it and the loop or `if`; a path that does not read it
never checks. `cond` and `while` ops carry the flag along with the value (`AssignedFlags`).
A tensor-dependent branch that reads a name no path assigned (or raises another error of
the user's code) raises the same error when the program runs that branch
(`deferred_errors`), not while the program is built.
"""

from __future__ import annotations

from dy2stat.dy2static.errors import Dy2StaticError
from dy2stat.runtime.registry import get_op
from dy2stat.static import nest
from dy2stat.static.builder import static_apply
from dy2stat.static.variable import Variable
from dy2stat.unassigned import Unassigned


class UndefinedVariableError(Dy2StaticError, UnboundLocalError):
    """A variable used where a tensor-dependent branch or loop may have left it unassigned."""


class Undefined(Unassigned):
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


class MaybeUndefined(Variable):
    """The value of `label` after tensor-dependent loops that assign it, which may have run
    zero times, or an `if` only one of whose branches does; `assigned` tells. `causes`:
    each loop's (file, line, source), each `if`'s (file, line, source, the branch)."""

    __slots__ = ("assigned", "label", "causes")

    def __init__(self, block, name: str, assigned, label: str, causes: tuple) -> None:
        super().__init__(block, name)
        self.assigned, self.label, self.causes = assigned, label, causes

    @classmethod
    def of(cls, value: Variable, assigned, label: str, causes: tuple) -> MaybeUndefined:
        return cls(value.block, value.name, assigned, label, causes)

    def read(self) -> Variable:
        """The value, after an `assert` op that raises UnboundLocalError when the program
        runs and it was never assigned."""
        static_apply(get_op("assert"), [self.assigned],
                     {"message": self.message(), "error": "UnboundLocalError"})
        return Variable(self.block, self.name)

    def message(self) -> str:
        loops = [cause for cause in self.causes if len(cause) == 3]
        reasons = []
        for cause in self.causes:
            if len(cause) == 4:
                filename, lineno, source, branch = cause
                reasons.append(f"the tensor-dependent `if` at {filename}:{lineno} (`{source}`) "
                               f"assigns it only in its {branch} branch, which did not run")
            elif cause is loops[0]:  # the loops together
                where = " and ".join(f"{filename}:{lineno} (`{source}`)"
                                     for filename, lineno, source in loops)
                many = len(loops) > 1
                reasons.append(f"the tensor-dependent loop{'s' if many else ''} at {where} "
                               f"that {'assign' if many else 'assigns'} it ran zero times")
        return (f"cannot access local variable '{self.label}' where it is not associated "
                f"with a value: {'; or '.join(reasons)}")


def maybe_undefined(value, assigned, label: str, causes: tuple = ()):
    """`value` (a Variable, or a structure of them) as a MaybeUndefined whose `assigned`
    is the given flag."""
    return nest.pack_as(value, [MaybeUndefined.of(v, assigned, label, causes)
                                if isinstance(v, Variable) else v
                                for v in nest.flatten(value)])


def causes_of(value) -> tuple:
    """The `causes` of the first MaybeUndefined in `value` (a structure), or ()."""
    return next((v.causes for v in nest.flatten(value) if isinstance(v, MaybeUndefined)), ())


def has_maybe_undefined(value) -> bool:
    return any(isinstance(v, MaybeUndefined) for v in nest.flatten(value))


class AssignedFlags:
    """State accessors in which each slot of `slots` (whose value may be a MaybeUndefined)
    is two slots: the value, and whether it is assigned (a bool Variable, or True). A cond
    or while op built over them carries the flags as values of their own.

    `where`: the loop being built (it joins the loops that assign those slots), or None.
    `causes`: for a slot whose entry value is not yet a MaybeUndefined, what may leave it
    unassigned (`MaybeUndefined.causes`), learnt from a branch.
    """

    def __init__(self, get_state, set_state, names, slots, entry, where=None,
                 causes=None) -> None:
        self._get, self._set, self.slots = get_state, set_state, set(slots)
        self.names = tuple(n for i, n in enumerate(names)
                           for n in ((n, f"whether {n} is assigned") if i in self.slots
                                     else (n,)))
        self._labels = {i: names[i] for i in self.slots}
        self._causes = {i: causes_of(entry[i]) or (causes or {}).get(i, ())
                        for i in self.slots}
        # Per slot, the leaves the flag is about, where only some are (a dict key first
        # set in a loop, beside keys set before): {leaf index: label}; None for all.
        self._leaves = {}
        for i in self.slots:
            leaves = nest.flatten(entry[i])
            maybe = {j: v.label for j, v in enumerate(leaves) if isinstance(v, MaybeUndefined)}
            variables = [j for j, v in enumerate(leaves) if isinstance(v, Variable)]
            self._leaves[i] = maybe if maybe and len(maybe) < len(variables) else None
        if where is not None:
            for i in self.slots:
                if where not in self._causes[i]:
                    self._causes[i] += (where,)

    def split(self, state) -> list:
        out = []
        for i, value in enumerate(state):
            if i not in self.slots:
                out.append(value)
                continue
            leaves = nest.flatten(value)  # a tuple assigned in a loop: one flag for all
            maybe = [v for v in leaves if isinstance(v, MaybeUndefined)]
            plain = [Variable(v.block, v.name) if isinstance(v, MaybeUndefined) else v
                     for v in leaves]
            out += [nest.pack_as(value, plain), maybe[0].assigned if maybe else True]
        return out

    def join(self, flat) -> list:
        out, it = [], iter(flat)
        for i in range(len(self.names) - len(self.slots)):
            value = next(it)
            if i in self.slots:
                assigned = next(it)
                if assigned is not True:
                    value = self._maybe(i, value, assigned)
            out.append(value)
        return out

    def _maybe(self, i, value, assigned):
        some = self._leaves[i]
        if some is None:
            return maybe_undefined(value, assigned, self._labels[i], self._causes[i])
        leaves = nest.flatten(value)
        for j, label in some.items():
            leaves[j] = MaybeUndefined.of(leaves[j], assigned, label, self._causes[i])
        return nest.pack_as(value, leaves)

    def get(self):
        return self.split(self._get())

    def set(self, flat) -> None:
        self._set(self.join(flat))
