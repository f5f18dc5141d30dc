"""Conv2D."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.functional.conv import conv_padding, pair
from dy2stat.nn.initializer import KaimingNormal
from dy2stat.nn.layer import Layer


class Conv2D(Layer):
    """2-D convolution of NCHW inputs; ``weight`` is [out, in/groups, kh, kw].

    The default weight initializer is Kaiming-normal (std sqrt(2 / fan_in)),
    as in Paddle; the bias starts at zero (``bias_attr=False``: no bias).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, padding_mode: str = "zeros", weight_attr=None,
                 bias_attr=None, data_format: str = "NCHW"):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"Conv2D: only padding_mode='zeros' is supported, "
                             f"got {padding_mode!r}")
        if data_format != "NCHW":
            raise ValueError(f"Conv2D: only data_format='NCHW' is supported, got {data_format!r}")
        groups = int(groups)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2D: in_channels {in_channels} and out_channels {out_channels} "
                             f"must both be divisible by groups={groups}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.groups = groups
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2D")
        self.stride = pair(stride, "stride", "Conv2D")
        self.dilation = pair(dilation, "dilation", "Conv2D")
        self.padding = conv_padding(padding, self.kernel_size, self.dilation, "Conv2D")
        shape = [self.out_channels, self.in_channels // groups, *self.kernel_size]
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
