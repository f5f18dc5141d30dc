"""Test cases of the update ops for the op-table harness (``tests/ops``).

``tests/ops/cases_optimizer.py`` re-exports ``CASES``, so the registry-wide
tests cover these ops; they have no gradient rules.
"""

import numpy as np

from tests.ops.harness import Case, positive, randn
from tests.optimizer import reference

LR = np.array([0.1])


def _adam_inputs(shape=(3, 4), dtype="float64"):
    return [randn(*shape, dtype=dtype), randn(*shape, dtype=dtype),
            randn(*shape, dtype=dtype), positive(*shape, dtype=dtype),
            np.array([0.9 ** 3], dtype=dtype), np.array([0.999 ** 3], dtype=dtype),
            LR.astype(dtype)]


def _multi_inputs(shapes, dtype="float64", same_powers=True):
    """multi_tensor_adam's inputs: lists of ``_adam_inputs`` over ``shapes`` (the beta
    powers differing per parameter unless ``same_powers``)."""
    groups = [_adam_inputs(shape, dtype) for shape in shapes]
    if not same_powers:
        for k, group in enumerate(groups):
            group[4] = group[4] * 0.9 ** k
            group[5] = group[5] * 0.999 ** k
    return [list(column) for column in zip(*(g[:6] for g in groups))] + [LR.astype(dtype)]


CASES = [
    Case("sgd", [randn(3, 4), randn(3, 4), LR], ref=reference.sgd, grad=False),
    Case("sgd", [randn(5), randn(5), np.array(0.5)], ref=reference.sgd, grad=False,
         name="0d_lr"),
    Case("momentum", [randn(3, 4), randn(3, 4), randn(3, 4), LR], {"mu": 0.8},
         ref=reference.momentum, grad=False),
    Case("momentum", [randn(3, 4), randn(3, 4), randn(3, 4), LR],
         {"mu": 0.9, "use_nesterov": True}, ref=reference.momentum, grad=False,
         name="nesterov"),
    Case("adam", _adam_inputs(), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
         ref=reference.adam, grad=False),
    Case("adam", _adam_inputs((), "float32"), {"epsilon": 1e-6}, ref=reference.adam,
         grad=False, name="0d_float32", rtol=1e-5, atol=1e-6),
    Case("adamw", _adam_inputs(), {"coeff": 0.1}, ref=reference.adamw, grad=False),
    Case("multi_tensor_adam", _multi_inputs([(3, 4), (5,), ()]), {"epsilon": 1e-6},
         ref=reference.multi_tensor_adam, grad=False),
    Case("multi_tensor_adam", _multi_inputs([(2, 3), (4,)], "float32", same_powers=False),
         {"coeff": 0.1}, ref=reference.multi_tensor_adam, grad=False, name="adamw_powers",
         rtol=1e-5, atol=1e-6),
]
