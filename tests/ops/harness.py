"""Table-driven op tests: one ``Case`` per op configuration.

Each case names an op of the registry, its inputs (NumPy arrays or Python
scalars), attrs and a NumPy reference. The runner checks the forward result
against the reference, gradients against central finite differences in
float64, and (``double=True``) second derivatives against finite differences
of the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

rng = np.random.default_rng(0)


def randn(*shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


def positive(*shape, dtype="float64"):
    return (rng.random(shape) + 0.5).astype(dtype)


def ints(low, high, *shape, dtype="int64"):
    return rng.integers(low, high, shape).astype(dtype)


def distinct(*shape, dtype="float64"):
    """Values far apart (so max/min/argmax and kinks are not near ties)."""
    n = int(np.prod(shape)) if shape else 1
    return (rng.permutation(n).reshape(shape) * 0.37 + 0.1).astype(dtype)


@dataclass
class Case:
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    ref: Callable | None = None  # NumPy reference: ref(*inputs, **attrs) -> array(s)
    grad: bool = True  # check gradients against finite differences
    grad_inputs: tuple | None = None  # input positions to check (default: all float arrays)
    double: bool = False  # also check second derivatives
    rtol: float = 1e-5
    atol: float = 1e-6
    name: str = ""
    # For ops whose forward is random or not comparable: a custom check(out, inputs).
    check: Callable | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}" if self.name else self.op
