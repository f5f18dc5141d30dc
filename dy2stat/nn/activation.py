"""Activation layers (see ``nn.functional`` for the math)."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.initializer import Constant
from dy2stat.nn.layer import Layer


class ReLU(Layer):
    """``max(x, 0)``, elementwise."""

    def forward(self, x):
        return F.relu(x)


class Sigmoid(Layer):
    """``1 / (1 + exp(-x))``, elementwise."""

    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Layer):
    """The hyperbolic tangent, elementwise."""

    def forward(self, x):
        return F.tanh(x)


class GELU(Layer):
    """The Gaussian error linear unit ``x * Phi(x)`` (``approximate``: its tanh form)."""

    def __init__(self, approximate: bool = False, name: str | None = None):
        super().__init__(name)
        self.approximate = bool(approximate)

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return "approximate=True" if self.approximate else ""


class Softmax(Layer):
    """``exp(x) / sum(exp(x))`` along ``axis``."""

    def __init__(self, axis: int = -1, name: str | None = None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, x):
        return F.softmax(x, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    """``log(softmax(x))`` along ``axis``, computed stably."""

    def forward(self, x):
        return F.log_softmax(x, self.axis)


class LeakyReLU(Layer):
    """x where x >= 0, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, name: str | None = None):
        super().__init__(name)
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Layer):
    """x where x > 0, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, name: str | None = None):
        super().__init__(name)
        self.alpha = float(alpha)

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SiLU(Layer):
    """x·sigmoid(x)."""

    def forward(self, x):
        return F.silu(x)


class Mish(Layer):
    """x·tanh(softplus(x))."""

    def forward(self, x):
        return F.mish(x)


class Hardswish(Layer):
    """x·relu6(x + 3) / 6."""

    def forward(self, x):
        return F.hardswish(x)


class ReLU6(Layer):
    """min(max(x, 0), 6)."""

    def forward(self, x):
        return F.relu6(x)


class Softsign(Layer):
    """x / (1 + |x|)."""

    def forward(self, x):
        return F.softsign(x)


class Softplus(Layer):
    """``log(1 + exp(beta * x)) / beta`` (x itself past ``threshold``)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, name: str | None = None):
        super().__init__(name)
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Layer):
    """x where x > 0, else ``weight * x``: one learned slope (``num_parameters=1``) or
    one per channel; the slopes start at ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, weight_attr=None,
                 data_format: str = "NCHW", name: str | None = None):
        super().__init__(name)
        self.num_parameters, self.data_format = int(num_parameters), data_format
        self.weight = self.create_parameter([self.num_parameters], weight_attr,
                                            default_initializer=Constant(float(init)))

    def forward(self, x):
        return F.prelu(x, self.weight, self.data_format)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
