"""Cases for runtime/ops/nn.py, conv.py and norm.py."""

import math

import numpy as np

from tests.ops.harness import Case, distinct, ints, positive, randn, rng

# ------------------------------------------------------------------- softmax


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    return np.log(_softmax(x, axis))


# ------------------------------------------------------------- cross entropy


def _ce_rows(logits, label, soft_label, ignore_index, axis):
    """Per-row losses (class axis moved last) and the count a mean divides by."""
    moved = np.moveaxis(logits, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    if soft_label:
        labels = np.moveaxis(label, axis, -1).reshape(flat.shape)
    else:
        if label.ndim == logits.ndim:
            label = np.squeeze(label, axis)
        labels = label.reshape(-1)
    out, count = [], 0
    for r, row in enumerate(flat):
        lse = math.log(sum(math.exp(v - row.max()) for v in row)) + row.max()
        if soft_label:
            out.append(-sum(p * (v - lse) for p, v in zip(labels[r], row)))
            count += 1
        else:
            lab = int(labels[r])
            out.append(0.0 if lab == ignore_index else lse - row[lab])
            count += lab != ignore_index
    return np.array(out).reshape(moved.shape[:-1]), max(count, 1)


def _ce_ref(logits, label, soft_label=False, ignore_index=-100, reduction="mean", axis=-1):
    out, count = _ce_rows(logits, label, soft_label, ignore_index, axis)
    if reduction == "none":
        return out
    return np.array(out.sum() if reduction == "sum" else out.sum() / count)


def _ce_grad_ref(logits, label, dloss, soft_label=False, ignore_index=-100, reduction="mean",
                 axis=-1):
    """softmax(row) * sum(label) - label for each row, scaled by that row's dloss."""
    moved = np.moveaxis(logits, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    _, count = _ce_rows(logits, label, soft_label, ignore_index, axis)
    if soft_label:
        target = np.moveaxis(label, axis, -1).reshape(flat.shape)
    else:
        lab = (np.squeeze(label, axis) if label.ndim == logits.ndim else label).reshape(-1)
        target = np.zeros_like(flat)
        for r, k in enumerate(lab):
            if k != ignore_index:
                target[r, k] = 1.0
    if reduction == "none":
        scale = np.reshape(dloss, (-1,))
    else:
        scale = np.full(len(flat), float(dloss) / (count if reduction == "mean" else 1))
    g = np.zeros_like(flat)
    for r, row in enumerate(flat):
        g[r] = (_softmax(row) * target[r].sum() - target[r]) * scale[r]
    return np.moveaxis(g.reshape(moved.shape), -1, axis)


def _labels(shape, classes, ignored=False):
    label = ints(0, classes, *shape)
    if ignored:
        label.reshape(-1)[::3] = -100
    return label


# --------------------------------------------------------------------- conv2d


def _geometry(x_shape, w_shape, stride, padding, dilation):
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    kh, kw = w_shape[2:]
    oh = (x_shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (x_shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return (sh, sw), (ph, pw), (dh, dw), (oh, ow)


def _taps(x_shape, w_shape, stride, padding, dilation, groups):
    """Each (n, o, i, j, c, c', ki, kj, h, w): y[n, o, i, j] += x[n, c, h, w] * w[o, c', ki, kj]."""
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _geometry(x_shape, w_shape, stride, padding,
                                                         dilation)
    n_, _, hh, ww = x_shape
    cout, cg, kh, kw = w_shape
    per = cout // groups
    for n in range(n_):
        for o in range(cout):
            for i in range(oh):
                for j in range(ow):
                    for cc in range(cg):
                        c = (o // per) * cg + cc
                        for ki in range(kh):
                            for kj in range(kw):
                                h, w = i * sh - ph + ki * dh, j * sw - pw + kj * dw
                                if 0 <= h < hh and 0 <= w < ww:
                                    yield n, o, i, j, c, cc, ki, kj, h, w


def _conv_ref(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    *_, (oh, ow) = _geometry(x.shape, w.shape, stride, padding, dilation)
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for n, o, i, j, c, cc, ki, kj, h, ww in _taps(x.shape, w.shape, stride, padding, dilation,
                                                  groups):
        y[n, o, i, j] += x[n, c, h, ww] * w[o, cc, ki, kj]
    return y


def _conv_grad_input_ref(x_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                         groups=1):
    dx = np.zeros(x_ref.shape)
    for n, o, i, j, c, cc, ki, kj, h, ww in _taps(x_ref.shape, w.shape, stride, padding,
                                                  dilation, groups):
        dx[n, c, h, ww] += dy[n, o, i, j] * w[o, cc, ki, kj]
    return dx


def _conv_grad_filter_ref(x, dy, w_ref, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                          groups=1):
    dw = np.zeros(w_ref.shape)
    for n, o, i, j, c, cc, ki, kj, h, ww in _taps(x.shape, w_ref.shape, stride, padding,
                                                  dilation, groups):
        dw[o, cc, ki, kj] += dy[n, o, i, j] * x[n, c, h, ww]
    return dw


_CONV_GROUPED = {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2], "groups": 2}
# x [1, 4, 5, 6] * w [4, 2, 3, 2] with these attrs -> [1, 4, 3, 4]

# -------------------------------------------------------------------- pooling


def _pool_windows(x_shape, kernel_size, stride=None, padding=0, ceil_mode=False):
    """(i, j, h0, h1, w0, w1) per output position: the window clipped to the input."""
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
    k, s, p = pair(kernel_size), pair(kernel_size if stride is None else stride), pair(padding)

    def out(size, k, s, p):
        if ceil_mode:
            n = math.ceil((size + 2 * p - k) / s) + 1
            return n - 1 if (n - 1) * s >= size + p else n
        return (size + 2 * p - k) // s + 1

    h, w = x_shape[2:]
    oh, ow = out(h, k[0], s[0], p[0]), out(w, k[1], s[1], p[1])
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            yield i, j, max(h0, 0), min(h0 + k[0], h), max(w0, 0), min(w0 + k[1], w), k, (oh, ow)


def _max_pool_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False):
    wins = list(_pool_windows(x.shape, kernel_size, stride, padding, ceil_mode))
    y = np.zeros(x.shape[:2] + wins[0][-1], x.dtype)
    for i, j, h0, h1, w0, w1, _, _ in wins:
        y[:, :, i, j] = x[:, :, h0:h1, w0:w1].max(axis=(2, 3))
    return y


def _max_pool_grad_ref(x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    dx = np.zeros(x.shape)
    for i, j, h0, h1, w0, w1, _, _ in _pool_windows(x.shape, kernel_size, stride, padding,
                                                     ceil_mode):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                win = x[n, c, h0:h1, w0:w1]
                a, b = np.unravel_index(np.argmax(win), win.shape)  # the first maximum
                dx[n, c, h0 + a, w0 + b] += dy[n, c, i, j]
    return dx


def _avg_pool_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True):
    wins = list(_pool_windows(x.shape, kernel_size, stride, padding, ceil_mode))
    y = np.zeros(x.shape[:2] + wins[0][-1])
    for i, j, h0, h1, w0, w1, k, _ in wins:
        div = (h1 - h0) * (w1 - w0) if exclusive else k[0] * k[1]
        y[:, :, i, j] = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3)) / div
    return y


def _avg_pool_grad_ref(x, dy, kernel_size, stride=None, padding=0, ceil_mode=False,
                       exclusive=True):
    dx = np.zeros(x.shape)
    for i, j, h0, h1, w0, w1, k, _ in _pool_windows(x.shape, kernel_size, stride, padding,
                                                     ceil_mode):
        div = (h1 - h0) * (w1 - w0) if exclusive else k[0] * k[1]
        dx[:, :, h0:h1, w0:w1] += dy[:, :, i : i + 1, j : j + 1] / div
    return dx


_POOL = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True}
# x [1, 2, 7, 5] with these attrs -> [1, 2, 4, 3]
_POOL_X = (1, 2, 7, 5)
_POOL_Y = (1, 2, 4, 3)

# -------------------------------------------------------------------- dropout


def _chwn(ref, images, image_out=True):
    """The reference of an op's [C, H, W, N] form: its NCHW reference on the
    inputs at positions ``images`` transposed back."""

    def chwn_ref(*inputs, **attrs):
        nchw = [x.transpose(3, 0, 1, 2) if i in images else x for i, x in enumerate(inputs)]
        out = ref(*nchw, **attrs)
        return out.transpose(1, 2, 3, 0) if image_out else out

    return chwn_ref


def _to_chwn(x):
    return np.ascontiguousarray(x.transpose(1, 2, 3, 0))


def _dropout_ref(x, mask, p=0.5, mode="upscale_in_train"):
    return x * mask / (1 - p) if mode == "upscale_in_train" else x * mask


_MASK = (rng.random((3, 4)) > 0.3).astype("float64")

# -------------------------------------------------------------- normalization


def _layer_norm_ref(x, scale, bias, epsilon=1e-5, begin_norm_axis=1):
    begin = begin_norm_axis % x.ndim
    lead = x.shape[:begin]
    flat = x.reshape(int(np.prod(lead)), -1)
    mean, var = flat.mean(axis=1), flat.var(axis=1)
    y = ((flat - mean[:, None]) / np.sqrt(var[:, None] + epsilon)).reshape(x.shape)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y, mean.reshape(lead), var.reshape(lead)


def _bn_ref(x, rm, rv, w, b, training=True, momentum=0.9, epsilon=1e-5, data_format="NCHW"):
    axis = x.ndim - 1 if data_format == "NHWC" else 1
    axes = tuple(a for a in range(x.ndim) if a != axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    if training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        new_rm = momentum * rm + (1 - momentum) * mean
        new_rv = momentum * rv + (1 - momentum) * x.var(axis=axes, ddof=1)
    else:
        mean, var, new_rm, new_rv = rm, rv, rm, rv
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, new_rm, new_rv, mean, 1 / np.sqrt(var + epsilon)


def _bn_inputs(shape, c, affine=True):
    ws = (randn(c), randn(c)) if affine else (None, None)
    return [randn(*shape), randn(c), positive(c), *ws]


def _numeric(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        hi = f()
        x[i] = saved - eps
        lo = f()
        x[i] = saved
        g[i] = (hi - lo) / (2 * eps)
    return g


def _bn_grad_ref(x, w, saved_mean, saved_invstd, dy, dmo, dvo, dsm, dsi, training=True,
                 momentum=0.9, epsilon=1e-5, data_format="NCHW"):
    """Finite differences of the weighted outputs of _bn_ref (running stats fixed)."""
    c = saved_mean.shape[0]
    rm, rv = saved_mean, 1 / saved_invstd**2 - epsilon  # what eval mode normalizes with
    w1 = np.ones(c) if w is None else w.copy()
    b1 = np.zeros(c)
    x = x.copy()

    def f():
        outs = _bn_ref(x, rm, rv, w1, b1, training, momentum, epsilon, data_format)
        return sum(float((o * d).sum()) for o, d in zip(outs, (dy, dmo, dvo, dsm, dsi)))

    return _numeric(f, x), _numeric(f, w1), _numeric(f, b1)


def _bn_grad_case(shape, data_format, affine, training, name):
    c = shape[-1] if data_format == "NHWC" else shape[1]
    x, rm, rv, w, b = _bn_inputs(shape, c, affine)
    _, _, _, mean, invstd = _bn_ref(x, rm, rv, w, b, training, data_format=data_format)
    douts = [randn(*shape), randn(c), randn(c), randn(c), randn(c)]
    attrs = {"training": training, "data_format": data_format}
    return Case("batch_norm_grad", [x, w, mean, invstd, *douts], attrs, ref=_bn_grad_ref,
                grad=False, rtol=1e-5, atol=1e-6, name=name)


# ------------------------------------------------------------------ embedding


def _embedding_ref(ids, w, padding_idx=None):
    pad = None if padding_idx is None else padding_idx % w.shape[0]
    out = np.zeros(ids.shape + (w.shape[1],))
    for idx in np.ndindex(ids.shape):
        if ids[idx] != pad:
            out[idx] = w[ids[idx]]
    return out


def _embedding_grad_ref(ids, w, dout, padding_idx=None):
    pad = None if padding_idx is None else padding_idx % w.shape[0]
    dw = np.zeros(w.shape)
    for idx in np.ndindex(ids.shape):
        if ids[idx] != pad:
            dw[ids[idx]] += dout[idx]
    return dw


_IDS = np.array([[0, 2, 2], [5, 1, 2]])

# ----------------------------------------------------------------------- gelu

_erf = np.vectorize(math.erf)
_C = math.sqrt(2 / math.pi)


def _gelu_ref(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + np.tanh(_C * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_grad_ref(x, dy, approximate=False):
    if approximate:
        t = np.tanh(_C * (x + 0.044715 * x**3))
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _C * (1 + 3 * 0.044715 * x * x))
    return dy * (0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x)
                 / math.sqrt(2 * math.pi))


CASES = [
    Case("softmax", [randn(3, 4)], ref=_softmax, double=True),
    Case("softmax", [randn(2, 3, 2)], {"axis": 1}, ref=_softmax, name="axis1", double=True),
    Case("log_softmax", [randn(3, 4)], ref=_log_softmax, double=True),
    Case("log_softmax", [randn(2, 3, 2)], {"axis": 0}, ref=_log_softmax, name="axis0",
         double=True),
    Case("cross_entropy", [randn(5, 4), _labels((5,), 4)], ref=_ce_ref),
    Case("cross_entropy", [randn(6, 3), _labels((6, 1), 3, ignored=True)],
         {"reduction": "none"}, ref=_ce_ref, name="ignored-none"),
    Case("cross_entropy", [randn(2, 4, 3), _labels((2, 1, 3), 4, ignored=True)],
         {"axis": 1}, ref=_ce_ref, name="axis1"),
    Case("cross_entropy", [randn(2, 3, 4), _softmax(randn(2, 3, 4))],
         {"soft_label": True, "reduction": "sum"}, ref=_ce_ref, name="soft", grad_inputs=(0,)),
    Case("cross_entropy_grad", [randn(6, 3), _labels((6,), 3, ignored=True), randn(6)],
         {"reduction": "none"}, ref=_ce_grad_ref, grad=False),
    Case("cross_entropy_grad", [randn(2, 4, 3), _labels((2, 1, 3), 4), np.array(0.7)],
         {"axis": 1}, ref=_ce_grad_ref, name="axis1-mean", grad=False),
    Case("cross_entropy_grad", [randn(2, 3), _softmax(randn(2, 3)), np.array(1.3)],
         {"soft_label": True, "reduction": "sum"}, ref=_ce_grad_ref, name="soft", grad=False),
    Case("conv2d", [randn(1, 2, 4, 4), randn(3, 2, 2, 2)], ref=_conv_ref, double=True),
    Case("conv2d", [randn(1, 4, 5, 6), randn(4, 2, 3, 2)], _CONV_GROUPED, ref=_conv_ref,
         name="grouped", double=True),
    Case("conv2d_grad_input", [randn(1, 2, 4, 4), randn(3, 2, 2, 2), randn(1, 3, 3, 3)],
         ref=_conv_grad_input_ref, grad_inputs=(1, 2), double=True),
    Case("conv2d_grad_input", [randn(1, 4, 5, 6), randn(4, 2, 3, 2), randn(1, 4, 3, 4)],
         _CONV_GROUPED, ref=_conv_grad_input_ref, grad_inputs=(1, 2), name="grouped"),
    Case("conv2d_grad_filter", [randn(1, 2, 4, 4), randn(1, 3, 3, 3), randn(3, 2, 2, 2)],
         ref=_conv_grad_filter_ref, grad_inputs=(0, 1), double=True),
    Case("conv2d_grad_filter", [randn(1, 4, 5, 6), randn(1, 4, 3, 4), randn(4, 2, 3, 2)],
         _CONV_GROUPED, ref=_conv_grad_filter_ref, grad_inputs=(0, 1), name="grouped"),
    Case("max_pool2d", [distinct(1, 2, 4, 4)], {"kernel_size": [2, 2]}, ref=_max_pool_ref),
    Case("max_pool2d", [distinct(*_POOL_X)], _POOL, ref=_max_pool_ref, name="pad-ceil"),
    Case("max_pool2d_grad",
         [(x := distinct(*_POOL_X)), _max_pool_ref(x, **_POOL), randn(*_POOL_Y)], _POOL,
         ref=_max_pool_grad_ref),
    Case("avg_pool2d", [randn(1, 2, 4, 4)], {"kernel_size": 2}, ref=_avg_pool_ref),
    Case("avg_pool2d", [randn(*_POOL_X)], _POOL, ref=_avg_pool_ref, name="pad-ceil"),
    Case("avg_pool2d", [randn(*_POOL_X)], {**_POOL, "exclusive": False}, ref=_avg_pool_ref,
         name="inclusive"),
    Case("avg_pool2d_grad", [randn(*_POOL_X), randn(*_POOL_Y)], _POOL, ref=_avg_pool_grad_ref,
         grad_inputs=(1,)),
    Case("avg_pool2d_grad", [randn(*_POOL_X), randn(*_POOL_Y)], {**_POOL, "exclusive": False},
         ref=_avg_pool_grad_ref, grad_inputs=(1,), name="inclusive"),
    # The batch-minor forms (no gradients): their NCHW forms' references, transposed.
    Case("conv2d_chwn", [_to_chwn(randn(3, 2, 4, 4)), randn(3, 2, 2, 2)],
         ref=_chwn(_conv_ref, {0}), grad=False),
    Case("conv2d_chwn", [_to_chwn(randn(2, 4, 5, 6)), randn(4, 2, 3, 2)], _CONV_GROUPED,
         ref=_chwn(_conv_ref, {0}), grad=False, name="grouped"),
    Case("conv2d_grad_input_chwn",
         [_to_chwn(randn(2, 4, 5, 6)), randn(4, 2, 3, 2), _to_chwn(randn(2, 4, 3, 4))],
         _CONV_GROUPED, ref=_chwn(_conv_grad_input_ref, {0, 2}), grad=False, name="grouped"),
    Case("conv2d_grad_input_chwn",
         [_to_chwn(randn(3, 2, 6, 6)), randn(3, 2, 3, 3), _to_chwn(randn(3, 3, 6, 6))],
         {"padding": [1, 1]}, ref=_chwn(_conv_grad_input_ref, {0, 2}), grad=False,
         name="padded"),
    Case("conv2d_grad_filter_chwn",
         [_to_chwn(randn(2, 4, 5, 6)), _to_chwn(randn(2, 4, 3, 4)), randn(4, 2, 3, 2)],
         _CONV_GROUPED, ref=_chwn(_conv_grad_filter_ref, {0, 1}, image_out=False),
         grad=False, name="grouped"),
    Case("max_pool2d_chwn", [_to_chwn(distinct(3, 2, 4, 4))], {"kernel_size": [2, 2]},
         ref=_chwn(_max_pool_ref, {0}), grad=False),
    Case("max_pool2d_chwn", [_to_chwn(distinct(2, *_POOL_X[1:]))], _POOL,
         ref=_chwn(_max_pool_ref, {0}), grad=False, name="pad-ceil"),
    Case("max_pool2d_grad_chwn",
         [_to_chwn(x := distinct(2, *_POOL_X[1:])), _to_chwn(_max_pool_ref(x, **_POOL)),
          _to_chwn(randn(2, *_POOL_Y[1:]))], _POOL,
         ref=_chwn(_max_pool_grad_ref, {0, 1, 2}), grad=False, name="pad-ceil"),
    Case("max_pool2d_grad_chwn",
         [_to_chwn(x := distinct(3, 2, 4, 4)), _to_chwn(_max_pool_ref(x, kernel_size=2)),
          _to_chwn(randn(3, 2, 2, 2))], {"kernel_size": 2},
         ref=_chwn(_max_pool_grad_ref, {0, 1, 2}), grad=False, name="tiled"),
    Case("dropout", [randn(3, 4), _MASK], {"p": 0.3}, ref=_dropout_ref, grad_inputs=(0,)),
    Case("dropout", [randn(3, 4), _MASK], {"p": 0.3, "mode": "downscale_in_infer"},
         ref=_dropout_ref, grad_inputs=(0,), name="downscale"),
    Case("layer_norm", [randn(2, 3, 4), randn(3, 4), randn(3, 4)], ref=_layer_norm_ref,
         double=True),
    Case("layer_norm", [randn(2, 3, 4), None, None], {"begin_norm_axis": 2},
         ref=_layer_norm_ref, name="plain", double=True),
    Case("layer_norm", [randn(3, 5), randn(5), None], {"begin_norm_axis": -1, "epsilon": 1e-3},
         ref=_layer_norm_ref, name="scale-only", double=True),
    Case("batch_norm", _bn_inputs((2, 3, 2, 2), 3), ref=_bn_ref, grad_inputs=(0, 3, 4)),
    Case("batch_norm", _bn_inputs((4, 3), 3), {"training": False}, ref=_bn_ref,
         grad_inputs=(0, 3, 4), name="eval"),
    Case("batch_norm", _bn_inputs((2, 2, 2, 3), 3, affine=False),
         {"data_format": "NHWC", "momentum": 0.8}, ref=_bn_ref, grad_inputs=(0,), name="nhwc"),
    _bn_grad_case((2, 3, 2, 2), "NCHW", True, True, "train"),
    _bn_grad_case((4, 3), "NCHW", True, False, "eval"),
    _bn_grad_case((2, 2, 3), "NHWC", False, True, "nhwc"),
    Case("embedding", [_IDS, randn(6, 3)], ref=_embedding_ref),
    Case("embedding", [_IDS, randn(6, 3)], {"padding_idx": 2}, ref=_embedding_ref, name="pad"),
    Case("embedding_grad", [_IDS, randn(6, 3), randn(2, 3, 3)], {"padding_idx": -1},
         ref=_embedding_grad_ref, grad_inputs=(2,)),
    Case("gelu", [randn(3, 4)], ref=_gelu_ref, double=True),
    Case("gelu", [randn(3, 4)], {"approximate": True}, ref=_gelu_ref, name="tanh", double=True),
    Case("gelu_grad", [randn(3, 4), randn(3, 4)], ref=_gelu_grad_ref, double=True),
    Case("gelu_grad", [randn(3, 4), randn(3, 4)], {"approximate": True}, ref=_gelu_grad_ref,
         name="tanh", double=True),
]
