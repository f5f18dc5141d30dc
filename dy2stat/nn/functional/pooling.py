"""Pooling over channel-first inputs: max/avg over windows (1-D and 2-D) and the
adaptive forms, which pick windows that cover the input for a wanted output size."""

from __future__ import annotations

import numbers

from dy2stat import ops
from dy2stat.dispatch import apply
from dy2stat.nn.functional.conv import conv_padding, pair, single


def _attrs(kernel_size, stride, padding, ceil_mode, where):
    kernel = pair(kernel_size, "kernel_size", where)
    return {
        "kernel_size": kernel,
        "stride": kernel if stride is None else pair(stride, "stride", where),
        "padding": conv_padding(padding, kernel, [1, 1], where),
        "ceil_mode": bool(ceil_mode),
    }


def _check_format(data_format, allowed, where):
    if data_format != allowed:
        raise ValueError(f"{where}: only data_format={allowed!r} is supported, "
                         f"got {data_format!r}")


def max_pool2d(x, kernel_size, stride=None, padding=0, return_mask: bool = False,
               ceil_mode: bool = False, data_format: str = "NCHW"):
    """Max over windows (stride defaults to kernel_size; padding counts as -inf)."""
    if return_mask:
        raise NotImplementedError("max_pool2d: return_mask=True is not supported")
    _check_format(data_format, "NCHW", "max_pool2d")
    return apply("max_pool2d", x, **_attrs(kernel_size, stride, padding, ceil_mode, "max_pool2d"))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               exclusive: bool = True, divisor_override=None, data_format: str = "NCHW"):
    """Mean over windows; ``exclusive`` leaves padding out of the divisor."""
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d: divisor_override is not supported")
    _check_format(data_format, "NCHW", "avg_pool2d")
    return apply("avg_pool2d", x, exclusive=bool(exclusive),
                 **_attrs(kernel_size, stride, padding, ceil_mode, "avg_pool2d"))


def _as_2d_window(kernel_size, stride, padding, where):
    kernel = single(kernel_size, "kernel_size", where)
    return ([1, kernel], None if stride is None else [1, single(stride, "stride", where)],
            [0, single(padding, "padding", where)])


def max_pool1d(x, kernel_size, stride=None, padding=0, return_mask: bool = False,
               ceil_mode: bool = False, name=None):
    """Max over windows of [N, C, L] inputs."""
    kernel, stride, padding = _as_2d_window(kernel_size, stride, padding, "max_pool1d")
    out = max_pool2d(ops.unsqueeze(x, 2), kernel, stride, padding, return_mask, ceil_mode)
    return ops.squeeze(out, 2)


def avg_pool1d(x, kernel_size, stride=None, padding=0, exclusive: bool = True,
               ceil_mode: bool = False, name=None):
    """Mean over windows of [N, C, L] inputs."""
    kernel, stride, padding = _as_2d_window(kernel_size, stride, padding, "avg_pool1d")
    out = avg_pool2d(ops.unsqueeze(x, 2), kernel, stride, padding, ceil_mode, exclusive)
    return ops.squeeze(out, 2)


# ------------------------------------------------------------------- adaptive


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """Window ``i`` covers ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _output_sizes(output_size, spatial, where) -> list[int]:
    if isinstance(output_size, numbers.Integral):
        sizes = [int(output_size)] * len(spatial)
    else:
        sizes = list(output_size)
        if len(sizes) != len(spatial):
            raise ValueError(f"{where}: output_size must have {len(spatial)} values, got "
                             f"{output_size!r}")
    # None keeps the input's size along that axis.
    sizes = [s if o is None else int(o) for o, s in zip(sizes, spatial)]
    if any(o < 1 and o != -1 for o in sizes):
        raise ValueError(f"{where}: output_size must be positive, got {output_size!r}")
    return sizes


def _adaptive(x, output_size, reduce, where):
    """Pool every spatial axis of ``x`` [N, C, *spatial] to ``output_size``."""
    spatial = list(x.shape[2:])
    sizes = _output_sizes(output_size, spatial, where)
    for i, (size, out) in enumerate(zip(spatial, sizes)):
        axis = 2 + i
        if out == 1 or out == size:  # all of it, or each element alone
            if out == 1:
                x = reduce(x, axis=axis, keepdim=True)
            continue
        if size < 0:
            raise ValueError(f"{where}: input size along axis {axis} must be known to pool "
                             f"it to {out} (input shape {list(x.shape)}); only output size "
                             "1 works for unknown sizes")
        index = [slice(None)] * len(x.shape)
        parts = []
        for start, stop in adaptive_windows(size, out):
            index[axis] = slice(start, stop)
            parts.append(reduce(x[tuple(index)], axis=axis, keepdim=True))
        x = ops.concat(parts, axis=axis)
    return x


def adaptive_avg_pool1d(x, output_size, name=None):
    """The mean over each of ``output_size`` windows that cover [N, C, L] inputs."""
    return _adaptive(x, [output_size], ops.mean, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(x, output_size, data_format: str = "NCHW", name=None):
    """The mean over each of ``output_size`` (an int or [h, w]) windows that cover the
    image (windows of equal size when the input size is a multiple of the output's)."""
    _check_format(data_format, "NCHW", "adaptive_avg_pool2d")
    sizes = _output_sizes(output_size, list(x.shape[2:]), "adaptive_avg_pool2d")
    h, w = x.shape[2:]
    if all(s > 0 and o > 0 and s % o == 0 and o not in (1, s)
           for s, o in zip((h, w), sizes)):
        kernel = [h // sizes[0], w // sizes[1]]
        return apply("avg_pool2d", x, kernel_size=kernel, stride=kernel, padding=[0, 0],
                     ceil_mode=False, exclusive=True)
    return _adaptive(x, sizes, ops.mean, "adaptive_avg_pool2d")


def adaptive_max_pool1d(x, output_size, return_mask: bool = False, name=None):
    """The max over each of ``output_size`` windows that cover [N, C, L] inputs."""
    if return_mask:
        raise NotImplementedError("adaptive_max_pool1d: return_mask=True is not supported")
    return _adaptive(x, [output_size], ops.max, "adaptive_max_pool1d")


def adaptive_max_pool2d(x, output_size, return_mask: bool = False, name=None):
    """The max over each of ``output_size`` (an int or [h, w]) windows that cover the
    image."""
    if return_mask:
        raise NotImplementedError("adaptive_max_pool2d: return_mask=True is not supported")
    return _adaptive(x, output_size, ops.max, "adaptive_max_pool2d")
