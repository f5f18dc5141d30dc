"""Elementwise math, comparisons, reductions and matmul."""

from __future__ import annotations

import numpy as np

from dy2stat.kernels import select
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import AXES, DTYPE, INT, NONE, Meta, defop

# ---------------------------------------------------------------- inference


def same_as_input(x, **_):
    return Meta(x.shape, x.dtype)


def _binary_infer(op, result_dtype=None):
    def infer(x, y, **_):
        shape = shapes.broadcast(x.shape, y.shape, op)
        return Meta(shape, result_dtype or dtypes.promote(x.dtype, y.dtype))

    return infer


def unbroadcast(e, g, x):
    """The gradient ``g`` of a broadcast result, summed back to ``x``'s shape."""
    gs, xs = tuple(g.shape), tuple(x.shape)
    if gs == xs and -1 not in xs:
        return g  # nothing was broadcast: no op needed
    return e("sum_to_like", g, x)


# ------------------------------------------------------ elementwise binary


def _add_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    return [unbroadcast(e, g, x) if need[0] else None, unbroadcast(e, g, y) if need[1] else None]


def _subtract_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    return [
        unbroadcast(e, g, x) if need[0] else None,
        unbroadcast(e, e("neg", g), y) if need[1] else None,
    ]


def _multiply_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    return [
        unbroadcast(e, e("multiply", g, y), x) if need[0] else None,
        unbroadcast(e, e("multiply", g, x), y) if need[1] else None,
    ]


def _divide_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    gx = e("divide", g, y)
    return [
        unbroadcast(e, gx, x) if need[0] else None,
        unbroadcast(e, e("neg", e("divide", e("multiply", gx, x), y)), y) if need[1] else None,
    ]


def _pow_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    gx = gy = None
    if need[0]:
        # A Python exponent stays a Python number (a 0-d array would round it to float32).
        lowered = y - 1 if isinstance(y, (int, float)) else e("subtract", y, 1)
        gx = e("multiply", g, e("multiply", y, e("pow", x, lowered)))
        gx = unbroadcast(e, gx, x)
    if need[1]:
        gy = unbroadcast(e, e("multiply", g, e("multiply", outs[0], e("log", x))), y)
    return [gx, gy]


def _select_grad(pick_x_op):
    """maximum/minimum: the gradient goes to the selected input (x on ties)."""

    def grad(e, ins, outs, douts, attrs, need):
        x, y = ins
        (g,) = douts
        take_x = e(pick_x_op, x, y)
        return [
            unbroadcast(e, e("where", take_x, g, 0.0), x) if need[0] else None,
            unbroadcast(e, e("where", take_x, 0.0, g), y) if need[1] else None,
        ]

    return grad


def _remainder_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    (g,) = douts
    return [
        unbroadcast(e, g, x) if need[0] else None,
        unbroadcast(e, e("neg", e("multiply", g, e("floor_divide", x, y))), y) if need[1] else None,
    ]


_BINARY = {
    # name: (kernel, grad, allowed dtypes)
    "add": (lambda xp, x, y: xp.add(x, y), _add_grad, dtypes.NUMERIC),
    "subtract": (lambda xp, x, y: xp.subtract(x, y), _subtract_grad, dtypes.NUMERIC),
    "multiply": (lambda xp, x, y: xp.multiply(x, y), _multiply_grad, dtypes.ALL),
    "divide": (lambda xp, x, y: xp.divide(x, y), _divide_grad, dtypes.FLOATS),
    "floor_divide": (lambda xp, x, y: xp.floor_divide(x, y), None, dtypes.NUMERIC),
    "remainder": (lambda xp, x, y: xp.remainder(x, y), _remainder_grad, dtypes.NUMERIC),
    "pow": (lambda xp, x, y: xp.power(x, y), _pow_grad, dtypes.NUMERIC),
    "maximum": (lambda xp, x, y: xp.maximum(x, y), _select_grad("greater_equal"), dtypes.NUMERIC),
    "minimum": (lambda xp, x, y: xp.minimum(x, y), _select_grad("less_equal"), dtypes.NUMERIC),
}
for _name, (_kernel, _grad, _dtypes) in _BINARY.items():
    defop(
        _name,
        inputs=("X", "Y"),
        kernel=_kernel,
        infer=_binary_infer(_name),
        grad=_grad,
        dtypes=_dtypes,
        promote=(0, 1),
        elementwise=True,
    )

