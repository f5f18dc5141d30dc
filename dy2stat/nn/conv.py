"""Conv1D, Conv2D and Conv2DTranspose."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.functional.conv import conv_padding, pair, single
from dy2stat.nn.initializer import KaimingNormal
from dy2stat.nn.layer import Layer


def _check(kind, in_channels, out_channels, groups, padding_mode, data_format, allowed):
    if padding_mode != "zeros":
        raise ValueError(f"{kind}: only padding_mode='zeros' is supported, got {padding_mode!r}")
    if data_format != allowed:
        raise ValueError(f"{kind}: only data_format={allowed!r} is supported, "
                         f"got {data_format!r}")
    groups = int(groups)
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(f"{kind}: in_channels {in_channels} and out_channels {out_channels} "
                         f"must both be divisible by groups={groups}")
    return groups


class Conv2D(Layer):
    """2-D convolution of NCHW inputs; ``weight`` is [out, in/groups, kh, kw].

    The default weight initializer is Kaiming-normal (std sqrt(2 / fan_in)),
    as in Paddle; the bias starts at zero (``bias_attr=False``: no bias).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, padding_mode: str = "zeros", weight_attr=None,
                 bias_attr=None, data_format: str = "NCHW"):
        super().__init__()
        self.groups = _check("Conv2D", in_channels, out_channels, groups, padding_mode,
                             data_format, "NCHW")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2D")
        self.stride = pair(stride, "stride", "Conv2D")
        self.dilation = pair(dilation, "dilation", "Conv2D")
        self.padding = conv_padding(padding, self.kernel_size, self.dilation, "Conv2D")
        shape = [self.out_channels, self.in_channels // self.groups, *self.kernel_size]
        self.weight = self.create_parameter(shape, weight_attr,
                                            default_initializer=KaimingNormal())
        self.bias = self.create_parameter([self.out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")
        if self.dilation != [1, 1]:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text


class Conv1D(Layer):
    """1-D convolution of [N, C, L] inputs; ``weight`` is [out, in/groups, k]
    (Kaiming-normal, as Conv2D)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, padding_mode: str = "zeros", weight_attr=None,
                 bias_attr=None, data_format: str = "NCL"):
        super().__init__()
        self.groups = _check("Conv1D", in_channels, out_channels, groups, padding_mode,
                             data_format, "NCL")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = single(kernel_size, "kernel_size", "Conv1D")
        self.stride = single(stride, "stride", "Conv1D")
        self.dilation = single(dilation, "dilation", "Conv1D")
        self.padding = padding
        shape = [self.out_channels, self.in_channels // self.groups, self.kernel_size]
        self.weight = self.create_parameter(shape, weight_attr,
                                            default_initializer=KaimingNormal())
        self.bias = self.create_parameter([self.out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class Conv2DTranspose(Layer):
    """Transposed 2-D convolution of NCHW inputs; ``weight`` is
    [in, out/groups, kh, kw] (Kaiming-normal over ``in * kh * kw`` inputs).

    ``forward(x, output_size=None)``: ``output_size`` picks the output padding for a
    wanted [h, w] (see ``F.conv2d_transpose``).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, dilation=1, weight_attr=None,
                 bias_attr=None, data_format: str = "NCHW"):
        super().__init__()
        self.groups = _check("Conv2DTranspose", in_channels, out_channels, groups, "zeros",
                             data_format, "NCHW")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2DTranspose")
        self.stride = pair(stride, "stride", "Conv2DTranspose")
        self.dilation = pair(dilation, "dilation", "Conv2DTranspose")
        self.padding = conv_padding(padding, self.kernel_size, self.dilation, "Conv2DTranspose")
        self.output_padding = pair(output_padding, "output_padding", "Conv2DTranspose")
        kh, kw = self.kernel_size
        shape = [self.in_channels, self.out_channels // self.groups, kh, kw]
        self.weight = self.create_parameter(
            shape, weight_attr, default_initializer=KaimingNormal(fan_in=in_channels * kh * kw))
        self.bias = self.create_parameter([self.out_channels], bias_attr, is_bias=True)

    def forward(self, x, output_size=None):
        return F.conv2d_transpose(x, self.weight, self.bias, self.stride, self.padding,
                                  0 if output_size is not None else self.output_padding,
                                  self.dilation, self.groups, output_size)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")
