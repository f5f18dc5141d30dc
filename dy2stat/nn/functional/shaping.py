"""Functions that reshape a layer's data: ``one_hot``, ``sequence_mask``, ``pad``
and ``interpolate`` (Paddle 2.x signatures)."""

from __future__ import annotations

from dy2stat.dispatch import apply
from dy2stat.ops import _dtype_name, one_hot
from dy2stat.runtime.ops.resample import PAD_MODES, RESIZE_MODES

__all__ = ["interpolate", "one_hot", "pad", "sequence_mask"]


def sequence_mask(x, maxlen=None, dtype="int64"):
    """``mask[..., j] = j < x[...]`` for ``j < maxlen`` (default: the largest length)."""
    if maxlen is None or isinstance(maxlen, int):
        return apply("sequence_mask", x, None, limit=maxlen, dtype=_dtype_name(dtype))
    return apply("sequence_mask", x, maxlen, dtype=_dtype_name(dtype))


def pad(x, pad, mode="constant", value=0.0, data_format="NCHW"):
    """Pad ``x`` as Paddle does. ``pad`` of length ``2 * x.ndim`` (constant mode) pads
    every dim from the first: ``[before_0, after_0, before_1, ...]``. Otherwise it pads
    the spatial dims of a 3-D/4-D/5-D input (by ``data_format``) from the last:
    ``[left, right, top, bottom, front, back]``. Modes: constant, reflect,
    replicate, circular."""
    if mode not in PAD_MODES:
        raise ValueError(f"pad: unknown mode {mode!r} (modes: {', '.join(PAD_MODES)})")
    pad = _ints(pad, "pad")
    ndim = len(x.shape)
    if mode == "constant" and len(pad) == 2 * ndim:
        paddings = pad
    elif len(pad) == 2 * (ndim - 2) and 3 <= ndim <= 5:
        channel_last = data_format[-1] == "C"
        spatial = list(range(1, ndim - 1)) if channel_last else list(range(2, ndim))
        paddings = [0] * (2 * ndim)
        for k, axis in enumerate(reversed(spatial)):  # the pad list starts at the last dim
            paddings[2 * axis], paddings[2 * axis + 1] = pad[2 * k], pad[2 * k + 1]
    else:
        raise ValueError(
            f"pad: {len(pad)} pad values for a {ndim}-D input in {mode} mode; give "
            f"{2 * ndim} (constant mode: every dim) or {2 * (ndim - 2)} (the spatial dims "
            "of a 3-D, 4-D or 5-D input)")
    return apply("pad", x, paddings=paddings, mode=mode, value=float(value))


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=False,
                align_mode=0, data_format="NCHW"):
    """Resize the two spatial dims of a 4-D ``x`` (NCHW or NHWC) to ``size`` or by
    ``scale_factor``, with ``mode`` "nearest" or "bilinear" (Paddle's
    ``align_corners`` and ``align_mode``)."""
    mode = mode.lower()
    if mode not in RESIZE_MODES:
        raise ValueError(f"interpolate: mode {mode!r} is not supported "
                         f"(modes: {', '.join(RESIZE_MODES)})")
    if align_corners and mode == "nearest":
        raise ValueError("interpolate: align_corners is for bilinear resizing; leave it "
                         "False with mode='nearest'")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"interpolate: data_format must be 'NCHW' or 'NHWC', got "
                         f"{data_format!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    attrs = {"mode": mode, "align_corners": bool(align_corners), "align_mode": int(align_mode),
             "channel_last": data_format == "NHWC"}
    if size is not None:
        attrs["size"] = _pair(_ints(size, "interpolate: size"))
    else:
        factors = scale_factor if isinstance(scale_factor, (list, tuple)) else [scale_factor]
        attrs["scale"] = _pair([float(f) for f in factors])
    return apply("interpolate", x, **attrs)


def _pair(values):
    return list(values) * 2 if len(values) == 1 else list(values)


def _ints(values, where) -> list:
    """A list of Python ints from an int, a list of ints or an eager tensor."""
    items = [values] if isinstance(values, int) else values
    if getattr(items, "is_static", False) or any(getattr(v, "is_static", False)
                                                  for v in items):
        raise TypeError(f"{where} must be Python ints in converted code (the output's shape "
                        "depends on them)")
    if hasattr(items, "numpy"):
        items = items.numpy().reshape(-1).tolist()
    return [int(v) for v in items]
