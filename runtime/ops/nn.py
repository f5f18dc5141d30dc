"""Neural-network ops: softmax, losses, convolution, pooling, dropout, norms, embedding, gelu.

Kernels come from ``dy2stat.kernels.nn`` (and ``.conv``); this file adds the
op records: slots, attrs, shape inference and gradient rules. Rules that must
support double grad (softmax, log_softmax, layer_norm) are written with
primitive ops; the others emit a ``*_grad`` op, and the linear or bilinear
``*_grad`` ops have rules of their own.
"""

from __future__ import annotations

import math
import numbers

from dy2stat.kernels import cudnn
from dy2stat.kernels import nn as nnk
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import Meta, defop

fmt = shapes.fmt


def _pair(value, name, op):
    """(a, b) from an int or a pair (attrs arrive as ints or lists)."""
    if isinstance(value, numbers.Integral):
        return (int(value), int(value))
    try:
        a, b = value
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {value!r}") from None


def _check_float(meta, what, op):
    if meta.dtype not in dtypes.FLOATS:
        raise TypeError(f"{op}: {what} must be a float tensor, got {meta.dtype}")


# ------------------------------------------------------------------- softmax


def _softmax_infer(op):
    def infer(x, axis=-1):
        shapes.normalize_axis(axis, len(x.shape), op)
        return Meta(x.shape, x.dtype)

    return infer


def _softmax_grad(e, ins, outs, douts, attrs, need):
    """y * (g - sum(g * y)): primitive ops only, so it differentiates again."""
    y, g, axis = outs[0], douts[0], attrs["axis"]
    dot = e("sum", e("multiply", g, y), axis=axis, keepdim=True)
    return [e("multiply", y, e("subtract", g, dot))]


def _log_softmax_grad(e, ins, outs, douts, attrs, need):
    """g - exp(y) * sum(g)."""
    y, g, axis = outs[0], douts[0], attrs["axis"]
    total = e("sum", g, axis=axis, keepdim=True)
    return [e("subtract", g, e("multiply", e("exp", y), total))]


defop(
    "softmax",
    attrs={"axis": -1},
    kernel=lambda xp, x, axis=-1: nnk.softmax(xp, x, axis),
    infer=_softmax_infer("softmax"),
    grad=_softmax_grad,
    dtypes=dtypes.FLOATS,
)
defop(
    "log_softmax",
    attrs={"axis": -1},
    kernel=lambda xp, x, axis=-1: nnk.log_softmax(xp, x, axis),
    infer=_softmax_infer("log_softmax"),
    grad=_log_softmax_grad,
    dtypes=dtypes.FLOATS,
)

# ------------------------------------------------------------- cross entropy

_REDUCTIONS = ("mean", "sum", "none")


def _ce_infer(op):
    def infer(logits, label, *rest, soft_label=False, ignore_index=-100, reduction="mean",
              axis=-1):
        shape = logits.shape
        if not shape:
            raise ValueError(f"{op}: logits must be at least 1-D, got shape {fmt(shape)}")
        ax = shapes.normalize_axis(axis, len(shape), op)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{op}: unknown reduction {reduction!r} (use mean, sum or none)")
        rows = tuple(d for i, d in enumerate(shape) if i != ax)
        if soft_label:
            _check_float(label, "a soft label", op)
            if not shapes.same(label.shape, shape):
                raise ValueError(
                    f"{op}: soft label shape {fmt(label.shape)} must equal logits shape "
                    f"{fmt(shape)}"
                )
        else:
            if label.dtype not in dtypes.INTS:
                raise TypeError(f"{op}: hard labels must be integers, got {label.dtype} "
                                "(pass soft_label=True for probabilities)")
            trimmed = label.shape
            if len(label.shape) == len(shape) and label.shape[ax] in (1, -1):
                trimmed = tuple(d for i, d in enumerate(label.shape) if i != ax)
            if not shapes.same(trimmed, rows):
                raise ValueError(
                    f"{op}: label shape {fmt(label.shape)} does not fit logits shape "
                    f"{fmt(shape)} (class axis {ax})"
                )
        if rest:  # the gradient op: DLoss in, a logits-shaped gradient out
            return Meta(shape, logits.dtype)
        return Meta(rows if reduction == "none" else (), logits.dtype)

    return infer


def _ce_grad(e, ins, outs, douts, attrs, need):
    logits, label = ins
    return [e("cross_entropy_grad", logits, label, douts[0], **attrs), None]


