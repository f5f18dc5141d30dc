"""Neural-network ops: softmax, cross entropy, dropout, embedding, gelu, convolution and
pooling (NCHW, and the batch-minor forms of the layout pass), layer and batch norm,
padding and resizing.

The norms are written out with the kernels' own arithmetic (mean, centered
variance, the same order of operations) rather than ONNX's fused forms, so their
results match dy2stat's closely; ONNX Runtime fuses the pattern again.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from dy2stat.kernels import resample
from dy2stat.onnx.graph import INT64_MAX
from dy2stat.onnx.lowering import OpContext, Unsupported, rule
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.conv import TO_CHWN, TO_NCHW


def _pair(value) -> tuple:
    """(a, b) from an int or a pair (how conv and pool attrs arrive)."""
    if isinstance(value, numbers.Integral):
        return (int(value), int(value))
    a, b = value
    return (int(a), int(b))


@rule("softmax", "log_softmax")
def _softmax(ctx: OpContext) -> None:
    axis = shapes.normalize_axis(ctx.attrs["axis"], len(ctx.meta().shape), ctx.type)
    ctx.output(ctx.g.op("Softmax" if ctx.type == "softmax" else "LogSoftmax", ctx.input(),
                        axis=axis))


@rule("cross_entropy")
def _cross_entropy(ctx: OpContext) -> None:
    """The kernel's: -log_softmax picked by the label (or weighted by a soft one), zero
    where the label is ignore_index; a mean divides by the valid labels (at least 1)."""
    g, dtype = ctx.g, ctx.dtype
    logits = ctx.input("Logits")
    rank = len(ctx.meta("Logits").shape)
    axis = shapes.normalize_axis(ctx.attrs["axis"], rank, ctx.type)
    logp = g.op("LogSoftmax", logits, axis=axis)
    if ctx.attrs["soft_label"]:
        loss = g.op("Neg", g.reduce("ReduceSum", g.op("Mul", ctx.input("Label", dtype=dtype),
                                                      logp), [axis], False))
        count = g.op("Div", g.cast_to(g.op("Size", logp), dtype),
                     g.cast_to(g.dim(logp, axis), dtype))
        count = g.op("Max", g.reshape(count, []), g.scalar(1, dtype))
    else:
        label = ctx.input("Label", dtype=dtypes.int64)
        if len(ctx.meta("Label").shape) == rank:
            label = g.squeeze(label, [axis])
        valid = g.op("Not", g.op("Equal", label, g.const(np.int64(ctx.attrs["ignore_index"]))))
        safe = g.op("Where", valid, label, g.const(np.int64(0)))
        picked = g.squeeze(g.op("GatherElements", logp, g.unsqueeze(safe, [axis]), axis=axis),
                           [axis])
        loss = g.op("Where", valid, g.op("Neg", picked), g.scalar(0, dtype))
        total = g.reduce("ReduceSum", g.cast_to(valid, dtypes.int64), None, False)
        count = g.cast_to(g.op("Max", total, g.const(np.int64(1))), dtype)
    reduction = ctx.attrs["reduction"]
    if reduction == "sum":
        loss = g.reduce("ReduceSum", loss, None, False)
    elif reduction == "mean":
        loss = g.op("Div", g.reduce("ReduceSum", loss, None, False), count)
    ctx.output(loss, "Loss")


@rule("dropout")
def _dropout(ctx: OpContext) -> None:
    g, dtype, p = ctx.g, ctx.dtype, ctx.attrs["p"]
    x = ctx.input()
    if p >= 1:
        ctx.output(g.op("Mul", x, g.scalar(0, dtype)))
        return
    out = g.op("Mul", x, ctx.input("Mask", dtype=dtype))
    if ctx.attrs["mode"] == "upscale_in_train":
        out = g.op("Mul", out, g.scalar(1 / (1 - p), dtype))
    ctx.output(out)


@rule("embedding")
def _embedding(ctx: OpContext) -> None:
    g, weight = ctx.g, ctx.input("W")
    ids = ctx.input("Ids", dtype=dtypes.int64)
    out = g.op("Gather", weight, ids, axis=0)
    pad = ctx.attrs["padding_idx"]
    if pad is not None:  # the padding id's rows are zeros
        vocab = ctx.meta("W").shape[0]
        pad = pad + vocab if pad < 0 else pad
        keep = g.cast_to(g.op("Not", g.op("Equal", ids, g.const(np.int64(pad)))), ctx.dtype)
        out = g.op("Mul", out, g.unsqueeze(keep, [-1]))
    ctx.output(out)


@rule("gelu")
def _gelu(ctx: OpContext) -> None:
    g, dtype, x = ctx.g, ctx.dtype, ctx.input()
    half_x = g.op("Mul", g.scalar(0.5, dtype), x)
    if ctx.attrs["approximate"]:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = g.op("Mul", g.scalar(0.044715, dtype), g.op("Mul", x, g.op("Mul", x, x)))
        inner = g.op("Mul", g.scalar(math.sqrt(2 / math.pi), dtype), g.op("Add", x, cube))
        ctx.output(g.op("Mul", half_x, g.op("Add", g.scalar(1, dtype), g.op("Tanh", inner))))
        return
    erf = g.op("Erf", g.op("Mul", x, g.scalar(math.sqrt(0.5), dtype)))  # x * Phi(x)
    ctx.output(g.op("Mul", half_x, g.op("Add", g.scalar(1, dtype), erf)))


def _nchw(lower_images):
    """The rule of an op on NCHW images: ``lower_images(ctx, x)`` gives its output."""
    def lower(ctx: OpContext) -> None:
        ctx.output(lower_images(ctx, ctx.input("X")))

    return lower


def _chwn(lower_images):
    """The rule of the op's batch-minor form (the layout pass's): images [C, H, W, N] in
    and out, so NCHW between two transposes."""
    def lower(ctx: OpContext) -> None:
        g = ctx.g
        out = lower_images(ctx, g.op("Transpose", ctx.input("X"), perm=list(TO_NCHW)))
        ctx.output(g.op("Transpose", out, perm=list(TO_CHWN)))

    return lower


def _conv(ctx: OpContext, x: str) -> str:
    dtype = ctx.dtype
    (sh, sw), (ph, pw), (dh, dw) = (_pair(ctx.attrs[k]) for k in ("stride", "padding",
                                                                  "dilation"))
    return ctx.g.op("Conv", ctx.g.cast(x, ctx.meta("X").dtype, dtype),
                    ctx.input("Filter", dtype=dtype), strides=[sh, sw], pads=[ph, pw, ph, pw],
                    dilations=[dh, dw], group=int(ctx.attrs["groups"]))


@rule("conv2d_grad_input")
def _conv_transpose(ctx: OpContext) -> None:
    """The input gradient of a convolution: what conv2d_transpose computes, a
    ConvTranspose of DOut whose output_padding gives X's (the shape reference's) size."""
    dtype = ctx.dtype
    (sh, sw), (ph, pw), (dh, dw) = (_pair(ctx.attrs[k]) for k in ("stride", "padding",
                                                                  "dilation"))
    out_hw, in_hw = ctx.meta("X").shape[2:], ctx.meta("DOut").shape[2:]
    kernel = ctx.meta("Filter").shape[2:]
    if min(*out_hw, *in_hw) < 0:
        raise Unsupported("a transposed convolution needs its input's and output's height "
                          "and width known when the model is exported")
    extra = [o - ((i - 1) * s - 2 * p + d * (k - 1) + 1) for o, i, s, p, d, k in
             zip(out_hw, in_hw, (sh, sw), (ph, pw), (dh, dw), kernel)]
    ctx.output(ctx.g.op("ConvTranspose", ctx.input("DOut", dtype=dtype),
                        ctx.input("Filter", dtype=dtype), strides=[sh, sw],
                        pads=[ph, pw, ph, pw], dilations=[dh, dw],
                        group=int(ctx.attrs["groups"]), output_padding=extra))


def _pool_pads(ctx: OpContext, hw) -> tuple:
    """(kernel, strides, pads): ceil_mode's extra bottom/right padding made explicit
    (its windows' padding is left out of max and of an exclusive average alike)."""
    k = _pair(ctx.attrs["kernel_size"])
    s = _pair(ctx.attrs["kernel_size"] if ctx.attrs["stride"] is None else ctx.attrs["stride"])
    p = _pair(ctx.attrs["padding"])
    extra = [0, 0]
    if ctx.attrs["ceil_mode"]:
        for i, size in enumerate(hw):
            if size < 0:
                raise Unsupported("ceil_mode pooling needs the input's height and width "
                                  "known when the model is exported (give them in the "
                                  "input_spec)")
            span = size + 2 * p[i] - k[i]
            out = -(-span // s[i]) + 1
            if (out - 1) * s[i] >= size + p[i]:
                out -= 1
            extra[i] = max(0, (out - 1) * s[i] + k[i] - (size + 2 * p[i]))
    return list(k), list(s), [p[0], p[1], p[0] + extra[0], p[1] + extra[1]]


def _spatial(ctx: OpContext) -> tuple:
    shape = ctx.meta("X").shape
    return (shape[1], shape[2]) if ctx.type.endswith("_chwn") else (shape[2], shape[3])


def _max_pool(ctx: OpContext, x: str) -> str:
    g, dtype = ctx.g, ctx.dtype
    work = dtype if dtype in dtypes.FLOATS | {dtypes.int8, dtypes.uint8} else dtypes.float64
    kernel, strides, pads = _pool_pads(ctx, _spatial(ctx))
    out = g.op("MaxPool", g.cast(x, dtype, work), kernel_shape=kernel, strides=strides,
               pads=pads)
    return g.cast(out, work, dtype)


def _avg_pool(ctx: OpContext, x: str) -> str:
    kernel, strides, pads = _pool_pads(ctx, _spatial(ctx))
    return ctx.g.op("AveragePool", x, kernel_shape=kernel, strides=strides, pads=pads,
                    count_include_pad=0 if ctx.attrs["exclusive"] else 1)


rule("conv2d")(_nchw(_conv))
rule("conv2d_chwn")(_chwn(_conv))
rule("max_pool2d")(_nchw(_max_pool))
rule("max_pool2d_chwn")(_chwn(_max_pool))
rule("avg_pool2d")(_nchw(_avg_pool))


@rule("layer_norm")
def _layer_norm(ctx: OpContext) -> None:
    """(x - mean) / sqrt(var + eps) * scale + bias over the axes from begin_norm_axis."""
    g, dtype, x = ctx.g, ctx.dtype, ctx.input()
    rank = len(ctx.meta().shape)
    begin = ctx.attrs["begin_norm_axis"] % max(rank, 1)
    axes = list(range(begin, rank))
    mean = g.reduce("ReduceMean", x, axes, True)
    centered = g.op("Sub", x, mean)
    var = g.reduce("ReduceMean", g.op("Mul", centered, centered), axes, True)
    y = g.op("Div", centered, g.op("Sqrt", g.op("Add", var, g.scalar(ctx.attrs["epsilon"],
                                                                      dtype))))
    if ctx.has("Scale"):
        y = g.op("Mul", y, ctx.input("Scale"))
    if ctx.has("Bias"):
        y = g.op("Add", y, ctx.input("Bias"))
    ctx.output(y, "Y")
    lead = g.shape(x, 0, begin) if begin else g.ints([])
    for slot, stat in (("Mean", mean), ("Variance", var)):
        if ctx.wanted(slot):
            ctx.output(g.reshape(stat, lead, allowzero=True), slot)


@rule("batch_norm")
def _batch_norm(ctx: OpContext) -> None:
    """Inference: x * scale + shift per channel, scale = weight / sqrt(var + eps) and
    shift = bias - mean * scale (the kernel's arithmetic)."""
    if ctx.attrs["training"]:
        raise Unsupported("batch norm in training mode (batch statistics): export the "
                          "model in eval mode (layer.eval())")
    g = ctx.g
    # statistics of another float dtype than x: computed in the wider, as NumPy promotes
    work = dtypes.promote(ctx.meta().dtype, ctx.meta("Variance").dtype)
    x, mean, var = (ctx.input(slot, dtype=work) for slot in ("X", "Mean", "Variance"))
    invstd = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, g.scalar(ctx.attrs["epsilon"],
                                                                         work))))
    scale = g.op("Mul", invstd, ctx.input("Scale", dtype=work)) if ctx.has("Scale") else invstd
    shift = g.op("Mul", mean, scale)
    shift = (g.op("Sub", ctx.input("Bias", dtype=work), shift) if ctx.has("Bias")
             else g.op("Neg", shift))
    rank = len(ctx.meta().shape)
    axis = rank - 1 if ctx.attrs["data_format"] in ("NHWC", "NLC", "NDHWC") else 1
    along = [1] * rank
    along[axis] = -1
    y = g.op("Add", g.op("Mul", x, g.reshape(scale, along)), g.reshape(shift, along))
    ctx.output(y, "Y", have=work)
    # inference leaves the running statistics as they are
    for slot, stat in (("MeanOut", "Mean"), ("VarianceOut", "Variance"), ("SavedMean", "Mean")):
        if ctx.wanted(slot):
            ctx.output(g.op("Identity", ctx.input(stat)), slot)
    if ctx.wanted("SavedInvStd"):
        ctx.output(invstd, "SavedInvStd", have=work)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


