"""Cases for runtime/ops/elementwise.py and runtime/ops/reduction.py."""

import numpy as np

from tests.ops.harness import Case, distinct, ints, positive, randn

_SPECIAL = np.array([[1.0, np.nan, -np.inf], [np.inf, -0.0, 3.5]])


def _var_ref(x, axis=None, unbiased=True, keepdim=False):
    axes = tuple(axis) if isinstance(axis, list) else axis
    mean = x.mean(axis=axes, keepdims=True)
    count = x.size // mean.size
    out = ((x - mean) ** 2).sum(axis=axes, keepdims=keepdim) / (count - int(unbiased))
    return np.asarray(out)


def _logsumexp_ref(x, axis=None, keepdim=False):
    axes = tuple(axis) if isinstance(axis, list) else axis
    return np.asarray(np.log(np.exp(x).sum(axis=axes, keepdims=keepdim)))


def _cumprod_ref(x, dim=None):
    if dim is None:
        x, dim = x.reshape(-1), 0
    out = np.moveaxis(x, dim, 0).copy()
    for i in range(1, out.shape[0]):
        out[i] = out[i - 1] * out[i]
    return np.moveaxis(out, 0, dim)


def _with_zeros():
    x = randn(3, 6)
    x[0, 1] = x[0, 3] = x[0, 4] = 0.0  # a first, a second and a third zero in a row
    x[1, 2] = x[1, 5] = 0.0
    x[2, 0] = 0.0
    return x


CASES = [
    Case("rsqrt", [positive(3, 4)], ref=lambda x: 1 / np.sqrt(x), double=True),
    Case("isnan", [_SPECIAL], ref=np.isnan, grad=False),
    Case("isinf", [_SPECIAL], ref=np.isinf, grad=False),
    Case("isfinite", [_SPECIAL], ref=np.isfinite, grad=False),
    Case("isfinite", [ints(0, 5, 4)], ref=np.isfinite, grad=False, name="int"),
    Case("masked_fill", [randn(2, 3), randn(2, 3) > 0, 2.5],
         ref=lambda x, m, v: np.where(m, v, x)),
    Case("masked_fill", [randn(2, 3), randn(3) > 0, randn(2, 1)],
         ref=lambda x, m, v: np.where(m, v, x), name="broadcast-tensor", double=False),
    Case("masked_fill", [ints(0, 9, 2, 3), randn(2, 3) > 0, 7.9],
         ref=lambda x, m, v: np.where(m, np.int64(7), x), name="int", grad=False),
    Case("add_n", [[randn(2, 3), randn(2, 3), randn(2, 3)]], grad=False,
         ref=lambda xs: xs[0] + xs[1] + xs[2]),
    Case("allclose", [randn(2, 3), randn(2, 3)], grad=False,
         ref=lambda x, y, **kw: np.array(np.allclose(x, y))),
    Case("allclose", [np.array([1.0, np.nan]), np.array([1.0 + 1e-9, np.nan])],
         {"equal_nan": True}, grad=False, name="nan",
         ref=lambda x, y, equal_nan: np.array(np.allclose(x, y, equal_nan=equal_nan))),
    Case("var", [randn(3, 4)], {"axis": 1}, ref=_var_ref, double=True),
    Case("var", [randn(2, 3, 4)], {"axis": [0, 2], "unbiased": False, "keepdim": True},
         ref=_var_ref, double=True, name="axes"),
    Case("var", [randn(3, 4)], ref=_var_ref, double=True, name="all"),
    Case("logsumexp", [randn(3, 4)], {"axis": 1}, ref=_logsumexp_ref, double=True),
    Case("logsumexp", [randn(2, 3) * 30], {"keepdim": True}, ref=_logsumexp_ref,
         name="all-large", double=True, rtol=1e-7),
    Case("logsumexp", [np.array([[-np.inf, -np.inf], [0.0, -np.inf]])], {"axis": 1},
         ref=_logsumexp_ref, grad=False, name="minus-inf"),
    Case("cumprod", [randn(3, 4)], {"dim": 1}, ref=_cumprod_ref, double=True),
    Case("cumprod", [randn(2, 3)], ref=_cumprod_ref, double=True, name="flat"),
    Case("cumprod", [_with_zeros()], {"dim": -1}, ref=_cumprod_ref, double=True,
         name="zeros"),
    Case("cumprod", [ints(1, 4, 2, 3)], {"dim": 0}, ref=_cumprod_ref, grad=False, name="int"),
    Case("cumprod", [distinct(4)], {"dim": 0}, ref=_cumprod_ref, name="1d"),
]