_CE_ATTRS = {"soft_label": False, "ignore_index": -100, "reduction": "mean", "axis": -1}

def _ce_kernel(fn):
    def kernel(xp, logits, label, *rest, soft_label=False, **attrs):
        if not soft_label and label.dtype.kind not in "iu":
            raise TypeError("hard labels must be integers")  # infer explains it
        return fn(xp, logits, label, *rest, soft_label=soft_label, **attrs)

    return kernel


defop(
    "cross_entropy",
    inputs=("Logits", "Label"),
    outputs=("Loss",),
    attrs=_CE_ATTRS,
    kernel=_ce_kernel(nnk.cross_entropy),
    infer=_ce_infer("cross_entropy"),
    grad=_ce_grad,
    no_grad=("Label",),
    dtypes=dtypes.FLOATS,
    doc="Softmax cross entropy of Logits against integer (or soft) labels.",
)
defop(
    "cross_entropy_grad",
    inputs=("Logits", "Label", "DLoss"),
    outputs=("DLogits",),
    attrs=_CE_ATTRS,
    kernel=_ce_kernel(nnk.cross_entropy_grad),
    infer=_ce_infer("cross_entropy_grad"),
    no_grad=("Label",),
    dtypes=dtypes.FLOATS,
    doc="The gradient of cross_entropy with respect to Logits.",
)

# ------------------------------------------------- backend-specific kernels

# Faster kernels for one array module, tried before the generic kernel; one
# returning NotImplemented (cuDNN missing, a dtype or case it cannot take)
# hands the call to the generic kernel.
BACKEND_KERNELS = {
    "cupy": {
        "conv2d": cudnn.conv2d,
        "conv2d_grad_input": cudnn.conv2d_grad_input,
        "conv2d_grad_filter": cudnn.conv2d_grad_filter,
        "max_pool2d": cudnn.max_pool2d,
        "max_pool2d_grad": cudnn.max_pool2d_grad,
        "avg_pool2d": cudnn.avg_pool2d,
        "avg_pool2d_grad": cudnn.avg_pool2d_grad,
    },
}


def _by_backend(op, generic):
    """The kernel of ``op``: the array module's own from BACKEND_KERNELS, else ``generic``."""

    def kernel(xp, *arrays, **attrs):
        fast = BACKEND_KERNELS.get(xp.__name__, {}).get(op)
        if fast is not None:
            out = fast(xp, *arrays, **attrs)
            if out is not NotImplemented:
                return out
        return generic(xp, *arrays, **attrs)

    kernel.__name__ = kernel.__qualname__ = getattr(generic, "__name__", op)
    kernel.__doc__ = generic.__doc__
    return kernel


# --------------------------------------------------------------------- conv2d

_CONV_ATTRS = {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}


def _conv_out(size, k, s, p, d, op, x_shape, w_shape):
    if size < 0 or k < 0:
        return -1
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if out < 1:
        raise ValueError(
            f"{op}: window {k} (dilation {d}) does not fit input size {size} + padding {p} "
            f"(input {fmt(x_shape)}, filter {fmt(w_shape)})"
        )
    return out


def _conv_shape(op, x_shape, w_shape, stride, padding, dilation, groups):
    """The output shape of conv2d; checks channels and groups where dims are known."""
    if len(x_shape) != 4:
        raise ValueError(f"{op}: input must be 4-D NCHW, got shape {fmt(x_shape)}")
    if len(w_shape) != 4:
        raise ValueError(f"{op}: filter must be 4-D [Cout, Cin/groups, KH, KW], "
                         f"got shape {fmt(w_shape)}")
    (sh, sw) = _pair(stride, "stride", op)
    (ph, pw) = _pair(padding, "padding", op)
    (dh, dw) = _pair(dilation, "dilation", op)
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{op}: stride and dilation must be >= 1 and padding >= 0 "
                         f"(stride {[sh, sw]}, padding {[ph, pw]}, dilation {[dh, dw]})")
    if not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c, h, w = x_shape
    cout, cg, kh, kw = w_shape
    if c != -1 and cg != -1 and c != cg * groups:
        extra = f" ({cg} per group x {groups} groups)" if groups > 1 else ""
        raise ValueError(
            f"{op}: input has {c} channels but filter expects {cg * groups}{extra} "
            f"(input {fmt(x_shape)}, filter {fmt(w_shape)})"
        )
    if cout != -1 and cout % groups:
        raise ValueError(
            f"{op}: {cout} output channels are not divisible by groups={groups} "
            f"(filter {fmt(w_shape)})"
        )
    oh = _conv_out(h, kh, sh, ph, dh, op, x_shape, w_shape)
    ow = _conv_out(w, kw, sw, pw, dw, op, x_shape, w_shape)
    return (n, cout, oh, ow)