_COMPARE = {
    "equal": lambda xp, x, y: xp.equal(x, y),
    "not_equal": lambda xp, x, y: xp.not_equal(x, y),
    "less_than": lambda xp, x, y: xp.less(x, y),
    "less_equal": lambda xp, x, y: xp.less_equal(x, y),
    "greater_than": lambda xp, x, y: xp.greater(x, y),
    "greater_equal": lambda xp, x, y: xp.greater_equal(x, y),
    "logical_and": lambda xp, x, y: xp.logical_and(x, y),
    "logical_or": lambda xp, x, y: xp.logical_or(x, y),
    "logical_xor": lambda xp, x, y: xp.logical_xor(x, y),
}
for _name, _kernel in _COMPARE.items():
    defop(
        _name,
        inputs=("X", "Y"),
        kernel=_kernel,
        infer=_binary_infer(_name, dtypes.bool_),
        promote=(0, 1),
        elementwise=True,
    )

_BITWISE = {
    "bitwise_and": lambda xp, x, y: xp.bitwise_and(x, y),
    "bitwise_or": lambda xp, x, y: xp.bitwise_or(x, y),
    "bitwise_xor": lambda xp, x, y: xp.bitwise_xor(x, y),
}
for _name, _kernel in _BITWISE.items():
    defop(
        _name,
        inputs=("X", "Y"),
        kernel=_kernel,
        infer=_binary_infer(_name),
        dtypes=dtypes.INTS | {dtypes.bool_},
        promote=(0, 1),
        elementwise=True,
    )

# ------------------------------------------------------- elementwise unary


def _unary_grad(local_grad):
    """Rule for y = f(x): dx = g * local_grad(e, x, y)."""

    def grad(e, ins, outs, douts, attrs, need):
        return [e("multiply", douts[0], local_grad(e, ins[0], outs[0]))]

    return grad


def _neg_grad(e, ins, outs, douts, attrs, need):
    return [e("neg", douts[0])]


def _sqrt_grad(e, ins, outs, douts, attrs, need):
    return [e("divide", douts[0], e("scale", outs[0], scale=2.0))]


def _log_grad(e, ins, outs, douts, attrs, need):
    return [e("divide", douts[0], ins[0])]


def _relu_grad(e, ins, outs, douts, attrs, need):
    return [e("where", e("greater_than", outs[0], 0.0), douts[0], 0.0)]


def _scale_grad(e, ins, outs, douts, attrs, need):
    return [e("scale", douts[0], scale=attrs["scale"])]


def _clip_grad(e, ins, outs, douts, attrs, need):
    x = ins[0]
    inside = e(
        "logical_and",
        e("greater_equal", x, float(attrs["min"])),
        e("less_equal", x, float(attrs["max"])),
    )
    return [e("where", inside, douts[0], 0.0)]


def _cast_grad(e, ins, outs, douts, attrs, need):
    x = ins[0]
    if not dtypes.is_float(x.dtype):
        return [None]
    return [e("cast", douts[0], dtype=str(x.dtype))]


def _sigmoid_kernel(xp, x):
    """1 / (1 + exp(-x)), in one buffer (tails keep their tiny values)."""
    out = xp.asarray(xp.exp(-x))  # a 0-d input gives a scalar: make it writable
    out += x.dtype.type(1)
    return xp.reciprocal(out, out=out)


