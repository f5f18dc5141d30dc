"""`while` and `for` at run time: Python loops, or a `while` op.

Generated code hands over the test and the body as closures over the enclosing function's
variables, and `get_state`/`set_state` for the variables the loop carries (`names`). As long
as the test is a Python value the loop runs in Python, exactly as the original. When the test
becomes a static Variable -- at the first check or in the middle of the loop, say after a
tensor-dependent `break` -- the remaining iterations become one `while` op that starts from
the current state.
"""

from __future__ import annotations

import numpy as np

from dy2stat import ops
from dy2stat.dy2static import ifelse, sequences, values
from dy2stat.dy2static.errors import Dy2StaticError, Retrace
from dy2stat.dy2static.tensor_array import TensorArray, truth
from dy2stat.dy2static.undefined import (
    AssignedFlags,
    Undefined,
    UndefinedReturnValue,
    has_maybe_undefined,
    is_undefined,
    maybe_undefined,
)
from dy2stat.static import control_flow, framework, nest


class LoopVariableError(Dy2StaticError, TypeError):
    """A variable a tensor-dependent loop carries cannot be carried as it is."""


def convert_while_loop(test, body, get_state=None, set_state=None, names=()):
    """`while test(): body()`; a `while` op from the first check whose result is static."""
    while True:
        pred = truth(test())
        if values.is_static(pred):
            get_state, set_state = values.state_accessors(get_state, set_state)
            _static_while(test, body, get_state, set_state, names, values.caller_location())
            return
        if not pred:
            return
        body()


def convert_for_loop(iterable, extra_test, body, get_state=None, set_state=None, names=()):
    """`for item in iterable: body(item)` while `extra_test()` (break/return flags) holds.

    A static iterable (a Variable, a tensor array, range/enumerate/zip of them) is walked by
    a `while` op; a Python one in Python, until `extra_test` turns static.
    """
    where = values.caller_location()
    get_state, set_state = values.state_accessors(get_state, set_state)
    if sequences.is_static_iterable(iterable):
        _static_for(sequences.as_sequence(iterable), extra_test, body, get_state, set_state,
                    names, where)
        return
    consumed = 0
    iterator = iter(iterable)
    while True:
        if extra_test is not None:
            ok = extra_test()
            if values.is_static(ok):
                rest = sequences.rest_of(iterable, consumed, iterator)
                if isinstance(rest, list):
                    _guarded_for(rest, extra_test, body, get_state, set_state, names, where)
                elif rest is not None:
                    _static_for(rest, extra_test, body, get_state, set_state, names, where)
                return
            if not ok:
                return
        try:
            item = next(iterator)
        except StopIteration:
            return
        consumed += 1
        body(item)


def _guarded_for(items, extra_test, body, get_state, set_state, names, where) -> None:
    """The iterations left over items a while op cannot index (layers, say), in Python: each
    one a cond on the loop's static test (its break/return flags)."""
    for item in items:
        ok = extra_test()
        if not values.is_static(ok):
            if not ok:
                return
            body(item)
            continue
        ifelse.static_if(values.as_predicate(ok), lambda item=item: body(item), lambda: None,
                         get_state, set_state, names, where)


def _static_for(seq, extra_test, body, get_state, set_state, names, where) -> None:
    length = seq.length()
    index = [values.constant(0)]  # a Variable from the start: the loop is a while op

    def test():
        more = index[0] < length
        if extra_test is None:
            return more
        ok = extra_test()
        if not values.is_static(ok):
            return more if ok else False
        return more & values.as_predicate(ok)

    def loop_body():
        i = index[0]
        body(seq.item(i))
        index[0] = i + 1

    def get():
        return (index[0], *get_state())

    def set_(state):
        index[0] = state[0]
        set_state(state[1:])

    _static_while(test, loop_body, get, set_, ("the loop index", *names), where)


class _Promote(Retrace):
    """The body promotes carried value `slot` (its leaf `leaf`) as eager arithmetic does on
    the first iteration (int32 + int64 is int64, a [] tensor plus a [1] one is [1]): the
    loop is built again with the value entering promoted."""

    def __init__(self, slot: int, leaf: int, dtype, shape) -> None:
        super().__init__(slot)
        self.slot, self.leaf, self.dtype, self.shape = slot, leaf, dtype, shape

    def apply(self, value):
        leaves = nest.flatten(value)
        promoted = ops.cast(leaves[self.leaf], str(self.dtype))
        if self.shape is not None:
            promoted = ops.expand(promoted, list(self.shape))
        leaves[self.leaf] = promoted
        return nest.pack_as(value, leaves)


def _broadcasts(small, large) -> bool:
    return all(a in (1, b) for a, b in zip(reversed(small), reversed(large)))