def _conv2d_infer(x, w, **attrs):
    _check_float(x, "input", "conv2d")
    return Meta(_conv_shape("conv2d", x.shape, w.shape, **attrs), dtypes.promote(x.dtype, w.dtype))


def _check_dout(op, x_shape, w_shape, dy, attrs):
    if len(dy.shape) != 4:
        raise ValueError(f"{op}: the output gradient must be 4-D, got shape {fmt(dy.shape)}")
    want = _conv_shape(op, x_shape, w_shape, **attrs)
    if not shapes.same(want, dy.shape):
        raise ValueError(
            f"{op}: output gradient shape {fmt(dy.shape)} does not match the convolution of "
            f"input {fmt(x_shape)} with filter {fmt(w_shape)} (output {fmt(want)})"
        )


def _conv2d_grad_input_infer(x_ref, w, dy, **attrs):
    _check_dout("conv2d_grad_input", x_ref.shape, w.shape, dy, attrs)
    return Meta(x_ref.shape, dtypes.promote(w.dtype, dy.dtype))


def _conv2d_grad_filter_infer(x, dy, w_ref, **attrs):
    _check_dout("conv2d_grad_filter", x.shape, w_ref.shape, dy, attrs)
    return Meta(w_ref.shape, dtypes.promote(x.dtype, dy.dtype))


def _conv2d_grad(e, ins, outs, douts, attrs, need):
    x, w = ins
    g = douts[0]
    return [
        e("conv2d_grad_input", x, w, g, **attrs) if need[0] else None,
        e("conv2d_grad_filter", x, g, w, **attrs) if need[1] else None,
    ]


def _conv2d_grad_input_grad(e, ins, outs, douts, attrs, need):
    """grad_input(w, dy) is bilinear: <gg, grad_input(w, dy)> = <dy, conv2d(gg, w)>."""
    _, w, dy = ins
    gg = douts[0]
    return [
        None,
        e("conv2d_grad_filter", gg, dy, w, **attrs) if need[1] else None,
        e("conv2d", gg, w, **attrs) if need[2] else None,
    ]


def _conv2d_grad_filter_grad(e, ins, outs, douts, attrs, need):
    """grad_filter(x, dy) is bilinear: <gg, grad_filter(x, dy)> = <dy, conv2d(x, gg)>."""
    x, dy, _ = ins
    gg = douts[0]
    return [
        e("conv2d_grad_input", x, gg, dy, **attrs) if need[0] else None,
        e("conv2d", x, gg, **attrs) if need[1] else None,
        None,
    ]


defop(
    "conv2d",
    inputs=("X", "Filter"),
    attrs=_CONV_ATTRS,
    kernel=_by_backend("conv2d", nnk.conv2d),
    infer=_conv2d_infer,
    grad=_conv2d_grad,
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="2-D convolution of NCHW X with Filter [Cout, Cin/groups, KH, KW] (no bias).",
)
defop(
    "conv2d_grad_input",
    inputs=("X", "Filter", "DOut"),
    attrs=_CONV_ATTRS,
    kernel=_by_backend("conv2d_grad_input", nnk.conv2d_grad_input),
    infer=_conv2d_grad_input_infer,
    grad=_conv2d_grad_input_grad,
    no_grad=("X",),
    dtypes=dtypes.FLOATS,
    promote=(1, 2),
    doc="The gradient of conv2d with respect to X (X is only a shape reference).",
)
defop(
    "conv2d_grad_filter",
    inputs=("X", "DOut", "Filter"),
    attrs=_CONV_ATTRS,
    kernel=_by_backend("conv2d_grad_filter", nnk.conv2d_grad_filter),
    infer=_conv2d_grad_filter_infer,
    grad=_conv2d_grad_filter_grad,
    no_grad=("Filter",),
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="The gradient of conv2d with respect to Filter (Filter is only a shape reference).",
)

# -------------------------------------------------------------------- pooling


