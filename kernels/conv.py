"""Convolution and pooling kernels over NCHW arrays (numpy or cupy).

Convolution is im2col + batched matmuls: the columns are copied once out of
a strided window view (``as_strided``, which NumPy and CuPy both have), and
the input gradient adds them back with one strided slice per kernel-window
position (a loop over kh*kw, never over the batch or pixels). Pooling combines
the kh*kw window views of the (padded) input the same way.

The ``*_chwn`` kernels take and give images laid out [C, H, W, N] (the batch
innermost), the layout the batch-minor column code works in anyway: a chain
of them (the ``batch_minor_layout`` pass) skips the transposes between layers,
and pooling's window ops run along the batch instead of a small map's rows.

The max pooling of 2x2 windows that tile an NCHW map on the host (the usual
pooling) and its gradient run compiled once called often (``compiled``: the same
selections in one loop, the same bits).
"""

import functools
import math
import numbers

import numpy

from dy2stat.kernels import compiled, select


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
SHORT_ROW = 16


def _batch_minor(xp, ow) -> bool:
    return ow < SHORT_ROW and _host_blas(xp)


def _host_blas(xp) -> bool:
    """Whether ``xp`` (None: the host) multiplies on the host: there many small products
    in cache beat one large one (OpenBLAS); on a GPU (cuBLAS) one batched product is
    fastest, and every extra call is a kernel launch."""
    return xp is None or xp.__name__ == "numpy"


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
    return _columns_chwn(xp, x.transpose(1, 2, 3, 0), kh, kw, stride, padding, dilation, out_hw)


def _columns_chwn(xp, xt, kh, kw, stride, padding, dilation, out_hw):
    """Columns [C*KH*KW, OH*OW*N] of ``xt`` laid out [C, H, W, N]: one copy out of a
    strided window view (two when ``xt`` needs padding or is not contiguous)."""
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, padding, dilation, out_hw
    c, h, w, n = xt.shape
    if ph or pw or not xt.flags.c_contiguous:
        padded = xp.zeros((c, h + 2 * ph, w + 2 * pw, n), dtype=xt.dtype)
        padded[:, ph : ph + h, pw : pw + w] = xt
        xt = padded
    s0, s1, s2, s3 = xt.strides
    view = xp.lib.stride_tricks.as_strided(
        xt, (c, kh, kw, oh, ow, n), (s0, s1 * dh, s2 * dw, s1 * sh, s2 * sw, s3)
    )
    return view.reshape(c * kh * kw, oh * ow * n)