@rule("pad")
def _pad(ctx: OpContext) -> None:
    g, x, dtype = ctx.g, ctx.input(), ctx.dtype
    paddings, mode = list(ctx.attrs["paddings"]), ctx.attrs["mode"]
    rank = len(ctx.meta().shape)
    if mode == "circular":  # the border wraps around: slices of x on both sides
        for axis in range(rank):
            before, after = paddings[2 * axis], paddings[2 * axis + 1]
            parts = [g.slice(x, [-before], [INT64_MAX], [axis])] if before else []
            parts.append(x)
            if after:
                parts.append(g.slice(x, [0], [after], [axis]))
            if len(parts) > 1:
                x = g.op("Concat", *parts, axis=axis)
        ctx.output(g.op("Identity", x) if x == ctx.input() else x)
        return
    pads = g.ints(paddings[0::2] + paddings[1::2])
    work = dtypes.int32 if dtype == dtypes.int16 else dtype  # ONNX Runtime pads no int16
    value = g.scalar(dtype.type(ctx.attrs["value"]), work) if mode == "constant" else None
    out = g.op("Pad", g.cast(x, dtype, work), pads, value, mode=_PAD_MODES[mode])
    ctx.output(out, have=work)


@rule("interpolate")
def _interpolate(ctx: OpContext) -> None:
    """The kernel's resampling of each spatial axis, from the same weights: a Gather of
    the nearest rows, or a MatMul by the (out x in) bilinear weights."""
    g, x = ctx.g, ctx.input()
    meta = ctx.meta()
    axes = (1, 2) if ctx.attrs["channel_last"] else (2, 3)
    in_sizes = [meta.shape[a] for a in axes]
    out_sizes = [ctx.out_meta().shape[a] for a in axes]
    if min(in_sizes + out_sizes) < 0:
        raise Unsupported("resizing needs the input's height and width known when the "
                          "model is exported (give them in the input_spec)")
    mode = ctx.attrs["mode"]
    scales = ctx.attrs["scale"]
    scales = (scales, scales) if isinstance(scales, (int, float)) else scales or (None, None)
    weight_dtype = meta.dtype if meta.dtype in dtypes.FLOATS else np.float64
    rank = len(meta.shape)
    for axis, n_in, n_out, scale in zip(axes, in_sizes, out_sizes, scales):
        weights = resample.weights(n_in, n_out, scale, mode, ctx.attrs["align_corners"],
                                   ctx.attrs["align_mode"], weight_dtype)
        if mode == "nearest":
            x = g.op("Gather", x, g.const(weights.argmax(axis=1).astype(np.int64)), axis=axis)
            continue
        perm = [i for i in range(rank) if i != axis] + [axis]  # the axis last, then back
        moved = g.op("MatMul", g.op("Transpose", x, perm=perm), g.const(weights.T.copy()))
        x = g.op("Transpose", moved, perm=[perm.index(i) for i in range(rank)])
    ctx.output(x)
