"""The functions added for release 0.2, called through the public API (``d2s.*``,
``F.*``, Tensor methods), each with a NumPy reference.

Inputs are NumPy arrays (they become tensors) in the order the function takes
them; everything else is in ``kwargs``. Static and converted runs give the
first input a -1 first dim (``batch``), as a batch of unknown size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import dy2stat as d2s
from dy2stat.nn import functional as F
from tests.ops.harness import distinct, ints, positive, randn


@dataclass
class Api:
    fn: Callable
    inputs: list
    ref: Callable
    kwargs: dict = field(default_factory=dict)
    name: str = ""
    grad: bool = True  # check gradients of the float inputs
    double: bool = False  # and second derivatives
    batch: bool = True  # a -1 first dim in static and converted runs

    @property
    def id(self) -> str:
        return self.name or self.fn.__name__

    def call(self, *tensors):
        return self.fn(*tensors, **self.kwargs)


def _norm_ref(x, p, axis=None):
    a = np.abs(x)
    if p == np.inf:
        return a.max(axis=axis)
    return (a ** p).sum(axis=axis) ** (1 / p)


def _scatter_ref(x, index, updates):
    out = x.copy()
    for i, row in zip(index, updates):
        out[i] = row
    return out


def _pad_reflect_ref(x):
    return np.pad(x, [(0, 0), (0, 0), (2, 1), (1, 2)], mode="reflect")


def _nearest2x(x):
    return x.repeat(2, axis=2).repeat(2, axis=3)


def _bilinear_corners_ref(x):
    """align_corners=True: output (i, j) samples x at (i (h-1)/(H-1), j (w-1)/(W-1))."""
    n, c, h, w = x.shape
    out_h, out_w = 5, 7
    out = np.zeros((n, c, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            y, z = i * (h - 1) / (out_h - 1), j * (w - 1) / (out_w - 1)
            y0, z0 = min(int(y), h - 2), min(int(z), w - 2)
            dy, dz = y - y0, z - z0
            out[:, :, i, j] = ((1 - dy) * (1 - dz) * x[:, :, y0, z0] + dy * (1 - dz) *
                               x[:, :, y0 + 1, z0] + (1 - dy) * dz * x[:, :, y0, z0 + 1] +
                               dy * dz * x[:, :, y0 + 1, z0 + 1])
    return out


def _increment(x):
    counter = x * 1.0  # a non-leaf: increment changes it in place
    d2s.increment(counter, 2.0)
    return counter


_X = randn(3, 4)
_SPECIAL = np.array([[1.0, np.nan], [np.inf, 0.0], [-np.inf, -2.0]])
_MASK = randn(3, 4) > 0

CASES = [
    Api(d2s.masked_fill, [randn(3, 4), _MASK], lambda x, m: np.where(m, -1.5, x),
        {"value": -1.5}),
    Api(d2s.topk, [distinct(3, 5)], lambda x: (np.sort(x)[:, ::-1][:, :2],
                                               np.argsort(-x, kind="stable")[:, :2]),
        {"k": 2}),
    Api(d2s.sort, [distinct(4, 3)], lambda x: -np.sort(-x, axis=0),
        {"axis": 0, "descending": True}),
    Api(d2s.argsort, [distinct(3, 4)], lambda x: np.argsort(x, axis=-1), grad=False),
    Api(lambda a, b: d2s.einsum("bij,bjk->bik", a, b), [randn(3, 2, 4), randn(3, 4, 5)],
        lambda a, b: np.einsum("bij,bjk->bik", a, b), name="einsum", double=True),
    Api(lambda x, y: d2s.einsum("...i,...i", x, y), [randn(3, 4), randn(3, 4)],
        lambda x, y: np.einsum("...i,...i", x, y), name="einsum-ellipsis", double=True),
    Api(lambda x: d2s.einsum("ii->i", x), [randn(3, 3)], lambda x: np.diagonal(x).copy(),
        name="einsum-diagonal"),
    Api(lambda x, y: d2s.einsum("ij,k->", x, y), [randn(3, 2), randn(4)],
        lambda x, y: np.einsum("ij,k->", x, y), name="einsum-sum-out", batch=False),
    Api(lambda x, y: d2s.einsum("...ij,...jk", x, y), [randn(2, 1, 3, 4), randn(5, 4, 2)],
        lambda x, y: np.einsum("...ij,...jk", x, y), name="einsum-broadcast", batch=False),
    Api(d2s.bmm, [randn(2, 3, 4), randn(2, 4, 2)], lambda x, y: x @ y, double=True),
    Api(lambda x: d2s.chunk(x, 2, axis=1), [randn(3, 4)], lambda x: np.split(x, 2, 1),
        name="chunk"),
    Api(d2s.unbind, [randn(3, 4)], lambda x: list(x.T), {"axis": 1}),
    Api(d2s.tril, [randn(3, 4)], lambda x: np.tril(x, -1), {"diagonal": -1}),
    Api(d2s.triu, [randn(3, 4)], np.triu),
    Api(d2s.std, [randn(3, 4)], lambda x: x.std(axis=1, ddof=1), {"axis": 1}, double=True),
    Api(d2s.var, [randn(3, 4)], lambda x: x.var(ddof=0), {"unbiased": False}, double=True),
    Api(d2s.logsumexp, [randn(3, 4)], lambda x: np.log(np.exp(x).sum(0)), {"axis": 0},
        double=True),
    Api(d2s.norm, [randn(3, 4)], lambda x: np.sqrt((x * x).sum()), double=True),
    Api(lambda x: d2s.norm(x, p=1, axis=1), [distinct(3, 4) - 1.7],
        lambda x: np.abs(x).sum(1), name="norm-1"),
    Api(lambda x: d2s.norm(x, p=np.inf, axis=-1), [distinct(3, 4) - 1.7],
        lambda x: _norm_ref(x, np.inf, -1), name="norm-inf"),
    Api(lambda x: d2s.norm(x, p=-np.inf, axis=0, keepdim=True), [distinct(3, 4) - 1.7],
        lambda x: np.abs(x).min(axis=0, keepdims=True), name="norm-minus-inf"),
    Api(lambda x: d2s.norm(x, p=0, axis=1), [np.array([[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]])],
        lambda x: (x != 0).sum(1).astype(x.dtype), name="norm-0", grad=False),
    Api(lambda x, s: d2s.scale(x, s, 1.0, act="relu"), [distinct(3, 4) - 2.0, np.array(2.0)],
        lambda x, s: np.maximum(s * x + 1.0, 0), name="scale-tensor-relu"),
    Api(lambda x: d2s.norm(x, p=3, axis=[0, 1]), [positive(3, 4)],
        lambda x: _norm_ref(x, 3), name="norm-3", double=True),
    Api(d2s.rsqrt, [positive(3, 4)], lambda x: 1 / np.sqrt(x), name="rsqrt", double=True),
    Api(d2s.isnan, [_SPECIAL], np.isnan, name="isnan", grad=False),
    Api(d2s.isinf, [_SPECIAL], np.isinf, name="isinf", grad=False),
    Api(d2s.isfinite, [_SPECIAL], np.isfinite, name="isfinite", grad=False),
    Api(d2s.allclose, [_X, _X + 1e-9], lambda x, y: np.array(True), grad=False),
    Api(d2s.cumprod, [randn(3, 4)], lambda x: np.cumprod(x, axis=1), {"dim": 1},
        double=True),
    Api(d2s.cumsum, [randn(3, 4)], lambda x: np.cumsum(x, axis=0), {"axis": 0}),
    Api(d2s.flip, [randn(3, 4)], lambda x: x[::-1, ::-1], {"axis": [0, 1]}),
    Api(d2s.roll, [randn(3, 4)], lambda x: np.roll(x, (1, -1), (0, 1)),
        {"shifts": [1, -1], "axis": [0, 1]}),
    Api(d2s.tile, [randn(3, 2)], lambda x: np.tile(x, (2, 1, 2)), {"repeat_times": [2, 1, 2]}),
    Api(d2s.expand, [randn(3, 1)], lambda x: np.broadcast_to(x, (2, 3, 4)),
        {"shape": [2, -1, 4]}),
    Api(d2s.expand_as, [randn(3, 1), np.zeros((3, 4), "int64")],
        lambda x, y: np.broadcast_to(x, y.shape),
        name="expand_as"),
    Api(d2s.repeat_interleave, [randn(3, 2)], lambda x: x.repeat(2, axis=1),
        {"repeats": 2, "axis": 1}),
    Api(d2s.repeat_interleave, [randn(3, 2), np.array([1, 0, 2])],
        lambda x, r: x.repeat(r, axis=0), {"axis": 0}, name="repeat_interleave-tensor",
        batch=False),
    Api(d2s.gather_nd, [randn(3, 4, 2), np.array([[0, 1], [2, 3], [0, 1]])],
        lambda x, i: x[i[:, 0], i[:, 1]]),
    Api(d2s.scatter, [randn(4, 3), np.array([2, 0, 2]), randn(3, 3)], _scatter_ref),
    Api(d2s.index_select, [randn(3, 4), np.array([3, 0, 3])],
        lambda x, i: x[:, i], {"axis": 1}),
    Api(d2s.masked_select, [randn(3, 4), _MASK], lambda x, m: x[m]),
    Api(lambda x: d2s.masked_select(x, x > 0).sum() * d2s.masked_select(x, x > 0).mean(),
        [randn(3, 4)], lambda x: x[x > 0].sum() * x[x > 0].mean(),
        name="masked_select-downstream"),
    Api(d2s.nonzero, [np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])], np.argwhere,
        grad=False),
    Api(lambda x: d2s.nonzero(x, as_tuple=True), [np.array([[0.0, 1.0], [2.0, 0.0]])],
        lambda x: tuple(c[:, None] for c in np.nonzero(x)), grad=False,
        name="nonzero-tuple"),
    Api(lambda x, y, z: d2s.add_n([x, y, z]), [randn(3, 4), randn(3, 4), randn(3, 4)],
        lambda x, y, z: x + y + z, name="add_n", batch=False),
    Api(_increment, [randn(1)], lambda x: x + 2.0, name="increment", batch=False),
    Api(d2s.strided_slice, [randn(5, 6)], lambda x: x[1:5:2, ::-2],
        {"axes": [0, 1], "starts": [1, -1], "ends": [5, -100], "strides": [2, -2]}),
    Api(d2s.slice, [randn(5, 6)], lambda x: x[:, 2:], {"axes": [1], "starts": [2],
                                                      "ends": [100]}),
    Api(d2s.scale, [randn(3, 4)], lambda x: 3.0 * (x + 0.5),
        {"scale": 3.0, "bias": 0.5, "bias_after_scale": False}),
    Api(lambda x, y: d2s.meshgrid(x, y), [randn(3), randn(4)],
        lambda x, y: np.meshgrid(x, y, indexing="ij"), name="meshgrid", batch=False),
    Api(d2s.diag, [randn(3)], lambda x: np.diag(x, 1), {"offset": 1}, batch=False),
    Api(d2s.diag, [randn(3, 4)], lambda x: np.diag(x, -1), {"offset": -1}, name="diag-2d"),
    Api(d2s.outer, [randn(3), randn(4)], np.outer),
    Api(lambda x: x.permute(1, 0, 2).view([4, -1]).t(), [randn(3, 4, 2)],
        lambda x: x.transpose(1, 0, 2).reshape(4, -1).T, name="permute-view-t"),
    # bounds that are tensors (in static and converted runs known only when they run)
    Api(lambda x: x * d2s.arange(d2s.shape(x)[0]).astype(x.dtype).unsqueeze(1), [randn(3, 2)],
        lambda x: x * np.arange(3)[:, None], name="arange-run-time-end"),
    Api(lambda x: x.sum() + d2s.arange(0.5, d2s.shape(x)[0], 0.5).sum(), [randn(3, 2)],
        lambda x: x.sum() + np.arange(0.5, 3, 0.5).sum(), name="arange-run-time-float"),
    Api(lambda x: x.reshape([d2s.shape(x)[0], 2, -1]), [randn(3, 4)],
        lambda x: x.reshape(3, 2, -1), name="reshape-two-run-time-dims"),
    Api(F.one_hot, [ints(0, 4, 3)], lambda x: np.eye(4)[x], {"num_classes": 4}, grad=False),
    Api(F.sequence_mask, [np.array([2, 0, 3])], lambda x: (np.arange(4) < x[:, None]),
        {"maxlen": 4, "dtype": "bool"}, grad=False),
    Api(F.pad, [randn(2, 3)], lambda x: np.pad(x, [(1, 0), (0, 2)], constant_values=0.5),
        {"pad": [1, 0, 0, 2], "value": 0.5}),
    Api(F.pad, [randn(2, 1, 3, 4)], _pad_reflect_ref, {"pad": [1, 2, 2, 1], "mode": "reflect"},
        name="pad-reflect"),
    Api(F.pad, [randn(2, 3, 4)], lambda x: np.pad(x, [(0, 0), (0, 0), (2, 1)], mode="edge"),
        {"pad": [2, 1], "mode": "replicate", "data_format": "NCL"}, name="pad-replicate"),
    Api(F.interpolate, [randn(2, 1, 2, 3)], _nearest2x, {"scale_factor": 2}),
    Api(F.interpolate, [randn(1, 2, 3, 4)], _bilinear_corners_ref,
        {"size": [5, 7], "mode": "bilinear", "align_corners": True},
        name="interpolate-bilinear"),
]
