"""`if`/`elif`/`else` and conditional expressions at run time: Python, or a `cond` op.

Generated code hands over the branches as closures that assign the enclosing function's
variables (`nonlocal`), and `get_state`/`set_state` functions that read and assign the
variables the branches change (their *state*: `names`). A Python predicate runs one branch,
exactly as the original code. A static predicate traces both branches into the blocks of a
`cond` op, restoring the state in between, and binds the state to the op's outputs.

A branch that jumped -- it set a flag of `exits` (return, break, continue) to True, it is the
false branch of an `if not flag:` guard, or each of its paths ends in a jump (`left`) -- may
leave a variable unassigned that the other branch assigns: where nothing reads it after the
jump, the variable is the op's output, the branch that jumped yielding a placeholder for it.
"""

from __future__ import annotations

from dy2stat.dy2static import values
from dy2stat.dy2static.deferred_errors import deferrable, raise_when_run
from dy2stat.dy2static.errors import Dy2StaticError, Retrace
from dy2stat.dy2static.tensor_array import TensorArray, truth
from dy2stat.dy2static.undefined import (
    AssignedFlags,
    Undefined,
    UndefinedReturnValue,
    causes_of,
    has_maybe_undefined,
    maybe_undefined,
)
from dy2stat.static import control_flow, nest


class BranchMismatchError(Dy2StaticError, TypeError):
    """The branches of a tensor-dependent `if` leave a variable with different types."""


class UncatchableBranchError(Dy2StaticError, RuntimeError):
    """A branch of a tensor-dependent `if` raises inside a `try` of the same function."""


class _Replan(Retrace):
    """The true branch must yield something else for one slot: trace both branches again."""

    def __init__(self, slot: int, plan) -> None:
        super().__init__(slot)
        self.slot, self.plan = slot, plan


_OUTPUT = object()  # a slot's value after the `if` is the cond op's output
_ARRAY_OUTPUT = object()  # ... the tensor array whose buffer is the op's output
_CONSTANT_LEAVES = (type(None), str, bytes, type(Ellipsis))


class _Mixed:
    """A slot's value after the `if`: a list, tuple or dict holding tensors beside Python
    values that both branches give alike (`return out, None`); the op carries its
    tensors, the values stay as they are."""

    def __init__(self, structure) -> None:
        self.structure = structure

    def pack(self, outs):
        return nest.replace_leaves(self.structure, values.is_tensor_like, outs)


def _is_mixed(value) -> bool:
    """Whether `value` is a container of tensors and constant Python leaves (None, str)."""
    if not isinstance(value, (list, tuple, dict)) or values.is_tensor_like(value):
        return False
    leaves = nest.flatten(value)
    return any(values.is_tensor_like(v) for v in leaves) and all(
        values.is_tensor_like(v) or type(v) in _CONSTANT_LEAVES for v in leaves)


class _Flagged:
    """A slot's value after the `if` when only one branch (`branch`, "true" or "false")
    assigns it: the op carries the value (a placeholder from the other branch) and
    whether it is assigned, and reading it checks that when the program runs."""

    def __init__(self, name: str, where, branch: str) -> None:
        self.name, self.cause = name, (*where, branch)

    def pack(self, outs):
        value, assigned = outs
        return maybe_undefined(value, assigned, self.name, (self.cause,))


def _carried_leaves(value) -> tuple:
    return tuple(v for v in nest.flatten(value) if values.is_tensor_like(v))


