"""More reductions and scans: ``var``, ``logsumexp`` and ``cumprod``.

(``sum``/``mean``/``max``/``cumsum`` are in ``math.py``.) The gradient rules
are written with other ops only, so they are differentiable again; counts of
reduced elements are computed when the program runs (dims may be -1).
"""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import _axes
from dy2stat.runtime.registry import AXES, INT, NONE, Meta, defop


def _reduce_infer(op):
    def infer(x, axis=None, keepdim=False, **_):
        return Meta(shapes.reduce(x.shape, axis, keepdim, op), x.dtype)

    return infer


def _spread(e, value, x, attrs):
    """A reduced value broadcast back over x's shape."""
    return e("sum_grad", value, x, axis=attrs["axis"], keepdim=attrs["keepdim"])


# --------------------------------------------------------------------- var


def _var_kernel(xp, x, axis=None, unbiased=True, keepdim=False):
    return xp.asarray(xp.var(x, axis=_axes(x, axis), ddof=int(bool(unbiased)),
                             keepdims=keepdim))


def _var_grad(e, ins, outs, douts, attrs, need):
    # d var / dx = 2 (x - mean) / (n - ddof), n the count of reduced elements.
    x = ins[0]
    centered = e("subtract", x, e("mean", x, axis=attrs["axis"], keepdim=True))
    count = e("divide", e("cast", e("numel", x), dtype=str(x.dtype)),
              e("cast", e("numel", outs[0]), dtype=str(x.dtype)))
    ddof = 1.0 if attrs["unbiased"] else 0.0
    factor = e("divide", _spread(e, douts[0], x, attrs), e("scale", count, bias=-ddof))
    return [e("multiply", factor, e("scale", centered, scale=2.0))]


defop(
    "var",
    attrs={"axis": None, "unbiased": True, "keepdim": False},
    attr_types={"axis": AXES.of_input("X")},
    kernel=_var_kernel,
    infer=_reduce_infer("var"),
    grad=_var_grad,
    dtypes=dtypes.FLOATS,
    doc="The variance over axis (unbiased: divided by n - 1).",
)

# --------------------------------------------------------------- logsumexp


def _logsumexp_kernel(xp, x, axis=None, keepdim=False):
    axes = _axes(x, axis)
    top = xp.max(x, axis=axes, keepdims=True) if x.size else xp.zeros((1,) * x.ndim, x.dtype)
    top = xp.where(xp.isfinite(top), top, x.dtype.type(0))  # all -inf (or inf): no shift
    out = xp.log(xp.sum(xp.exp(x - top), axis=axes, keepdims=True)) + top
    return xp.asarray(out if keepdim else xp.squeeze(out, axis=axes if axes is not None
                                                    else tuple(range(x.ndim))))


def _logsumexp_grad(e, ins, outs, douts, attrs, need):
    x = ins[0]
    weights = e("exp", e("subtract", x, _spread(e, outs[0], x, attrs)))  # the softmax
    return [e("multiply", _spread(e, douts[0], x, attrs), weights)]


defop(
    "logsumexp",
    attrs={"axis": None, "keepdim": False},
    attr_types={"axis": AXES.of_input("X")},
    kernel=_logsumexp_kernel,
    infer=_reduce_infer("logsumexp"),
    grad=_logsumexp_grad,
    dtypes=dtypes.FLOATS,
    doc="log(sum(exp(X))) over axis, computed without overflow.",
)

# ----------------------------------------------------------------- cumprod


def _cumprod_kernel(xp, x, dim=None):
    if dim is None:
        x, dim = x.reshape(-1), 0
    return xp.cumprod(x, axis=dim, dtype=x.dtype)


def _cumprod_infer(x, dim=None):
    if dim is not None:
        shapes.normalize_axis(dim, len(x.shape), "cumprod")
        return Meta(tuple(x.shape), x.dtype)
    return Meta((shapes.numel(x.shape),), x.dtype)


def _cumprod_grad(e, ins, outs, douts, attrs, need):
    x, dim = ins[0], attrs["dim"]
    if dim is None:
        g = _cumprod_grad_along(e, e("reshape", x, shape=[-1]), outs[0], douts[0], 0)
        return [e("reshape_like", g, x)]
    return [_cumprod_grad_along(e, x, outs[0], douts[0], dim)]


def _cumprod_grad_along(e, x, out, g, axis):
    """dx_k = sum over i >= k of g_i * prod_{j <= i, j != k} x_j.

    Where x_k != 0 that is (reverse cumsum of g * out)_k / x_k. At the first zero of
    a row the products skip it: the same sum over the cumprod with that zero made 1.
    At the second zero they skip both zeros and hold the first as a factor (zero in
    value, but what the second derivative differentiates). Past that every product
    holds two zeros.
    """
    zero = e("equal", x, 0.0)
    zeros_so_far = e("cumsum", e("cast", zero, dtype="int64"), axis=axis)
    first = e("logical_and", zero, e("equal", zeros_so_far, 1))
    second = e("logical_and", zero, e("equal", zeros_so_far, 2))

    def skipping(mask):
        return e("cumsum", e("multiply", g, e("cumprod", e("where", mask, 1.0, x), dim=axis)),
                 axis=axis, reverse=True)

    nonzero_part = e("divide", e("cumsum", e("multiply", g, out), axis=axis, reverse=True),
                     e("where", zero, 1.0, x))
    first_zero = e("sum", e("where", first, x, 0.0), axis=[axis], keepdim=True)
    second_part = e("multiply", skipping(e("logical_or", first, second)), first_zero)
    at_zeros = e("where", first, skipping(first), e("where", second, second_part, 0.0))
    return e("where", zero, at_zeros, nonzero_part)


defop(
    "cumprod",
    attrs={"dim": None},
    attr_types={"dim": (NONE | INT).of_input("X")},
    kernel=_cumprod_kernel,
    infer=_cumprod_infer,
    grad=_cumprod_grad,
    dtypes=dtypes.NUMERIC,
    doc="Cumulative product along dim (None: over the flattened input).",
)