def _static_while(test, body, get_state, set_state, names, where) -> None:
    init = list(get_state())
    program = values.current_program()
    init = _prepare(init, body, get_state, set_state, names, where, program)
    promoted = set()
    while True:
        first_block = len(program.blocks)
        try:
            set_state(_build_carrying_flags(test, body, get_state, set_state, names, where,
                                            init))
            return
        except _Promote as promote:
            del program.blocks[first_block:]
            set_state(init)
            key = (promote.slot, promote.leaf, str(promote.dtype), promote.shape)
            if key in promoted:
                raise RuntimeError(f"while: cannot settle the type of {names[promote.slot]}"
                                   ) from None
            promoted.add(key)
            init[promote.slot] = promote.apply(init[promote.slot])


def _build_carrying_flags(test, body, get_state, set_state, names, where, init) -> list:
    maybe = [i for i, v in enumerate(init) if has_maybe_undefined(v)]
    if maybe:  # carry whether each is assigned along with it
        state = AssignedFlags(get_state, set_state, names, maybe, init, where)
        # The slot of `init` each carried value is (None: a slot's flag).
        slots = [s for i in range(len(init)) for s in ((i, None) if i in maybe else (i,))]
        try:
            return state.join(_build(test, body, state.get, state.set, state.names, where,
                                     state.split(init)))
        except _Promote as promote:
            if slots[promote.slot] is not None:
                promote.slot = slots[promote.slot]
            raise
    return _build(test, body, get_state, set_state, names, where, init)


def _prepare(init, body, get_state, set_state, names, where, program) -> list:
    """Entry values that a while op can carry, learnt from trials of the body: for a
    Python number the dtype of what the first iteration makes of it (a trial in which it
    stays a Python number, as eagerly: `s + i` with int32 `i` is int32); then placeholders
    for values the body defines first (not assigned yet: MaybeUndefined) and tensor arrays
    for lists the body grows (a trial that sees the carried values as the op will)."""
    prepared = list(init)
    if any(values.is_number(v) for v in init):
        after = _trial(body, get_state, set_state, init, program, carried=False)
        for i, (before, now) in enumerate(zip(init, after)):
            if values.is_number(before) and values.dtype_of(now) is not None:
                # A number the body broadcasts into a tensor (`z = 0; z = z + x`) enters
                # with that tensor's shape, where it is known before the program runs.
                shape = values.shape_of(now)
                prepared[i] = values.constant(
                    before, _number_dtype(names[i], before, now, where),
                    shape if -1 not in shape else [])
    if not any(is_undefined(v) or isinstance(v, (list, dict)) for v in init):
        return prepared
    after = _trial(body, get_state, set_state, prepared, program)
    for i, (before, now) in enumerate(zip(init, after)):
        if isinstance(before, dict) and isinstance(now, dict) and set(now) - set(before):
            prepared[i] = _with_new_keys(prepared[i], now, names[i])
        elif isinstance(before, list) and (
                isinstance(now, TensorArray)  # an inner loop grows it
                or isinstance(now, list) and len(now) != len(before)):
            if before:
                prepared[i] = TensorArray.from_list(before)
            else:
                spec = values.Spec.of(now[0] if isinstance(now, list) else now.buffer[0])
                prepared[i] = TensorArray.empty(spec.shape, spec.dtype)
    # A name the body defines first is carried from the start, with a flag; one it defines
    # from another such name (`if i > 1: s = a` before `a = 1`) shows in a later trial.
    while True:
        new = [i for i, (before, now) in enumerate(zip(prepared, after))
               if is_undefined(before) and values.is_tensor_like(now)]
        for i in new:
            prepared[i] = values.placeholders(after[i])
            if type(init[i]) is Undefined:  # (a return value needs no flag: do_return tells)
                prepared[i] = maybe_undefined(prepared[i], False, names[i])
        if not new or not any(type(v) is Undefined for v in after):
            return prepared
        after = _trial(body, get_state, set_state, prepared, program)


def _with_new_keys(before: dict, now: dict, name: str) -> dict:
    """`before` with the tensor keys an iteration adds (`d["last"] = h`), each a value
    that is assigned only if the loop runs: reading it after a loop that ran zero times
    raises an error naming it when the program runs (eager's dict has no such key)."""
    out = dict(before)
    for key in now.keys() - before.keys():
        if values.is_tensor_like(now[key]):
            out[key] = maybe_undefined(values.placeholders(now[key]), False,
                                       f"{name}[{key!r}]")
    return out


def _number_dtype(name, number, now, where):
    """The dtype a Python number carried by a loop has, from its value `now` after one
    iteration (eager: a Python number, or a tensor the number met or was replaced by)."""
    dtype = values.dtype_of(now)
    if values.is_number(now):
        return values.promote(values.dtype_of(number), dtype)
    if not values.fits(number, dtype):
        label = name if " " in name else f"'{name}'"
        raise LoopVariableError(
            f"{label} is {values.describe(number)} before this tensor-dependent loop and "
            f"{values.describe(now)} after an iteration; a Python number carried by a loop "
            f"takes the dtype of the tensor it becomes only when it fits it "
            f"({values.FITS})", *where,
            f"Give it one dtype before and in the loop: a number that fits {dtype}, or the "
            f"tensor cast with .astype('{values.promote_scalar(dtype, number)}').")
    return dtype


