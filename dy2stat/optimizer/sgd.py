"""Plain stochastic gradient descent."""

from __future__ import annotations

from dy2stat.optimizer.lr import LRScheduler
from dy2stat.optimizer.optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    """``param -= lr * grad``."""

    _op_type = "sgd"

    def __init__(self, learning_rate: float | LRScheduler = 0.001, parameters=None,
                 weight_decay=None, grad_clip=None, name: str | None = None):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