def convert_ifelse(pred, true_fn, false_fn, get_state=None, set_state=None, names=None,
                   exits=None, guard=None, left=(None, None), dead=(), caught=None):
    """`true_fn()` if `pred` else `false_fn()`; a `cond` op when `pred` is static.

    With `names` (the state's names; get/set_state are None when there is no state) the
    branches are statements; without, they are the two expressions of `a if pred else b`
    and the chosen value is returned. `exits`: {jump flag: the names nothing reads after
    the jump (None: all)}; `guard`: the flag of an `if not flag:`; `left`: per branch whose
    every path jumps, the names nothing reads after it (True: all; None: it goes on);
    `dead`: the local names nothing reads after the `if` (the branches may leave them
    different: a name only the branches use); `caught`: the line of the `try` (with
    handlers) of the same function whose body holds the `if`, if any.
    """
    pred = truth(pred)
    if not values.is_static(pred):
        return true_fn() if pred else false_fn()
    where = values.caller_location()
    pred = values.as_predicate(pred)
    if names is not None:
        get_state, set_state = values.state_accessors(get_state, set_state)
        static_if(pred, true_fn, false_fn, get_state, set_state, names, where,
                  exits, guard, left, dead, caught)
        return None
    return select(pred, true_fn, false_fn, where)


def select(pred, true_fn, false_fn, where, label="the conditional expression"):
    """`true_fn()` if the bool Variable `pred` else `false_fn()`, as a cond op's output;
    `where` is the user's expression, `label` what messages call its value."""
    box = [Undefined("value")]

    def branch(fn):
        return lambda: box.__setitem__(0, fn())

    static_if(pred, branch(true_fn), branch(false_fn), lambda: (box[0],),
              lambda state: box.__setitem__(0, state[0]), (label,), where)
    return box[0]


class _Exits:
    """Which branches jumped, what they leave that nothing reads, and the `try` around
    the `if` (`caught`: its line, or None)."""

    def __init__(self, names=(), exits=None, guard=None, left=(None, None), dead=(),
                 caught=None) -> None:
        self.index = {name: i for i, name in enumerate(names)}
        self.exits, self.guard, self.left = exits or {}, guard, left
        self.dead = frozenset(dead)  # read after neither branch
        self.caught = caught

    def unread(self, branch: int, state: list):
        """What `branch` (0: true, 1: false) leaves unread with its `state`: None for all,
        else a set of names (empty where it did not jump)."""
        if self.left[branch] is True:
            return None
        names = set(self.left[branch] or ())
        for flag, unread in self.exits.items():
            i = self.index.get(flag)
            if (branch == 1 and flag == self.guard) or (i is not None and state[i] is True):
                if unread is None:
                    return None
                names.update(unread)
        return names

    def set_in_both(self, states, raised=(False, False)) -> list[int]:
        """The slots of the flags both branches set (a branch that `raised` never goes on:
        it sets them all)."""
        return [i for flag, i in self.index.items() if flag in self.exits and
                all(s[i] is True or (b == 1 and flag == self.guard) or raised[b]
                    for b, s in enumerate(states))]


def static_if(pred, true_fn, false_fn, get_state, set_state, names, where, exits=None,
              guard=None, left=(None, None), dead=(), caught=None) -> None:
    """A `cond` op on the bool Variable `pred` whose branches change the state; `where` is
    the user's statement; `exits`, `guard`, `left` say where branches jumped, `dead` what
    nothing reads after it, `caught` which `try` holds it (see convert_ifelse)."""
    entry = list(get_state())
    program = values.current_program()
    first_block = len(program.blocks)
    # The slots whose value loops may have left unassigned: the op carries their flags.
    maybe = {i for i, v in enumerate(entry) if has_maybe_undefined(v)}
    learnt = {}  # the causes of slots a branch made MaybeUndefined
    while True:
        flags = AssignedFlags(_noticing_maybe(get_state, maybe), set_state, names, maybe, entry,
                              causes=learnt)
        jumps = _Exits(flags.names, exits, guard, left, dead, caught)  # by the flags' slots
        try:
            _trace_with_plans(pred, true_fn, false_fn, flags, where, flags.split(entry),
                              program, first_block, jumps)
            return
        except _NewlyMaybe as new:  # a loop in a branch assigned it first: carry its flag
            del program.blocks[first_block:]
            set_state(entry)
            maybe.add(new.slot)
            learnt[new.slot] = new.causes


