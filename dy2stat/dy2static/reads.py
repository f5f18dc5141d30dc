"""What converted code reads outside its own variables, reported to the trace's record.

Converted code reads attributes through `read_attr` (the attribute_reads pass writes
`_jst.read_attr(self, 'threshold')` for `self.threshold`), and a converted function that
starts reports the globals and closure variables it may read and assign
(`enter_function`). Outside a trace both only do what the original code does; while
tracing they tell `dy2stat.mode.state.recorder` (see dy2stat.jit.trace_record), so that a
cached program is reused only while those values stay the same.
"""

from __future__ import annotations

import types

import gast

from dy2stat.mode import state


def read_attr(obj, name: str):
    """`obj.name`, recorded while tracing."""
    value = getattr(obj, name)
    recorder = state.recorder
    if recorder is not None:
        recorder.read_attr(obj, name, value)
    return value


class FreeNames:
    """The names a function reads or assigns outside its own scope."""

    __slots__ = ("globals_read", "globals_written", "cells_written")

    def __init__(self, fn, node: gast.AST):
        self.globals_read = frozenset(code_names(fn.__code__))
        declared_global, declared_nonlocal = set(), set()
        for n in gast.walk(node):
            if isinstance(n, gast.Global):
                declared_global.update(n.names)
            elif isinstance(n, gast.Nonlocal):
                declared_nonlocal.update(n.names)
        self.globals_written = frozenset(declared_global)
        self.cells_written = frozenset(declared_nonlocal & set(fn.__code__.co_freevars))


def code_names(code: types.CodeType) -> set:
    """The names `code` (and the functions, lambdas and comprehensions inside it) may look
    up as globals (with attribute names among them: a superset)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def enter_function(fn, free: FreeNames) -> None:
    """Converted `fn` starts: while tracing, tell the record what it may read and assign."""
    recorder = state.recorder
    if recorder is not None:
        recorder.enter(fn, free.globals_read, free.globals_written, free.cells_written)
