"""Neural-network kernels: activations, losses, normalization, embedding, dropout.

Convolution and pooling live in ``dy2stat.kernels.conv`` and are re-exported
here. Where CuPy has a better primitive than the generic code (scatter-add,
erfc) the choice sits in a small table keyed by the array module's name.

A value combined with parameters or masks of another float dtype (float16
activations with float32 layer-norm weights) is computed in the wider dtype
NumPy picks and returned in the value's dtype, as mixed-precision training
expects; statistics keep the dtype of what they are computed from.
"""

import math

from dy2stat.kernels.conv import (
    avg_pool2d,
    avg_pool2d_grad,
    conv2d,
    conv2d_chwn,
    conv2d_grad_filter,
    conv2d_grad_filter_chwn,
    conv2d_grad_input,
    conv2d_grad_input_chwn,
    max_pool2d,
    max_pool2d_chwn,
    max_pool2d_grad,
    max_pool2d_grad_chwn,
)

__all__ = [
    "avg_pool2d",
    "avg_pool2d_grad",
    "batch_norm",
    "batch_norm_grad",
    "conv2d",
    "conv2d_chwn",
    "conv2d_grad_filter",
    "conv2d_grad_filter_chwn",
    "conv2d_grad_input",
    "conv2d_grad_input_chwn",
    "cross_entropy",
    "cross_entropy_grad",
    "dropout",
    "embedding",
    "embedding_grad",
    "erfc",
    "gelu",
    "gelu_grad",
    "layer_norm",
    "layer_norm_grad",
    "log_softmax",
    "max_pool2d",
    "max_pool2d_chwn",
    "max_pool2d_grad",
    "max_pool2d_grad_chwn",
    "relu",
    "softmax",
]


def _scalar(xp, value, dtype):
    """A 0-d array (numpy reductions give numpy scalars, not arrays)."""
    return xp.asarray(value, dtype=dtype)


# ---------------------------------------------------------------- activations


def relu(xp, x):
    """max(x, 0), keeping x's dtype."""
    return xp.maximum(x, xp.zeros((), dtype=x.dtype))


def softmax(xp, x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the max for stability."""
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(xp, x, axis=-1):
    """log(softmax(x)) along ``axis``, computed without overflow."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


# Chebyshev coefficients of log(erfc(z) / t) + z**2 in y = 2t - 1, t = 2 / (2 + z), z >= 0
# (Numerical Recipes, 3rd ed., section 6.2.2). All 28 give erfc to about 1e-15 relative
# for z <= 6 and 1e-13 up to underflow; 16 give 1e-10, ample for float32.
_ERFC_COF = (
    -1.3026537197817094,
    6.4196979235649026e-1,
    1.9476473204185836e-2,
    -9.561514786808631e-3,
    -9.46595344482036e-4,
    3.66839497852761e-4,
    4.2523324806907e-5,
    -2.0278578112534e-5,
    -1.624290004647e-6,
    1.303655835580e-6,
    1.5626441722e-8,
    -8.5238095915e-8,
    6.529054439e-9,
    5.059343495e-9,
    -9.91364156e-10,
    -2.27365122e-10,
    9.6467911e-11,
    2.394038e-12,
    -6.886027e-12,
    8.94487e-13,
    3.13092e-13,
    -1.12708e-13,
    3.81e-16,
    7.106e-15,
    -1.523e-15,
    -9.4e-17,
    1.21e-16,
    -2.8e-17,
)


def _erfc_generic(xp, x):
    """erfc by the Chebyshev fit above, summed with Clenshaw's recurrence."""
    cof = _ERFC_COF if x.dtype.itemsize >= 8 else _ERFC_COF[:16]
    z = xp.abs(x)
    t = 2 / (2 + z)
    ty = 4 * t - 2
    d, dd = 0, 0
    for c in cof[:0:-1]:
        d, dd = ty * d - dd + c, d
    r = t * xp.exp(-z * z + 0.5 * (cof[0] + ty * d) - dd)
    return xp.where(x >= 0, r, 2 - r)


def _erfc_cupy(xp, x):
    import cupyx.scipy.special

    return cupyx.scipy.special.erfc(x)


_ERFC = {"numpy": _erfc_generic, "cupy": _erfc_cupy}


def erfc(xp, x):
    """Complementary error function, to ~1e-15 in float64 (float16 is computed in float32)."""
    work = x.astype(xp.float32) if x.dtype.itemsize < 4 else x
    return _ERFC.get(xp.__name__, _erfc_generic)(xp, work).astype(x.dtype, copy=False)


_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def gelu(xp, x, approximate=False):
    """x * Phi(x), Phi the normal CDF; ``approximate`` uses the tanh form."""
    if approximate:
        return 0.5 * x * (1 + xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * erfc(xp, -_SQRT_HALF * x)


def gelu_grad(xp, x, dy, approximate=False):
    """Gradient of gelu (the same formula, differentiated)."""
    if approximate:
        th = xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))
        dinner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
        return dy * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * dinner)
    return dy * (0.5 * erfc(xp, -_SQRT_HALF * x) + x * _INV_SQRT_2PI * xp.exp(-0.5 * x * x))


