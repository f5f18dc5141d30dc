"""Cases for runtime/ops/manipulation.py.

Variadic inputs (concat/stack) are checked forward here; their gradients and
the double gradients of these (linear) ops are checked in test_manipulation.py.
"""

import numpy as np

from dy2stat.runtime.ops.indexing import decode_index, encode_index
from tests.ops.harness import Case, distinct, ints, randn


def _index_case(op, x, index, *, value=None, name, grad_g=None):
    """A getitem/setitem/getitem_grad case for a Python index (arrays stand for tensors)."""
    encoded, tensors = encode_index(index)
    attrs = {"index": encoded}
    if op == "getitem":
        return Case(op, [x, tensors], attrs, ref=_getitem_ref, name=name)
    if op == "setitem":
        return Case(op, [x, value, tensors], attrs, ref=_setitem_ref, name=name)
    return Case(op, [grad_g, x, tensors], attrs, ref=_getitem_grad_ref, name=name,
                grad_inputs=(0,))


def _getitem_ref(x, tensors, index):
    return x[decode_index(index, tensors)]


def _setitem_ref(x, value, tensors, index):
    out = x.copy()
    out[decode_index(index, tensors)] = value
    return out


def _getitem_grad_ref(g, x, tensors, index):
    out = np.zeros(x.shape, g.dtype)
    np.add.at(out, decode_index(index, tensors), g)
    return out


def _flip_ref(x, axis):
    return np.flip(x, tuple(axis))


def _squeeze_ref(x, axis=None):
    if axis is None:
        return np.squeeze(x)
    axes = tuple(a for a in ([axis] if isinstance(axis, int) else axis) if x.shape[a] == 1)
    return np.squeeze(x, axes)


def _tile_grad_ref(g, x, repeat_times):
    # Sum the tiles one by one.
    out = np.zeros(x.shape)
    for start in np.ndindex(*repeat_times):
        out += g[tuple(slice(s * d, (s + 1) * d) for s, d in zip(start, x.shape))]
    return out


def _gather_grad_ref(g, x, index):
    out = np.zeros(x.shape)
    np.add.at(out, index, g)
    return out


_X = randn(2, 3, 4)
_INDEX_CASES = [
    ("int", _X, 1),
    ("negative-int", _X, (-1, 2)),
    ("slices", _X, (slice(0, 2), slice(None, None, 2), slice(1, None))),
    ("negative-step", _X, (slice(None, None, -1), slice(2, 0, -1))),
    ("newaxis", _X, (None, 0, None, slice(1, 3))),
    ("ellipsis", _X, (Ellipsis, 1)),
    ("ellipsis-mid", _X, (0, Ellipsis, None, slice(None, 2))),
    ("tensor-int", _X, (slice(None), np.array([2, 0, 2]))),
    ("tensor-2d", _X, np.array([[1, 0], [1, 1]])),
    ("tensor-split", _X, (np.array([1, 0]), slice(None), np.array([3, 3]))),
    ("list", _X, [1, 0, 1]),
    ("mask", _X, _X > 0),
    ("mask-2d", _X, (slice(None), np.array([[True, False, True, False]] * 3))),
    ("tensor-bound", _X, (slice(np.array(1), None), slice(None, None, np.array(2)))),
]