def _pool_out(size, k, s, p, ceil_mode, op, shape):
    if size < 0:
        return -1
    span = size + 2 * p - k
    if span < 0:
        raise ValueError(
            f"{op}: window {k} does not fit input size {size} + padding {p} (input {fmt(shape)})"
        )
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _check_pool_padding(op, k, p):
    if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        raise ValueError(f"{op}: padding {list(p)} must be at most half of kernel_size {list(k)}")


def _pool_kernel(fn, op):
    """The kernel, refusing padding wider than half the window (eager and static alike)."""

    def kernel(xp, *arrays, kernel_size, stride=None, padding=0, **attrs):
        _check_pool_padding(op, _pair(kernel_size, "kernel_size", op),
                            _pair(padding, "padding", op))
        return fn(xp, *arrays, kernel_size=kernel_size, stride=stride, padding=padding, **attrs)

    return kernel


def _pool_shape(op, shape, kernel_size, stride, padding, ceil_mode):
    if len(shape) != 4:
        raise ValueError(f"{op}: input must be 4-D NCHW, got shape {fmt(shape)}")
    if kernel_size is None:
        raise ValueError(f"{op}: kernel_size is required")
    kh, kw = _pair(kernel_size, "kernel_size", op)
    sh, sw = _pair(kernel_size if stride is None else stride, "stride", op)
    ph, pw = _pair(padding, "padding", op)
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{op}: kernel_size and stride must be >= 1 and padding >= 0 "
                         f"(kernel_size {[kh, kw]}, stride {[sh, sw]}, padding {[ph, pw]})")
    _check_pool_padding(op, (kh, kw), (ph, pw))
    n, c, h, w = shape
    return (n, c, _pool_out(h, kh, sh, ph, ceil_mode, op, shape),
            _pool_out(w, kw, sw, pw, ceil_mode, op, shape))


_POOL_ATTRS = {"kernel_size": None, "stride": None, "padding": 0, "ceil_mode": False}
_AVG_ATTRS = {**_POOL_ATTRS, "exclusive": True}


def _max_pool_infer(x, **attrs):
    return Meta(_pool_shape("max_pool2d", x.shape, **attrs), x.dtype)


def _avg_pool_infer(x, exclusive=True, **attrs):
    return Meta(_pool_shape("avg_pool2d", x.shape, **attrs), x.dtype)


def _max_pool_grad_infer(x, y, dy, **attrs):
    want = _pool_shape("max_pool2d_grad", x.shape, **attrs)
    for meta, what in ((y, "output"), (dy, "output gradient")):
        if not shapes.same(want, meta.shape):
            raise ValueError(f"max_pool2d_grad: {what} shape {fmt(meta.shape)} does not match "
                             f"the pooled shape {fmt(want)} of input {fmt(x.shape)}")
    return Meta(x.shape, dy.dtype)


def _avg_pool_grad_infer(x, dy, exclusive=True, **attrs):
    want = _pool_shape("avg_pool2d_grad", x.shape, **attrs)
    if not shapes.same(want, dy.shape):
        raise ValueError(f"avg_pool2d_grad: output gradient shape {fmt(dy.shape)} does not match "
                         f"the pooled shape {fmt(want)} of input {fmt(x.shape)}")
    return Meta(x.shape, dy.dtype)


def _max_pool_grad(e, ins, outs, douts, attrs, need):
    return [e("max_pool2d_grad", ins[0], outs[0], douts[0], **attrs)]


def _avg_pool_grad(e, ins, outs, douts, attrs, need):
    return [e("avg_pool2d_grad", ins[0], douts[0], **attrs)]


def _avg_pool_grad_grad(e, ins, outs, douts, attrs, need):
    """avg_pool2d_grad is linear in DOut, the adjoint of avg_pool2d."""
    return [None, e("avg_pool2d", douts[0], **attrs)]


