"""MobileNetV2 ("Inverted Residuals and Linear Bottlenecks"), as Paddle's
``vision.models.MobileNetV2``: the same layers, parameter names and arguments.

Inputs are NCHW images (224x224 for the published model; the network downsamples
by 32, so 32x32 images give a 1x1 last map).
"""

from __future__ import annotations

from dy2stat import nn, ops

__all__ = ["InvertedResidual", "MobileNetV2", "mobilenet_v2"]

# (expansion t, output channels c, repeats n, first stride s) of each stage
_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
           (6, 160, 3, 2), (6, 320, 1, 1)]


def _make_divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to the nearest multiple of ``divisor`` (at least ``divisor``),
    never more than 10% below it: channel counts that suit the hardware."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class ConvBNReLU(nn.Sequential):
    """Conv (bias-free, "same" padding) -> BatchNorm2D -> ReLU6."""

    def __init__(self, in_planes: int, out_planes: int, kernel_size: int = 3,
                 stride: int = 1, groups: int = 1, norm_layer=nn.BatchNorm2D):
        super().__init__(
            nn.Conv2D(in_planes, out_planes, kernel_size, stride, (kernel_size - 1) // 2,
                      groups=groups, bias_attr=False),
            norm_layer(out_planes),
            nn.ReLU6())


class InvertedResidual(nn.Layer):
    """A 1x1 expansion by ``expand_ratio`` (ReLU6), a 3x3 depthwise conv (ReLU6) and a
    linear 1x1 projection, with a shortcut when the shape is kept."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: float,
                 norm_layer=nn.BatchNorm2D):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"InvertedResidual: stride must be 1 or 2, got {stride}")
        self.stride = stride
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden, kernel_size=1, norm_layer=norm_layer))
        layers += [ConvBNReLU(hidden, hidden, stride=stride, groups=hidden, norm_layer=norm_layer),
                   nn.Conv2D(hidden, oup, 1, 1, 0, bias_attr=False), norm_layer(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Layer):
    """MobileNetV2 whose channel counts are scaled by ``scale`` (rounded to multiples
    of 8; the last conv keeps at least 1280). ``with_pool=False`` leaves out the global
    average pool and ``num_classes <= 0`` the classifier (dropout 0.2, then Linear)."""

    def __init__(self, scale: float = 1.0, num_classes: int = 1000, with_pool: bool = True):
        super().__init__()
        self.scale, self.num_classes, self.with_pool = scale, int(num_classes), bool(with_pool)
        channels = _make_divisible(32 * scale)
        self.last_channel = _make_divisible(1280 * max(1.0, scale))
        features = [ConvBNReLU(3, channels, stride=2)]
        for t, c, n, s in _STAGES:
            out = _make_divisible(c * scale)
            for i in range(n):
                features.append(InvertedResidual(channels, out, s if i == 0 else 1, t))
                channels = out
        features.append(ConvBNReLU(channels, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        if self.with_pool:
            self.pool2d_avg = nn.AdaptiveAvgPool2D(1)
        if self.num_classes > 0:
            self.classifier = nn.Sequential(nn.Dropout(0.2),
                                            nn.Linear(self.last_channel, self.num_classes))

    def forward(self, x):
        x = self.features(x)
        if self.with_pool:
            x = self.pool2d_avg(x)
        if self.num_classes > 0:
            x = self.classifier(ops.flatten(x, 1))
        return x


def mobilenet_v2(pretrained: bool = False, scale: float = 1.0, **kwargs) -> MobileNetV2:
    """MobileNetV2 with width multiplier ``scale``; ``kwargs`` go to ``MobileNetV2``."""
    if pretrained:
        raise ValueError("mobilenet_v2: no pretrained weights are bundled; build the model "
                         "and load a state dict with set_state_dict(d2s.load(path))")
    return MobileNetV2(scale=scale, **kwargs)