def _trace_with_plans(pred, true_fn, false_fn, flags, where, init, program,
                      first_block, exits) -> None:
    plans: dict[int, tuple] = {}
    while True:
        try:
            _trace(pred, true_fn, false_fn, flags.get, flags.set, flags.names, where, init,
                   plans, exits)
            return
        except _Replan as replan:
            del program.blocks[first_block:]
            if replan.slot in plans:
                raise RuntimeError(
                    f"cond: cannot settle the type of {flags.names[replan.slot]}") from None
            kind, spec = replan.plan
            if kind == "array":  # a list one branch grows more: both grow a tensor array
                items = init[replan.slot]
                init[replan.slot] = (TensorArray.from_list(items) if items else
                                     TensorArray.empty(spec.shape, spec.dtype))
            plans[replan.slot] = replan.plan


class _NewlyMaybe(Retrace):
    """A branch left slot `slot` a MaybeUndefined: trace again carrying its flag."""

    def __init__(self, slot: int, causes: tuple) -> None:
        super().__init__(slot)
        self.slot, self.causes = slot, causes


def _noticing_maybe(get_state, maybe: set):
    """`get_state` that raises _NewlyMaybe for a slot outside `maybe` holding a
    MaybeUndefined."""
    def get():
        state = list(get_state())
        for i, value in enumerate(state):
            if i not in maybe and has_maybe_undefined(value):
                raise _NewlyMaybe(i, causes_of(value))
        return state

    return get


def _trace(pred, true_fn, false_fn, get_state, set_state, names, where, init, plans,
           exits) -> None:
    seen: dict[str, list] = {}

    def run_true():
        seen["true_entry"] = values.snapshot(init)
        seen["true_marks"] = [_mark(v) for v in seen["true_entry"]]
        set_state(seen["true_entry"])
        seen["true_raised"] = _run_branch(true_fn, seen["true_entry"], set_state, where,
                                          exits.caught)
        seen["true"] = list(get_state())
        seen["yield"] = [_true_yield(i, t, plans) for i, t in enumerate(seen["true"])]
        return seen["yield"]

    def run_false():
        seen["false_entry"] = values.snapshot(init)
        false_marks = [_mark(v) for v in seen["false_entry"]]
        set_state(seen["false_entry"])
        raised = (seen["true_raised"], _run_branch(false_fn, seen["false_entry"], set_state,
                                                   where, exits.caught))
        if all(raised):  # the statement raises whichever way it goes
            raise raised[0]
        out, results = [], []
        state = list(get_state())
        unread = tuple(None if raised[b] else exits.unread(b, s)
                       for b, s in enumerate((seen["true"], state)))
        for i, f in enumerate(state):
            slot = _Slot(i, names[i], where, seen["true"][i], seen["yield"][i], f,
                         [u is None or names[i] in u for u in unread], names[i] in exits.dead,
                         plans.get(i))
            unchanged = _same(_mark(slot.t), seen["true_marks"][i]) and \
                _same(_mark(f), false_marks[i])
            fy, result = slot.merge()
            out.append(fy)
            results.append(init[i] if unchanged and result is _OUTPUT else result)
            if result is _ARRAY_OUTPUT:
                out[-1] = fy.buffer
        for i in exits.set_in_both((seen["true"], state), raised):
            results[i] = True  # jumped either way (a guard's false branch leaves a tensor)
        seen["results"] = results
        return out

    outs = control_flow.cond(pred, run_true, run_false)
    set_state([o if r is _OUTPUT else TensorArray(o) if r is _ARRAY_OUTPUT else
               r.pack(o) if isinstance(r, (_Mixed, _Flagged)) else r
               for o, r in zip(outs, seen["results"])])


