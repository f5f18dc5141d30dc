"""Cases for runtime/ops/fused.py (the pass that makes the op: tests/runtime/test_fusion.py)."""

import numpy as np

from tests.ops.harness import Case, positive, randn

_GELU = [
    ["full", [], {"value": 0.5}, "float64"],
    ["multiply", ["x0", "t0"], {}, "float64"],
    ["full", [], {"value": 3.0}, "float64"],
    ["pow", ["x0", "t2"], {}, "float64"],
    ["scale", ["t3"], {"scale": 0.044715, "bias": 0.0}, "float64"],
    ["add", ["x0", "t4"], {}, "float64"],
    ["scale", ["t5"], {"scale": 0.7978845608, "bias": 0.0}, "float64"],
    ["tanh", ["t6"], {}, "float64"],
    ["scale", ["t7"], {"scale": 1.0, "bias": 1.0}, "float64"],
    ["multiply", ["t1", "t8"], {}, "float64"],
]


def _gelu(xs, expr, dtype):
    (x,) = xs
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


CASES = [
    Case("fused_elementwise", [[randn(2, 3)]], {"expr": _GELU, "dtype": "float64"}, ref=_gelu,
         grad=False),
    Case("fused_elementwise", [[positive(2, 3), randn(3)]],
         {"expr": [["log", ["x0"], {}, "float64"], ["multiply", ["t0", "x1"], {}, "float64"],
                   ["greater_than", ["t1", "x1"], {}, "bool"]], "dtype": "bool"},
         ref=lambda xs, expr, dtype: np.log(xs[0]) * xs[1] > xs[1], name="broadcast_bool",
         grad=False),
]