defop(
    "max_pool2d",
    attrs=_POOL_ATTRS,
    kernel=_pool_kernel(_by_backend("max_pool2d", nnk.max_pool2d), "max_pool2d"),
    infer=_max_pool_infer,
    grad=_max_pool_grad,
    dtypes=dtypes.NUMERIC,
    doc="Max pooling of NCHW X (stride defaults to kernel_size; padding counts as -inf).",
)
defop(
    "max_pool2d_grad",
    inputs=("X", "Out", "DOut"),
    attrs=_POOL_ATTRS,
    kernel=_pool_kernel(_by_backend("max_pool2d_grad", nnk.max_pool2d_grad), "max_pool2d_grad"),
    infer=_max_pool_grad_infer,
    no_grad=("X", "Out"),
    dtypes=dtypes.FLOATS,
    doc="The gradient of max_pool2d: each window's DOut goes to its first maximum.",
)
defop(
    "avg_pool2d",
    attrs=_AVG_ATTRS,
    kernel=_pool_kernel(_by_backend("avg_pool2d", nnk.avg_pool2d), "avg_pool2d"),
    infer=_avg_pool_infer,
    grad=_avg_pool_grad,
    dtypes=dtypes.FLOATS,
    doc="Average pooling of NCHW X; exclusive leaves padding out of the divisor.",
)
defop(
    "avg_pool2d_grad",
    inputs=("X", "DOut"),
    attrs=_AVG_ATTRS,
    kernel=_pool_kernel(_by_backend("avg_pool2d_grad", nnk.avg_pool2d_grad), "avg_pool2d_grad"),
    infer=_avg_pool_grad_infer,
    grad=_avg_pool_grad_grad,
    no_grad=("X",),
    dtypes=dtypes.FLOATS,
    doc="The gradient of avg_pool2d (X is only a shape reference).",
)

# -------------------------------------------------------------------- dropout

_DROPOUT_MODES = ("upscale_in_train", "downscale_in_infer")


def _dropout_infer(x, mask, p=0.5, mode="upscale_in_train"):
    if mode not in _DROPOUT_MODES:
        raise ValueError(f"dropout: unknown mode {mode!r} (use {' or '.join(_DROPOUT_MODES)})")
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not shapes.same(x.shape, mask.shape):
        raise ValueError(f"dropout: mask shape {fmt(mask.shape)} must equal input shape "
                         f"{fmt(x.shape)}")
    return Meta(x.shape, x.dtype)


def _dropout_kernel(xp, x, mask, p=0.5, mode="upscale_in_train"):
    if x.shape != mask.shape:
        raise ValueError("mask shape differs")  # infer explains it
    return nnk.dropout(xp, x, mask, p, mode)


def _dropout_grad(e, ins, outs, douts, attrs, need):
    return [e("dropout", douts[0], ins[1], **attrs), None]


defop(
    "dropout",
    inputs=("X", "Mask"),
    attrs={"p": 0.5, "mode": "upscale_in_train"},
    kernel=_dropout_kernel,
    infer=_dropout_infer,
    grad=_dropout_grad,
    no_grad=("Mask",),
    dtypes=dtypes.FLOATS,
    doc="X * Mask (Mask from bernoulli_mask), scaled by 1/(1-p) in upscale_in_train mode.",
)

# ----------------------------------------------------------------- layer_norm


def _norm_axis(begin, ndim, op):
    if not -ndim <= begin < max(ndim, 1):
        raise ValueError(f"{op}: begin_norm_axis {begin} is out of range for a {ndim}-D input")
    return begin % max(ndim, 1)


def _layer_norm_kernel(xp, x, scale, bias, epsilon=1e-5, begin_norm_axis=1):
    begin = _norm_axis(begin_norm_axis, x.ndim, "layer_norm")
    for v in (scale, bias):
        if v is not None and v.shape != x.shape[begin:]:
            raise ValueError("scale/bias shape")  # infer explains it
    return nnk.layer_norm(xp, x, scale, bias, epsilon, begin)


def _layer_norm_infer(x, scale, bias, epsilon=1e-5, begin_norm_axis=1):
    begin = _norm_axis(begin_norm_axis, len(x.shape), "layer_norm")
    normalized = x.shape[begin:]
    for meta, what in ((scale, "scale"), (bias, "bias")):
        if meta is not None and not shapes.same(meta.shape, normalized):
            raise ValueError(
                f"layer_norm: {what} shape {fmt(meta.shape)} must equal the normalized shape "
                f"{fmt(normalized)} (input {fmt(x.shape)}, begin_norm_axis {begin_norm_axis})"
            )
    stats = Meta(x.shape[:begin], x.dtype)
    return Meta(x.shape, x.dtype), stats, stats


