"""Convolution and pooling kernels over NCHW arrays (numpy or cupy).

Convolution is im2col + batched matmuls: the columns are copied once out of
a strided window view (``as_strided``, which NumPy and CuPy both have), and
the input gradient adds them back with one strided slice per kernel-window
position (a loop over kh*kw, never over the batch or pixels). Pooling combines
the kh*kw window views of the (padded) input the same way.
"""

import functools
import math
import numbers

from dy2stat.kernels import select


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


def _pad(xp, x, pads, value=0):
    """``x`` padded by ``pads`` (one (before, after) pair per axis): ``x`` itself when
    there is none, else a filled array with ``x`` copied in (np.pad is far slower)."""
    if not any(a or b for a, b in pads):
        return x
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
    out = xp.full(shape, value, dtype=x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    return out


# Two layouts for the columns. Batch-major [N, C*KH*KW, OH*OW] feeds a batched
# matmul that writes NCHW directly; its copies run along output rows, which is
# slow when rows are short. Batch-minor [C*KH*KW, OH*OW*N] copies runs of
# OW*N, then needs products over chunks of columns and a transpose back to
# NCHW: faster for small maps. The input gradient is always batch-minor.
_SHORT_ROW = 16


def _batch_minor(ow) -> bool:
    return ow < _SHORT_ROW


def _im2col(xp, x, kh, kw, stride, padding, dilation, out_hw):
    """Columns [N, C*KH*KW, OH*OW] of NCHW ``x``: one copy out of a strided window view."""
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, padding, dilation, out_hw
    n, c = x.shape[:2]
    xpad = xp.ascontiguousarray(_pad(xp, x, ((0, 0), (0, 0), (ph, ph), (pw, pw))))
    s0, s1, s2, s3 = xpad.strides
    view = xp.lib.stride_tricks.as_strided(
        xpad, (n, c, kh, kw, oh, ow), (s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw)
    )
    return view.reshape(n, c * kh * kw, oh * ow)


def _im2col_batch_minor(xp, x, kh, kw, stride, padding, dilation, out_hw):
    """Columns [C*KH*KW, OH*OW*N] of NCHW ``x``, the batch innermost."""
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, padding, dilation, out_hw
    n, c, h, w = x.shape
    xt = xp.zeros((c, h + 2 * ph, w + 2 * pw, n), dtype=x.dtype)
    xt[:, ph : ph + h, pw : pw + w] = x.transpose(1, 2, 3, 0)
    s0, s1, s2, s3 = xt.strides
    view = xp.lib.stride_tricks.as_strided(
        xt, (c, kh, kw, oh, ow, n), (s0, s1 * dh, s2 * dw, s1 * sh, s2 * sw, s3)
    )
    return view.reshape(c * kh * kw, oh * ow * n)


def _positions_per_chunk(positions, n, columns=320):
    """The most output positions, dividing ``positions``, whose columns for all
    ``n`` images fit in ``columns`` (at least 1)."""
    k = max(1, min(positions, columns // n))
    while positions % k:
        k -= 1
    return k


def _by_group(a, groups):
    """[N, C, ...] as [N, G, C/G * ..., L] where L is the last axis."""
    return a.reshape(a.shape[0], groups, -1, a.shape[-1])


def _batch_minor_dy(dy, groups):
    """NCHW ``dy`` as [G, Cout/G, OH*OW*N] (the batch innermost)."""
    n, cout, oh, ow = dy.shape
    return dy.transpose(1, 2, 3, 0).reshape(groups, cout // groups, oh * ow * n)


def conv2d(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """2-D convolution of NCHW ``x`` with filter ``w`` [Cout, Cin/groups, KH, KW]."""
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w.shape, stride, padding, dilation, groups
    )
    n = x.shape[0]
    cout, cg, kh, kw = w.shape
    wg = w.reshape(groups, cout // groups, cg * kh * kw)
    if _batch_minor(ow):
        cols = _im2col_batch_minor(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
        # One product per chunk of k output positions (all N images): a chunk of
        # columns stays in cache, which makes the products ~1.4x faster than one.
        k = _positions_per_chunk(oh * ow, n)
        chunks = cols.reshape(groups, cg * kh * kw, oh * ow // k, k * n).transpose(0, 2, 1, 3)
        y = xp.matmul(wg[:, None], chunks)  # [G, chunk, Cout/G, k*N]
        y = y.reshape(groups, oh * ow // k, cout // groups, k, n).transpose(4, 0, 2, 1, 3)
        return xp.ascontiguousarray(y).reshape(n, cout, oh, ow)
    cols = _by_group(_im2col(xp, x, kh, kw, stride, padding, dilation, (oh, ow)), groups)
    return xp.matmul(wg, cols).reshape(n, cout, oh, ow)


@functools.lru_cache(maxsize=256)
def _col2im_windows(kh, kw, stride, dilation, out_hw) -> tuple:
    """The index of each kernel-window position's outputs in the padded
    [G, C, H, W, N] input gradient (made once per geometry: the loop over
    them runs on every call)."""
    (sh, sw), (dh, dw), (oh, ow) = stride, dilation, out_hw
    return tuple((slice(None), slice(None), _window(i * dh, sh, oh), _window(j * dw, sw, ow))
                 for i in range(kh) for j in range(kw))


def conv2d_grad_input(
    xp, x_shape_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """Gradient of conv2d with respect to its input (only ``x_shape_ref.shape`` is read).

    Made batch-minor ([G, C/G, H, W, N]), so every add runs along W*N
    contiguous values. With stride 1 along W (the usual case) one product
    gives each kernel row's whole contribution (``_rows_of_input_gradient``);
    otherwise each kernel-window position's columns are added in turn.
    """
    x_shape = tuple(x_shape_ref.shape)
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _conv_geometry(
        x_shape, w.shape, stride, padding, dilation, groups
    )
    n, c, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    dxpad = xp.zeros((groups, cg, h + 2 * ph, wd + 2 * pw, n), dtype=dy.dtype)
    if sw == 1:
        rows = _rows_of_input_gradient(xp, w, dy, dw, groups, wd + 2 * pw)
        for i in range(kh):
            target = dxpad[:, :, _window(i * dh, sh, oh)]
            xp.add(target, rows[:, i], out=target)
    else:
        # filter rows ordered (window position, input channel): each position's slice is contiguous
        wt = w.reshape(groups, cout // groups, cg, kh * kw).transpose(0, 3, 2, 1)
        wt = wt.reshape(groups, kh * kw * cg, cout // groups)
        cols = xp.matmul(wt, _batch_minor_dy(dy, groups)).reshape(groups, kh * kw, cg, oh, ow, n)
        for k, window in enumerate(_col2im_windows(kh, kw, (sh, sw), (dh, dw), (oh, ow))):
            target = dxpad[window]
            xp.add(target, cols[:, k], out=target)
    dx = dxpad.reshape(c, h + 2 * ph, wd + 2 * pw, n)[:, ph : ph + h, pw : pw + wd]
    return xp.ascontiguousarray(dx.transpose(3, 0, 1, 2))


def _rows_of_input_gradient(xp, w, dy, dw, groups, wp):
    """Each kernel row's contribution to the padded input gradient when the
    stride along W is 1: [G, KH, C/G, OH, Wp, N], one product for all of them.

    Row i at padded column x gets sum over (co, j) of w[co, c, i, j] *
    dy[co, x - j*dw]: dy padded along W and viewed at its kw shifts
    [G, Cout/G * KW, OH*Wp*N] (one copy) times the filter as
    [G, KH * C/G, Cout/G * KW], its kw axis reversed to match the shifts.
    Fewer, larger calls than adding KH*KW column blocks: ~10% faster on
    LeNet's second convolution, though the product does more work where the
    padded width exceeds the output's.
    """
    n, cout, oh, ow = dy.shape
    _, cg, kh, kw = w.shape
    cog, reach = cout // groups, dw * (kw - 1)
    dyp = xp.zeros((groups, cog, oh, ow + 2 * reach, n), dtype=dy.dtype)
    dyp[:, :, :, reach : reach + ow] = dy.transpose(1, 2, 3, 0).reshape(groups, cog, oh, ow, n)
    s_g, s_c, s_h, s_w, s_n = dyp.strides
    # shifted[g, co, j, r, x, :] = dyp[g, co, r, x + j*dw, :] = dy at column x - (kw-1-j)*dw
    shifted = xp.lib.stride_tricks.as_strided(
        dyp, (groups, cog, kw, oh, wp, n), (s_g, s_c, s_w * dw, s_h, s_w, s_n))
    filters = w.reshape(groups, cog, cg, kh, kw)[..., ::-1].transpose(0, 3, 2, 1, 4)
    filters = filters.reshape(groups, kh * cg, cog * kw)
    rows = xp.matmul(filters, shifted.reshape(groups, cog * kw, oh * wp * n))
    return rows.reshape(groups, kh, cg, oh, wp, n)


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
    if _batch_minor(ow):
        cols = _im2col_batch_minor(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
        cols = cols.reshape(groups, cg * kh * kw, oh * ow * n)
        # cols @ dy^T, transposed after: BLAS runs this product ~1.7x faster than dy @ cols^T
        dw = xp.matmul(cols, _batch_minor_dy(dy, groups).transpose(0, 2, 1))
        return xp.ascontiguousarray(dw.transpose(0, 2, 1)).reshape(w_shape)
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


def _combine_windows(xp, a, k, s, out, ufunc):
    """``ufunc`` over every window position of ``a``, into one new array."""
    windows = [a[win] for win in _windows(k, s, out)]
    if len(windows) == 1:
        return windows[0].copy()
    result = ufunc(windows[0], windows[1])
    for w in windows[2:]:
        ufunc(result, w, out=result)
    return result


def _lowest(xp, dtype):
    return -math.inf if xp.dtype(dtype).kind == "f" else xp.iinfo(dtype).min


def max_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Max pooling of NCHW ``x``; padding counts as -inf."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    return _combine_windows(xp, _pad(xp, x, pads, _lowest(xp, x.dtype)), k, s, out, xp.maximum)


def max_pool2d_grad(xp, x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Gradient of max_pool2d: each window's dy goes to its first maximum."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    xpad = _pad(xp, x, pads, _lowest(xp, x.dtype))
    (_, _), (_, _), (ph, eh), (pw, ew) = pads
    # Windows that neither overlap nor leave gaps write each element once.
    tiled = (s == k and not (ph or eh or pw or ew)
             and xpad.shape[2:] == (out[0] * k[0], out[1] * k[1]))
    dxpad = (xp.empty if tiled else xp.zeros)(xpad.shape, dtype=dy.dtype)
    zero = xp.zeros((), dtype=dy.dtype)
    windows = list(_windows(k, s, out))
    free = None  # windows whose maximum is not found yet (None: all of them)
    for n, win in enumerate(windows):
        hit = xpad[win] == y
        if free is None:
            free = ~hit
        else:
            hit &= free
            if n < len(windows) - 1:
                free ^= hit
        if tiled:
            select.where(xp, hit, dy, zero, out=dxpad[win])
        else:
            dxpad[win] += select.where(xp, hit, dy, zero)
    return dxpad[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


def _avg_divisor(xp, x, k, s, out, pads, exclusive):
    """How many elements each output averages: [OH, OW] or a Python number."""
    if not exclusive:
        return k[0] * k[1]
    ones = _pad(xp, xp.ones(x.shape[2:], dtype=x.dtype), pads[2:])
    return _combine_windows(xp, ones, k, s, out, xp.add)


def avg_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True):
    """Average pooling of NCHW ``x``; ``exclusive`` leaves padding out of the divisor."""
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    total = _combine_windows(xp, _pad(xp, x, pads), k, s, out, xp.add)
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