_UNARY_FLOAT = {
    "exp": (lambda xp, x: xp.exp(x), _unary_grad(lambda e, x, y: y)),
    "log": (lambda xp, x: xp.log(x), _log_grad),
    "sqrt": (lambda xp, x: xp.sqrt(x), _sqrt_grad),
    "tanh": (
        lambda xp, x: xp.tanh(x),
        _unary_grad(lambda e, x, y: e("scale", e("multiply", y, y), scale=-1.0, bias=1.0)),
    ),
    "sigmoid": (
        _sigmoid_kernel,
        _unary_grad(lambda e, x, y: e("multiply", y, e("scale", y, scale=-1.0, bias=1.0))),
    ),
    "sin": (lambda xp, x: xp.sin(x), _unary_grad(lambda e, x, y: e("cos", x))),
    "cos": (lambda xp, x: xp.cos(x), _unary_grad(lambda e, x, y: e("neg", e("sin", x)))),
    "floor": (lambda xp, x: xp.floor(x), None),
    "ceil": (lambda xp, x: xp.ceil(x), None),
    "round": (lambda xp, x: xp.round(x), None),
}
for _name, (_kernel, _grad) in _UNARY_FLOAT.items():
    defop(
        _name,
        kernel=_kernel,
        infer=same_as_input,
        grad=_grad,
        dtypes=dtypes.FLOATS,
        elementwise=True,
    )

_UNARY_NUMERIC = {
    "neg": (lambda xp, x: xp.negative(x), _neg_grad),
    "abs": (lambda xp, x: xp.abs(x), _unary_grad(lambda e, x, y: e("sign", x))),
    "sign": (lambda xp, x: xp.sign(x), None),
    "relu": (lambda xp, x: xp.maximum(x, x.dtype.type(0)), _relu_grad),
}
for _name, (_kernel, _grad) in _UNARY_NUMERIC.items():
    defop(
        _name,
        kernel=_kernel,
        infer=same_as_input,
        grad=_grad,
        dtypes=dtypes.NUMERIC,
        elementwise=True,
    )

defop(
    "logical_not",
    kernel=lambda xp, x: xp.logical_not(x),
    infer=lambda x, **_: Meta(x.shape, dtypes.bool_),
    elementwise=True,
)
defop(
    "bitwise_not",
    kernel=lambda xp, x: xp.invert(x),
    infer=same_as_input,
    dtypes=dtypes.INTS | {dtypes.bool_},
    elementwise=True,
)


def _scale_kernel(xp, x, scale=1.0, bias=0.0):
    """scale * x + bias, keeping x's dtype."""
    t = x.dtype.type
    return x * t(scale) + t(bias) if bias else x * t(scale)


defop(
    "scale",
    attrs={"scale": 1.0, "bias": 0.0},
    kernel=_scale_kernel,
    infer=same_as_input,
    grad=_scale_grad,
    dtypes=dtypes.NUMERIC,
    elementwise=True,
)


def _clip_kernel(xp, x, min=-np.inf, max=np.inf):
    return xp.clip(x, select.clip_bound(min, x.dtype), select.clip_bound(max, x.dtype))


defop(
    "clip",
    attrs={"min": -np.inf, "max": np.inf},
    kernel=_clip_kernel,
    infer=same_as_input,
    grad=_clip_grad,
    dtypes=dtypes.NUMERIC,
    elementwise=True,
)


def _cast_infer(x, dtype):
    return Meta(x.shape, dtypes.as_dtype(dtype, where="cast"))


defop(
    "cast",
    attrs={"dtype": "float32"},
    attr_types={"dtype": DTYPE},
    kernel=lambda xp, x, dtype: x.astype(dtype, copy=False),
    infer=_cast_infer,
    grad=_cast_grad,
    elementwise=True,
)

# ------------------------------------------------------------- reductions


def _reduce_infer(op, result_dtype=None):
    def infer(x, axis=None, keepdim=False):
        return Meta(shapes.reduce(x.shape, axis, keepdim, op), result_dtype or x.dtype)

    return infer


