"""``where(xp, cond, x, y)``: elementwise selection, branch-free on NumPy; and
``clip_bound``, the bound ``clip`` selects against, in the clipped dtype.

NumPy's ``where`` branches on every element, which costs ~15x a multiply when
the mask is not mostly one value (ReLU and max-pool gradients). Selecting the
bits with and/or (against zero: multiplying them, as integers, by the 0/1
mask) does not branch and is exact for every value (NaN, -0.0).
Other array modules (CuPy) use their own ``where``.
"""

import numpy

# Below this many elements the few extra NumPy calls cost more than they save.
BITWISE_MIN_SIZE = 4096


def where(xp, cond, x, y, out=None):
    """``xp.where(cond, x, y)`` for arrays ``x`` and ``y`` of one dtype, written to
    ``out`` (of the broadcast shape and that dtype, not ``y``) when given."""
    return _BY_MODULE.get(xp.__name__, _where)(xp, cond, x, y, out)


def _where(xp, cond, x, y, out):
    if out is None:
        return xp.where(cond, x, y)
    out[...] = xp.where(cond, x, y)
    return out


def _bitwise_where(xp, cond, x, y, out):
    bits = _BITS.get(x.dtype.itemsize)
    if (cond.size < BITWISE_MIN_SIZE or bits is None or x.dtype != y.dtype
            or x.dtype.kind not in "biuf"):
        return _where(xp, cond, x, y, out)
    cond = cond.astype(bool, copy=False)
    if y.ndim == 0 and not y.view(bits):  # where(cond, x, 0): x's bits times 1 or 0
        if out is None:
            out = numpy.empty(numpy.broadcast_shapes(cond.shape, x.shape), dtype=x.dtype)
        numpy.multiply(x.view(bits), cond, out=out.view(bits))
        return out
    mask = numpy.empty(numpy.broadcast_shapes(cond.shape, x.shape, y.shape), dtype=bits)
    numpy.negative(cond.view(numpy.int8), out=mask)  # all bits or none
    if out is None:
        out = numpy.empty(mask.shape, dtype=x.dtype)
    out_bits = out.view(bits)
    numpy.bitwise_and(x.view(bits), mask, out=out_bits)
    numpy.invert(mask, out=mask)
    numpy.bitwise_and(mask, y.view(bits), out=mask)
    numpy.bitwise_or(out_bits, mask, out=out_bits)
    return out


_BITS = {1: numpy.int8, 2: numpy.int16, 4: numpy.int32, 8: numpy.int64}


def clip_bound(value, dtype):
    """``value`` (a Python number, -inf/inf for no bound) as a scalar of ``dtype``, as
    Paddle casts it; for an integer dtype a bound beyond its range is its end (so
    the default bounds and a -1 bound of a uint8 tensor bound nothing)."""
    dtype = numpy.dtype(dtype)
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        value = min(max(value, info.min), info.max)
    return dtype.type(value)
_BY_MODULE = {"numpy": _bitwise_where}
