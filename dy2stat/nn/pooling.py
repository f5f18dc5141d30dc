"""Pooling layers: max and average over windows (1-D, 2-D) and the adaptive forms."""

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


class MaxPool1D(Layer):
    """Max over ``kernel_size`` windows of [N, C, L] inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, return_mask: bool = False,
                 ceil_mode: bool = False, name: str | None = None):
        super().__init__(name)
        if return_mask:
            raise NotImplementedError("MaxPool1D: return_mask=True is not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode = bool(ceil_mode)

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1D(Layer):
    """Mean over ``kernel_size`` windows of [N, C, L] inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, exclusive: bool = True,
                 ceil_mode: bool = False, name: str | None = None):
        super().__init__(name)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.exclusive, self.ceil_mode = bool(exclusive), bool(ceil_mode)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.exclusive,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Layer):
    def __init__(self, output_size, name: str | None = None):
        super().__init__(name)
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1D(_AdaptivePool):
    """The mean over ``output_size`` windows that cover [N, C, L] inputs."""

    def forward(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2D(_AdaptivePool):
    """The mean over ``output_size`` (an int or [h, w]; None keeps that size) windows
    that cover NCHW inputs."""

    def __init__(self, output_size, data_format: str = "NCHW", name: str | None = None):
        super().__init__(output_size, name)
        self.data_format = data_format

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size, self.data_format)


class AdaptiveMaxPool1D(_AdaptivePool):
    """The max over ``output_size`` windows that cover [N, C, L] inputs."""

    def __init__(self, output_size, return_mask: bool = False, name: str | None = None):
        super().__init__(output_size, name)
        if return_mask:
            raise NotImplementedError("AdaptiveMaxPool1D: return_mask=True is not supported")

    def forward(self, x):
        return F.adaptive_max_pool1d(x, self.output_size)


class AdaptiveMaxPool2D(_AdaptivePool):
    """The max over ``output_size`` (an int or [h, w]) windows that cover NCHW inputs."""

    def __init__(self, output_size, return_mask: bool = False, name: str | None = None):
        super().__init__(output_size, name)
        if return_mask:
            raise NotImplementedError("AdaptiveMaxPool2D: return_mask=True is not supported")

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size)
