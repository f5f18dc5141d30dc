"""Sorting kernels: stable ``argsort`` in either direction, and ``topk``.

Both directions are stable: equal values keep their order of appearance, so
results do not depend on the backend's sorting algorithm.
"""


def argsort(xp, x, axis=-1, descending=False):
    """Indices that sort ``x`` along ``axis`` (int64); ties stay in input order."""
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable").astype(xp.int64, copy=False)
    # Sort the reversed input ascending, then read the result backwards: the
    # largest come first and, among equal values, the earliest does.
    n = x.shape[axis]
    backwards = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
    return (n - 1 - xp.flip(backwards, axis)).astype(xp.int64, copy=False)


def topk(xp, x, k, axis=-1, largest=True):
    """``(values, indices)`` of the ``k`` largest (or smallest) along ``axis``, sorted."""
    order = argsort(xp, x, axis, descending=largest)
    indices = xp.take(order, xp.arange(k), axis=axis)
    return xp.take_along_axis(x, indices, axis=axis), indices


def add_along_axis(xp, like, indices, g, axis):
    """Zeros shaped like ``like`` with ``g`` added at ``indices`` along ``axis``
    (repeated indices accumulate): the adjoint of ``take_along_axis``."""
    out = xp.zeros(like.shape, dtype=g.dtype)
    axis = axis % like.ndim
    grids = xp.ix_(*[xp.arange(d) for d in indices.shape])
    where = tuple(indices if i == axis else grids[i] for i in range(indices.ndim))
    xp.add.at(out, where, g)
    return out
