"""max_pool2d and avg_pool2d over NCHW inputs."""

from __future__ import annotations

from dy2stat.dispatch import apply
from dy2stat.nn.functional.conv import conv_padding, pair


def _attrs(kernel_size, stride, padding, ceil_mode, where):
    kernel = pair(kernel_size, "kernel_size", where)
    return {
        "kernel_size": kernel,
        "stride": kernel if stride is None else pair(stride, "stride", where),
        "padding": conv_padding(padding, kernel, [1, 1], where),
        "ceil_mode": bool(ceil_mode),
    }


def max_pool2d(x, kernel_size, stride=None, padding=0, return_mask: bool = False,
               ceil_mode: bool = False, data_format: str = "NCHW"):
    """Max over windows (stride defaults to kernel_size; padding counts as -inf)."""
    if return_mask:
        raise NotImplementedError("max_pool2d: return_mask=True is not supported")
    if data_format != "NCHW":
        raise ValueError(f"max_pool2d: only data_format='NCHW' is supported, got {data_format!r}")
    return apply("max_pool2d", x, **_attrs(kernel_size, stride, padding, ceil_mode, "max_pool2d"))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               exclusive: bool = True, divisor_override=None, data_format: str = "NCHW"):
    """Mean over windows; ``exclusive`` leaves padding out of the divisor."""
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d: divisor_override is not supported")
    if data_format != "NCHW":
        raise ValueError(f"avg_pool2d: only data_format='NCHW' is supported, got {data_format!r}")
    return apply("avg_pool2d", x, exclusive=bool(exclusive),
                 **_attrs(kernel_size, stride, padding, ceil_mode, "avg_pool2d"))
