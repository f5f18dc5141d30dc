"""Padding and resizing: ``pad`` and ``interpolate``, with their gradients.

Both are linear in X; their gradient ops are the adjoints, and the adjoint of
an adjoint is the forward op again (so second derivatives work).
"""

from __future__ import annotations

from dy2stat.kernels import resample
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import NONE, NUMBER, AttrType, Meta, defop, ints

fmt = shapes.fmt
PAD_MODES = ("constant", "reflect", "replicate", "circular")
RESIZE_MODES = ("nearest", "bilinear")


# --------------------------------------------------------------------- pad


def _pad_infer(x, paddings, mode="constant", value=0.0):
    if mode not in PAD_MODES:
        raise ValueError(f"pad: unknown mode {mode!r} (modes: {', '.join(PAD_MODES)})")
    if len(paddings) != 2 * len(x.shape):
        raise ValueError(f"pad: {len(paddings)} paddings for a {len(x.shape)}-D input "
                         f"{fmt(x.shape)} (expected 2 per dim)")
    out = []
    for i, d in enumerate(x.shape):
        before, after = paddings[2 * i], paddings[2 * i + 1]
        reason = resample.pad_check(mode, d, before, after)
        if reason:
            raise ValueError(f"pad: dim {i} of {fmt(x.shape)} by ({before}, {after}): {reason}")
        out.append(d + before + after if d >= 0 else -1)
    return Meta(tuple(out), x.dtype)


defop(
    "pad",
    attrs={"paddings": [], "mode": "constant", "value": 0.0},
    attr_types={"paddings": ints()},
    kernel=resample.pad,
    infer=_pad_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("pad_grad", douts[0], ins[0], paddings=attrs["paddings"], mode=attrs["mode"])],
    doc="X padded by paddings ([before_0, after_0, before_1, ...]) in mode "
        "(constant: value; reflect; replicate; circular).",
)
defop(
    "pad_grad",
    inputs=("G", "X"),
    attrs={"paddings": [], "mode": "constant"},
    attr_types={"paddings": ints()},
    kernel=resample.pad_grad,
    infer=lambda g, x, paddings, mode="constant": Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("pad", douts[0], paddings=attrs["paddings"], mode=attrs["mode"]), None],
    no_grad=("X",),
    dtypes={"G": dtypes.FLOATS},
    doc="The border of G folded back onto X's elements (the gradient of pad).",
)

# ------------------------------------------------------------- interpolate


def _interpolate_infer(x, size=None, scale=None, mode="nearest", align_corners=False,
                       align_mode=0, channel_last=False):
    if mode not in RESIZE_MODES:
        raise ValueError(f"interpolate: unknown mode {mode!r} "
                         f"(modes: {', '.join(RESIZE_MODES)})")
    if len(x.shape) != 4:
        raise ValueError(f"interpolate: the input must be 4-D (N, C, H, W or N, H, W, C), "
                         f"got shape {fmt(x.shape)}")
    if mode == "bilinear" and x.dtype not in dtypes.FLOATS:
        raise TypeError(f"interpolate: bilinear resizing needs a float input, got {x.dtype}")
    if (size is None) == (scale is None):
        raise ValueError("interpolate: give exactly one of size and scale")
    axes = (1, 2) if channel_last else (2, 3)
    out = list(x.shape)
    for k, axis in enumerate(axes):
        n = resample.out_size(x.shape[axis], None if size is None else size[k],
                              None if scale is None else scale[k])
        if n == 0 or n < -1:
            raise ValueError(f"interpolate: resizing {fmt(x.shape)} gives an empty axis")
        out[axis] = n
    return Meta(tuple(out), x.dtype)


_SCALES = AttrType("a list of numbers", lambda v: isinstance(v, (list, tuple))
                   and all(NUMBER.accepts(x) for x in v))
_INTERPOLATE_TYPES = {"size": NONE | ints(1, 2), "scale": NONE | NUMBER | _SCALES}


def _kernel_attrs(attrs):
    return {k: attrs[k] for k in ("size", "scale", "mode", "align_corners", "align_mode",
                                  "channel_last")}


defop(
    "interpolate",
    attrs={"size": None, "scale": None, "mode": "nearest", "align_corners": False,
           "align_mode": 0, "channel_last": False},
    attr_types=_INTERPOLATE_TYPES,
    kernel=resample.interpolate,
    infer=_interpolate_infer,
    eager_infer=True,  # which dtypes it takes depends on the mode
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("interpolate_grad", douts[0], ins[0], **_kernel_attrs(attrs))],
    doc="X resized on its two spatial axes to size (or by scale) with nearest or "
        "bilinear sampling (align_corners, align_mode as Paddle's).",
)
defop(
    "interpolate_grad",
    inputs=("G", "X"),
    attrs={"size": None, "scale": None, "mode": "nearest", "align_corners": False,
           "align_mode": 0, "channel_last": False},
    attr_types=_INTERPOLATE_TYPES,
    kernel=resample.interpolate_grad,
    infer=lambda g, x, **_: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("interpolate", douts[0], **_kernel_attrs(attrs)), None],
    no_grad=("X",),
    dtypes={"G": dtypes.FLOATS},
    doc="G resampled back onto X's grid by the transposed weights (the gradient of "
        "interpolate).",
)