def _run_branch(fn, entry, set_state, where, caught) -> Exception | None:
    """Trace the branch `fn`; the error it raised, if any (see `deferrable`).

    That branch becomes one that raises the error when the program runs it: eagerly, a
    call that never takes it never raises (the other branch of an enclosing `if` always
    jumped, say, or the inputs that reach it have other shapes). Its state is left as on
    `entry`, and nothing after it reads what it yields. Inside a `try` of the user's
    function (`caught`: its line) the error is refused: that `try` would catch it
    eagerly, but cannot catch an error of the running program.
    """
    try:
        fn()
    except Exception as error:
        if not deferrable(error):
            raise
        if caught is not None:
            raise UncatchableBranchError(
                f"a branch of this tensor-dependent `if` raises {type(error).__name__} "
                f"({error}) inside the `try` at line {caught}: the program takes the branch "
                "when it runs, where a `try` of converted code does not catch its errors",
                *where, "Raise it on a Python value, or put the `try` outside the converted "
                "code.") from error
        raise_when_run(error)
        set_state(entry)
        return error
    return None


def _mark(value):
    """What tells that a branch left a value as it was (None: cannot tell, e.g. a list that
    may have been appended to in place)."""
    if values.is_static(value):
        return ("variable", value.name)  # x[i] = v rebinds the Variable's name in place
    if isinstance(value, (list, dict, tuple)) or hasattr(type(value), "snapshot"):
        return None
    return ("object", id(value))


def _same(mark, entry_mark) -> bool:
    return entry_mark is not None and mark == entry_mark


def _true_yield(i: int, t, plans: dict):
    if isinstance(t, TensorArray):
        return t.buffer
    plan = plans.get(i)
    if plan is not None and plan[0] != "array":
        kind, spec = plan
        if kind == "dtype":
            return values.constant(t, spec)
        if kind == "flagged":  # the value (or a placeholder) and whether it is assigned
            if type(t) is Undefined:
                return values.placeholders(spec), values.constant(False, "bool")
            return _as_tensors(t), values.constant(True, "bool")
        return values.placeholders(spec)
    if _is_mixed(t):
        return _carried_leaves(t)
    return t if values.is_tensor_like(t) else None


