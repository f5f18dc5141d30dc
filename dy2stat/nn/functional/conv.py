"""conv1d, conv2d and conv2d_transpose over channel-first inputs.

conv1d is conv2d over a height-1 image; conv2d_transpose is the input gradient of a
convolution (the ``conv2d_grad_input`` op), so it shares conv2d's kernels and its
gradient rules.
"""

from __future__ import annotations

import numbers

from dy2stat import ops
from dy2stat.dispatch import apply
from dy2stat.nn.functional.common import batch_zeros


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


def single(value, name: str, where: str) -> int:
    """An int from an int or a one-element list."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        return int(value[0])
    raise ValueError(f"{where}: {name} must be an int, got {value!r}")


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


def _conv1d_padding(padding, kernel, dilation, where) -> int:
    """One symmetric padding from an int, ``[p]``, ``[p, p]`` or 'SAME'/'VALID'."""
    if isinstance(padding, (list, tuple)) and len(padding) == 2:
        if int(padding[0]) != int(padding[1]):
            raise ValueError(f"{where}: only symmetric padding is supported, got {list(padding)}")
        return int(padding[0])
    if isinstance(padding, str):
        return conv_padding(padding, [1, kernel], [1, dilation], where)[1]
    return single(padding, "padding", where)


def _check_format(data_format, allowed, where):
    if data_format != allowed:
        raise ValueError(f"{where}: only data_format={allowed!r} is supported, "
                         f"got {data_format!r}")


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1,
           data_format: str = "NCHW"):
    """2-D convolution; ``weight`` is [out_channels, in_channels/groups, kh, kw]."""
    _check_format(data_format, "NCHW", "conv2d")
    dilation = pair(dilation, "dilation", "conv2d")
    kernel = list(weight.shape[2:]) if len(weight.shape) == 4 else [1, 1]
    out = apply("conv2d", x, weight, stride=pair(stride, "stride", "conv2d"),
                padding=conv_padding(padding, kernel, dilation, "conv2d"), dilation=dilation,
                groups=int(groups))
    return _add_bias(out, bias)


def _add_bias(out, bias):
    if bias is None:
        return out
    shape = [1, -1] + [1] * (len(out.shape) - 2)
    return ops.add(out, ops.reshape(bias, shape))


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1,
           data_format: str = "NCL"):
    """1-D convolution of [N, C, L] inputs; ``weight`` is [out_channels,
    in_channels/groups, k]."""
    _check_format(data_format, "NCL", "conv1d")
    if len(x.shape) != 3 or len(weight.shape) != 3:
        raise ValueError(f"conv1d: expected a 3-D input and a 3-D weight, got shapes "
                         f"{list(x.shape)} and {list(weight.shape)}")
    dilation = single(dilation, "dilation", "conv1d")
    pad = _conv1d_padding(padding, weight.shape[2], dilation, "conv1d")
    out = apply("conv2d", ops.unsqueeze(x, 2), ops.unsqueeze(weight, 2),
                stride=[1, single(stride, "stride", "conv1d")], padding=[0, pad],
                dilation=[1, dilation], groups=int(groups))
    return _add_bias(ops.squeeze(out, 2), bias)


def conv_transpose_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                        output_padding: int) -> int:
    """The output length of a transposed convolution along one axis."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 + output_padding


def conv2d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0,
                     dilation=1, groups: int = 1, output_size=None,
                     data_format: str = "NCHW"):
    """Transposed 2-D convolution (the gradient of conv2d with respect to its input);
    ``weight`` is [in_channels, out_channels/groups, kh, kw].

    The output size is ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + 1 +
    output_padding``; ``output_size`` picks ``output_padding`` for a wanted size.
    """
    where = "conv2d_transpose"
    _check_format(data_format, "NCHW", where)
    if len(x.shape) != 4 or len(weight.shape) != 4:
        raise ValueError(f"{where}: expected a 4-D input and a 4-D weight, got shapes "
                         f"{list(x.shape)} and {list(weight.shape)}")
    if isinstance(padding, str) and padding.upper() == "SAME":
        raise NotImplementedError(f"{where}: padding='SAME' is not supported; give the "
                                  "padding as ints")
    stride, dilation = pair(stride, "stride", where), pair(dilation, "dilation", where)
    kernel = [int(k) for k in weight.shape[2:]]
    padding = conv_padding(padding, kernel, dilation, where)
    extra = pair(output_padding, "output_padding", where)
    sizes = [int(d) for d in x.shape[2:]]
    if any(d < 0 for d in sizes):
        raise ValueError(f"{where}: the input's height and width must be known, got shape "
                         f"{list(x.shape)}")
    base = [conv_transpose_size(s, k, st, p, d, 0)
            for s, k, st, p, d in zip(sizes, kernel, stride, padding, dilation)]
    if output_size is not None:
        wanted = pair(output_size[-2:] if isinstance(output_size, (list, tuple))
                      and len(output_size) > 2 else output_size, "output_size", where)
        extra = [w - b for w, b in zip(wanted, base)]
    if any(not 0 <= e < s for e, s in zip(extra, stride)):
        raise ValueError(f"{where}: output_padding (or output_size) gives {extra} extra rows/"
                         f"columns; each must be in [0, stride) (stride {stride})")
    out_hw = [b + e for b, e in zip(base, extra)]
    channels = int(weight.shape[1]) * int(groups)
    # The convolution whose input gradient this is reads an input of the output's shape;
    # only that shape is used.
    like = batch_zeros(x, [channels, *out_hw])
    out = apply("conv2d_grad_input", like, weight, x, stride=stride, padding=padding,
                dilation=dilation, groups=int(groups))
    return _add_bias(out, bias)
