"""LeNet-5 (Paddle's ``vision.models.LeNet``)."""

from __future__ import annotations

from dy2stat import nn, ops

__all__ = ["LeNet"]


class LeNet(nn.Layer):
    """LeNet-5 for 1x28x28 images: two conv/ReLU/max-pool stages, then three Linear layers.

    ``num_classes <= 0`` leaves out the classifier (the output is the
    [N, 16, 5, 5] feature map).
    """

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2D(1, 6, 3, stride=1, padding=1),
            nn.ReLU(),
            nn.MaxPool2D(2, 2),
            nn.Conv2D(6, 16, 5, stride=1, padding=0),
            nn.ReLU(),
            nn.MaxPool2D(2, 2),
        )
        if num_classes > 0:
            self.fc = nn.Sequential(
                nn.Linear(400, 120),
                nn.Linear(120, 84),
                nn.Linear(84, num_classes),
            )

    def forward(self, inputs):
        x = self.features(inputs)
        if self.num_classes > 0:
            x = ops.flatten(x, 1)
            x = self.fc(x)
        return x