def _trial(body, get_state, set_state, init, program, carried=True) -> list:
    """The state after one iteration of the body, traced into a block that is then dropped.

    The body sees the carried values as it will in the while op, as Variables, so that it
    takes the same paths (`if n > 1` on a carried number is a cond there); with
    `carried=False` it sees them as they are."""
    first_block = len(program.blocks)
    block = program.create_block(framework.current_block().idx)
    entry = values.snapshot(init)
    try:
        with framework.block_guard(block):
            set_state([_as_carried(v) for v in entry] if carried else entry)
            body()
            return list(get_state())
    finally:
        del program.blocks[first_block:]
        set_state(init)


def _as_carried(value):
    """`value` as a while op's body sees it if the op carries it: numbers and eager tensors
    as Variables (placeholders), Variables as they are; anything else unchanged."""
    if isinstance(value, TensorArray) or not values.is_tensor_like(value):
        return value
    return nest.pack_as(value, [v if values.is_static(v) else values.placeholder(v)
                                for v in nest.flatten(value)])


def _build(test, body, get_state, set_state, names, where, init) -> list:
    carried = [i for i, v in enumerate(init)
               if values.is_tensor_like(v) or isinstance(v, TensorArray)]
    arrays = {i for i in carried if isinstance(init[i], TensorArray)}

    def state_from(loop_vars):
        # Copies: `x[i] = v` in the body rebinds a Variable in place, and while_loop reads
        # its arguments' names after tracing the body.
        state = list(init)
        for i, v in zip(carried, values.snapshot(list(loop_vars))):
            state[i] = TensorArray(v) if i in arrays else v
        return state

    def loop_vars_of(state):
        return [state[i].buffer if i in arrays else state[i] for i in carried]

    def cond_fn(*loop_vars):
        set_state(state_from(loop_vars))
        pred = test()
        return values.as_predicate(pred) if values.is_static(pred) else bool(pred)

    def body_fn(*loop_vars):
        entry = state_from(loop_vars)
        # What the carried values looked like: the body may change a dict or list in place.
        shapes = values.snapshot(entry)
        set_state(entry)
        body()
        state = list(get_state())
        for i, (before, now) in enumerate(zip(entry, state)):
            _check_carried(i, names[i], init[i], shapes[i] if i in carried else before, now,
                           i in carried, where)
        return loop_vars_of(state)

    outs = control_flow.while_loop(cond_fn, body_fn, loop_vars_of(init))
    return state_from(outs)


def _check_carried(i, name, initial, before, now, carried, where) -> None:
    label = name if " " in name else f"'{name}'"
    if not carried:
        if now is before or (is_undefined(before) and is_undefined(now)):
            return
        raise LoopVariableError(
            f"{label} is {values.describe(before)} before this tensor-dependent loop and "
            f"{values.describe(now)} after an iteration; such a loop can only change "
            "tensors, numbers and lists of them", *where)
    if isinstance(before, TensorArray):
        return
    if not values.is_tensor_like(now):
        what = "has no value" if isinstance(now, (Undefined, UndefinedReturnValue)) \
            else f"becomes {values.describe(now)}"
        raise LoopVariableError(f"{label} {what} in the body of this tensor-dependent loop",
                                *where)
    if not nest.same_structure(before, now):
        advice = None
        if isinstance(before, dict) and isinstance(now, dict):
            added = sorted(map(repr, set(now) - set(before)))
            advice = (f"Give it every key the loop sets ({', '.join(added)}) before the "
                      "loop." if added else None)
        raise LoopVariableError(
            f"{label} is {values.describe(before)} before this tensor-dependent loop and "
            f"{values.describe(now)} after an iteration", *where, advice)
    for leaf, (a, b) in enumerate(zip(nest.flatten(before), nest.flatten(now))):
        da, db = values.dtype_of(a), values.dtype_of(b)
        sa, sb = values.shape_of(a), values.shape_of(b)
        if da != db and np.can_cast(da, db, "safe") and len(sa) == len(sb):
            raise _Promote(i, leaf, db, None)
        if len(sa) < len(sb) and -1 not in sb and _broadcasts(sa, sb) and (
                da == db or np.can_cast(da, db, "safe")):
            raise _Promote(i, leaf, db, tuple(sb))
        if da != db:
            raise LoopVariableError(
                f"{label} changes dtype from {da} to {db} in the body of this "
                "tensor-dependent loop; give it its final dtype before the loop "
                f"(e.g. with .astype('{db}'))", *where)
        if len(values.shape_of(a)) != len(values.shape_of(b)):
            raise LoopVariableError(
                f"{label} changes rank from {values.shape_of(a)} to {values.shape_of(b)} in "
                "the body of this tensor-dependent loop", *where,
                "Give it the rank it has after the loop before the loop (e.g. "
                "d2s.zeros([...]) instead of 0, or a reshape in the body).")
