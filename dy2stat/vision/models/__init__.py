"""``dy2stat.vision.models``: LeNet, ResNet and MobileNetV2 with Paddle's names,
arguments and layer layout (no pretrained weights are bundled)."""

from dy2stat.vision.models.lenet import LeNet
from dy2stat.vision.models.mobilenetv2 import MobileNetV2, mobilenet_v2
from dy2stat.vision.models.resnet import (
    BasicBlock,
    BottleneckBlock,
    ResNet,
    resnet18,
    resnet34,
    resnet50,
    resnet101,
    resnet152,
)

__all__ = ["BasicBlock", "BottleneckBlock", "LeNet", "MobileNetV2", "ResNet", "mobilenet_v2",
           "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"]
