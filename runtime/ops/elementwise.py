"""More elementwise ops: ``rsqrt``, the float tests (``isnan``/``isinf``/``isfinite``),
``masked_fill``, ``add_n`` and the ``allclose`` reduction."""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import Meta, defop

fmt = shapes.fmt


def _rsqrt_grad(e, ins, outs, douts, attrs, need):
    # d(x^-1/2) = -x^-3/2 / 2 = -y^3 / 2
    y = outs[0]
    return [e("multiply", douts[0], e("scale", e("multiply", y, e("multiply", y, y)),
                                      scale=-0.5))]


defop(
    "rsqrt",
    kernel=lambda xp, x: xp.reciprocal(xp.sqrt(x)),
    infer=lambda x: Meta(tuple(x.shape), x.dtype),
    grad=_rsqrt_grad,
    dtypes=dtypes.FLOATS,
    elementwise=True,
    doc="1 / sqrt(X).",
)

for _name in ("isnan", "isinf", "isfinite"):
    defop(
        _name,
        kernel=(lambda fn: lambda xp, x: getattr(xp, fn)(x))(_name),
        infer=lambda x: Meta(tuple(x.shape), dtypes.bool_),
        dtypes=dtypes.NUMERIC,
        elementwise=True,
    )


def _masked_fill_kernel(xp, x, mask, value):
    value = xp.asarray(value, dtype=x.dtype)
    return xp.where(mask, value, x)


def _masked_fill_infer(x, mask, value):
    shape = shapes.broadcast(x.shape, mask.shape, "masked_fill")
    return Meta(shapes.broadcast(shape, value.shape, "masked_fill"), x.dtype)


def _masked_fill_grad(e, ins, outs, douts, attrs, need):
    x, mask, value = ins
    g = douts[0]
    return [
        unbroadcast(e, e("where", mask, 0.0, g), x) if need[0] else None,
        None,
        unbroadcast(e, e("where", mask, g, 0.0), value) if need[2] else None,
    ]


defop(
    "masked_fill",
    inputs=("X", "Mask", "Value"),
    kernel=_masked_fill_kernel,
    infer=_masked_fill_infer,
    grad=_masked_fill_grad,
    no_grad=("Mask",),
    dtypes={"Mask": dtypes.BOOLS},
    doc="X with Value (cast to X's dtype) where Mask is true; all three broadcast.",
)


def _add_n_infer(xs):
    if not xs:
        raise ValueError("add_n: needs at least one input")
    shape, dtype = tuple(xs[0].shape), xs[0].dtype
    for x in xs[1:]:
        if not shapes.same(shape, x.shape) or x.dtype != dtype:
            listed = ", ".join(f"{x.dtype}{fmt(x.shape)}" for x in xs)
            raise ValueError(f"add_n: the inputs must agree in shape and dtype, got {listed}")
        shape = tuple(b if a == -1 else a for a, b in zip(shape, x.shape))
    return Meta(shape, dtype)


def _add_n_kernel(xp, xs):
    out = xs[0].copy()
    for x in xs[1:]:
        out += x
    return out


defop(
    "add_n",
    inputs=("Xs*",),
    kernel=_add_n_kernel,
    infer=_add_n_infer,
    eager_infer=True,  # the inputs agree in dtype (and shape)
    grad=lambda e, ins, outs, douts, attrs, need: [[douts[0] for _ in ins[0]]],
    doc="The sum of the tensors Xs (one shape and dtype).",
)


def _allclose_infer(x, y, rtol=1e-5, atol=1e-8, equal_nan=False):
    shapes.broadcast(x.shape, y.shape, "allclose")
    return Meta((), dtypes.bool_)


defop(
    "allclose",
    inputs=("X", "Y"),
    attrs={"rtol": 1e-5, "atol": 1e-8, "equal_nan": False},
    kernel=lambda xp, x, y, rtol=1e-5, atol=1e-8, equal_nan=False: xp.asarray(
        xp.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)),
    infer=_allclose_infer,
    promote=(0, 1),
    doc="Whether |X - Y| <= atol + rtol * |Y| everywhere (a 0-D bool).",
)