def _axes(x, axis):
    """numpy's axis argument: None, int or tuple."""
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def _accumulating_kernel(fn):
    """sum/prod in the dtype ``dtypes.accumulated`` gives (NumPy's own choice for
    unsigned ints is uint64)."""
    def kernel(xp, x, axis=None, keepdim=False):
        return xp.asarray(getattr(xp, fn)(x, axis=_axes(x, axis), keepdims=keepdim,
                                          dtype=dtypes.accumulated(x.dtype)))

    return kernel


def _accumulating_infer(op):
    def infer(x, axis=None, keepdim=False):
        return Meta(shapes.reduce(x.shape, axis, keepdim, op), dtypes.accumulated(x.dtype))

    return infer


def _mean_kernel(xp, x, axis=None, keepdim=False):
    return xp.asarray(xp.mean(x, axis=_axes(x, axis), keepdims=keepdim))


def _sum_grad(e, ins, outs, douts, attrs, need):
    return [e("sum_grad", douts[0], ins[0], axis=attrs["axis"], keepdim=attrs["keepdim"])]


def _mean_grad(e, ins, outs, douts, attrs, need):
    return [e("mean_grad", douts[0], ins[0], axis=attrs["axis"], keepdim=attrs["keepdim"])]


def _extreme_grad(e, ins, outs, douts, attrs, need):
    """max/min: the gradient is shared equally among the tied extreme elements."""
    x, out, g = ins[0], outs[0], douts[0]
    spread = {"axis": attrs["axis"], "keepdim": attrs["keepdim"]}
    hit = e("equal", x, e("sum_grad", out, x, **spread))
    hit = e("cast", hit, dtype=str(x.dtype))
    count = e("sum_grad", e("sum", hit, **spread), x, **spread)
    share = e("divide", e("sum_grad", g, x, **spread), count)
    return [e("multiply", share, hit)]


_REDUCE = {
    "sum": (_accumulating_kernel("sum"), _sum_grad, dtypes.ALL),
    "mean": (_mean_kernel, _mean_grad, dtypes.FLOATS),
    "max": (lambda xp, x, axis=None, keepdim=False: xp.asarray(
        xp.max(x, axis=_axes(x, axis), keepdims=keepdim)), _extreme_grad, dtypes.ALL),
    "min": (lambda xp, x, axis=None, keepdim=False: xp.asarray(
        xp.min(x, axis=_axes(x, axis), keepdims=keepdim)), _extreme_grad, dtypes.ALL),
    "prod": (_accumulating_kernel("prod"), None, dtypes.NUMERIC),
}


for _name, (_kernel, _grad, _dtypes) in _REDUCE.items():
    defop(
        _name,
        attrs={"axis": None, "keepdim": False},
        attr_types={"axis": AXES.of_input("X")},
        kernel=_kernel,
        infer=_accumulating_infer(_name) if _name in ("sum", "prod") else _reduce_infer(_name),
        grad=_grad,
        dtypes=_dtypes,
    )

for _name, _fn in {"any": "any", "all": "all"}.items():
    defop(
        _name,
        attrs={"axis": None, "keepdim": False},
        attr_types={"axis": AXES.of_input("X")},
        kernel=(lambda fn: lambda xp, x, axis=None, keepdim=False: xp.asarray(
            getattr(xp, fn)(x, axis=_axes(x, axis), keepdims=keepdim)))(_fn),
        infer=_reduce_infer(_name, dtypes.bool_),
    )


def _arg_kernel(fn):
    def kernel(xp, x, axis=None, keepdim=False):
        if axis is None:
            out = getattr(xp, fn)(x.reshape(-1))
            return xp.asarray(out, dtype=xp.int64).reshape((1,) * x.ndim if keepdim else ())
        return xp.asarray(getattr(xp, fn)(x, axis=axis, keepdims=keepdim), dtype=xp.int64)

    return kernel


