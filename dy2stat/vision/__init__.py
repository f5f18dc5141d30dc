"""``dy2stat.vision``: datasets (MNIST from local IDX files), transforms and models
(LeNet, ResNet, MobileNetV2)."""

from dy2stat.vision import datasets, models, transforms
from dy2stat.vision.models import LeNet

__all__ = ["LeNet", "datasets", "models", "transforms"]