def _positions_per_chunk(positions, n, columns=320):
    """The most output positions, dividing ``positions``, whose columns for all
    ``n`` images fit in ``columns`` (at least 1)."""
    return _largest_divisor(positions, columns // n)


def _largest_divisor(total, at_most):
    """The largest divisor of ``total`` that is at most ``at_most`` (at least 1)."""
    k = max(1, min(total, at_most))
    while total % k:
        k -= 1
    return k


def _by_group(a, groups):
    """[N, C, ...] as [N, G, C/G * ..., L] where L is the last axis."""
    return a.reshape(a.shape[0], groups, -1, a.shape[-1])


def _batch_minor_dy(dy_bm, groups):
    """``dy`` laid out [Cout, OH, OW, N] as [G, Cout/G, OH*OW*N]."""
    cout, oh, ow, n = dy_bm.shape
    return dy_bm.reshape(groups, cout // groups, oh * ow * n)


def conv2d(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """2-D convolution of NCHW ``x`` with filter ``w`` [Cout, Cin/groups, KH, KW]."""
    return conv2d_keeping_columns(xp, x, w, stride, padding, dilation, groups)[0]


def conv2d_keeping_columns(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                           groups=1):
    """``conv2d`` and the im2col columns it multiplied, which the filter gradient of the
    same input multiplies again (``conv2d_grad_filter_from_columns``): [N, C*KH*KW,
    OH*OW], or batch-minor [1, C*KH*KW, OH*OW*N] (see ``_batch_minor``)."""
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w.shape, stride, padding, dilation, groups
    )
    n = x.shape[0]
    cout, cg, kh, kw = w.shape
    # The columns are a value of the program, whose shape inference gives: they take the
    # host's layout on every device.
    if _batch_minor(None, ow):
        cols = _im2col_batch_minor(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
        y = _product_by_chunks(xp, w, cols, groups, oh * ow, n)
        y = xp.ascontiguousarray(y.transpose(4, 0, 1, 2, 3)).reshape(n, cout, oh, ow)
        return y, cols[None]
    wg = w.reshape(groups, cout // groups, cg * kh * kw)
    cols = _im2col(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
    return xp.matmul(wg, _by_group(cols, groups)).reshape(n, cout, oh, ow), cols


def conv2d_columns_shape(x_shape, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                         groups=1) -> tuple:
    """The shape of the columns ``conv2d_keeping_columns`` gives for the shape ``x_shape``
    of its input and ``w_shape`` of its filter (-1 where it depends on an unknown dim)."""
    n, c, h, w = x_shape
    kh, kw = w_shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    oh = -1 if h == -1 else _conv_out(h, kh, sh, ph, dh)
    ow = -1 if w == -1 else _conv_out(w, kw, sw, pw, dw)
    rows = -1 if -1 in (c, kh, kw) else c * kh * kw
    if ow != -1 and _batch_minor(None, ow):
        return (1, rows, -1 if -1 in (n, oh) else oh * ow * n)
    return (-1 if ow == -1 else n, rows, -1 if -1 in (oh, ow) else oh * ow)


def conv2d_chwn(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """conv2d of ``x`` laid out [C, H, W, N] (the batch innermost); the output is
    [Cout, OH, OW, N]. Chains of these need no transposes between layers."""
    c, h, wd, n = x.shape
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        (n, c, h, wd), w.shape, stride, padding, dilation, groups
    )
    cols = _columns_chwn(xp, x, w.shape[2], w.shape[3], stride, padding, dilation, (oh, ow))
    y = _product_by_chunks(xp, w, cols, groups, oh * ow, n)
    return xp.ascontiguousarray(y).reshape(w.shape[0], oh, ow, n)


def _product_by_chunks(xp, w, cols, groups, positions, n):
    """``w`` times batch-minor columns [C*KH*KW, positions*N], as a view
    [G, Cout/G, positions/k, k, N]: one product per chunk of k output
    positions (all N images), so a chunk of columns stays in cache, which makes
    the products ~1.4x faster than one."""
    cout, cg, kh, kw = w.shape
    k = _positions_per_chunk(positions, n) if _host_blas(xp) else positions
    wg = w.reshape(groups, cout // groups, cg * kh * kw)
    chunks = cols.reshape(groups, cg * kh * kw, positions // k, k * n).transpose(0, 2, 1, 3)
    y = xp.matmul(wg[:, None], chunks)  # [G, chunk, Cout/G, k*N]
    return y.reshape(groups, positions // k, cout // groups, k, n).transpose(0, 2, 1, 3, 4)


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
    """Gradient of conv2d with respect to its input (only ``x_shape_ref.shape`` is read)."""
    n, c, h, wd = x_shape_ref.shape
    dx = _grad_input_chwn(xp, (c, h, wd, n), w, dy.transpose(1, 2, 3, 0), stride, padding,
                          dilation, groups)
    return xp.ascontiguousarray(dx.transpose(3, 0, 1, 2))


def conv2d_grad_input_chwn(
    xp, x_shape_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """``conv2d_grad_input`` with ``dy`` and the result laid out [C, H, W, N]."""
    return _grad_input_chwn(xp, tuple(x_shape_ref.shape), w, dy, stride, padding, dilation,
                            groups)


def _grad_input_chwn(xp, x_shape, w, dy, stride, padding, dilation, groups):
    """The input gradient [C, H, W, N] (maybe a view) from ``dy`` laid out [Cout, OH, OW, N].

    Made batch-minor ([G, C/G, H, W, N]), so every add runs along W*N
    contiguous values. With stride 1 along W (the usual case) one product
    gives each kernel row's whole contribution (``_rows_of_input_gradient``);
    otherwise each kernel-window position's columns are added in turn.
    """
    c, h, wd, n = x_shape
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _conv_geometry(
        (n, c, h, wd), w.shape, stride, padding, dilation, groups
    )
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
    return dxpad.reshape(c, h + 2 * ph, wd + 2 * pw, n)[:, ph : ph + h, pw : pw + wd]


def _rows_of_input_gradient(xp, w, dy, dw, groups, wp):
    """Each kernel row's contribution to the padded input gradient when the
    stride along W is 1: [G, KH, C/G, OH, Wp, N], one product for all of them.

    Row i at padded column x gets sum over (co, j) of w[co, c, i, j] *
    dy[co, x - j*dw] (``dy`` laid out [Cout, OH, OW, N]): dy padded along W and
    viewed at its kw shifts [G, Cout/G * KW, OH*Wp*N] (one copy) times the
    filter as [G, KH * C/G, Cout/G * KW], its kw axis reversed to match the
    shifts. Fewer, larger calls than adding KH*KW column blocks: ~10% faster
    on LeNet's second convolution, though the product does more work where
    the padded width exceeds the output's.
    """
    cout, oh, ow, n = dy.shape
    _, cg, kh, kw = w.shape
    cog, reach = cout // groups, dw * (kw - 1)
    dyp = xp.zeros((groups, cog, oh, ow + 2 * reach, n), dtype=dy.dtype)
    dyp[:, :, :, reach : reach + ow] = dy.reshape(groups, cog, oh, ow, n)
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
    kh, kw = w_shape[2:]
    minor = _batch_minor(xp, ow)
    if minor:
        cols = _im2col_batch_minor(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
    else:
        cols = _im2col(xp, x, kh, kw, stride, padding, dilation, (oh, ow))
    return _filter_from_columns(xp, cols, dy, w_shape, groups, minor)


def conv2d_grad_filter_from_columns(xp, cols, dy, w_shape_ref, stride=(1, 1),
                                    padding=(0, 0), dilation=(1, 1), groups=1):
    """``conv2d_grad_filter`` from the columns ``conv2d_keeping_columns`` gave for the
    same input (the same products, without copying the columns again)."""
    minor = _batch_minor(None, dy.shape[3])  # the layout conv2d_keeping_columns gave
    cols = cols[0] if minor else cols
    return _filter_from_columns(xp, cols, dy, tuple(w_shape_ref.shape), groups, minor)


def _filter_from_columns(xp, cols, dy, w_shape, groups, minor):
    n, cout, oh, ow = dy.shape
    if minor:
        return _filter_product(xp, cols, dy.transpose(1, 2, 3, 0), w_shape, groups)
    dyg = _by_group(dy.reshape(n, cout, oh * ow), groups)
    return xp.matmul(dyg, _by_group(cols, groups).transpose(0, 1, 3, 2)).sum(
        axis=0).reshape(w_shape)


def conv2d_grad_filter_chwn(
    xp, x, dy, w_shape_ref, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """``conv2d_grad_filter`` with ``x`` and ``dy`` laid out [C, H, W, N]."""
    w_shape = tuple(w_shape_ref.shape)
    c, h, wd, n = x.shape
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        (n, c, h, wd), w_shape, stride, padding, dilation, groups
    )
    cols = _columns_chwn(xp, x, w_shape[2], w_shape[3], stride, padding, dilation, (oh, ow))
    return _filter_product(xp, cols, dy, w_shape, groups)


def _filter_product(xp, cols, dy_bm, w_shape, groups):
    """The filter gradient from batch-minor columns and ``dy`` laid out [Cout, OH, OW, N]."""
    g, columns = groups, cols.shape[1]
    cols = cols.reshape(g, cols.shape[0] // g, columns)
    dyg = _batch_minor_dy(dy_bm, g)
    k, cog = cols.shape[1], dyg.shape[1]
    # OpenBLAS runs a product this small along a long inner dimension 2-5x slower
    # than the same product in pieces of ~512 columns, summed after.
    skinny = k * cog < _SKINNY and _host_blas(xp)
    pieces = _largest_divisor(columns, columns // 512) if skinny else 1
    if pieces > 1:
        part = columns // pieces
        dw = xp.matmul(cols.reshape(g, k, pieces, part).transpose(0, 2, 1, 3),
                       dyg.reshape(g, cog, pieces, part).transpose(0, 2, 3, 1)).sum(axis=1)
    else:
        # cols @ dy^T, transposed after: BLAS runs this product ~1.7x faster than dy @ cols^T
        dw = xp.matmul(cols, dyg.transpose(0, 2, 1))
    return xp.ascontiguousarray(dw.transpose(0, 2, 1)).reshape(w_shape)


# Filter gradients with fewer elements per group (C/G*KH*KW times Cout/G) are
# summed over pieces of the columns (measured: LeNet's first layer, 9 x 6).
_SKINNY = 2048


def _pool_out(size, k, s, p, ceil_mode):
    """Output size and the extra right padding ceil_mode needs along one axis."""
    span = size + 2 * p - k
    if span < 0:
        raise ValueError(f"pool2d: window {k} does not fit input {size} + pad {p}")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window would start in the padding
        out -= 1
    return out, max(0, (out - 1) * s + k - (size + 2 * p))


def _pool_geometry(x_shape, kernel_size, stride, padding, ceil_mode, chwn=False):
    """(kh, kw), (sh, sw), (oh, ow) and the pad widths for xp.pad of an NCHW
    (``chwn``: [C, H, W, N]) input."""
    (kh, kw) = _pair(kernel_size)
    (sh, sw) = _pair(kernel_size if stride is None else stride)
    (ph, pw) = _pair(padding)
    h, w = x_shape[1:3] if chwn else x_shape[2:]
    oh, eh = _pool_out(h, kh, sh, ph, ceil_mode)
    ow, ew = _pool_out(w, kw, sw, pw, ceil_mode)
    spatial = ((ph, ph + eh), (pw, pw + ew))
    pads = ((0, 0), *spatial, (0, 0)) if chwn else ((0, 0), (0, 0), *spatial)
    return (kh, kw), (sh, sw), (oh, ow), pads


def _windows(k, s, out, chwn=False):
    """The index of each window position into a padded NCHW (or HW; ``chwn``:
    [C, H, W, N]) array."""
    (kh, kw), (sh, sw), (oh, ow) = k, s, out
    lead = slice(None) if chwn else Ellipsis
    for i in range(kh):
        for j in range(kw):
            yield (lead, _window(i, sh, oh), _window(j, sw, ow))


def _combine_windows(xp, a, k, s, out, ufunc, chwn=False):
    """``ufunc`` over every window position of ``a``, into one new array."""
    windows = [a[win] for win in _windows(k, s, out, chwn)]
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
    return _max_pool(xp, x, kernel_size, stride, padding, ceil_mode, chwn=False)


def max_pool2d_chwn(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """``max_pool2d`` of ``x`` laid out [C, H, W, N]: every window op runs along the
    batch, a longer inner loop than a small map's rows."""
    return _max_pool(xp, x, kernel_size, stride, padding, ceil_mode, chwn=True)


def _max_pool(xp, x, kernel_size, stride, padding, ceil_mode, chwn):
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode, chwn)
    if (k == s == (2, 2) and not chwn and xp is numpy and x.dtype.char in "fd"
            and not any(a or b for a, b in pads) and x.shape[2:] == (2 * out[0], 2 * out[1])):
        y = _pool_2x2(x)
        if y is not None:
            return y
    xpad = _pad(xp, x, pads, _lowest(xp, x.dtype))
    return _combine_windows(xp, xpad, k, s, out, xp.maximum, chwn)


def max_pool2d_grad(xp, x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Gradient of max_pool2d: each window's dy goes to its first maximum."""
    return _max_pool_grad(xp, x, y, dy, kernel_size, stride, padding, ceil_mode, chwn=False)


def max_pool2d_grad_chwn(xp, x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    """``max_pool2d_grad`` with every array laid out [C, H, W, N]."""
    return _max_pool_grad(xp, x, y, dy, kernel_size, stride, padding, ceil_mode, chwn=True)


def _max_pool_grad(xp, x, y, dy, kernel_size, stride, padding, ceil_mode, chwn):
    k, s, out, pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode, chwn)
    (ph, eh), (pw, ew) = pads[1:3] if chwn else pads[2:]
    spatial = x.shape[1:3] if chwn else x.shape[2:]
    # Windows that neither overlap nor leave gaps write each element once.
    tiled = (s == k and not (ph or eh or pw or ew)
             and spatial == (out[0] * k[0], out[1] * k[1]))
    if (tiled and k == (2, 2) and not chwn and xp is numpy and y.flags.c_contiguous
            and x.dtype == y.dtype == dy.dtype and x.dtype.char in "fd"):
        dx = _pool_grad_2x2(x, y, dy)
        if dx is not None:
            return dx
    xpad = _pad(xp, x, pads, _lowest(xp, x.dtype))
    zero = xp.zeros((), dtype=dy.dtype)
    if tiled and chwn:
        dx = _tiled_grad_chwn(xp, xpad, y, dy, k, zero)
        if dx is not None:
            return dx
    dxpad = (xp.empty if tiled else xp.zeros)(xpad.shape, dtype=dy.dtype)
    windows = list(_windows(k, s, out, chwn))
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
    h, w = x.shape[1:3] if chwn else x.shape[2:]
    crop = (slice(ph, ph + h), slice(pw, pw + w))
    return dxpad[(slice(None), *crop)] if chwn else dxpad[(slice(None), slice(None), *crop)]


def pool_2x2_loop(x, y):
    """Max pooling of [M, H, W] ``x`` in 2x2 windows that tile it, into ``y``: each
    window's elements combined row by row as ``numpy.maximum`` combines the window views
    (``_combine_windows``): the running maximum is kept when it is greater or NaN, else
    the next element is taken (so of equal values, -0.0 and 0.0 included, the later
    one; of NaNs, the first). Compiled by ``_compile_pool_2x2``: one pass instead of
    three strided ones, ~2.5x faster on LeNet's maps."""
    m, oh, ow = y.shape
    for a in range(m):
        for i in range(oh):
            r0, r1 = 2 * i, 2 * i + 1
            for j in range(ow):
                c0, c1 = 2 * j, 2 * j + 1
                top = x[a, r0, c0]
                v = x[a, r0, c1]
                top = top if (top > v or top != top) else v
                v = x[a, r1, c0]
                top = top if (top > v or top != top) else v
                v = x[a, r1, c1]
                top = top if (top > v or top != top) else v
                y[a, i, j] = top


def _compile_pool_2x2():
    signatures = [f"void({t}[:, :, ::1], {t}[:, :, ::1])" for t in ("f4", "f8")]
    return compiled.numba_njit()(signatures, cache=False, nogil=True)(pool_2x2_loop)


def _pool_2x2(x):
    """The compiled 2x2 max pooling of NCHW ``x``, or None while it is not built."""
    loop = compiled.ready("max_pool2d_2x2", _compile_pool_2x2)
    if loop is None:
        return None
    n, c, h, w = x.shape
    y = numpy.empty((n, c, h // 2, w // 2), dtype=x.dtype)
    loop(numpy.ascontiguousarray(x).reshape(n * c, h, w), y.reshape(n * c, h // 2, w // 2))
    return y


def pool_grad_2x2_loop(x, y, dy, dx):
    """The max-pool gradient of [M, H, W] ``x`` in 2x2 windows that tile it, into
    ``dx``: each window's ``dy`` goes to its first element equal to the window's
    maximum ``y`` (row by row, as ``_windows`` orders them), zeros elsewhere -- what the
    NumPy form selects. Branch-free (which element holds a maximum is random, and
    branches on it mispredict): compiled by ``_compile_pool_grad_2x2``, ~2x faster
    than the NumPy form on LeNet's maps."""
    m, oh, ow = y.shape
    zero = dx.dtype.type(0)
    for a in range(m):
        for i in range(oh):
            r0, r1 = 2 * i, 2 * i + 1
            for j in range(ow):
                c0, c1 = 2 * j, 2 * j + 1
                top, g = y[a, i, j], dy[a, i, j]
                h0 = x[a, r0, c0] == top
                h1 = (x[a, r0, c1] == top) & (not h0)
                free = not (h0 | h1)
                h2 = (x[a, r1, c0] == top) & free
                h3 = (x[a, r1, c1] == top) & free & (not h2)
                dx[a, r0, c0] = g if h0 else zero
                dx[a, r0, c1] = g if h1 else zero
                dx[a, r1, c0] = g if h2 else zero
                dx[a, r1, c1] = g if h3 else zero


def _compile_pool_grad_2x2():
    signatures = [f"void({t}[:, :, ::1], {t}[:, :, ::1], {t}[:, :, ::1], {t}[:, :, ::1])"
                  for t in ("f4", "f8")]
    return compiled.numba_njit()(signatures, cache=False, nogil=True)(pool_grad_2x2_loop)


def _pool_grad_2x2(x, y, dy):
    """The compiled 2x2 gradient of NCHW ``x``, or None while it is not built."""
    loop = compiled.ready("max_pool2d_grad_2x2", _compile_pool_grad_2x2)
    if loop is None:
        return None
    n, c, h, w = x.shape
    dx = numpy.empty(x.shape, dtype=dy.dtype)
    flat = (n * c, h // 2, w // 2)
    loop(numpy.ascontiguousarray(x).reshape(n * c, h, w), y.reshape(flat),
         numpy.ascontiguousarray(dy).reshape(flat), dx.reshape(n * c, h, w))
    return dx


def _tiled_grad_chwn(xp, x, y, dy, k, zero):
    """The max-pool gradient of [C, H, W, N] ``x`` cut into windows that neither
    overlap nor leave gaps, in a few calls that run along the batch (one
    compare, one count, one select: on two threads at once, far fewer GIL
    hand-offs than a few calls per window position); None when some window
    holds its maximum twice (or a NaN), which the general path resolves."""
    (kh, kw), (c, oh, ow, n) = k, y.shape
    hit = x.reshape(c, oh, kh, ow, kw, n) == y[:, :, None, :, None, :]
    if int(xp.count_nonzero(hit)) != y.size:
        return None
    return select.where(xp, hit, dy[:, :, None, :, None, :], zero).reshape(x.shape)


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
