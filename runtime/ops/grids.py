"""Grids built from vectors: ``meshgrid`` and ``sequence_mask``."""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import NONE, Meta, defop, int_at_least

fmt = shapes.fmt


def _meshgrid_infer(xs):
    if not xs:
        raise ValueError("meshgrid: needs at least one input")
    for x in xs:
        if len(x.shape) > 1:
            listed = ", ".join(fmt(x.shape) for x in xs)
            raise ValueError(f"meshgrid: the inputs must be 1-D (or 0-D), got {listed}")
    shape = tuple(x.shape[0] if x.shape else 1 for x in xs)
    return [Meta(shape, x.dtype) for x in xs]


def _meshgrid_kernel(xp, xs):
    return list(xp.meshgrid(*[x.reshape(-1) for x in xs], indexing="ij"))


def _meshgrid_grad(e, ins, outs, douts, attrs, need):
    (xs,), (gs,) = ins, douts
    n = len(xs)
    grads = []
    for i, (x, g) in enumerate(zip(xs, gs)):
        others = [j for j in range(n) if j != i]
        summed = e("sum", g, axis=others) if others else g
        grads.append(e("reshape_like", summed, x))
    return [grads]


defop(
    "meshgrid",
    inputs=("Xs*",),
    outputs=("Outs*",),
    kernel=_meshgrid_kernel,
    infer=_meshgrid_infer,
    grad=_meshgrid_grad,
    doc="Coordinate grids ('ij' indexing): output i repeats Xs[i] along axis i.",
)


def _sequence_mask_infer(x, maxlen, limit=None, dtype="int64"):
    # A tensor bound (MaxLen) or none (X's maximum): the size is known at run time.
    size = int(limit) if maxlen is None and limit is not None else -1
    return Meta(tuple(x.shape) + (size,), dtypes.as_dtype(dtype, where="sequence_mask"))


def _sequence_mask_kernel(xp, x, maxlen, limit=None, dtype="int64"):
    if maxlen is not None:
        limit = int(maxlen.reshape(()).item() if hasattr(maxlen, "reshape") else maxlen)
    elif limit is None:
        limit = int(x.max()) if x.size else 0
    return (xp.arange(limit) < x[..., None]).astype(dtype)


defop(
    "sequence_mask",
    inputs=("X", "MaxLen?"),
    attrs={"limit": None, "dtype": "int64"},
    attr_types={"limit": NONE | int_at_least(0)},
    kernel=_sequence_mask_kernel,
    infer=_sequence_mask_infer,
    no_grad=("X", "MaxLen"),
    dtypes={"X": dtypes.INTS, "MaxLen": dtypes.INTS},
    doc="mask[..., j] = j < X[...] for j below MaxLen (a tensor), limit, or X's maximum.",
)