def _layer_norm_grad(e, ins, outs, douts, attrs, need):
    """Composite: the statistics are recomputed with primitive ops, so it differentiates again.

    Mean and Variance are outputs too; their gradients are added to X's.
    """
    x, scale, bias = ins
    dy, dmean, dvar = douts
    ndim = len(x.shape)
    begin = _norm_axis(attrs["begin_norm_axis"], ndim, "layer_norm")
    axes = list(range(begin, ndim))
    mu = e("mean", x, axis=axes, keepdim=True)
    xc = e("subtract", x, mu)
    var = e("mean", e("multiply", xc, xc), axis=axes, keepdim=True)
    rstd = e("divide", 1.0, e("sqrt", e("add", var, float(attrs["epsilon"]))))
    xhat = e("multiply", xc, rstd)
    gx = gscale = gbias = None
    if need[0]:
        g = dy if scale is None else e("multiply", dy, scale)
        centered = e("subtract", g, e("mean", g, axis=axes, keepdim=True))
        along = e("multiply", xhat, e("mean", e("multiply", g, xhat), axis=axes, keepdim=True))
        gx = e("multiply", rstd, e("subtract", centered, along))
        spread = {"axis": axes, "keepdim": False}
        gx = e("add", gx, e("mean_grad", dmean, x, **spread))
        gx = e("add", gx, e("multiply", e("scale", xc, scale=2.0),
                            e("mean_grad", dvar, x, **spread)))
    if need[1] and scale is not None:
        gscale = unbroadcast(e, e("multiply", dy, xhat), scale)
    if need[2] and bias is not None:
        gbias = unbroadcast(e, dy, bias)
    return [gx, gscale, gbias]


defop(
    "layer_norm",
    inputs=("X", "Scale?", "Bias?"),
    outputs=("Y", "Mean", "Variance"),
    attrs={"epsilon": 1e-5, "begin_norm_axis": 1},
    kernel=_layer_norm_kernel,
    infer=_layer_norm_infer,
    grad=_layer_norm_grad,
    dtypes=dtypes.FLOATS,
    doc="Normalize X over axes begin_norm_axis..; Mean/Variance have shape X.shape[:begin].",
)

# ----------------------------------------------------------------- batch_norm

_BN_ATTRS = {"training": True, "momentum": 0.9, "epsilon": 1e-5, "data_format": "NCHW"}
_CHANNEL_LAST = ("NHWC", "NLC", "NDHWC")
_CHANNEL_FIRST = ("NCHW", "NC", "NCL", "NCDHW")


def _bn_channels(x, data_format, op):
    if data_format not in _CHANNEL_LAST + _CHANNEL_FIRST:
        raise ValueError(f"{op}: unknown data_format {data_format!r}")
    if len(x.shape) < 2:
        raise ValueError(f"{op}: input must be at least 2-D, got shape {fmt(x.shape)}")
    axis = len(x.shape) - 1 if data_format in _CHANNEL_LAST else 1
    return axis, x.shape[axis]


def _check_channel_vectors(op, x, c, named):
    for what, meta in named:
        if meta is not None and not shapes.same(meta.shape, (c,)):
            raise ValueError(f"{op}: {what} shape {fmt(meta.shape)} must be [{c}] "
                             f"(the channels of input {fmt(x.shape)})")


def _batch_norm_infer(x, mean, var, scale, bias, training=True, momentum=0.9, epsilon=1e-5,
                      data_format="NCHW"):
    _, c = _bn_channels(x, data_format, "batch_norm")
    _check_channel_vectors("batch_norm", x, c, (("mean", mean), ("variance", var),
                                                ("scale", scale), ("bias", bias)))
    stats = Meta((c,), x.dtype if training else mean.dtype)
    inv = Meta((c,), x.dtype if training else var.dtype)
    return (Meta(x.shape, x.dtype), Meta((c,), mean.dtype), Meta((c,), var.dtype), stats, inv)


def _batch_norm_kernel(xp, x, mean, var, scale, bias, training=True, momentum=0.9,
                       epsilon=1e-5, data_format="NCHW"):
    return nnk.batch_norm(xp, x, mean, var, scale, bias, training, momentum, epsilon,
                          data_format)


