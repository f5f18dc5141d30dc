"""Cases for runtime/ops/debug.py (print, assert and hand_out act when the program runs)."""

import numpy as np

from tests.ops.harness import Case, randn


def _returns_nothing(out, inputs):
    assert out == ()


CASES = [
    Case("print", [[randn(2)]], {"texts": ["x =", None]}, grad=False, check=_returns_nothing),
    Case("assert", [np.array([True, True])], {"message": "all good"}, grad=False,
         check=_returns_nothing),
    Case("hand_out", [[randn(2, 3)]], {"index": 4}, grad=False, check=_returns_nothing),
]