class _Slot:
    """One state variable after both branches ran: what the false branch yields, and its
    value after the `if` (_OUTPUT: the op's output)."""

    def __init__(self, index, name, where, t, ty, f, unread=(False, False),
                 dead=False, plan=None) -> None:
        self.index, self.name, self.where = index, name, where
        self.t, self.ty, self.f = t, ty, f
        self.unread = unread  # (true, false): nothing reads it after the branch (a jump)
        self.dead = dead  # nothing reads it after the `if`
        self.plan = plan  # how a replan made the true branch yield it, or None

    def merge(self):
        try:
            return self._merge()
        except BranchMismatchError:
            # A list or an object a branch changed in place may be seen through another
            # name: only a value that cannot change is as good as unread.
            if not (self.dead and _unchangeable(self.t) and _unchangeable(self.f)):
                raise
        # Branches that disagree on a value nothing reads: no output; unbound after.
        ty = self.ty
        fy = None if ty is None else values.placeholders(
            nest.pack_as(ty, [values.Spec.of(v) for v in nest.flatten(ty)]))
        return fy, Undefined(self.name)

    def _merge(self):
        t, ty, f = self.t, self.ty, self.f
        if self.plan is not None and self.plan[0] == "flagged":
            return self._flagged()
        if isinstance(t, TensorArray) and isinstance(f, TensorArray):
            return TensorArray(self._match(ty, f.buffer)), _ARRAY_OUTPUT
        if _grown_differently(t, f):
            element = (t if len(t) > len(f) else f)[-1]
            raise _Replan(self.index, ("array", values.Spec.of(element)))
        array = t if isinstance(t, TensorArray) else f
        if isinstance(array, TensorArray) and isinstance(t if array is f else f, list):
            # An if inside one branch made the list a tensor array: so must this one.
            raise _Replan(self.index, ("array", values.Spec.of(array.buffer[0])))
        if values.is_number(t) and _same_python_value(t, f):
            return (f if ty is not None else None), t  # the same number either way: kept
        if _is_mixed(t):
            return self._match_mixed(ty, t, f)
        if ty is not None:
            if values.is_tensor_like(f):
                return self._match(ty, f), _OUTPUT
            if isinstance(f, (Undefined, UndefinedReturnValue)):
                fy = values.placeholders(ty)
                if isinstance(f, UndefinedReturnValue) or self.unread[1]:
                    return fy, _OUTPUT
                if _flaggable(t):
                    raise _Replan(self.index, ("flagged", None))
                return fy, self._undefined("true")
            raise self._mismatch(f"{values.describe(t)} in the true branch but "
                                 f"{values.describe(f)} in the false branch")
        if f is t:
            return None, t
        if isinstance(t, UndefinedReturnValue) or (isinstance(t, Undefined) and
                                                   self.unread[0]):
            if values.is_tensor_like(f):  # the true branch must yield a placeholder too
                spec = nest.pack_as(f, [values.Spec.of(v) for v in nest.flatten(f)])
                raise _Replan(self.index, ("placeholder", spec))
            return None, f
        if isinstance(f, UndefinedReturnValue):
            return None, t
        if isinstance(t, Undefined):
            if _flaggable(f):
                spec = nest.pack_as(f, [values.Spec.of(v) for v in nest.flatten(f)])
                raise _Replan(self.index, ("flagged", spec))
            return None, f if isinstance(f, Undefined) else self._undefined("false")
        if isinstance(f, Undefined):
            return None, t if self.unread[1] else self._undefined("true")
        if not values.is_tensor_like(f) and _same_python_value(t, f):
            return None, t
        show = _leaves_described if nest.same_structure(t, f) else values.describe
        raise self._mismatch(f"{show(t)} in the true branch but "
                             f"{show(f)} in the false branch")

    def _flagged(self):
        """A value only one branch assigns (the true branch yields it and True, or a
        placeholder and False): the false branch's yield alike, and a _Flagged result."""
        value, _ = self.ty
        if type(self.f) is Undefined:
            fy = values.placeholders(value), values.constant(False, "bool")
        else:
            fy = self._match(value, _as_tensors(self.f)), values.constant(True, "bool")
        return fy, _Flagged(self.name, self.where,
                            "false" if type(self.t) is Undefined else "true")

    def _match_mixed(self, ty, t, f):
        """A container of tensors and Python values: the same values, tensors that match."""
        same = nest.same_structure(t, f) and all(
            values.is_tensor_like(b) if values.is_tensor_like(a) else _same_python_value(a, b)
            for a, b in zip(nest.flatten(t), nest.flatten(f)))
        if not same:
            raise self._mismatch(f"{_leaves_described(t)} in the true branch but "
                                 f"{_leaves_described(f)} in the false branch")
        return self._match(ty, _carried_leaves(f)), _Mixed(t)

    def _match(self, ty, f):
        """What the false branch yields for `f`, after checking it against `ty`."""
        if not nest.same_structure(ty, f):
            raise self._mismatch(f"{values.describe(ty)} in the true branch but "
                                 f"{values.describe(f)} in the false branch")
        # A Python number meeting a tensor takes the tensor's dtype, as in eager arithmetic;
        # one that does not fit it (0.5 against int32) cannot: eager gives either dtype.
        leaves = []
        for a, b in zip(nest.flatten(ty), nest.flatten(f)):
            da, db = values.dtype_of(a), values.dtype_of(b)
            a_number, b_number = values.is_number(a), values.is_number(b)
            if a_number and b_number and da != db:
                common = values.promote(da, db)
                if common != da:
                    self._replan_dtype(ty, common)
                leaves.append(values.constant(b, common))
            elif a_number and not b_number:
                if not values.fits(a, db):
                    raise self._unfit(a, b, "true")
                if da != db:
                    self._replan_dtype(ty, db)
                leaves.append(b)
            elif b_number and not a_number:
                if not values.fits(b, da):
                    raise self._unfit(b, a, "false")
                leaves.append(values.constant(b, da))
            elif da != db or len(values.shape_of(a)) != len(values.shape_of(b)):
                raise self._mismatch(f"{values.describe(a)} in the true branch but "
                                     f"{values.describe(b)} in the false branch")
            else:
                leaves.append(b)
        return nest.pack_as(f, leaves)

    def _replan_dtype(self, ty, dtype):
        if not values.is_number(ty):
            raise self._mismatch("a number in one branch and a tensor of another dtype in "
                                 "the other (inside a list or tuple)")
        raise _Replan(self.index, ("dtype", dtype))

    def _unfit(self, number, tensor, branch: str) -> BranchMismatchError:
        other = "false" if branch == "true" else "true"
        label = self.name if " " in self.name else f"'{self.name}'"
        dtype = values.dtype_of(tensor)
        return BranchMismatchError(
            f"{label} is {values.describe(number)} in the {branch} branch but "
            f"{values.describe(tensor)} in the {other} branch of this tensor-dependent `if`; "
            "a Python number takes the dtype of the tensor in the other branch only when it "
            f"fits it ({values.FITS})", *self.where,
            f"Give it one dtype in both branches: a number that fits {dtype}, or the tensor "
            f"cast with .astype('{values.promote_scalar(dtype, number)}').")

    def _undefined(self, branch: str) -> Undefined:
        filename, lineno, _ = self.where
        return Undefined(
            self.name,
            f"the tensor-dependent `if` at {filename}:{lineno} assigns it only in its "
            f"{branch} branch",
            self.where,
        )

    def _mismatch(self, what: str) -> BranchMismatchError:
        label = self.name if " " in self.name else f"'{self.name}'"
        hint = ""
        if self.t is None or self.f is None:
            hint = ("; a function that returns a tensor on one path must return one on "
                    "every path" if label.startswith("the return value") else
                    "; give it a tensor before the `if`, or in both branches")
        return BranchMismatchError(
            f"{label} is {what} of this tensor-dependent `if`; both branches must give it "
            f"the same type (tensors of one dtype and rank, or the same Python value){hint}",
            *self.where,
        )


