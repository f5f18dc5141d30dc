"""ResNet ("Deep Residual Learning for Image Recognition"), as Paddle's
``vision.models.ResNet``: the same layers, parameter names and arguments.

Inputs are NCHW images; at 224x224 the last stage's map is 7x7. Smaller images
work down to 32x32 (the last map is then 1x1), which is what the tests use.
"""

from __future__ import annotations

from dy2stat import nn, ops

__all__ = ["BasicBlock", "BottleneckBlock", "ResNet", "resnet18", "resnet34", "resnet50",
           "resnet101", "resnet152"]

# blocks per stage for each depth
_STAGES = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
           152: [3, 8, 36, 3]}


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
    """A bias-free convolution ("same" padding for odd kernels) and its batch norm."""
    return (nn.Conv2D(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups,
                      bias_attr=False), nn.BatchNorm2D(cout))


class BasicBlock(nn.Layer):
    """Two 3x3 conv-BN layers and a shortcut (ResNet-18/34); ``expansion`` 1."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1, norm_layer=None):
        super().__init__()
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock: only groups=1 and base_width=64 are supported")
        if dilation != 1 or norm_layer not in (None, nn.BatchNorm2D):
            raise NotImplementedError("BasicBlock: dilation and norm_layer are not supported")
        self.conv1, self.bn1 = _conv_bn(inplanes, planes, 3, stride)
        self.relu = nn.ReLU()
        self.conv2, self.bn2 = _conv_bn(planes, planes, 3)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class BottleneckBlock(nn.Layer):
    """1x1 (reduce), 3x3 (stride, groups) and 1x1 (expand) conv-BN layers and a shortcut
    (ResNet-50 and deeper); ``expansion`` 4."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1, norm_layer=None):
        super().__init__()
        if dilation != 1 or norm_layer not in (None, nn.BatchNorm2D):
            raise NotImplementedError("BottleneckBlock: dilation and norm_layer are not "
                                      "supported")
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1, self.bn1 = _conv_bn(inplanes, width, 1)
        self.conv2, self.bn2 = _conv_bn(width, width, 3, stride, groups)
        self.conv3, self.bn3 = _conv_bn(width, planes * self.expansion, 1)
        self.relu = nn.ReLU()
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Layer):
    """A ResNet of ``depth`` (18, 34, 50, 101 or 152) built from ``block``.

    ``width`` is the bottleneck's base width (64; 128 for the "wide" ResNets) and
    ``groups`` its grouped 3x3 convolutions (ResNeXt). ``with_pool=False`` leaves out
    the global average pool and ``num_classes <= 0`` the classifier, so the output is
    the feature map.
    """

    def __init__(self, block, depth: int = 50, width: int = 64, num_classes: int = 1000,
                 with_pool: bool = True, groups: int = 1):
        super().__init__()
        if depth not in _STAGES:
            raise ValueError(f"ResNet: depth must be one of {sorted(_STAGES)}, got {depth}")
        self.num_classes, self.with_pool = int(num_classes), bool(with_pool)
        self.groups, self.base_width = int(groups), int(width)
        self.inplanes = 64
        self.conv1 = nn.Conv2D(3, self.inplanes, 7, stride=2, padding=3, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(self.inplanes)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(3, stride=2, padding=1)
        blocks = _STAGES[depth]
        self.layer1 = self._make_layer(block, 64, blocks[0])
        self.layer2 = self._make_layer(block, 128, blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 256, blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 512, blocks[3], stride=2)
        if self.with_pool:
            self.avgpool = nn.AdaptiveAvgPool2D((1, 1))
        if self.num_classes > 0:
            self.fc = nn.Linear(512 * block.expansion, self.num_classes)

    def _make_layer(self, block, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        """One stage: ``blocks`` blocks, the first of which changes stride and width (its
        shortcut then is a strided 1x1 conv-BN)."""
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(*_conv_bn(self.inplanes, planes * block.expansion, 1,
                                                 stride))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups,
                        self.base_width)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, groups=self.groups, base_width=self.base_width)
                   for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        if self.with_pool:
            x = self.avgpool(x)
        if self.num_classes > 0:
            x = self.fc(ops.flatten(x, 1))
        return x


def _resnet(block, depth: int, pretrained: bool, **kwargs) -> ResNet:
    if pretrained:
        raise ValueError(f"resnet{depth}: no pretrained weights are bundled; build the model "
                         "and load a state dict with set_state_dict(d2s.load(path))")
    return ResNet(block, depth, **kwargs)


def resnet18(pretrained: bool = False, **kwargs) -> ResNet:
    """ResNet-18 (BasicBlock, stages of 2, 2, 2, 2); ``kwargs`` go to ``ResNet``."""
    return _resnet(BasicBlock, 18, pretrained, **kwargs)


def resnet34(pretrained: bool = False, **kwargs) -> ResNet:
    """ResNet-34 (BasicBlock, stages of 3, 4, 6, 3); ``kwargs`` go to ``ResNet``."""
    return _resnet(BasicBlock, 34, pretrained, **kwargs)


def resnet50(pretrained: bool = False, **kwargs) -> ResNet:
    """ResNet-50 (BottleneckBlock, stages of 3, 4, 6, 3); ``kwargs`` go to ``ResNet``."""
    return _resnet(BottleneckBlock, 50, pretrained, **kwargs)


def resnet101(pretrained: bool = False, **kwargs) -> ResNet:
    """ResNet-101 (BottleneckBlock, stages of 3, 4, 23, 3); ``kwargs`` go to ``ResNet``."""
    return _resnet(BottleneckBlock, 101, pretrained, **kwargs)


def resnet152(pretrained: bool = False, **kwargs) -> ResNet:
    """ResNet-152 (BottleneckBlock, stages of 3, 8, 36, 3); ``kwargs`` go to ``ResNet``."""
    return _resnet(BottleneckBlock, 152, pretrained, **kwargs)
