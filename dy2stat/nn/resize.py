"""Nearest and bilinear resizing of NCHW images, for ``Upsample``.

Written with ``gather`` along each spatial axis (and a weighted sum of two gathers for
bilinear), so gradients come from gather's rule. The sampling positions follow
Paddle's ``interpolate``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from dy2stat import ops
from dy2stat.nn.functional.common import constant_like


def resize(x, size=None, scale_factor=None, mode: str = "nearest", align_corners=False,
           align_mode: int = 0):
    """``x`` [N, C, H, W] resized to ``size`` ([h, w]) or by ``scale_factor``."""
    where = f"Upsample(mode={mode!r})"
    if mode not in ("nearest", "bilinear"):
        raise NotImplementedError(f"{where}: only 'nearest' and 'bilinear' are supported")
    if len(x.shape) != 4:
        raise ValueError(f"{where}: expected a 4-D NCHW input, got shape {list(x.shape)}")
    in_sizes = [int(d) for d in x.shape[2:]]
    if any(d < 0 for d in in_sizes):
        raise ValueError(f"{where}: the input's height and width must be known, got shape "
                         f"{list(x.shape)}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{where}: give exactly one of size and scale_factor")
    if size is not None:
        outs = [int(size)] * 2 if isinstance(size, numbers.Integral) else [int(s) for s in size]
        scales = [None, None]
    else:
        scales = ([float(scale_factor)] * 2 if isinstance(scale_factor, numbers.Number)
                  else [float(s) for s in scale_factor])
        outs = [int(math.floor(n * s)) for n, s in zip(in_sizes, scales)]
    for axis, (n, out, scale) in enumerate(zip(in_sizes, outs, scales), start=2):
        if mode == "nearest":
            x = ops.gather(x, _index(_nearest(n, out, scale, align_corners), x), axis=axis)
        else:
            low, high, frac = _linear(n, out, scale, align_corners, align_mode)
            shape = [1] * 4
            shape[axis] = out
            w = constant_like(frac.reshape(shape).astype(x.dtype), x)
            a = ops.gather(x, _index(low, x), axis=axis)
            b = ops.gather(x, _index(high, x), axis=axis)
            x = ops.add(a, ops.multiply(ops.subtract(b, a), w))
    return x


def _index(values: np.ndarray, like):
    return constant_like(values.astype(np.int64), like)


def _ratio(n: int, out: int, scale, align_corners: bool) -> float:
    if align_corners:
        return (n - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / scale if scale is not None else n / out


def _nearest(n, out, scale, align_corners) -> np.ndarray:
    ratio = _ratio(n, out, scale, align_corners)
    offset = 0.5 if align_corners else 0.0
    return np.minimum((ratio * np.arange(out) + offset).astype(np.int64), n - 1)


def _linear(n, out, scale, align_corners, align_mode):
    """(left index, right index, weight of the right) for each output position."""
    ratio = _ratio(n, out, scale, align_corners)
    dst = np.arange(out, dtype=np.float64)
    half_pixel = not align_corners and align_mode == 0
    src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0) if half_pixel else dst * ratio
    low = np.minimum(np.floor(src).astype(np.int64), n - 1)
    high = np.minimum(low + 1, n - 1)
    return low, high, src - low