def _batch_norm_grad_kernel(xp, x, scale, saved_mean, saved_invstd, dy, d_mean_out=None,
                            d_var_out=None, d_saved_mean=None, d_saved_invstd=None,
                            training=True, momentum=0.9, epsilon=1e-5, data_format="NCHW"):
    """The kernel's (dx, dscale, dbias), plus (in training) what reaches X through the
    statistics outputs: MeanOut, VarianceOut, SavedMean and SavedInvStd."""
    dx, dscale, dbias = nnk.batch_norm_grad(xp, x, scale, saved_mean, saved_invstd, dy,
                                            training, data_format)
    if not training:
        return dx, dscale, dbias
    axis = x.ndim - 1 if data_format in _CHANNEL_LAST else 1
    n = x.size // x.shape[axis]
    d_mean = None  # per-channel d loss / d batch mean
    d_var = None  # per-channel d loss / d biased batch variance
    if d_mean_out is not None:
        d_mean = (1 - momentum) * d_mean_out
    if d_saved_mean is not None:
        d_mean = d_saved_mean if d_mean is None else d_mean + d_saved_mean
    if d_var_out is not None:
        d_var = (1 - momentum) * (n / max(n - 1, 1)) * d_var_out
    if d_saved_invstd is not None:
        term = -0.5 * saved_invstd**3 * d_saved_invstd
        d_var = term if d_var is None else d_var + term
    shape = [1] * x.ndim
    shape[axis] = -1
    if d_mean is not None:
        dx = dx + (d_mean / n).reshape(shape).astype(dx.dtype, copy=False)
    if d_var is not None:
        centered = x - saved_mean.reshape(shape)
        dx = dx + (centered * (d_var * (2 / n)).reshape(shape)).astype(dx.dtype, copy=False)
    return dx, dscale, dbias


def _batch_norm_grad_infer(x, scale, saved_mean, saved_invstd, dy, *douts, training=True,
                           momentum=0.9, epsilon=1e-5, data_format="NCHW"):
    _, c = _bn_channels(x, data_format, "batch_norm_grad")
    _check_channel_vectors("batch_norm_grad", x, c, (("scale", scale),
                                                     ("saved mean", saved_mean),
                                                     ("saved inverse std", saved_invstd)))
    if not shapes.same(dy.shape, x.shape):
        raise ValueError(f"batch_norm_grad: output gradient shape {fmt(dy.shape)} must equal "
                         f"input shape {fmt(x.shape)}")
    vec = Meta((c,), dy.dtype)
    return Meta(x.shape, x.dtype), vec, vec


def _batch_norm_grad(e, ins, outs, douts, attrs, need):
    x, _, _, scale, _ = ins
    _, _, _, saved_mean, saved_invstd = outs
    dx, dscale, dbias = e("batch_norm_grad", x, scale, saved_mean, saved_invstd, *douts,
                          **attrs)
    return [dx if need[0] else None, None, None,
            dscale if need[3] else None, dbias if need[4] else None]


defop(
    "batch_norm",
    inputs=("X", "Mean", "Variance", "Scale?", "Bias?"),
    outputs=("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedInvStd"),
    attrs=_BN_ATTRS,
    kernel=_batch_norm_kernel,
    infer=_batch_norm_infer,
    grad=_batch_norm_grad,
    no_grad=("Mean", "Variance"),
    dtypes=dtypes.FLOATS,
    doc="Batch norm; Mean/Variance are the running statistics, MeanOut/VarianceOut their "
        "updates (training) and SavedMean/SavedInvStd the batch statistics used.",
)
defop(
    "batch_norm_grad",
    inputs=("X", "Scale?", "SavedMean", "SavedInvStd", "DY", "DMeanOut?", "DVarianceOut?",
            "DSavedMean?", "DSavedInvStd?"),
    outputs=("DX", "DScale", "DBias"),
    attrs=_BN_ATTRS,
    kernel=_batch_norm_grad_kernel,
    infer=_batch_norm_grad_infer,
    dtypes=dtypes.FLOATS,
    doc="The gradient of batch_norm; the optional D* slots carry the statistics outputs' "
        "gradients (added to DX in training).",
)

# ------------------------------------------------------------------ embedding


def _embedding_check(op, ids, w, padding_idx):
    if ids.dtype not in dtypes.INTS:
        raise TypeError(f"{op}: ids must be integers, got {ids.dtype}")
    if len(w.shape) != 2:
        raise ValueError(f"{op}: weight must be 2-D [vocab, dim], got shape {fmt(w.shape)}")
    vocab = w.shape[0]
    if padding_idx is not None and vocab != -1 and not -vocab <= padding_idx < vocab:
        raise ValueError(f"{op}: padding_idx {padding_idx} is out of range for a vocabulary "
                         f"of {vocab} (weight {fmt(w.shape)})")


def _embedding_infer(ids, w, padding_idx=None):
    _embedding_check("embedding", ids, w, padding_idx)
    return Meta(tuple(ids.shape) + (w.shape[1],), w.dtype)


