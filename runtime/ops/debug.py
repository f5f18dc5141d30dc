"""Ops with effects when a program runs: ``print``, ``assert`` and ``hand_out``."""

from __future__ import annotations

import builtins
import contextlib
import sys
import threading

import numpy as np

from dy2stat.kernels.backend import to_host
from dy2stat.runtime.registry import AttrType, defop


def _print_kernel(xp, values, texts=(), sep=" ", end="\n"):
    """Print the texts with each ``None`` replaced by the next value."""
    it = iter(values)
    parts = [str(np.asarray(to_host(next(it)))) if t is None else t for t in texts]
    print(*parts, sep=sep, end=end)


def _assert_kernel(xp, cond, message="", error="AssertionError", note=""):
    if not bool(to_host(cond).all()):
        kind = _error_class(error)
        failure = kind(message) if message else kind()
        if note:
            failure.add_note(note)
        raise failure


def _error_class(name: str) -> type:
    """The exception class a failed ``assert`` raises: Python's ``assert``, or the error a
    branch of the user's code raised while the program was built. ``name`` is a builtin
    (UnboundLocalError, ValueError, ...) or ``module.Class`` in a dy2stat module already
    loaded (nothing is imported, so a saved program runs no code); anything else raises
    AssertionError."""
    module, _, qualname = name.rpartition(".")
    if not module:
        kind = getattr(builtins, name, None)
    elif module == "dy2stat" or module.startswith("dy2stat."):
        kind = getattr(sys.modules.get(module), qualname, None)
    else:
        kind = None
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else AssertionError


_listener = threading.local()  # .fn: what ``hand_out`` passes its values to, or None


def _hand_out_kernel(xp, values, index=0):
    """Pass the values to whoever listens to the running plan (``listening``)."""
    fn = getattr(_listener, "fn", None)
    if fn is not None:
        fn(index, values)


@contextlib.contextmanager
def listening(fn):
    """Within the block, every ``hand_out`` op this thread runs calls ``fn(index, values)``
    (a converted program's backward hands out each parameter's gradient as soon as it
    is final, for data-parallel training to send while the backward goes on)."""
    previous = getattr(_listener, "fn", None)
    _listener.fn = fn
    try:
        yield
    finally:
        _listener.fn = previous


defop(
    "print",
    inputs=("X*",),
    outputs=(),
    attrs={"texts": [], "sep": " ", "end": "\n"},
    attr_types={"texts": AttrType("a list of strings and nulls (where values go)",
                                  lambda v: isinstance(v, list)
                                  and all(t is None or isinstance(t, str) for t in v))},
    kernel=_print_kernel,
    infer=lambda xs, **_: (),
    doc="Print values when the program runs (texts hold None where a value goes).",
)
defop(
    "assert",
    inputs=("Cond",),
    outputs=(),
    attrs={"message": "", "error": "AssertionError", "note": ""},
    kernel=_assert_kernel,
    infer=lambda cond, **_: (),
    doc="Raise AssertionError(message) (or the exception `error` names: a builtin such as "
        "UnboundLocalError, or a dy2stat one; with `note` added to it) when the program "
        "runs and Cond is not all true.",
)
defop(
    "hand_out",
    inputs=("X*",),
    outputs=(),
    attrs={"index": 0},
    kernel=_hand_out_kernel,
    infer=lambda xs, **_: (),
    doc="Pass the values, and `index`, to the listener of the running program (none: "
        "nothing happens); a training backward hands out each gradient when it is final.",
)
