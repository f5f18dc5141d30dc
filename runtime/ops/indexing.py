"""Indexing ops: ``getitem`` (``x[idx]``), its gradient and ``setitem`` (``x[idx] = v``).

The index is encoded as JSON-ready data by ``encode_index``; tensors inside
the index travel as the ops' ``Index*`` inputs (see ``encode_index``).
"""

from __future__ import annotations

import numpy as np

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.manipulation import _add_at
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import AttrType, Meta, defop

fmt = shapes.fmt


class IndexOutOfRange(IndexError, ValueError):
    """An index past a known dim: an IndexError (Python's protocol) and a ValueError (ours)."""


# ---------------------------------------------------------------- indexing
#
# An index is a list of entries, one per item of the Python index tuple:
#   3                           an int
#   ["slice", a, b, c]          a slice; each bound an int, None or ["tensor", k]
#   ["none"]                    np.newaxis
#   ["ellipsis"]                ...
#   ["bool", True]              a Python bool (numpy: a 0-d mask)
#   ["list", [0, 2]]            a (nested) list of ints or bools
#   ["tensor", k]               the k-th Index input: int → gather, bool → mask


def encode_index(index) -> tuple[list, list]:
    """``(entries, tensors)`` for a Python index; anything that is not an int,
    slice, None, Ellipsis, list, tuple or bool counts as a tensor and is
    returned in ``tensors`` (pass them as the op's ``Index`` inputs)."""
    tensors: list = []

    def tensor(value):
        tensors.append(value)
        return ["tensor", len(tensors) - 1]

    def bound(value):
        if value is None:
            return None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return int(value)
        return tensor(value)

    def entry(item):
        if isinstance(item, (bool, np.bool_)):
            return ["bool", bool(item)]
        if isinstance(item, (int, np.integer)):
            return int(item)
        if isinstance(item, slice):
            return ["slice", bound(item.start), bound(item.stop), bound(item.step)]
        if item is None:
            return ["none"]
        if item is Ellipsis:
            return ["ellipsis"]
        if isinstance(item, list):
            return ["list", _plain_list(item)]
        return tensor(item)

    items = index if isinstance(index, tuple) else (index,)
    return [entry(item) for item in items], tensors


def _plain_list(items):
    out = []
    for v in items:
        if isinstance(v, list):
            out.append(_plain_list(v))
        elif isinstance(v, (bool, np.bool_)):
            out.append(bool(v))
        elif isinstance(v, (int, np.integer)):
            out.append(int(v))
        else:
            raise TypeError(
                f"getitem: a list index may hold only ints or bools, got a {type(v).__name__}; "
                "index with a tensor instead"
            )
    return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


def _is_tensor_entry(entry) -> bool:
    return (isinstance(entry, list) and len(entry) == 2 and entry[0] == "tensor"
            and _is_int(entry[1]) and entry[1] >= 0)


def _is_plain_list(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, bool) or _is_int(v) or _is_plain_list(v) for v in value)


def _is_entry(entry) -> bool:
    """One entry of an encoded index, as the comment above lists them."""
    if _is_int(entry):
        return True
    if not isinstance(entry, list) or not entry:
        return False
    tag, rest = entry[0], entry[1:]
    if tag == "slice":
        return len(rest) == 3 and all(b is None or _is_int(b) or _is_tensor_entry(b)
                                      for b in rest)
    if tag in ("none", "ellipsis"):
        return not rest
    if tag == "bool":
        return len(rest) == 1 and isinstance(rest[0], bool)
    if tag == "list":
        return len(rest) == 1 and _is_plain_list(rest[0])
    return _is_tensor_entry(entry)


INDEX = AttrType("an encoded index (a list of ints and tagged entries: see "
                 "runtime/ops/indexing.py)",
                 lambda v: isinstance(v, list) and all(_is_entry(e) for e in v))


def decode_index(encoded, tensor_arrays, xp=np) -> tuple:
    """The Python index an encoded index stands for, tensors replaced by arrays."""

    def bound(value):
        if value is None or isinstance(value, int):
            return value
        return int(tensor_arrays[value[1]].reshape(()).item())

    def entry(item):
        if isinstance(item, int):
            return item
        tag = item[0]
        if tag == "slice":
            return slice(bound(item[1]), bound(item[2]), bound(item[3]))
        if tag == "tensor":
            return tensor_arrays[item[1]]
        if tag == "none":
            return None
        if tag == "ellipsis":
            return Ellipsis
        if tag == "bool":
            return bool(item[1])
        if tag == "list":
            array = xp.asarray(item[1])
            return array if array.size else array.astype(xp.int64)
        raise ValueError(f"getitem: unknown index entry {item!r}")

    return tuple(entry(item) for item in encoded)