for _name, _fn in {"argmax": "argmax", "argmin": "argmin"}.items():
    defop(
        _name,
        attrs={"axis": None, "keepdim": False},
        attr_types={"axis": (NONE | INT).of_input("X")},
        kernel=_arg_kernel(_fn),
        infer=_reduce_infer(_name, dtypes.int64),
        dtypes=dtypes.NUMERIC,
    )


def _sum_grad_kernel(xp, g, x, axis=None, keepdim=False):
    """Spread a reduced gradient back over the input's shape."""
    if not keepdim and axis is not None:
        g = xp.expand_dims(g, shapes.axes_tuple(axis, x.ndim, "sum_grad"))
    elif not keepdim:
        g = g.reshape((1,) * x.ndim)
    return xp.broadcast_to(g, x.shape)


def _mean_grad_kernel(xp, g, x, axis=None, keepdim=False):
    count = 1
    for a in shapes.axes_tuple(axis, x.ndim, "mean_grad"):
        count *= x.shape[a]
    return _sum_grad_kernel(xp, g, x, axis, keepdim) / g.dtype.type(max(count, 1))


def _spread_infer(g, x, axis=None, keepdim=False):
    return Meta(x.shape, g.dtype)


defop(
    "sum_grad",
    inputs=("Grad", "X"),
    attrs={"axis": None, "keepdim": False},
    attr_types={"axis": AXES.of_input("X")},
    kernel=_sum_grad_kernel,
    infer=_spread_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("sum", douts[0], **attrs), None],
    no_grad=("X",),
    dtypes={"Grad": dtypes.FLOATS},
    doc="Broadcast a reduced gradient to X's shape (the gradient of sum).",
)
defop(
    "mean_grad",
    inputs=("Grad", "X"),
    attrs={"axis": None, "keepdim": False},
    attr_types={"axis": AXES.of_input("X")},
    kernel=_mean_grad_kernel,
    infer=_spread_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [e("mean", douts[0], **attrs), None],
    no_grad=("X",),
    dtypes={"Grad": dtypes.FLOATS},
    doc="The gradient of mean: broadcast and divide by the reduced count.",
)


def _sum_to_like_kernel(xp, g, x):
    """Sum a broadcast gradient down to x's shape."""
    if g.shape == x.shape:
        return g
    lead = g.ndim - x.ndim
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(x.shape) if d == 1 and g.shape[i + lead] != 1
    )
    if len(axes) > 1 and axes[0] == 0:
        # The batch axis first: adding whole rows runs contiguously, several
        # times faster than one reduction over strided axes (a conv bias gradient).
        g = xp.sum(g, axis=0, keepdims=True)
        axes = axes[1:]
    return xp.sum(g, axis=axes, keepdims=True).reshape(x.shape)


