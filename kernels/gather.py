"""Gathering and scattering kernels: ``gather_nd``, ``scatter``, ``masked_select``,
``repeat_interleave`` and their adjoints (repeated indices accumulate)."""


def _nd_index(index):
    """The tuple that indexes the leading ``index.shape[-1]`` dims."""
    return tuple(index[..., i] for i in range(index.shape[-1]))


def gather_nd(xp, x, index):
    return xp.asarray(x[_nd_index(index)])


def gather_nd_grad(xp, g, x, index):
    out = xp.zeros(x.shape, dtype=g.dtype)
    xp.add.at(out, _nd_index(index), g)
    return out


def scatter_winners(xp, index):
    """Which rows of an overwriting scatter's updates are kept: the last one written to
    each position (found by a stable sort, so it does not depend on the backend)."""
    index = index.reshape(-1)
    order = xp.argsort(index, kind="stable")
    ordered = index[order]
    last = xp.ones(index.shape, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    winners = xp.zeros(index.shape, dtype=bool)
    winners[order] = last
    return winners


def scatter(xp, x, index, updates, overwrite=True):
    """``x`` with rows ``index`` replaced by ``updates`` (overwrite: the last of repeated
    indices wins) or by the sum of the updates for that row (accumulate)."""
    index = index.reshape(-1)
    updates = updates.astype(x.dtype, copy=False).reshape((index.shape[0],) + x.shape[1:])
    out = x.copy()
    if overwrite:
        keep = scatter_winners(xp, index)
        out[index[keep]] = updates[keep]
    else:
        out[index] = 0
        xp.add.at(out, index, updates)
    return out


def masked_select(xp, x, mask):
    shape = xp.broadcast(x, mask).shape
    return xp.broadcast_to(x, shape)[xp.broadcast_to(mask, shape)]


def masked_select_grad(xp, g, x, mask):
    """Zeros of the broadcast shape with ``g`` placed where ``mask`` holds."""
    shape = xp.broadcast(x, mask).shape
    out = xp.zeros(shape, dtype=g.dtype)
    out[xp.broadcast_to(mask, shape)] = g
    return out


def _repeats(xp, repeats, count):
    """The per-element repeats as a host list (an int repeats every element alike)."""
    if isinstance(repeats, int):
        return [repeats] * count
    values = repeats.reshape(-1).tolist()
    return values * count if len(values) == 1 else values


def repeat_interleave(xp, x, repeats, axis=None):
    if axis is None:
        x, axis = x.reshape(-1), 0
    return xp.repeat(x, _repeats(xp, repeats, x.shape[axis]), axis=axis)


def repeat_interleave_grad(xp, g, x, repeats, axis=None):
    """Sum each element's repeats back into it (the adjoint of repeat_interleave)."""
    flat = axis is None
    if flat:
        axis = 0
        shape = (x.size,)
    else:
        shape = x.shape
    owner = xp.repeat(xp.arange(shape[axis]), _repeats(xp, repeats, shape[axis]))
    moved = xp.moveaxis(g, axis, 0)
    out = xp.zeros((shape[axis],) + moved.shape[1:], dtype=g.dtype)
    xp.add.at(out, owner, moved)
    out = xp.moveaxis(out, 0, axis)
    return out.reshape(x.shape) if flat else out
