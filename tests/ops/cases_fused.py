"""Cases for runtime/ops/fused.py (the passes that make the ops:
tests/runtime/test_fusion.py, tests/runtime/test_share_conv_columns.py)."""

import numpy as np

from dy2stat.kernels import conv
from tests.ops.cases_nn import _conv_grad_filter_ref, _conv_ref
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


def _keeps_columns(x, w, **attrs):
    """conv2d_keeping_columns: the convolution, and the columns its filter gradient reads."""

    def check(out, inputs):
        y, columns = out
        np.testing.assert_allclose(y, _conv_ref(x, w, **attrs), rtol=1e-10)
        dy = randn(*y.shape)
        np.testing.assert_allclose(
            conv.conv2d_grad_filter_from_columns(np, columns, dy, w, **attrs),
            _conv_grad_filter_ref(x, dy, w, **attrs), rtol=1e-10)

    return check


def _columns_of(x, w, **attrs):
    return conv.conv2d_keeping_columns(np, x, w, **attrs)[1]


_WIDE = (randn(2, 2, 5, 18), randn(3, 2, 3, 3))  # rows of 16 and more: batch-major columns
_SMALL = (randn(3, 4, 5, 6), randn(4, 2, 3, 2))  # short rows: batch-minor, grouped
_DY_WIDE, _DY_SMALL = randn(2, 3, 3, 16), randn(3, 4, 3, 5)
CASES += [
    Case("conv2d_keeping_columns", list(_WIDE), check=_keeps_columns(*_WIDE), grad=False),
    Case("conv2d_keeping_columns", list(_SMALL), {"groups": 2},
         check=_keeps_columns(*_SMALL, groups=2), grad=False, name="grouped"),
    Case("conv2d_grad_filter_from_columns", [_columns_of(*_WIDE), _DY_WIDE, _WIDE[1]],
         ref=lambda c, dy, w: _conv_grad_filter_ref(_WIDE[0], dy, w), grad=False),
    Case("conv2d_grad_filter_from_columns",
         [_columns_of(*_SMALL, groups=2), _DY_SMALL, _SMALL[1]], {"groups": 2},
         ref=lambda c, dy, w, groups: _conv_grad_filter_ref(_SMALL[0], dy, w, groups=groups),
         grad=False, name="grouped"),
]
