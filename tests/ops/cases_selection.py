"""Cases for runtime/ops/selection.py, grids.py and tensor_array.py."""

import numpy as np

from tests.ops.harness import Case, ints, randn

_INDEX = np.array([[0, 1], [2, 0], [0, 1]])  # a repeated row: gradients accumulate


def _gather_nd_ref(x, index):
    out = [x[tuple(row)] for row in index.reshape(-1, index.shape[-1])]
    return np.array(out).reshape(index.shape[:-1] + x.shape[index.shape[-1]:])


def _gather_nd_grad_ref(g, x, index):
    out = np.zeros(x.shape)
    rows = index.reshape(-1, index.shape[-1])
    for row, value in zip(rows, g.reshape((len(rows),) + x.shape[index.shape[-1]:])):
        out[tuple(row)] += value
    return out


def _scatter_ref(x, index, updates, overwrite=True):
    out = x.copy()
    if not overwrite:
        out[index] = 0
    for i, row in zip(index, updates):
        out[i] = row if overwrite else out[i] + row
    return out


def _winners_ref(index):
    return np.array([i not in index[k + 1:] for k, i in enumerate(index.tolist())])


def _masked_select_grad_ref(g, x, mask):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    out = np.zeros(shape)
    out[np.broadcast_to(mask, shape)] = g
    return out


def _repeat_ref(x, repeats, times=1, axis=None):
    if axis is None:
        x, axis = x.reshape(-1), 0
    counts = [times] * x.shape[axis] if repeats is None else list(repeats.reshape(-1))
    parts = [np.take(x, [i] * int(c), axis=axis) for i, c in enumerate(counts)]
    return np.concatenate(parts, axis=axis)


def _repeat_grad_ref(g, x, repeats, times=1, axis=None):
    flat = axis is None
    shape = (x.size,) if flat else x.shape
    axis = 0 if flat else axis
    counts = [times] * shape[axis] if repeats is None else list(repeats.reshape(-1))
    owner = [i for i, c in enumerate(counts) for _ in range(int(c))]
    out = np.zeros(shape)
    for j, i in enumerate(owner):
        src = [slice(None)] * g.ndim
        dst = [slice(None)] * len(shape)
        src[axis], dst[axis] = j, i
        out[tuple(dst)] += g[tuple(src)]
    return out.reshape(x.shape)


def _meshgrid_ref(xs):
    return np.meshgrid(*xs, indexing="ij")


def _sequence_mask_ref(x, maxlen=None, limit=None, dtype="int64"):
    n = int(maxlen) if maxlen is not None else limit if limit is not None else int(x.max())
    out = np.zeros(x.shape + (n,), dtype)
    for idx in np.ndindex(x.shape):
        out[idx][: x[idx]] = 1
    return out


def _array_write_ref(array, x, i):
    i = int(np.asarray(i).reshape(-1)[0])
    rows = list(array) + [np.zeros(x.shape)] * max(0, i + 1 - len(array))
    rows[i] = x
    return np.stack(rows)


CASES = [
    Case("gather_nd", [randn(3, 4, 2), _INDEX], ref=_gather_nd_ref),
    Case("gather_nd", [randn(3, 4), np.array([[2], [0]])], ref=_gather_nd_ref, name="rows"),
    Case("gather_nd_grad", [randn(3, 2), randn(3, 4, 2), _INDEX], ref=_gather_nd_grad_ref,
         grad_inputs=(0,)),
    Case("scatter", [randn(4, 3), np.array([1, 3, 1]), randn(3, 3)], ref=_scatter_ref),
    Case("scatter", [randn(4, 3), np.array([1, 3, 1]), randn(3, 3)], {"overwrite": False},
         ref=_scatter_ref, name="accumulate"),
    Case("scatter", [randn(5), np.array([4, 0]), randn(2)], ref=_scatter_ref, name="1d"),
    Case("scatter_winners", [np.array([2, 0, 2, 1, 0, 2])], ref=_winners_ref, grad=False),
    Case("masked_select", [randn(3, 4), randn(3, 4) > 0], ref=lambda x, m: x[m]),
    Case("masked_select", [randn(3, 1), randn(2, 3, 4) > 0], name="broadcast",
         ref=lambda x, m: np.broadcast_to(x, m.shape)[m]),
    Case("masked_select_grad", [randn(6), randn(3, 1), np.arange(12).reshape(3, 4) % 2 == 0],
         ref=_masked_select_grad_ref, grad_inputs=(0,)),
    Case("nonzero", [np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])],
         ref=lambda x: np.argwhere(x), grad=False),
    Case("nonzero", [np.array([True, False, True])], ref=lambda x: np.argwhere(x),
         grad=False, name="bool"),
    Case("repeat_interleave", [randn(2, 3), None], {"times": 2, "axis": 1}, ref=_repeat_ref),
    Case("repeat_interleave", [randn(2, 3), None], {"times": 2}, ref=_repeat_ref, name="flat"),
    Case("repeat_interleave", [randn(3, 2), np.array([2, 0, 1])], {"axis": 0},
         ref=_repeat_ref, name="tensor"),
    Case("repeat_interleave_grad", [randn(4, 2), randn(3, 2), np.array([1, 0, 3])],
         {"axis": 0}, ref=_repeat_grad_ref, grad_inputs=(0,)),
    Case("repeat_interleave_grad", [randn(12), randn(2, 3), None], {"times": 2},
         ref=_repeat_grad_ref, grad_inputs=(0,), name="flat"),
    Case("roll", [randn(3, 4)], {"shifts": 1}, ref=lambda x, shifts: np.roll(x, 1)),
    Case("roll", [randn(3, 4)], {"shifts": [1, -2], "axis": [0, 1]}, name="axes",
         ref=lambda x, shifts, axis: np.roll(x, shifts, axis)),
    Case("meshgrid", [[randn(2), randn(3), randn(4)]], ref=_meshgrid_ref, grad=False),
    Case("sequence_mask", [np.array([[1, 3], [0, 2]]), None], {"limit": 4},
         ref=_sequence_mask_ref),
    Case("sequence_mask", [np.array([2, 0, 3]), None], {"dtype": "float32"},
         ref=_sequence_mask_ref, name="max"),
    Case("sequence_mask", [np.array([2, 0, 3]), np.array(5)], {"dtype": "bool"},
         ref=_sequence_mask_ref, name="tensor"),
    Case("array_write", [randn(3, 2), randn(2), np.array(1)], ref=_array_write_ref),
    Case("array_write", [randn(2, 2), randn(2), np.array([2])], ref=_array_write_ref,
         name="append"),
    Case("array_write", [randn(1, 2), randn(2), np.array(3)], ref=_array_write_ref,
         name="past-the-end"),
    Case("array_write", [np.zeros((0, 1, 1)), randn(2, 3), np.array(0)], name="placeholder",
         ref=lambda a, x, i: x[None], grad_inputs=(1,)),
    Case("array_write", [randn(2, 2).astype("float32"), ints(0, 5, 2), np.array(0)],
         ref=lambda a, x, i: np.stack([x, a[1]]).astype("float32"), grad=False, name="cast"),
]
