"""``where(xp, cond, x, y)``: elementwise selection, branch-free on NumPy.

NumPy's ``where`` branches on every element, which costs ~15x a multiply when
the mask is not mostly one value (ReLU and max-pool gradients). Selecting the
bits with and/or does not branch and is exact for every value (NaN, -0.0).
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
    if (cond.size < BITWISE_MIN_SIZE or x.dtype != y.dtype
            or x.dtype.kind not in "biuf" or x.dtype.itemsize not in (1, 2, 4, 8)):
        return _where(xp, cond, x, y, out)
    bits = numpy.dtype(f"i{x.dtype.itemsize}")
    mask = numpy.empty(numpy.broadcast_shapes(cond.shape, x.shape, y.shape), dtype=bits)
    numpy.negative(cond.astype(bool, copy=False).view(numpy.int8), out=mask)  # all bits or none
    if out is None:
        out = numpy.empty(mask.shape, dtype=x.dtype)
    out_bits = out.view(bits)
    numpy.bitwise_and(x.view(bits), mask, out=out_bits)
    if y.ndim == 0 and not y.view(bits):  # where(cond, x, 0): done
        return out
    numpy.invert(mask, out=mask)
    numpy.bitwise_and(mask, y.view(bits), out=mask)
    numpy.bitwise_or(out_bits, mask, out=out_bits)
    return out


_BY_MODULE = {"numpy": _bitwise_where}