def dropout(xp, x, mask, p=0.5, mode="upscale_in_train"):
    """x * mask, scaled by 1/(1-p) in upscale_in_train mode (p == 1 gives zeros)."""
    if p >= 1:
        return xp.zeros_like(x)
    mask = mask.astype(x.dtype, copy=False)  # 0s and 1s: exact in any float dtype
    if mode == "upscale_in_train":
        return x * mask * x.dtype.type(1 / (1 - p))
    if mode == "downscale_in_infer":
        return x * mask
    raise ValueError(f"dropout: unknown mode {mode!r}")


# --------------------------------------------------------------------- losses


def _hard_label(label, ndim, axis):
    """Integer labels without the class axis (a size-1 class axis is dropped)."""
    if label.ndim == ndim:
        if label.shape[axis] != 1:
            raise ValueError(f"cross_entropy: label shape {label.shape} has a class axis != 1")
        label = label.squeeze(axis)
    return label


def _ce_terms(xp, logits, label, soft_label, ignore_index, axis):
    """(log_softmax, labels, valid mask or None, the mean's denominator as a logits dtype).

    Like Paddle, a mean over no valid label divides by 1 (gives 0), not by 0.
    """
    lsm = log_softmax(xp, logits, axis)
    if soft_label:
        return lsm, label, None, logits.dtype.type(max(lsm.size // lsm.shape[axis], 1))
    label = _hard_label(label, logits.ndim, axis)
    valid = label != ignore_index
    return lsm, label, valid, xp.maximum(valid.sum(), 1).astype(logits.dtype)


def _reduce(xp, loss, reduction, count, dtype):
    if reduction == "none":
        return loss.astype(dtype, copy=False)
    if reduction == "sum":
        return _scalar(xp, loss.sum(), dtype)
    if reduction == "mean":
        return _scalar(xp, loss.sum() / count, dtype)
    raise ValueError(f"cross_entropy: unknown reduction {reduction!r}")


def cross_entropy(
    xp, logits, label, soft_label=False, ignore_index=-100, reduction="mean", axis=-1
):
    """Softmax cross entropy of ``logits`` against integer or soft labels."""
    axis = axis % logits.ndim
    lsm, label, valid, count = _ce_terms(xp, logits, label, soft_label, ignore_index, axis)
    if soft_label:
        loss = -(label * lsm).sum(axis=axis)
    else:
        safe = xp.expand_dims(xp.where(valid, label, 0), axis)
        picked = xp.take_along_axis(lsm, safe.astype(xp.int64), axis=axis).squeeze(axis)
        loss = xp.where(valid, -picked, xp.zeros((), dtype=lsm.dtype))
    return _reduce(xp, loss, reduction, count, logits.dtype)


def cross_entropy_grad(
    xp, logits, label, dloss, soft_label=False, ignore_index=-100, reduction="mean", axis=-1
):
    """Gradient of cross_entropy with respect to ``logits``."""
    axis = axis % logits.ndim
    lsm, label, valid, count = _ce_terms(xp, logits, label, soft_label, ignore_index, axis)
    p = xp.exp(lsm)
    if soft_label:
        g = p * label.sum(axis=axis, keepdims=True) - label
    else:
        shape = [1] * logits.ndim
        shape[axis] = logits.shape[axis]
        classes = xp.arange(logits.shape[axis]).reshape(shape)
        g = p - (classes == xp.expand_dims(label, axis)).astype(p.dtype)
        g = g * xp.expand_dims(valid, axis).astype(p.dtype)
    if reduction == "none":
        scale = xp.expand_dims(dloss, axis)
    elif reduction == "sum":
        scale = dloss
    elif reduction == "mean":
        scale = dloss / count
    else:
        raise ValueError(f"cross_entropy: unknown reduction {reduction!r}")
    return (g * scale).astype(logits.dtype, copy=False)


# -------------------------------------------------------------- normalization


def layer_norm(xp, x, weight, bias, epsilon=1e-5, begin_norm_axis=1):
    """Normalize over axes begin_norm_axis.. -> (y, mean, variance), stats of x.shape[:axis]."""
    axes = tuple(range(begin_norm_axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / xp.sqrt(var + x.dtype.type(epsilon))
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    lead = x.shape[:begin_norm_axis]
    return y.astype(x.dtype, copy=False), mean.reshape(lead), var.reshape(lead)


def layer_norm_grad(xp, x, weight, mean, variance, dy, epsilon=1e-5, begin_norm_axis=1):
    """Gradient of layer_norm -> (dx, dweight, dbias); weight None counts as ones."""
    axes = tuple(range(begin_norm_axis, x.ndim))
    stat_shape = x.shape[:begin_norm_axis] + (1,) * len(axes)
    invstd = 1 / xp.sqrt(variance.reshape(stat_shape) + x.dtype.type(epsilon))
    xhat = (x - mean.reshape(stat_shape)) * invstd
    lead = tuple(range(begin_norm_axis))
    dweight, dbias = (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
    g = dy if weight is None else dy * weight
    dx = invstd * (
        g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True)
    )
    return dx, dweight, dbias


def _channel_axis(ndim, data_format):
    return ndim - 1 if data_format in ("NHWC", "NLC", "NDHWC") else 1


def _per_channel(v, ndim, axis):
    """A [C] vector shaped to broadcast along ``axis`` of an ndim array."""
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def batch_norm(
    xp,
    x,
    running_mean,
    running_var,
    weight,
    bias,
    training=True,
    momentum=0.9,
    epsilon=1e-5,
    data_format="NCHW",
):
    """Batch norm -> (y, new_running_mean, new_running_var, saved_mean, saved_invstd)."""
    if x.dtype == xp.float16 and not training:
        # float16 activations are normalized in float32 (as cuDNN and ONNX Runtime do):
        # folding the statistics into one scale and shift cancels in float16.
        y, *rest = batch_norm(xp, x.astype(xp.float32), running_mean.astype(xp.float32),
                              running_var.astype(xp.float32),
                              None if weight is None else weight.astype(xp.float32),
                              None if bias is None else bias.astype(xp.float32),
                              training, momentum, epsilon, data_format)
        return (y.astype(x.dtype), running_mean, running_var,
                rest[2].astype(running_mean.dtype), rest[3].astype(running_var.dtype))
    axis = _channel_axis(x.ndim, data_format)
    axes = tuple(a for a in range(x.ndim) if a != axis)
    if training:
        mean = x.mean(axis=axes)
        var = ((x - _per_channel(mean, x.ndim, axis)) ** 2).mean(axis=axes)
        n = x.size // x.shape[axis]
        unbiased = var * (n / max(n - 1, 1))
        new_mean = momentum * running_mean + (1 - momentum) * mean
        new_var = momentum * running_var + (1 - momentum) * unbiased
        new_mean = new_mean.astype(running_mean.dtype, copy=False)
        new_var = new_var.astype(running_var.dtype, copy=False)
    else:
        mean, var = running_mean, running_var
        new_mean, new_var = running_mean, running_var
    invstd = 1 / xp.sqrt(var + var.dtype.type(epsilon))
    scale = invstd if weight is None else invstd * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    y = x * _per_channel(scale, x.ndim, axis) + _per_channel(shift, x.ndim, axis)
    return y.astype(x.dtype, copy=False), new_mean, new_var, mean, invstd


def batch_norm_grad(xp, x, weight, saved_mean, saved_invstd, dy, training=True, data_format="NCHW"):
    """Gradient of batch_norm -> (dx, dweight, dbias); weight None counts as ones."""
    axis = _channel_axis(x.ndim, data_format)
    axes = tuple(a for a in range(x.ndim) if a != axis)
    invstd = _per_channel(saved_invstd, x.ndim, axis)
    xhat = (x - _per_channel(saved_mean, x.ndim, axis)) * invstd
    dbias = dy.sum(axis=axes)
    dweight = (dy * xhat).sum(axis=axes)
    scale = invstd if weight is None else invstd * _per_channel(weight, x.ndim, axis)
    dweight_out = dweight.astype(dy.dtype, copy=False)
    dbias_out = dbias.astype(dy.dtype, copy=False)
    if not training:
        return (dy * scale).astype(x.dtype, copy=False), dweight_out, dbias_out
    n = x.size // x.shape[axis]
    dx = scale * (
        dy - _per_channel(dbias / n, x.ndim, axis) - xhat * _per_channel(dweight / n, x.ndim, axis)
    )
    return dx.astype(x.dtype, copy=False), dweight_out, dbias_out


# ------------------------------------------------------------------ embedding


def _padding_row(padding_idx, vocab):
    if padding_idx is None:
        return None
    return padding_idx + vocab if padding_idx < 0 else padding_idx


def embedding(xp, ids, weight, padding_idx=None):
    """Rows of ``weight`` picked by ``ids``; ids equal to padding_idx give zeros."""
    out = xp.take(weight, ids, axis=0)
    pad = _padding_row(padding_idx, weight.shape[0])
    if pad is not None:
        out = out * (ids != pad)[..., None].astype(weight.dtype)
    return out


def _scatter_add_numpy(xp, target, rows, values):
    xp.add.at(target, rows, values)


def _scatter_add_cupy(xp, target, rows, values):
    import cupyx

    cupyx.scatter_add(target, rows, values)


_SCATTER_ADD = {"numpy": _scatter_add_numpy, "cupy": _scatter_add_cupy}


def embedding_grad(xp, ids, weight_shape_ref, dout, padding_idx=None):
    """Gradient of embedding: dout rows summed into their ids' rows (repeats add up)."""
    vocab, dim = weight_shape_ref.shape
    dweight = xp.zeros((vocab, dim), dtype=dout.dtype)
    _SCATTER_ADD.get(xp.__name__, _scatter_add_numpy)(
        xp, dweight, ids.reshape(-1), dout.reshape(-1, dim)
    )
    pad = _padding_row(padding_idx, vocab)
    if pad is not None:
        dweight[pad] = 0
    return dweight