defop(
    "sum_to_like",
    inputs=("Grad", "X"),
    kernel=_sum_to_like_kernel,
    infer=lambda g, x: Meta(x.shape, g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [e("expand_as", douts[0], ins[0]), None],
    no_grad=("X",),
    dtypes={"Grad": dtypes.FLOATS},
    doc="Reduce a broadcast gradient to X's shape.",
)
defop(
    "expand_as",
    inputs=("X", "Like"),
    kernel=lambda xp, x, like: xp.broadcast_to(x, like.shape),
    infer=lambda x, like: Meta(shapes.broadcast(x.shape, like.shape, "expand_as"), x.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [e("sum_to_like", douts[0], ins[0]), None],
    no_grad=("Like",),
)


def _cumsum_kernel(xp, x, axis=None, reverse=False):
    if axis is None:
        x, axis = x.reshape(-1), 0
    if reverse:
        return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return xp.cumsum(x, axis=axis, dtype=x.dtype)


def _cumsum_infer(x, axis=None, reverse=False):
    shape = (shapes.numel(x.shape),) if axis is None else x.shape
    return Meta(shape, x.dtype)


def _cumsum_grad(e, ins, outs, douts, attrs, need):
    axis = attrs["axis"]
    g = e("cumsum", douts[0], axis=axis, reverse=not attrs["reverse"])
    return [g if axis is not None else e("reshape", g, shape=list(ins[0].shape))]


defop(
    "cumsum",
    attrs={"axis": None, "reverse": False},
    attr_types={"axis": (NONE | INT).of_input("X")},
    kernel=_cumsum_kernel,
    infer=_cumsum_infer,
    grad=_cumsum_grad,
    dtypes=dtypes.NUMERIC,
)

# ----------------------------------------------------------------- matmul


def _matmul_kernel(xp, x, y, transpose_x=False, transpose_y=False):
    if transpose_x:
        x = xp.swapaxes(x, -1, -2)
    if transpose_y:
        y = xp.swapaxes(y, -1, -2)
    return xp.matmul(x, y)


def _matmul_infer(x, y, transpose_x=False, transpose_y=False):
    xs, ys = list(x.shape), list(y.shape)
    if not xs or not ys:
        raise ValueError(f"matmul: inputs must be at least 1-D, got shapes {xs} and {ys}")
    if transpose_x and len(xs) > 1:
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if transpose_y and len(ys) > 1:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    x2 = [1] + xs if len(xs) == 1 else xs
    y2 = ys + [1] if len(ys) == 1 else ys
    k1, k2 = x2[-1], y2[-2]
    if k1 != k2 and k1 != -1 and k2 != -1:
        raise ValueError(
            f"matmul: shapes {shapes.fmt(x.shape)} and {shapes.fmt(y.shape)} do not match "
            f"(inner dims {k1} and {k2})"
        )
    batch = shapes.broadcast(x2[:-2], y2[:-2], "matmul")
    out = list(batch) + [x2[-2], y2[-1]]
    if len(xs) == 1:
        out.pop(-2)
    if len(ys) == 1:
        out.pop(-1)
    return Meta(tuple(out), dtypes.promote(x.dtype, y.dtype))


def _matmul_grad(e, ins, outs, douts, attrs, need):
    x, y = ins
    g = douts[0]
    if attrs["transpose_x"] or attrs["transpose_y"]:
        # Rare in practice: materialize the transposes and reuse the plain rule.
        xt = e("swapaxes_last", x) if attrs["transpose_x"] else x
        yt = e("swapaxes_last", y) if attrs["transpose_y"] else y
        gx, gy = _matmul_grad(e, [xt, yt], outs, douts, {"transpose_x": False,
                                                         "transpose_y": False}, need)
        if gx is not None and attrs["transpose_x"]:
            gx = e("swapaxes_last", gx)
        if gy is not None and attrs["transpose_y"]:
            gy = e("swapaxes_last", gy)
        return [gx, gy]
    x_vec, y_vec = len(x.shape) == 1, len(y.shape) == 1
    x2 = e("unsqueeze", x, axis=[0]) if x_vec else x
    y2 = e("unsqueeze", y, axis=[-1]) if y_vec else y
    if x_vec:
        g = e("unsqueeze", g, axis=[-2])
    if y_vec:
        g = e("unsqueeze", g, axis=[-1])
    gx = gy = None
    if need[0]:
        gx = e("matmul", g, y2, transpose_y=True)
        if x_vec:
            gx = e("squeeze", gx, axis=[-2])
        gx = unbroadcast(e, gx, x)
    if need[1]:
        gy = e("matmul", x2, g, transpose_x=True)
        if y_vec:
            gy = e("squeeze", gy, axis=[-1])
        gy = unbroadcast(e, gy, y)
    return [gx, gy]


defop(
    "matmul",
    inputs=("X", "Y"),
    attrs={"transpose_x": False, "transpose_y": False},
    kernel=_matmul_kernel,
    infer=_matmul_infer,
    grad=_matmul_grad,
    dtypes=dtypes.NUMERIC,
    promote=(0, 1),
)