CASES = [
    Case("reshape", [randn(2, 3, 4)], {"shape": [0, -1, 2]},
         ref=lambda x, shape: x.reshape(2, -1, 2)),
    Case("reshape", [randn(6)], {"shape": [2, 3]}, ref=lambda x, shape: x.reshape(shape),
         name="plain"),
    Case("reshape_shaped", [randn(2, 3, 4), np.array([0, -1, 2])],
         {"static_shape": [-1, -1, 2]}, ref=lambda x, shape, static_shape: x.reshape(2, -1, 2),
         grad_inputs=(0,)),
    Case("reshape_like", [randn(6), randn(3, 2)], ref=lambda x, like: x.reshape(like.shape),
         grad_inputs=(0,)),
    Case("transpose", [randn(2, 3, 4)], {"perm": [2, 0, 1]},
         ref=lambda x, perm: np.transpose(x, perm)),
    Case("transpose", [randn(2, 3, 4)], {"perm": [-1, 0, 1]},
         ref=lambda x, perm: np.transpose(x, (2, 0, 1)), name="negative"),
    Case("swapaxes_last", [randn(2, 3, 4)], ref=lambda x: np.swapaxes(x, -1, -2)),
    # The harness differentiates only array inputs: see test_manipulation.py for Xs* grads.
    Case("concat", [[randn(2, 3), randn(1, 3)]], ref=lambda xs, axis=0: np.concatenate(xs),
         grad=False),
    Case("concat", [[randn(2, 3), randn(2, 1)]], {"axis": -1},
         ref=lambda xs, axis: np.concatenate(xs, axis), name="last", grad=False),
    Case("concat", [[randn(2), ints(0, 4, 3)]], grad=False,
         ref=lambda xs: np.concatenate([xs[0], xs[1].astype(np.float64)]), name="promote"),
    Case("split_like", [randn(5, 2), [randn(2, 2), randn(3, 7)]],
         ref=lambda g, xs, axis=0: [g[:2], g[2:]], grad_inputs=(0,)),
    Case("stack", [[randn(2, 3), randn(2, 3)]], {"axis": 1},
         ref=lambda xs, axis: np.stack(xs, axis), grad=False),
    Case("unstack", [randn(2, 3)], {"axis": 1, "num": 3},
         ref=lambda x, axis, num: [x[:, 0], x[:, 1], x[:, 2]]),
    Case("split", [randn(6, 2)], {"num_or_sections": 3},
         ref=lambda x, num_or_sections: np.split(x, 3)),
    Case("split", [randn(2, 7)], {"num_or_sections": [2, -1, 1], "axis": 1},
         ref=lambda x, num_or_sections, axis: np.split(x, [2, 6], axis=1), name="sections"),
    Case("squeeze", [randn(1, 3, 1)], ref=lambda x: np.squeeze(x)),
    Case("squeeze", [randn(1, 3, 1)], {"axis": [0, 1]}, ref=_squeeze_ref, name="axes"),
    Case("unsqueeze", [randn(2, 3)], {"axis": [0, -1]},
         ref=lambda x, axis: x[None, :, :, None]),
    Case("unsqueeze", [randn(2, 3)], {"axis": 1}, ref=lambda x, axis: x[:, None],
         name="int"),
    Case("flatten", [randn(2, 3, 4)], {"start_axis": 1},
         ref=lambda x, start_axis: x.reshape(2, 12)),
    Case("flatten", [randn(2, 3, 4, 5)], {"start_axis": 1, "stop_axis": 2},
         ref=lambda x, start_axis, stop_axis: x.reshape(2, 12, 5), name="middle"),
    *[_index_case("getitem", x, idx, name=n) for n, x, idx in _INDEX_CASES],
    _index_case("getitem", randn(5), 3, name="to-0d"),
    _index_case("setitem", randn(2, 3, 4), (0, slice(None, None, -2)), value=randn(2, 4),
                name="slices"),
    _index_case("setitem", randn(2, 3, 4), (Ellipsis, None, 1), value=randn(1, 3, 1),
                name="broadcast"),
    _index_case("setitem", randn(2, 3, 4), (slice(None), np.array([2, 0])),
                value=randn(1, 1, 2, 4), name="tensor-int"),
    _index_case("setitem", randn(2, 3), randn(2, 3) > 0, value=2.5, name="mask-scalar"),
    _index_case("setitem", randn(4), [1, 3], value=ints(0, 5, 2), name="int-value"),
    _index_case("getitem_grad", randn(2, 3, 4), (slice(None), np.array([1, 1, 0])),
                grad_g=randn(2, 3, 4), name="repeated"),
    _index_case("getitem_grad", randn(2, 3, 4), (None, 1, slice(None, None, -1)),
                grad_g=randn(1, 3, 4), name="basic"),
    Case("gather", [randn(5, 3), np.array([4, 0, 4])], ref=lambda x, i: np.take(x, i, 0)),
    Case("gather", [randn(2, 5), np.array([[1, 2], [3, 1]])], {"axis": 1},
         ref=lambda x, i, axis: np.take(x, i, axis), name="axis"),
    Case("gather_grad", [randn(3, 3), randn(5, 3), np.array([4, 0, 4])],
         ref=_gather_grad_ref, grad_inputs=(0,)),
    Case("where", [randn(2, 3) > 0, randn(2, 3), randn(3)], ref=np.where),
    Case("where", [randn(2, 3) > 0, randn(2, 3), 0.0], ref=np.where, name="scalar"),
    Case("where", [randn(3) > 0, 1.0, randn(2, 1)], ref=np.where, name="scalar-x"),
    Case("expand", [randn(3, 1)], {"shape": [2, -1, 4]},
         ref=lambda x, shape: np.broadcast_to(x, (2, 3, 4))),
    Case("tile", [randn(2, 3)], {"repeat_times": [2, 1, 2]},
         ref=lambda x, repeat_times: np.tile(x, repeat_times)),
    Case("tile_grad", [randn(2, 2, 6), randn(2, 3)], {"repeat_times": [2, 1, 2]},
         ref=lambda g, x, repeat_times: _tile_grad_ref(g, x[None], repeat_times)[0],
         grad_inputs=(0,)),
    Case("flip", [randn(2, 3, 4)], {"axis": [0, -1]}, ref=_flip_ref),
    Case("one_hot", [np.array([[0, 2], [1, 0]])], {"num_classes": 3},
         ref=lambda x, num_classes: np.eye(3, dtype=np.float32)[x]),
    Case("shape", [randn(2, 3, 4)], ref=lambda x: np.array(x.shape)),
    Case("shape", [np.array(1.0)], ref=lambda x: np.zeros(0, np.int64), name="0d"),
    Case("numel", [randn(2, 3, 4)], ref=lambda x: np.array(x.size)),
    Case("assign", [distinct(2, 3)], ref=lambda x: x.copy()),
]
