"""Padding and resizing kernels: ``pad`` (constant/reflect/replicate/circular) and
``interpolate`` (nearest/bilinear), with their adjoints.

Padding is given per dim as a flat list ``[before_0, after_0, before_1, ...]``.
Resizing works on two spatial axes; each axis is resampled by an (out x in)
weight matrix, so the adjoint multiplies by the transposes.
"""

import numpy

_NUMPY_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
                "circular": "wrap"}


def pad(xp, x, paddings, mode="constant", value=0.0):
    pairs = [(paddings[2 * i], paddings[2 * i + 1]) for i in range(x.ndim)]
    if mode == "constant":
        return xp.pad(x, pairs, mode="constant", constant_values=x.dtype.type(value))
    return xp.pad(x, pairs, mode=_NUMPY_MODES[mode])


def _fold(xp, g, axis, before, after, n, mode):
    """The gradient along one padded ``axis``: the middle ``n`` entries plus the
    border entries added onto the elements they copied."""

    def at(start, stop):
        return (slice(None),) * axis + (slice(start, stop),)

    core = g[at(before, before + n)].copy()
    head, tail = g[at(0, before)], g[at(before + n, before + n + after)]
    if mode == "reflect":  # the border mirrors x[1:before+1] and x[n-1-after:n-1]
        core[at(1, before + 1)] += xp.flip(head, axis)
        core[at(n - 1 - after, n - 1)] += xp.flip(tail, axis)
    elif mode == "replicate":  # the border repeats the first and the last element
        core[at(0, 1)] += head.sum(axis=axis, keepdims=True)
        core[at(n - 1, n)] += tail.sum(axis=axis, keepdims=True)
    elif mode == "circular":  # the border wraps around
        core[at(n - before, n)] += head
        core[at(0, after)] += tail
    return core


def pad_grad(xp, g, x, paddings, mode="constant"):
    """Fold the padded border of ``g`` back onto the elements it copied, dim by dim."""
    for axis in range(g.ndim):
        before, after = paddings[2 * axis], paddings[2 * axis + 1]
        if before or after:
            g = _fold(xp, g, axis, before, after, x.shape[axis], mode)
    return g


def pad_check(mode, dim, before, after) -> str | None:
    """Why padding a dim of size ``dim`` is impossible in ``mode`` (None: it is fine)."""
    if before < 0 or after < 0:
        return "paddings must be >= 0"
    if mode == "reflect" and dim >= 0 and (before >= dim or after >= dim):
        return f"reflect padding must be smaller than the dim ({dim})"
    if mode in ("replicate", "circular") and dim == 0 and (before or after):
        return f"{mode} padding needs a non-empty dim"
    if mode == "circular" and dim >= 0 and (before > dim or after > dim):
        return f"circular padding must be at most the dim ({dim})"
    return None


# ------------------------------------------------------------------- resizing


def out_size(in_size, size, scale):
    """The resized length: ``size`` when given, else ``floor(in_size * scale)``."""
    if size is not None:
        return int(size)
    return int(in_size * scale) if in_size >= 0 else -1


def _ratio(in_size, n_out, scale, align_corners):
    """Input positions per output position (float32 arithmetic, as the reference does)."""
    f32 = numpy.float32
    if n_out <= 1:
        return f32(0)
    if align_corners:
        return f32(in_size - 1) / f32(n_out - 1)
    return f32(1.0 / scale) if scale else f32(in_size) / f32(n_out)


def weights(in_size, n_out, scale, mode, align_corners, align_mode, dtype):
    """The (n_out x in_size) matrix that resamples one axis (on the host)."""
    ratio = _ratio(in_size, n_out, scale, align_corners)
    k = numpy.arange(n_out, dtype=numpy.float32)
    w = numpy.zeros((n_out, in_size), dtype=dtype)
    rows = numpy.arange(n_out)
    if mode == "nearest":
        src = ratio * k + numpy.float32(0.5) if align_corners else ratio * k
        w[rows, numpy.minimum(src.astype(numpy.int64), in_size - 1)] = 1
        return w
    half = numpy.float32(0.5)
    centered = align_mode == 0 and not align_corners
    src = numpy.maximum(ratio * (k + half) - half if centered else ratio * k, numpy.float32(0))
    low = numpy.minimum(src.astype(numpy.int64), in_size - 1)
    high = numpy.minimum(low + 1, in_size - 1)
    frac = (src - low).astype(dtype)
    numpy.add.at(w, (rows, low), 1 - frac)
    numpy.add.at(w, (rows, high), frac)
    return w


def _spatial(ndim, channel_last):
    return (ndim - 3, ndim - 2) if channel_last else (ndim - 2, ndim - 1)


def _resample(xp, x, mats, channel_last):
    """Apply one weight matrix per spatial axis (matrix @ the axis)."""
    for axis, w in zip(_spatial(x.ndim, channel_last), mats):
        x = xp.moveaxis(xp.tensordot(xp.asarray(w), x, axes=([1], [axis])), 0, axis)
    return x


def _matrices(in_sizes, out_sizes, scale, mode, align_corners, align_mode, dtype):
    scales = scale if scale is not None else (None, None)
    return [weights(i, o, s, mode, align_corners, align_mode, dtype)
            for i, o, s in zip(in_sizes, out_sizes, scales)]


def interpolate(xp, x, size=None, scale=None, mode="nearest", align_corners=False,
                align_mode=0, channel_last=False):
    axes = _spatial(x.ndim, channel_last)
    in_sizes = [x.shape[a] for a in axes]
    sizes = size if size is not None else (None, None)
    scales = scale if scale is not None else (None, None)
    out_sizes = [out_size(i, s, f) for i, s, f in zip(in_sizes, sizes, scales)]
    dtype = x.dtype if x.dtype.kind == "f" else numpy.float64
    mats = _matrices(in_sizes, out_sizes, scale, mode, align_corners, align_mode, dtype)
    if mode == "nearest":  # a gather: exact for every dtype
        for axis, w in zip(axes, mats):
            x = xp.take(x, xp.asarray(w.argmax(axis=1)), axis=axis)
        return x
    return _resample(xp, x, mats, channel_last)


def interpolate_grad(xp, g, x, size=None, scale=None, mode="nearest", align_corners=False,
                     align_mode=0, channel_last=False):
    axes = _spatial(x.ndim, channel_last)
    in_sizes = [x.shape[a] for a in axes]
    out_sizes = [g.shape[a] for a in axes]
    mats = _matrices(in_sizes, out_sizes, scale, mode, align_corners, align_mode, g.dtype)
    return _resample(xp, g, [w.T for w in mats], channel_last)
