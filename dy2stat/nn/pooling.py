"""MaxPool2D and AvgPool2D."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.layer import Layer


class MaxPool2D(Layer):
    """Max over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``)."""

    def __init__(self, kernel_size, stride=None, padding=0, return_mask: bool = False,
                 ceil_mode: bool = False, data_format: str = "NCHW", name: str | None = None):
        super().__init__(name)
        if return_mask:
            raise NotImplementedError("MaxPool2D: return_mask=True is not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.data_format = bool(ceil_mode), data_format

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode, data_format=self.data_format)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class AvgPool2D(Layer):
    """Mean over ``kernel_size`` windows; ``exclusive`` leaves padding out of the divisor."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 exclusive: bool = True, data_format: str = "NCHW", name: str | None = None):
        super().__init__(name)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.exclusive = bool(ceil_mode), bool(exclusive)
        self.data_format = data_format

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.exclusive, data_format=self.data_format)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")
