"""Ops with effects when a program runs: ``print`` and ``assert``."""

from __future__ import annotations

import numpy as np

from dy2stat.kernels.backend import to_host
from dy2stat.runtime.registry import AttrType, defop


def _print_kernel(xp, values, texts=(), sep=" ", end="\n"):
    """Print the texts with each ``None`` replaced by the next value."""
    it = iter(values)
    parts = [str(np.asarray(to_host(next(it)))) if t is None else t for t in texts]
    print(*parts, sep=sep, end=end)


# What a failed ``assert`` may raise (``error``): Python's ``assert``, or what reading a
# variable that was never assigned raises. Any other name raises AssertionError.
_ERRORS = {"AssertionError": AssertionError, "UnboundLocalError": UnboundLocalError}


def _assert_kernel(xp, cond, message="", error="AssertionError"):
    if not bool(to_host(cond).all()):
        kind = _ERRORS.get(error, AssertionError)
        raise kind(message) if message else kind()


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
    doc="Raise AssertionError(message) (or the `error` named, UnboundLocalError) when the "
        "program runs and Cond is not all true.",
)
