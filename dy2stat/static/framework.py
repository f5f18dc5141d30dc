"""Static-mode state: the default programs, the current block, parameters."""

from __future__ import annotations

import contextlib
import threading

from dy2stat.mode import state
from dy2stat.runtime.ir import Block, Operator, Program


class _Defaults(threading.local):
    """The default programs and the blocks being built, one set per thread (static mode
    is per thread too: a program built in one thread is not appended to by another)."""

    def __init__(self):
        self.main = Program()
        self.startup = Program()
        # Blocks being built (innermost last): control flow pushes its sub-blocks.
        self.blocks: list[Block] = []
        # (scope path, layer) of the Layers being traced (innermost last).
        self.scopes: list[tuple[str, object]] = []


defaults = _Defaults()


def default_main_program() -> Program:
    """The program that ops append to in static mode (outside ``program_guard``)."""
    return defaults.main


def default_startup_program() -> Program:
    """The program that initializes the default main program's parameters."""
    return defaults.startup


def current_block() -> Block:
    if defaults.blocks and defaults.blocks[-1].program is defaults.main:
        return defaults.blocks[-1]
    return defaults.main.global_block()


@contextlib.contextmanager
def program_guard(main: Program, startup: Program | None = None):
    """Build into ``main`` (and put initializers into ``startup``) inside the block."""
    if not isinstance(main, Program):
        raise TypeError(f"program_guard: main must be a static.Program, not {type(main).__name__}")
    saved = defaults.main, defaults.startup, defaults.blocks
    defaults.main = main
    defaults.startup = startup if startup is not None else defaults.startup
    defaults.blocks = []
    try:
        yield
    finally:
        defaults.main, defaults.startup, defaults.blocks = saved


@contextlib.contextmanager
def block_guard(block: Block):
    """Append to ``block`` (a sub-block being built) inside the ``with``."""
    defaults.blocks.append(block)
    try:
        yield block
    finally:
        defaults.blocks.pop()


@contextlib.contextmanager
def layer_scope(layer):
    """Ops appended inside record ``layer``'s scope path (``LeNet/conv1``; see ``scoped``).

    A layer is named as the Layer traced around it holds it (``features.0`` is
    ``features/0``), else by its class (the outermost one, or one held elsewhere)."""
    outer_path, outer = defaults.scopes[-1] if defaults.scopes else ("", None)
    name = type(layer).__name__
    for held_as, sub in getattr(outer, "named_sublayers", tuple)():
        if sub is layer:
            name = held_as.replace(".", "/")
            break
    path = "/".join(part for part in f"{outer_path}/{name}".split("/") if part)
    defaults.scopes.append((path, layer))
    try:
        yield
    finally:
        defaults.scopes.pop()


def scoped(op: Operator) -> Operator:
    """``op``, recording the scope path of the Layers being traced around it."""
    op.scope = defaults.scopes[-1][0] if defaults.scopes else ""
    return op


@contextlib.contextmanager
def static_guard(on: bool = True):
    previous = state.static
    state.static = on
    try:
        yield
    finally:
        state.static = previous


def enable_static() -> None:
    """From now on every op appends to the default main program."""
    state.static = True


def disable_static() -> None:
    """Back to eager (dynamic graph) mode: ops run at once."""
    state.static = False


def in_static_mode() -> bool:
    """Whether ops append to a static program (after ``enable_static``)."""
    return state.static


def create_parameter(shape, dtype="float32", name=None, initializer=None):
    """A persistable variable of the main program, initialized by the startup program.

    ``initializer`` is ``(op_type, attrs)`` of a creation op (``uniform``,
    ``normal``, ``full``); the default is Xavier-uniform.
    """
    from_main = defaults.main.global_block()
    name = name or defaults.main.unique_name("param")
    shape = [int(d) for d in shape]
    var = from_main.create_var(shape, dtype, name=name, persistable=True)
    if initializer is None:
        fan_in, fan_out = (shape[0], shape[-1]) if len(shape) >= 2 else (shape[0], shape[0])
        limit = (6.0 / (fan_in + fan_out)) ** 0.5
        initializer = ("uniform", {"min": -limit, "max": limit})
    op_type, attrs = initializer
    startup = defaults.startup.global_block()
    if name not in startup.vars:
        startup.create_var(shape, dtype, name=name, persistable=True)
        startup.append_op(Operator(op_type, {}, {"Out": [name]},
                                   {"shape": shape, "dtype": str(var.dtype), **attrs}))
    return var
