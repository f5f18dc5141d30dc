"""Guards: the Python values a trace read, written down and checked before its program runs.

A trace reads more than its arguments: Layer attributes (``self.threshold``), attributes of
other objects (``self.cfg.scale``), module globals and closure variables. Each value read
becomes a guard entry, and a cached program is reused only while every entry still holds;
otherwise the call traces again and the retrace log says which value changed
(``retracing forward: self.threshold changed from 0.5 to -100.0``).

How a value is compared (``kind_of``):

- numbers, strings, None, NumPy scalars, dtypes, functions, methods and classes, and tuples
  of such values, by ``==``;
- small lists, dicts and sets of such values (up to ``SMALL`` items) by ``==`` against a
  copy taken when traced, so changing them in place is seen too -- unless the trace
  itself changed them (say, appended to a log): then by identity;
- anything else -- tensors, arrays, Layers, other objects, large containers -- by identity:
  replacing it retraces, changing it in place is not seen (a tensor's values are read when
  the program runs anyway; an array or a large list changed in place keeps the traced
  program: assign a new one, or make the array a buffer).

A tensor's gradient that a training step read (``p.grad``, fed at every call) is guarded
on whether there is one, and its shape and dtype (``grad_layout``), and the tensors a
step may train on their ``stop_gradient`` (a layer frozen later retraces): all such
entries are checked together, in one call.

The cost per call is what makes this affordable. Entries on Layers are checked only after
some Layer's attributes changed (any assignment, registration or ``train``/``eval`` bumps
``layer.changes``); other entries are checked on every call, one ``attrgetter`` or
``itemgetter`` per object and a tuple comparison.
"""

from __future__ import annotations

import copy
import enum
import operator
import types

import numpy as np

from dy2stat.nn import layer as layer_module

SMALL = 64  # containers up to this many items are compared by value

VALUE, SNAPSHOT, IDENTITY = "value", "snapshot", "identity"

_SIMPLE = (type(None), bool, int, float, complex, str, bytes, np.generic, np.dtype,
           enum.Enum, range, slice, type, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.BuiltinMethodType)


def kind_of(value) -> str:
    """How a guard compares ``value`` (see the module docstring)."""
    if not _is_simple(value):
        return IDENTITY
    return SNAPSHOT if _is_mutable(value) else VALUE


def _is_simple(value) -> bool:
    """A value made of numbers, strings and the like, in small containers."""
    if isinstance(value, _SIMPLE):
        return True
    if type(value) in (tuple, frozenset, list, set):
        return len(value) <= SMALL and all(_is_simple(v) for v in value)
    if type(value) is dict:
        return len(value) <= SMALL and all(
            _is_simple(k) and _is_simple(v) for k, v in value.items())
    return False


def _is_mutable(value) -> bool:
    if type(value) in (list, set, dict):
        return True
    if type(value) in (tuple, frozenset):
        return any(_is_mutable(v) for v in value)
    return False


class Entry:
    """One value a trace read: where it lives and what it was."""

    __slots__ = ("holder", "access", "name", "kind", "expected", "label")

    def __init__(self, holder, access: str, name, value, label: str):
        # access: "attr" (getattr(holder, name)), "item" (holder[name], a globals dict),
        # "cell" (a closure cell's contents), "keys" (the keys of getattr(holder, name):
        # the ids of a Layer's hooks), "grad" (whether the tensor holder has a gradient,
        # and its shape and dtype: ``grad_layout``) or "stop_gradient" (the tensor's flag)
        self.holder, self.access, self.name, self.label = holder, access, name, label
        self.kind = kind_of(value)
        self.expected = copy.deepcopy(value) if self.kind == SNAPSHOT else value

    def settle(self) -> None:
        """A list or dict the trace itself changed (a Python side effect of tracing, such
        as logging into a list) is compared by identity from then on: its later changes
        would otherwise invalidate every program traced before them."""
        if self.kind != SNAPSHOT:
            return
        try:
            now = self.read()
            changed = now != self.expected
        except Exception:
            return
        if changed:
            self.kind, self.expected = IDENTITY, now

    def read(self):
        if self.access == "attr":
            return getattr(self.holder, self.name)
        if self.access == "grad":
            return grad_layout(self.holder)
        if self.access == "stop_gradient":
            return self.holder.stop_gradient
        if self.access == "item":
            return self.holder[self.name]
        if self.access == "keys":
            return tuple(getattr(self.holder, self.name))
        return self.holder.cell_contents

    def holds(self) -> bool:
        try:
            now = self.read()
        except Exception:
            return False
        if self.kind == IDENTITY:
            return now is self.expected
        try:
            return bool(now == self.expected)
        except Exception:
            return False

    def change(self) -> str:
        """What changed, for the retrace log."""
        try:
            now = self.read()
        except Exception:
            return f"{self.label} was deleted"
        return f"{self.label} changed from {_show(self.expected)} to {_show(now)}"


