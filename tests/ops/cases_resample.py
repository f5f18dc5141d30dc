"""Cases for runtime/ops/resample.py: references computed element by element."""

import numpy as np

from tests.ops.harness import Case, ints, randn


def _source(mode, p, n):
    """Which input element output position ``p`` (counted from the first input
    element) copies along a dim of size ``n``; None: the padding value."""
    if 0 <= p < n:
        return p
    if mode == "constant":
        return None
    if mode == "reflect":
        return -p if p < 0 else 2 * (n - 1) - p
    if mode == "replicate":
        return min(max(p, 0), n - 1)
    return p % n  # circular


def _pad_map(shape, paddings, mode):
    out_shape = tuple(d + paddings[2 * i] + paddings[2 * i + 1] for i, d in enumerate(shape))
    for out in np.ndindex(out_shape):
        src = [_source(mode, j - paddings[2 * i], shape[i]) for i, j in enumerate(out)]
        yield out, None if None in src else tuple(src)


def _pad_ref(x, paddings, mode="constant", value=0.0):
    shape = tuple(d + paddings[2 * i] + paddings[2 * i + 1] for i, d in enumerate(x.shape))
    out = np.full(shape, value, x.dtype)
    for o, src in _pad_map(x.shape, paddings, mode):
        if src is not None:
            out[o] = x[src]
    return out


def _pad_grad_ref(g, x, paddings, mode="constant"):
    out = np.zeros(x.shape)
    for o, src in _pad_map(x.shape, paddings, mode):
        if src is not None:
            out[src] += g[o]
    return out


def _taps(in_size, n_out, scale, mode, align_corners, align_mode):
    """For each output position: [(input position, weight)], by Paddle's formulas."""
    f32 = np.float32
    if n_out > 1:
        ratio = (f32(in_size - 1) / f32(n_out - 1) if align_corners
                 else f32(1.0 / scale) if scale else f32(in_size) / f32(n_out))
    else:
        ratio = f32(0)
    taps = []
    for k in range(n_out):
        if mode == "nearest":
            src = int(ratio * f32(k) + f32(0.5)) if align_corners else int(ratio * f32(k))
            taps.append([(min(src, in_size - 1), 1.0)])
            continue
        if align_mode == 0 and not align_corners:
            src = max(ratio * (f32(k) + f32(0.5)) - f32(0.5), f32(0))
        else:
            src = ratio * f32(k)
        low = int(src)
        high = low + (1 if low < in_size - 1 else 0)
        frac = float(src - low)
        taps.append([(low, 1 - frac), (high, frac)])
    return taps


def _interpolate_ref(x, size=None, scale=None, mode="nearest", align_corners=False,
                     align_mode=0, channel_last=False):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    h, w = x.shape[2:]
    out_h = size[0] if size else int(h * scale[0])
    out_w = size[1] if size else int(w * scale[1])
    rows = _taps(h, out_h, scale and scale[0], mode, align_corners, align_mode)
    cols = _taps(w, out_w, scale and scale[1], mode, align_corners, align_mode)
    out = np.zeros(x.shape[:2] + (out_h, out_w), x.dtype)
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            for r, wr in row:
                for c, wc in col:
                    out[:, :, i, j] += (wr * wc * x[:, :, r, c]).astype(x.dtype)
    return out.transpose(0, 2, 3, 1) if channel_last else out


def _interpolate_grad_ref(g, x, **attrs):
    """The adjoint, column by column: d out[k] / d x[i] for each basis input."""
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        basis = np.zeros(x.shape)
        basis[idx] = 1.0
        out[idx] = (_interpolate_ref(basis, **attrs) * g).sum()
    return out


_IMG = randn(1, 2, 3, 4)
CASES = [
    Case("pad", [randn(2, 3)], {"paddings": [1, 0, 2, 1], "value": 0.5}, ref=_pad_ref,
         double=False),
    Case("pad", [ints(0, 9, 2, 3)], {"paddings": [0, 1, 1, 1], "value": 7.0}, ref=_pad_ref,
         grad=False, name="int"),
    *[Case("pad", [randn(1, 2, 3, 4)], {"paddings": [0, 0, 0, 0, 2, 1, 3, 2], "mode": mode},
           ref=_pad_ref, name=mode) for mode in ("reflect", "replicate", "circular")],
    *[Case("pad_grad", [randn(2, 3, 9), randn(2, 3, 4)],
           {"paddings": [0, 0, 0, 0, 3, 2], "mode": mode}, ref=_pad_grad_ref,
           grad_inputs=(0,), name=mode)
      for mode in ("constant", "reflect", "replicate", "circular")],
    Case("interpolate", [_IMG], {"size": [5, 7]}, ref=_interpolate_ref),
    Case("interpolate", [_IMG], {"scale": [2.0, 1.5]}, ref=_interpolate_ref, name="scale"),
    Case("interpolate", [randn(1, 1, 6, 5)], {"size": [4, 3]}, ref=_interpolate_ref,
         name="down"),
    Case("interpolate", [_IMG], {"size": [5, 7], "mode": "bilinear"}, ref=_interpolate_ref,
         name="bilinear"),
    Case("interpolate", [_IMG], {"size": [5, 7], "mode": "bilinear", "align_corners": True},
         ref=_interpolate_ref, name="bilinear-corners"),
    Case("interpolate", [_IMG], {"scale": [2.0, 0.5], "mode": "bilinear", "align_mode": 1},
         ref=_interpolate_ref, name="bilinear-mode1"),
    Case("interpolate", [randn(1, 3, 4, 2)],
         {"size": [4, 6], "mode": "bilinear", "channel_last": True},
         ref=_interpolate_ref, name="nhwc"),
    Case("interpolate", [ints(0, 9, 1, 1, 2, 3)], {"scale": [2.0, 2.0]},
         ref=_interpolate_ref, grad=False, name="int-nearest"),
    Case("interpolate_grad", [randn(1, 2, 5, 7), _IMG], {"size": [5, 7], "mode": "bilinear"},
         ref=_interpolate_grad_ref, grad_inputs=(0,)),
    Case("interpolate_grad", [randn(1, 2, 6, 6), _IMG], {"scale": [2.0, 1.5]},
         ref=_interpolate_grad_ref, grad_inputs=(0,), name="nearest"),
]
