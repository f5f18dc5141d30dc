"""Normalization ops: layer_norm, batch_norm and batch_norm_grad.

Kernels come from ``dy2stat.kernels.nn``; this file adds the op records:
slots, attrs, shape inference and gradient rules. layer_norm's rule is written
with primitive ops so that it differentiates again; batch_norm emits
``batch_norm_grad``.
"""

from __future__ import annotations

from dy2stat.kernels import nn as nnk
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import Meta, defop, one_of

fmt = shapes.fmt


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
    dtypes={"X": dtypes.FLOATS, "Scale": dtypes.FLOATS, "Bias": dtypes.FLOATS},
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
    attr_types={"data_format": one_of(*_CHANNEL_LAST, *_CHANNEL_FIRST)},
    kernel=_batch_norm_kernel,
    infer=_batch_norm_infer,
    grad=_batch_norm_grad,
    no_grad=("Mean", "Variance"),
    dtypes=dict.fromkeys(("X", "Mean", "Variance", "Scale", "Bias"), dtypes.FLOATS),
    doc="Batch norm; Mean/Variance are the running statistics, MeanOut/VarianceOut their "
        "updates (training) and SavedMean/SavedInvStd the batch statistics used.",
)
defop(
    "batch_norm_grad",
    inputs=("X", "Scale?", "SavedMean", "SavedInvStd", "DY", "DMeanOut?", "DVarianceOut?",
            "DSavedMean?", "DSavedInvStd?"),
    outputs=("DX", "DScale", "DBias"),
    attrs=_BN_ATTRS,
    attr_types={"data_format": one_of(*_CHANNEL_LAST, *_CHANNEL_FIRST)},
    kernel=_batch_norm_grad_kernel,
    infer=_batch_norm_grad_infer,
    dtypes=dict.fromkeys(("X", "Scale", "SavedMean", "SavedInvStd", "DY", "DMeanOut",
                          "DVarianceOut", "DSavedMean", "DSavedInvStd"), dtypes.FLOATS),
    doc="The gradient of batch_norm; the optional D* slots carry the statistics outputs' "
        "gradients (added to DX in training).",
)