def grad_layout(tensor) -> tuple | None:
    """None when ``tensor`` has no gradient, else the gradient's shape and dtype: what a
    program that reads the gradient assumes of it."""
    grad = tensor._grad
    return None if grad is None else (grad._data.shape, grad._data.dtype)


def _show(value) -> str:
    text = repr(value) if kind_of(value) != IDENTITY else f"<{type(value).__name__} object>"
    return text if len(text) <= 60 else text[:57] + "..."


class _Check:
    """The entries of one holder, checked together: one getter call for the values
    compared by ``==`` and one for those compared by identity."""

    __slots__ = ("holder", "get_values", "values", "get_ids", "ids")

    def __init__(self, entries: list[Entry]):
        self.holder = entries[0].holder
        by_value = [e for e in entries if e.kind != IDENTITY]
        by_id = [e for e in entries if e.kind == IDENTITY]
        self.get_values, self.values = _getter(by_value), tuple(e.expected for e in by_value)
        self.get_ids, self.ids = _getter(by_id), tuple(e.expected for e in by_id)

    def holds(self) -> bool:
        try:
            if self.get_values is not None and self.get_values(self.holder) != self.values:
                return False
            if self.get_ids is not None:
                return all(map(operator.is_, self.get_ids(self.holder), self.ids))
        except Exception:  # a value was deleted, or a comparison failed
            return False
        return True


def _getter(entries: list[Entry]):
    """A function of the holder giving the tuple of the entries' current values."""
    if not entries:
        return None
    access = entries[0].access
    if access == "cell":
        cells = [e.holder for e in entries]
        return lambda _: tuple(c.cell_contents for c in cells)
    if access == "grad":
        tensors = [e.holder for e in entries]
        return lambda _: tuple(map(grad_layout, tensors))
    if access == "stop_gradient":
        tensors = [e.holder for e in entries]
        return lambda _: tuple(t.stop_gradient for t in tensors)
    names = [e.name for e in entries]
    if access == "keys":
        return lambda holder: tuple(tuple(getattr(holder, n)) for n in names)
    getter = (operator.attrgetter if access == "attr" else operator.itemgetter)(*names)
    if len(names) == 1:
        return lambda holder: (getter(holder),)
    return getter


# Entries of these kinds are checked together, whatever their holders: one call for all.
_ONE_CHECK = ("cell", "grad", "stop_gradient")


def _compile(entries: list[Entry]) -> list[_Check]:
    groups: dict = {}
    for e in entries:
        key = e.access if e.access in _ONE_CHECK else (id(e.holder), e.access)
        groups.setdefault(key, []).append(e)
    return [_Check(group) for group in groups.values()]


class Guards:
    """Everything a trace read, checked before its program is reused."""

    def __init__(self, always: list[Entry], layers: list[Entry]):
        self.always, self.layers = always, layers
        self._always = _compile(always)
        self._layers = _compile(layers)
        self._layer_changes = layer_module.changes.count  # Layer entries held at this count

    def __len__(self) -> int:
        return len(self.always) + len(self.layers)

    def hold(self) -> bool:
        for check in self._always:
            if not check.holds():
                return False
        count = layer_module.changes.count
        if count != self._layer_changes and self._layers:
            for check in self._layers:
                if not check.holds():
                    return False
            self._layer_changes = count
        return True

    def changes(self) -> list[str]:
        """What no longer holds (for the retrace log)."""
        return [e.change() for e in self.always + self.layers if not e.holds()]