def _has_int_array(idx) -> bool:
    return any(hasattr(i, "dtype") and i.dtype.kind in "iu" for i in idx)


def _classify(item, metas, op):
    """(kind, dims consumed, broadcast shape of an advanced index)."""
    if isinstance(item, int):
        return "int", 1, ()
    tag = item[0]
    if tag == "slice":
        return "slice", 1, None
    if tag == "none":
        return "none", 0, None
    if tag == "ellipsis":
        return "ellipsis", 0, None
    if tag == "bool":
        return "adv", 0, (1 if item[1] else 0,)
    if tag == "list":
        array = np.asarray(item[1])
        if array.dtype == np.bool_:
            return "mask", array.ndim, (int(array.sum()),)
        return "array", 1, array.shape
    if tag == "tensor":
        meta = metas[item[1]]
        if meta.dtype == dtypes.bool_:
            return "mask", len(meta.shape), (-1,)
        if meta.dtype not in dtypes.INTS:
            raise TypeError(f"{op}: a {meta.dtype} tensor cannot be an index (use int or bool)")
        return "array", 1, tuple(meta.shape)
    raise ValueError(f"{op}: unknown index entry {item!r}")


def _slice_len(dim, item, op):
    start, stop, step = item[1:]
    if isinstance(step, list):
        return -1
    if step == 0:
        raise ValueError(f"{op}: slice step cannot be zero")
    if dim < 0 or isinstance(start, list) or isinstance(stop, list):
        return -1
    return len(range(*slice(start, stop, step).indices(dim)))


def _check_bounds(dim, values, shape, op):
    for v in np.asarray(values).reshape(-1).tolist():
        if dim >= 0 and not -dim <= v < dim:
            raise IndexOutOfRange(
                f"{op}: index {v} is out of range for a dim of size {dim} (shape {fmt(shape)})"
            )


def index_shape(shape, encoded, metas, op="getitem") -> tuple:
    """The shape of ``x[index]`` for an ``x`` of ``shape`` (-1 where unknown)."""
    shape = tuple(shape)
    kinds = [_classify(item, metas, op) for item in encoded]
    if sum(k == "ellipsis" for k, _, _ in kinds) > 1:
        raise ValueError(f"{op}: an index can only have a single ellipsis ('...')")
    used = sum(n for _, n, _ in kinds)
    if used > len(shape):
        raise IndexOutOfRange(
            f"{op}: too many indices for shape {fmt(shape)}: {len(shape)}-D, {used} indexed"
        )
    has_adv = any(k in ("adv", "mask", "array") for k, _, _ in kinds)
    out, adv, adv_at, positions, dim = [], [], None, [], 0
    for pos, (item, (kind, n, adv_shape)) in enumerate(zip(encoded, kinds)):
        here = shape[dim : dim + n]
        if kind == "ellipsis":
            rest = len(shape) - used
            out.extend(shape[dim : dim + rest])
            dim += rest
            continue
        if kind == "none":
            out.append(1)
        elif kind == "slice":
            out.append(_slice_len(here[0], item, op))
        elif kind == "int":
            _check_bounds(here[0], item, shape, op)
        elif kind == "array" and item[0] == "list":
            _check_bounds(here[0], item[1], shape, op)
        elif kind == "mask":
            mask_shape = np.shape(item[1]) if item[0] == "list" else metas[item[1]].shape
            if not shapes.same(mask_shape, here):
                raise IndexOutOfRange(
                    f"{op}: boolean index of shape {fmt(mask_shape)} does not match the "
                    f"indexed dims {fmt(here)} of shape {fmt(shape)}"
                )
        dim += n
        if kind in ("adv", "mask", "array") or (kind == "int" and has_adv):
            adv.append(adv_shape)
            positions.append(pos)
            if adv_at is None:
                adv_at = len(out)
    out.extend(shape[dim:])
    if adv:
        joined = ()
        for s in adv:
            joined = shapes.broadcast(joined, s, op)
        # numpy: advanced indices next to each other keep their place; split up, they lead.
        if positions == list(range(positions[0], positions[-1] + 1)):
            out[adv_at:adv_at] = joined
        else:
            out = list(joined) + out
    return tuple(out)


