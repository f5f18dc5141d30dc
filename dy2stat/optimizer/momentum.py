"""SGD with momentum (optionally Nesterov's)."""

from __future__ import annotations

from dy2stat.optimizer.lr import LRScheduler
from dy2stat.optimizer.optimizer import Accumulator, Optimizer

__all__ = ["Momentum"]


class Momentum(Optimizer):
    """``v = momentum * v + grad; param -= lr * v`` (Nesterov:
    ``param -= lr * (grad + momentum * v)``), as Paddle's ``momentum`` op."""

    _op_type = "momentum"
    _accumulators = (Accumulator("velocity"),)

    def __init__(self, learning_rate: float | LRScheduler = 0.001, momentum: float = 0.9,
                 parameters=None, use_nesterov: bool = False, weight_decay=None,
                 grad_clip=None, name: str | None = None):
        if not 0.0 <= momentum:
            raise ValueError(f"Momentum: momentum must be non-negative, got {momentum}")
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _attrs(self) -> dict:
        return {"mu": self._momentum, "use_nesterov": self._use_nesterov}