def _flaggable(value) -> bool:
    """Whether a value only one branch assigns can be carried with a flag: tensors and
    Python numbers (a number becomes a tensor, as where both branches assign one), or a
    tuple, list or dict of them; not tensor arrays, strings or other Python values."""
    leaves = nest.flatten(value)
    return bool(leaves) and values.is_tensor_like(value) and not isinstance(value, TensorArray)


def _as_tensors(value):
    """`value` with each Python number a constant of its dtype."""
    return nest.pack_as(value, [values.constant(v) if values.is_number(v) else v
                                for v in nest.flatten(value)])


def _grown_differently(t, f) -> bool:
    """Whether the branches left a list of tensors with different lengths (one appended
    more): it becomes a tensor array whose length is known when the program runs."""
    return (isinstance(t, list) and isinstance(f, list) and len(t) != len(f)
            and values.is_tensor_like(t) and values.is_tensor_like(f)
            and all(not isinstance(v, (list, tuple, dict)) for v in t + f))


def _unchangeable(value) -> bool:
    """A tensor, a number, a string, None, or a tuple of them."""
    if isinstance(value, tuple):
        return all(_unchangeable(v) for v in value)
    return values.is_tensor_like(value) and not isinstance(value, (list, dict)) or \
        type(value) in _CONSTANT_LEAVES


def _leaves_described(value) -> str:
    """'a tuple of (a float32[2] tensor, None)', for a container's mismatch."""
    if not isinstance(value, (list, tuple, dict)):
        return values.describe(value)
    return (f"a {type(value).__name__} of "
            f"({', '.join(values.describe(v) for v in nest.flatten(value))})")


def _same_python_value(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False
