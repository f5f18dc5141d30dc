"""Cases for runtime/ops/sorting.py and runtime/ops/linalg.py."""

import numpy as np

from tests.ops.harness import Case, distinct, ints, randn

_TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.0, 0.0, 5.0, 0.0, -1.0]])


def _argsort_ref(x, axis=-1, descending=False):
    """Stable in both directions, by comparing (value, position) pairs one by one."""
    moved = np.moveaxis(x, axis, -1)
    out = np.empty(moved.shape, np.int64)
    for idx in np.ndindex(moved.shape[:-1]):
        sign = -1 if descending else 1
        pairs = sorted((sign * v, i) for i, v in enumerate(moved[idx].tolist()))
        out[idx] = [i for _, i in pairs]
    return np.moveaxis(out, -1, axis)


def _topk_ref(x, k, axis=-1, largest=True):
    order = np.take(_argsort_ref(x, axis, descending=largest), np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis), order


def _take_grad_ref(g, x, index, axis):
    out = np.zeros(x.shape)
    for idx in np.ndindex(index.shape):
        target = list(idx)
        target[axis] = index[idx]
        out[tuple(target)] += g[idx]
    return out


def _einsum_ref(xs, equation):
    return np.einsum(equation, *xs)


def _diag_ref(x, offset=0, padding_value=0.0):
    if x.ndim == 2:
        return np.diagonal(x, offset).copy()
    n = len(x) + abs(offset)
    out = np.full((n, n), padding_value, x.dtype)
    for i, v in enumerate(x):
        out[i + max(-offset, 0), i + max(offset, 0)] = v
    return out


def _diag_grad_ref(g, x, offset=0):
    if x.ndim == 1:
        return np.diagonal(g, offset).copy()
    out = np.zeros(x.shape)
    for i, v in enumerate(g):
        out[i + max(-offset, 0), i + max(offset, 0)] = v
    return out


CASES = [
    Case("argsort", [_TIES], ref=_argsort_ref, grad=False),
    Case("argsort", [_TIES], {"axis": 1, "descending": True}, ref=_argsort_ref, grad=False,
         name="descending"),
    Case("argsort", [randn(4, 3)], {"axis": 0, "descending": True}, ref=_argsort_ref,
         grad=False, name="axis0"),
    Case("argsort", [ints(0, 3, 6)], {"descending": True}, ref=_argsort_ref, grad=False,
         name="int"),
    Case("topk", [distinct(3, 5)], {"k": 2}, ref=_topk_ref),
    Case("topk", [distinct(4, 3)], {"k": 3, "axis": 0, "largest": False}, ref=_topk_ref,
         name="smallest"),
    Case("topk", [_TIES], {"k": 3}, ref=_topk_ref, grad=False, name="ties"),
    Case("take_along_axis", [randn(3, 4), np.array([[0, 3], [1, 1], [2, 0]])], {"axis": 1},
         ref=lambda x, i, axis: np.take_along_axis(x, i, axis)),
    Case("take_along_axis_grad", [randn(3, 2), randn(3, 4), np.array([[0, 3], [1, 1], [2, 0]])],
         {"axis": 1}, ref=_take_grad_ref, grad_inputs=(0,)),
    Case("einsum", [[randn(2, 3), randn(3, 4)]], {"equation": "ij,jk->ik"},
         ref=_einsum_ref, grad=False),
    Case("einsum", [[randn(3, 3)]], {"equation": "ii->"}, ref=_einsum_ref, grad=False,
         name="trace"),
    Case("einsum", [[randn(2, 1, 3), randn(4, 3)]], {"equation": "abc,dc->abd"},
         ref=_einsum_ref, grad=False, name="batched"),
    Case("tril", [randn(3, 4)], ref=lambda x: np.tril(x)),
    Case("tril", [randn(2, 3, 4)], {"diagonal": 1}, ref=lambda x, diagonal: np.tril(x, 1),
         name="batched"),
    Case("triu", [randn(4, 3)], {"diagonal": -1}, ref=lambda x, diagonal: np.triu(x, -1)),
    Case("diag", [randn(3)], ref=_diag_ref),
    Case("diag", [randn(3)], {"offset": -2, "padding_value": 9.0}, ref=_diag_ref,
         name="offset-padding"),
    Case("diag", [randn(3, 5)], {"offset": 1}, ref=_diag_ref, name="2d"),
    Case("diag", [randn(4, 2)], {"offset": -1}, ref=_diag_ref, name="2d-below"),
    Case("diag_grad", [randn(5, 5), randn(3)], {"offset": 2}, ref=_diag_grad_ref,
         grad_inputs=(0,)),
    Case("diag_grad", [randn(3), randn(3, 5)], {"offset": 1}, ref=_diag_grad_ref,
         grad_inputs=(0,), name="2d"),
]