def _metas(values):
    return [Meta(tuple(v.shape), v.dtype) for v in values]


def _getitem_kernel(xp, x, indices, index):
    return xp.asarray(x[decode_index(index, indices, xp)])


def _getitem_grad(e, ins, outs, douts, attrs, need):
    x, indices = ins
    return [e("getitem_grad", douts[0], x, indices, index=attrs["index"]), None]


defop(
    "getitem",
    inputs=("X", "Index*"),
    attrs={"index": []},
    attr_types={"index": INDEX},
    kernel=_getitem_kernel,
    infer=lambda x, indices, index: Meta(index_shape(x.shape, index, indices), x.dtype),
    grad=_getitem_grad,
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS | dtypes.BOOLS},
    doc="x[index]; the result may be a view: never write into it.",
)


def _getitem_grad_kernel(xp, g, x, indices, index):
    idx = decode_index(index, indices, xp)
    out = xp.zeros(x.shape, dtype=g.dtype)
    if _has_int_array(idx):
        return _add_at(xp, out, idx, g)
    out[idx] = g
    return out


def _getitem_grad_infer(g, x, indices, index):
    selected = index_shape(x.shape, index, indices, "getitem_grad")
    if not shapes.same(selected, g.shape):
        raise ValueError(f"getitem_grad: the gradient has shape {fmt(g.shape)}, but x[index] "
                         f"has shape {fmt(selected)} (x has shape {fmt(x.shape)})")
    return Meta(tuple(x.shape), g.dtype)


defop(
    "getitem_grad",
    inputs=("G", "X", "Index*"),
    attrs={"index": []},
    attr_types={"index": INDEX},
    kernel=_getitem_grad_kernel,
    infer=_getitem_grad_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("getitem", douts[0], ins[2], index=attrs["index"]),
        None,
        None,
    ],
    no_grad=("X", "Index"),
    dtypes={"G": dtypes.FLOATS, "Index": dtypes.INTS | dtypes.BOOLS},
    doc="Zeros like X with G added at index (repeated indices accumulate).",
)


def _setitem_kernel(xp, x, value, indices, index):
    out = x.copy()
    if hasattr(value, "dtype"):
        value = value.astype(x.dtype, copy=False)
    out[decode_index(index, indices, xp)] = value
    return out


def _setitem_infer(x, value, indices, index):
    target = index_shape(x.shape, index, indices, "setitem")
    v = list(value.shape)
    while len(v) > len(target) and v[0] in (1, -1):
        v.pop(0)
    if len(v) > len(target) or any(
        a not in (1, -1) and b != -1 and a != b for a, b in zip(reversed(v), reversed(target))
    ):
        raise ValueError(
            f"setitem: cannot assign a value of shape {fmt(value.shape)} to a selection of "
            f"shape {fmt(target)} (x has shape {fmt(x.shape)})"
        )
    return Meta(tuple(x.shape), x.dtype)


def _setitem_grad(e, ins, outs, douts, attrs, need):
    x, value, indices = ins
    g, index = douts[0], attrs["index"]
    gx = gv = None
    if need[0]:
        gx = e("setitem", g, 0.0, indices, index=index)
    if need[1]:
        gv = e("getitem", g, indices, index=index)
        target = index_shape(x.shape, index, _metas(indices), "setitem")
        extra = len(value.shape) - len(target)
        if extra > 0:  # the value had leading 1-dims that numpy drops
            gv = e("unsqueeze", gv, axis=list(range(extra)))
        gv = unbroadcast(e, gv, value)
    return [gx, gv, None]


defop(
    "setitem",
    inputs=("X", "Value", "Index*"),
    attrs={"index": []},
    attr_types={"index": INDEX},
    kernel=_setitem_kernel,
    infer=_setitem_infer,
    grad=_setitem_grad,
    no_grad=("Index",),
    dtypes={"Index": dtypes.INTS | dtypes.BOOLS},
    doc="A copy of X with X[index] = Value (broadcast, cast to X's dtype); X is not changed.",
)
