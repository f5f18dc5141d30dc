"""Convolution and pooling ops: conv2d, max_pool2d, avg_pool2d and their gradients.

Kernels come from ``dy2stat.kernels.nn`` (and ``.conv``); a backend's own
kernel in ``BACKEND_KERNELS`` (cuDNN on CuPy) is tried first. This file adds
the op records: slots, attrs, shape inference and gradient rules. The ops emit
a ``*_grad`` op, and the bilinear or linear ``*_grad`` ops have rules of their
own.
"""

from __future__ import annotations

import numbers

from dy2stat.kernels import cudnn, pool_cuda
from dy2stat.kernels import nn as nnk
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.nn import _check_float
from dy2stat.runtime.registry import NONE, OPS, Meta, defop, int_at_least, ints

fmt = shapes.fmt


def _pair_type(low: int):
    """An int or a pair of ints, each ``>= low`` (what ``_pair`` reads)."""
    return int_at_least(low) | ints(low, length=2)


def _pair(value, name, op):
    """(a, b) from an int or a pair (attrs arrive as ints or lists)."""
    if isinstance(value, numbers.Integral):
        return (int(value), int(value))
    try:
        a, b = value
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {value!r}") from None


# ------------------------------------------------- backend-specific kernels

# Faster kernels for one array module, tried before the generic kernel; one
# returning NotImplemented (cuDNN missing, a dtype or case it cannot take)
# hands the call to the generic kernel. On CuPy: convolutions through the
# cuDNN frontend, pooling as one CUDA kernel per call.
BACKEND_KERNELS = {
    "cupy": {
        "conv2d": cudnn.conv2d,
        "conv2d_grad_input": cudnn.conv2d_grad_input,
        "conv2d_grad_filter": cudnn.conv2d_grad_filter,
        "max_pool2d": pool_cuda.max_pool2d,
        "max_pool2d_grad": pool_cuda.max_pool2d_grad,
        "avg_pool2d": pool_cuda.avg_pool2d,
        "avg_pool2d_grad": pool_cuda.avg_pool2d_grad,
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
_CONV_TYPES = {"stride": _pair_type(1), "padding": _pair_type(0), "dilation": _pair_type(1),
               "groups": int_at_least(1)}


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
    attr_types=_CONV_TYPES,
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
    attr_types=_CONV_TYPES,
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
    attr_types=_CONV_TYPES,
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
_POOL_TYPES = {"kernel_size": NONE | _pair_type(1), "stride": NONE | _pair_type(1),
               "padding": _pair_type(0)}


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
    attr_types=_POOL_TYPES,
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
    attr_types=_POOL_TYPES,
    kernel=_pool_kernel(_by_backend("max_pool2d_grad", nnk.max_pool2d_grad), "max_pool2d_grad"),
    infer=_max_pool_grad_infer,
    no_grad=("X", "Out"),
    dtypes=dtypes.FLOATS,
    doc="The gradient of max_pool2d: each window's DOut goes to its first maximum.",
)
defop(
    "avg_pool2d",
    attrs=_AVG_ATTRS,
    attr_types=_POOL_TYPES,
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
    attr_types=_POOL_TYPES,
    kernel=_pool_kernel(_by_backend("avg_pool2d_grad", nnk.avg_pool2d_grad), "avg_pool2d_grad"),
    infer=_avg_pool_grad_infer,
    grad=_avg_pool_grad_grad,
    no_grad=("X",),
    dtypes=dtypes.FLOATS,
    doc="The gradient of avg_pool2d (X is only a shape reference).",
)

# ------------------------------------------- batch-minor ([C, H, W, N]) forms

# The batch_minor_layout pass (runtime/passes/layout.py) rewrites a training
# program's convolution and pooling ops into these forms, after its backward
# is built: they take and give images laid out [C, H, W, N], and asking for
# their gradient is an error.
TO_CHWN, TO_NCHW = (1, 2, 3, 0), (3, 0, 1, 2)
# op -> (its input slots that hold images, whether its output is an image)
CHWN_FORMS = {
    "conv2d": (("X",), True),
    "conv2d_grad_input": (("X", "DOut"), True),
    "conv2d_grad_filter": (("X", "DOut"), False),
    "max_pool2d": (("X",), True),
    "max_pool2d_grad": (("X", "Out", "DOut"), True),
}


def _permuted(meta: Meta, perm) -> Meta:
    return Meta(tuple(meta.shape[p] for p in perm), meta.dtype)


def _chwn_form(op: str, kernel):
    base = OPS[op]
    images, image_out = CHWN_FORMS[op]

    def infer(*metas, **attrs):
        for slot, meta in zip(base.inputs, metas):
            if slot.name in images and len(meta.shape) != 4:
                raise ValueError(f"{op}_chwn: {slot.name} must be 4-D [C, H, W, N], "
                                 f"got shape {fmt(meta.shape)}")
        nchw = [_permuted(m, TO_NCHW) if s.name in images else m
                for s, m in zip(base.inputs, metas)]
        out = base.infer(*nchw, **attrs)
        return _permuted(out, TO_CHWN) if image_out else out

    def grad(e, ins, outs, douts, attrs, need):
        raise ValueError(f"{op}_chwn has no gradient rule: build the backward first, then run "
                         "the batch_minor_layout pass")

    defop(f"{op}_chwn", inputs=base.input_names, attrs=base.attrs,
          attr_types=base.attr_types, kernel=kernel, infer=infer,
          grad=grad, dtypes=base.input_dtypes, promote=base.promote,
          doc=f"{op} with {', '.join(images)}{' and Out' if image_out else ''} laid out "
              "[C, H, W, N] (made by the batch_minor_layout pass; no gradient).")


_chwn_form("conv2d", nnk.conv2d_chwn)
_chwn_form("conv2d_grad_input", nnk.conv2d_grad_input_chwn)
_chwn_form("conv2d_grad_filter", nnk.conv2d_grad_filter_chwn)
_chwn_form("max_pool2d", _pool_kernel(nnk.max_pool2d_chwn, "max_pool2d"))
_chwn_form("max_pool2d_grad", _pool_kernel(nnk.max_pool2d_grad_chwn, "max_pool2d_grad"))
