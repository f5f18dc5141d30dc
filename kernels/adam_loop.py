"""Adam's elementwise update as one compiled loop (``compiled``: built once called often).

The NumPy form (``runtime.ops.optimizer._adam_update``) makes eleven passes over
a parameter's elements; this loop makes one, with the same operations in the
same order on values of the same dtype, so it gives the same bits: each
product, sum, square root and quotient is one IEEE operation rounded to the
parameters' dtype (Numba contracts no multiply-add into a fused one without
``fastmath``), and every scalar is passed already of that dtype, as NumPy
casts a Python float against a float32 array.
"""

from __future__ import annotations

import math

import numpy

from dy2stat.kernels import compiled

__all__ = ["adam_update"]


def adam_update_loop(param, g, moment1, moment2, lr_t, eps_t, beta1, one_minus_beta1, beta2,
                     one_minus_beta2, out):
    """One pass of ``adam_update`` over flat arrays, into the rows of ``out``: the new
    parameter, first moment and second moment (one output array: with one a loop
    over five arrays stays within the overlap checks LLVM makes to vectorize it)."""
    for i in range(param.shape[0]):
        gi = g[i]
        a = moment1[i] * beta1 + gi * one_minus_beta1
        b = moment2[i] * beta2 + (gi * gi) * one_minus_beta2
        out[1, i] = a
        out[2, i] = b
        out[0, i] = param[i] - (a / (math.sqrt(b) + eps_t)) * lr_t


def _compile():
    signatures = [f"void({t}[::1], {t}[::1], {t}[::1], {t}[::1], {t}, {t}, {t}, {t}, {t}, {t}, "
                  f"{t}[:, ::1])" for t in ("f4", "f8")]
    return compiled.numba_njit()(signatures, cache=False, nogil=True, error_model="numpy")(
        adam_update_loop)


def adam_update(param, g, moment1, moment2, lr_t, eps_t, beta1, beta2):
    """``(param_out, m1, m2)`` of Adam's update from the compiled loop, or None when it is
    not built yet or the operands are not what it takes (host arrays of one float
    dtype and one shape, contiguous; one learning rate and epsilon for all)."""
    dtype = param.dtype
    if (dtype.char not in "fd" or numpy.ndim(lr_t) or numpy.ndim(eps_t)
            or not all(type(a) is numpy.ndarray and a.dtype == dtype and a.shape == param.shape
                       and a.flags.c_contiguous for a in (param, g, moment1, moment2))):
        return None
    loop = compiled.ready("adam_update", _compile)
    if loop is None:
        return None
    scalar = dtype.type
    out = numpy.empty((3, param.size), dtype)
    loop(*(a.reshape(-1) for a in (param, g, moment1, moment2)), scalar(lr_t), scalar(eps_t),
         scalar(beta1), scalar(1 - beta1), scalar(beta2), scalar(1 - beta2), out)
    return tuple(row.reshape(param.shape) for row in out)
