"""Cases for runtime/ops/creation.py (random ops: checked by their range and moments)."""

import numpy as np

from tests.ops.harness import Case, randn


def _random_check(dtype, shape, low=None, high=None, mean=None, std=None, values=None):
    def check(out, inputs):
        a = out.numpy()
        assert a.dtype == np.dtype(dtype) and a.shape == tuple(shape)
        if low is not None:
            assert a.min() >= low and a.max() < high
        if mean is not None:
            assert abs(a.mean() - mean) < 0.05 * max(std, 1) and abs(a.std() - std) < 0.05 * std
        if values is not None:
            assert set(np.unique(a).tolist()) <= set(values)

    return check


def _keep_rate(p):
    def check(out, inputs):
        a = out.numpy()
        assert a.dtype == inputs[0].dtype and a.shape == inputs[0].shape
        assert set(np.unique(a).tolist()) <= {0.0, 1.0}
        assert abs(a.mean() - (1 - p)) < 0.02

    return check


CASES = [
    Case("full", [], {"shape": [2, 3], "value": 1.5},
         ref=lambda shape, value: np.full(shape, value, np.float32)),
    Case("full", [], {"shape": [], "value": 7, "dtype": "int32"},
         ref=lambda shape, value, dtype: np.array(7, np.int32), name="0d-int"),
    Case("full", [], {"shape": [3], "value": 1.0, "dtype": "bool"},
         ref=lambda shape, value, dtype: np.ones(3, bool), name="bool"),
    Case("full_like", [randn(2, 3)], {"value": 2.0},
         ref=lambda x, value: np.full_like(x, value)),
    Case("full_like", [randn(2, 3)], {"value": 0.0, "dtype": "int64"},
         ref=lambda x, value, dtype: np.zeros(x.shape, np.int64), name="dtype"),
    Case("arange", [], {"end": 5}, ref=lambda end: np.arange(5)),
    Case("arange", [], {"start": 1.0, "end": 2.0, "step": 0.25, "dtype": "float32"},
         ref=lambda start, end, step, dtype: np.arange(1, 2, 0.25, np.float32), name="float"),
    Case("arange", [], {"start": 5, "end": 0, "step": -2},
         ref=lambda start, end, step: np.arange(5, 0, -2), name="negative"),
    Case("linspace", [], {"start": 0.0, "stop": 1.0, "num": 5},
         ref=lambda start, stop, num: np.linspace(0, 1, 5, dtype=np.float32)),
    Case("eye", [], {"num_rows": 3}, ref=lambda num_rows: np.eye(3, dtype=np.float32)),
    Case("eye", [], {"num_rows": 2, "num_columns": 4, "dtype": "int64"},
         ref=lambda num_rows, num_columns, dtype: np.eye(2, 4, dtype=np.int64), name="rect"),
    Case("uniform", [], {"shape": [200, 50], "min": -2.0, "max": 3.0},
         check=_random_check("float32", (200, 50), low=-2.0, high=3.0)),
    Case("uniform", [], {"shape": [4], "dtype": "float64", "seed": 7},
         check=_random_check("float64", (4,), low=-1.0, high=1.0), name="seeded"),
    Case("normal", [], {"shape": [200, 50], "mean": 1.0, "std": 2.0},
         check=_random_check("float32", (200, 50), mean=1.0, std=2.0)),
    Case("normal", [], {"shape": [100, 100], "dtype": "float16"},
         check=_random_check("float16", (100, 100), mean=0.0, std=1.0), name="half"),
    Case("randint", [], {"shape": [1000], "low": -2, "high": 3},
         check=_random_check("int64", (1000,), values=range(-2, 3))),
    Case("randint", [], {"shape": [3, 4], "high": 2, "dtype": "int32"},
         check=_random_check("int32", (3, 4), values=(0, 1)), name="int32"),
    Case("bernoulli_mask", [randn(100, 100)], {"p": 0.3}, check=_keep_rate(0.3)),
    Case("bernoulli_mask", [randn(100, 100).astype(np.float32)], {"p": 0.0},
         check=_keep_rate(0.0), name="keep-all"),
]

CASES.append(Case("full_shaped", [np.array([2, 3])], {"static_shape": [-1, 3], "value": 1.5},
                  ref=lambda shape, static_shape, value: np.full(tuple(shape), value,
                                                                 "float32"),
                  grad=False))
CASES += [
    Case("range", [np.array(0), np.array(5), np.array(1)], {},
         ref=lambda start, end, step: np.arange(5), grad=False),
    Case("range", [np.array(1.0, "float32"), np.array(2.0, "float32"),
                   np.array(0.25, "float32")], {"dtype": "float32"},
         ref=lambda start, end, step, dtype: np.arange(1, 2, 0.25, np.float32), grad=False,
         name="float"),
    Case("range", [np.array([5]), np.array([0]), np.array([-2])], {},
         ref=lambda start, end, step: np.arange(5, 0, -2), grad=False, name="negative"),
]
