"""Convolution and pooling kernels over NCHW arrays (numpy or cupy).

Convolution is im2col + a batched matmul: the columns are copied once out of
a strided window view (``as_strided``, which NumPy and CuPy both have), and
the input gradient adds them back with one strided slice per kernel-window
position (a loop over kh*kw, never over the batch or pixels).
"""

import math
import numbers


def _pair(value):
    """(a, b) from an int or a pair."""
    if isinstance(value, numbers.Integral):
        return (int(value), int(value))
    a, b = value
    return (int(a), int(b))


def _window(start, step, count):
    """The slice that picks ``count`` values from ``start`` every ``step``."""
    return slice(start, start + step * (count - 1) + 1, step)


def _conv_out(size, k, s, p, d):
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if out < 1:
        raise ValueError(f"conv2d: window {k} (dilation {d}) does not fit input {size} + pad {p}")
    return out


def _conv_geometry(x_shape, w_shape, stride, padding, dilation, groups):
    """Normalized attrs and output size of a convolution."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, w = x_shape
    cout, cg, kh, kw = w_shape
    if c != cg * groups or cout % groups:
        raise ValueError(f"conv2d: input {x_shape} and filter {w_shape} do not fit groups={groups}")
    oh, ow = _conv_out(h, kh, sh, ph, dh), _conv_out(w, kw, sw, pw, dw)
    return (sh, sw), (ph, pw), (dh, dw), (oh, ow)


def _im2col(xp, x, kh, kw, stride, padding, dilation, out_hw):
    """Columns [N, C*KH*KW, OH*OW] of NCHW ``x``: one copy out of a strided window view."""
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, padding, dilation, out_hw
    n, c = x.shape[:2]
    xpad = xp.ascontiguousarray(xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))))
    s0, s1, s2, s3 = xpad.strides
    view = xp.lib.stride_tricks.as_strided(
        xpad, (n, c, kh, kw, oh, ow), (s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw)
    )
    return view.reshape(n, c * kh * kw, oh * ow)


def _by_group(a, groups):
    """[N, C, ...] as [N, G, C/G * ..., L] where L is the last axis."""
    return a.reshape(a.shape[0], groups, -1, a.shape[-1])


def conv2d(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """2-D convolution of NCHW ``x`` with filter ``w`` [Cout, Cin/groups, KH, KW]."""
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w.shape, stride, padding, dilation, groups
    )
    cout, cg, kh, kw = w.shape
    cols = _by_group(_im2col(xp, x, kh, kw, stride, padding, dilation, (oh, ow)), groups)
    y = xp.matmul(w.reshape(groups, cout // groups, cg * kh * kw), cols)
    return y.reshape(x.shape[0], cout, oh, ow)


def conv2d_grad_input(
    xp, x_shape_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """Gradient of conv2d with respect to its input (only ``x_shape_ref.shape`` is read)."""
    x_shape = tuple(x_shape_ref.shape)
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _conv_geometry(
        x_shape, w.shape, stride, padding, dilation, groups
    )
    n, c, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    # filter rows ordered (window position, input channel) so each position's slice is contiguous
    wt = w.reshape(groups, cout // groups, cg, kh * kw).transpose(0, 3, 2, 1)
    wt = wt.reshape(groups, kh * kw * cg, cout // groups)
    cols = xp.matmul(wt, _by_group(dy.reshape(n, cout, oh * ow), groups))
    cols = cols.reshape(n, groups, kh * kw, cg, oh, ow)
    dxpad = xp.zeros((n, groups, cg, h + 2 * ph, wd + 2 * pw), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dxpad[..., _window(i * dh, sh, oh), _window(j * dw, sw, ow)] += cols[:, :, i * kw + j]
    return xp.ascontiguousarray(
        dxpad.reshape(n, c, h + 2 * ph, wd + 2 * pw)[..., ph : ph + h, pw : pw + wd]
    )


def conv2d_grad_filter(
    xp, x, dy, w_shape_ref, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """Gradient of conv2d with respect to its filter (only ``w_shape_ref.shape`` is read)."""
    w_shape = tuple(w_shape_ref.shape)
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w_shape, stride, padding, dilation, groups
    )
    n = x.shape[0]
    cout, cg, kh, kw = w_shape
    cols = _by_group(_im2col(xp, x, kh, kw, stride, padding, dilation, (oh, ow)), groups)
    dyg = _by_group(dy.reshape(n, cout, oh * ow), groups)
    return xp.matmul(dyg, cols.transpose(0, 1, 3, 2)).sum(axis=0).reshape(w_shape)


def _pool_out(size, k, s, p, ceil_mode):
    """Output size and the extra right padding ceil_mode needs along one axis."""
    span = size + 2 * p - k
    if span < 0:
        raise ValueError(f"pool2d: window {k} does not fit input {size} + pad {p}")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window would start in the padding
        out -= 1
    return out, max(0, (out - 1) * s + k - (size + 2 * p))


def _pool_geometry(x_shape, kernel_size, stride, padding, ceil_mode):
    """(kh, kw), (sh, sw), (oh, ow) and the pad widths for xp.pad."""
    (kh, kw) = _pair(kernel_size)
    (sh, sw) = _pair(kernel_size if stride is None else stride)
    (ph, pw) = _pair(padding)
    oh, eh = _pool_out(x_shape[2], kh, sh, ph, ceil_mode)
    ow, ew = _pool_out(x_shape[3], kw, sw, pw, ceil_mode)
    pads = ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew))
    return (kh, kw), (sh, sw), (oh, ow), pads


def _windows(k, s, out):
    """The index of each window position into a padded NCHW (or HW) array."""
    (kh, kw), (sh, sw), (oh, ow) = k, s, out
    for i in range(kh):
        for j in range(kw):
            yield (Ellipsis, _window(i, sh, oh), _window(j, sw, ow))


def _lowest(xp, dtype):
    return -math.inf if xp.dtype(dtype).kind == "f" else xp.iinfo(dtype).min


def max_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Max pooling of NCHW ``x``; padding counts as -inf."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    xpad = xp.pad(x, pads, constant_values=_lowest(xp, x.dtype))
    y = None
    for win in _windows(k, s, out):
        y = xpad[win].copy() if y is None else xp.maximum(y, xpad[win])
    return y


def max_pool2d_grad(xp, x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Gradient of max_pool2d: each window's dy goes to its first maximum."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    xpad = xp.pad(x, pads, constant_values=_lowest(xp, x.dtype))
    dxpad = xp.zeros(xpad.shape, dtype=dy.dtype)
    taken = xp.zeros(y.shape, dtype=bool)
    zero = xp.zeros((), dtype=dy.dtype)
    for win in _windows(k, s, out):
        hit = (xpad[win] == y) & ~taken
        dxpad[win] += xp.where(hit, dy, zero)
        taken |= hit
    (_, _), (_, _), (ph, _), (pw, _) = pads
    return dxpad[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


def _avg_divisor(xp, x, k, s, out, pads, exclusive):
    """How many elements each output averages: [OH, OW] or a Python number."""
    if not exclusive:
        return k[0] * k[1]
    ones = xp.pad(xp.ones(x.shape[2:], dtype=x.dtype), pads[2:])
    count = None
    for win in _windows(k, s, out):
        count = ones[win].copy() if count is None else count + ones[win]
    return count


def avg_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True):
    """Average pooling of NCHW ``x``; ``exclusive`` leaves padding out of the divisor."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    xpad = xp.pad(x, pads)
    total = None
    for win in _windows(k, s, out):
        total = xpad[win].copy() if total is None else total + xpad[win]
    return (total / _avg_divisor(xp, x, k, s, out, pads, exclusive)).astype(x.dtype, copy=False)


def avg_pool2d_grad(
    xp, x, dy, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True
):
    """Gradient of avg_pool2d: each window's dy spread evenly over its divisor."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    share = (dy / _avg_divisor(xp, x, k, s, out, pads, exclusive)).astype(dy.dtype, copy=False)
    (_, _), (_, _), (ph, eh), (pw, ew) = pads
    dxpad = xp.zeros(x.shape[:2] + (x.shape[2] + ph + eh, x.shape[3] + pw + ew), dtype=dy.dtype)
    for win in _windows(k, s, out):
        dxpad[win] += share
    return dxpad[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]
