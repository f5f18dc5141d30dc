"""Activation layers: ReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.layer import Layer


class ReLU(Layer):
    def forward(self, x):
        return F.relu(x)


class Sigmoid(Layer):
    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Layer):
    def forward(self, x):
        return F.tanh(x)


class GELU(Layer):
    def __init__(self, approximate: bool = False, name: str | None = None):
        super().__init__(name)
        self.approximate = bool(approximate)

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return "approximate=True" if self.approximate else ""


class Softmax(Layer):
    def __init__(self, axis: int = -1, name: str | None = None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, x):
        return F.softmax(x, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    def forward(self, x):
        return F.log_softmax(x, self.axis)
