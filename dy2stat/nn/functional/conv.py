"""conv2d over NCHW inputs."""

from __future__ import annotations

import numbers

from dy2stat import ops
from dy2stat.dispatch import apply


def pair(value, name: str, where: str) -> list:
    """``[a, b]`` from an int or a pair (attrs are JSON-friendly lists)."""
    if isinstance(value, numbers.Integral):
        return [int(value), int(value)]
    try:
        a, b = value
        return [int(a), int(b)]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name} must be an int or a pair of ints, "
                         f"got {value!r}") from None


def conv_padding(padding, kernel, dilation, where: str) -> list:
    """Symmetric ``[pad_h, pad_w]`` from an int, a pair, four equal-per-axis values
    (``[top, bottom, left, right]``) or ``"VALID"``/``"SAME"`` (stride 1)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [0, 0]
        if mode == "SAME":
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            if any(t % 2 for t in total):
                raise ValueError(f"{where}: padding='SAME' needs symmetric padding here; "
                                 f"kernel {kernel} with dilation {dilation} is not")
            return [t // 2 for t in total]
        raise ValueError(f"{where}: padding must be an int, a pair, 'SAME' or 'VALID', "
                         f"got {padding!r}")
    if isinstance(padding, (list, tuple)) and len(padding) == 4:
        top, bottom, left, right = (int(v) for v in padding)
        if top != bottom or left != right:
            raise ValueError(f"{where}: only symmetric padding is supported, got {list(padding)}")
        return [top, left]
    return pair(padding, "padding", where)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1,
           data_format: str = "NCHW"):
    """2-D convolution; ``weight`` is [out_channels, in_channels/groups, kh, kw]."""
    if data_format != "NCHW":
        raise ValueError(f"conv2d: only data_format='NCHW' is supported, got {data_format!r}")
    dilation = pair(dilation, "dilation", "conv2d")
    kernel = list(weight.shape[2:]) if len(weight.shape) == 4 else [1, 1]
    out = apply("conv2d", x, weight, stride=pair(stride, "stride", "conv2d"),
                padding=conv_padding(padding, kernel, dilation, "conv2d"), dilation=dilation,
                groups=int(groups))
    if bias is None:
        return out
    return ops.add(out, ops.reshape(bias, [1, -1, 1, 1]))