def _embedding_grad_infer(ids, w, dout, padding_idx=None):
    _embedding_check("embedding_grad", ids, w, padding_idx)
    want = tuple(ids.shape) + (w.shape[1],)
    if not shapes.same(want, dout.shape):
        raise ValueError(f"embedding_grad: output gradient shape {fmt(dout.shape)} must be "
                         f"{fmt(want)} (ids {fmt(ids.shape)}, weight {fmt(w.shape)})")
    return Meta(w.shape, dout.dtype)


def _embedding_grad(e, ins, outs, douts, attrs, need):
    ids, w = ins
    return [None, e("embedding_grad", ids, w, douts[0], **attrs)]


def _embedding_grad_grad(e, ins, outs, douts, attrs, need):
    """embedding_grad is linear in DOut, the adjoint of embedding."""
    return [None, None, e("embedding", ins[0], douts[0], **attrs)]


defop(
    "embedding",
    inputs=("Ids", "W"),
    attrs={"padding_idx": None},
    kernel=lambda xp, ids, w, padding_idx=None: nnk.embedding(xp, ids, w, padding_idx),
    infer=_embedding_infer,
    grad=_embedding_grad,
    no_grad=("Ids",),
    dtypes=dtypes.INTS,
    doc="Rows of W picked by integer Ids; ids equal to padding_idx give zeros.",
)
defop(
    "embedding_grad",
    inputs=("Ids", "W", "DOut"),
    attrs={"padding_idx": None},
    kernel=lambda xp, ids, w, dout, padding_idx=None: nnk.embedding_grad(
        xp, ids, w, dout, padding_idx),
    infer=_embedding_grad_infer,
    grad=_embedding_grad_grad,
    no_grad=("Ids", "W"),
    dtypes=dtypes.INTS,
    doc="The gradient of embedding with respect to W (W is only a shape reference).",
)

# ----------------------------------------------------------------------- gelu

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_GELU_A = 0.044715


def _gelu_grad(e, ins, outs, douts, attrs, need):
    return [e("gelu_grad", ins[0], douts[0], **attrs)]


def _gelu_second(e, x, approximate):
    """gelu''(x) with primitive ops."""
    x2 = e("multiply", x, x)
    if not approximate:
        # d/dx [Phi(x) + x phi(x)] = phi(x) (2 - x^2)
        phi = e("scale", e("exp", e("scale", x2, scale=-0.5)), scale=_INV_SQRT_2PI)
        return e("multiply", phi, e("scale", x2, scale=-1.0, bias=2.0))
    # t = tanh(u), u = c (x + a x^3), u' = c (1 + 3 a x^2):
    # f'' = (1 - t^2) (c + 6 a c x^2 - x t u'^2)
    c, a = _SQRT_2_OVER_PI, _GELU_A
    t = e("tanh", e("scale", e("multiply", x, e("scale", x2, scale=a, bias=1.0)), scale=c))
    du = e("scale", x2, scale=3 * a * c, bias=c)
    sech2 = e("scale", e("multiply", t, t), scale=-1.0, bias=1.0)
    inner = e("subtract", e("scale", x2, scale=6 * a * c, bias=c),
              e("multiply", e("multiply", x, t), e("multiply", du, du)))
    return e("multiply", sech2, inner)


def _gelu_grad_grad(e, ins, outs, douts, attrs, need):
    x, dy = ins
    gg = douts[0]
    gx = gdy = None
    if need[0]:
        gx = e("multiply", e("multiply", gg, dy), _gelu_second(e, x, attrs["approximate"]))
    if need[1]:
        gdy = e("gelu_grad", x, gg, **attrs)
    return [gx, gdy]


defop(
    "gelu",
    attrs={"approximate": False},
    kernel=lambda xp, x, approximate=False: nnk.gelu(xp, x, approximate),
    infer=lambda x, approximate=False: Meta(x.shape, x.dtype),
    grad=_gelu_grad,
    dtypes=dtypes.FLOATS,
    doc="x * Phi(x); approximate uses the tanh form.",
)
defop(
    "gelu_grad",
    inputs=("X", "DOut"),
    attrs={"approximate": False},
    kernel=lambda xp, x, dy, approximate=False: nnk.gelu_grad(xp, x, dy, approximate),
    infer=lambda x, dy, approximate=False: Meta(shapes.broadcast(x.shape, dy.shape, "gelu_grad"),
                                                dtypes.promote(x.dtype, dy.dtype)),
    grad=_gelu_grad_grad,
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="The gradient of gelu: DOut * gelu'(X).",
)
