"""Ops with effects when a program runs: ``print``, ``assert`` and ``hand_out``."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from dy2stat.kernels.backend import to_host
from dy2stat.runtime.registry import AttrType, defop


def _print_kernel(xp, values, texts=(), sep=" ", end="\n"):
    """Print the texts with each ``None`` replaced by the next value."""
    it = iter(values)
    parts = [str(np.asarray(to_host(next(it)))) if t is None else t for t in texts]
    print(*parts, sep=sep, end=end)


# What a failed ``assert`` may raise (``error``): Python's ``assert``, or what reading a
# variable (a name) that was never assigned raises. Any other name raises AssertionError.
_ERRORS = {"AssertionError": AssertionError, "UnboundLocalError": UnboundLocalError,
           "NameError": NameError}


def _assert_kernel(xp, cond, message="", error="AssertionError"):
    if not bool(to_host(cond).all()):
        kind = _ERRORS.get(error, AssertionError)
        raise kind(message) if message else kind()


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
    attrs={"message": "", "error": "AssertionError"},
    kernel=_assert_kernel,
    infer=lambda cond, **_: (),
    doc="Raise AssertionError(message) (or the `error` named, UnboundLocalError or "
        "NameError) when the program runs and Cond is not all true.",
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
