"""Adam and AdamW (decoupled weight decay)."""

from __future__ import annotations

from dy2stat.optimizer.lr import LRScheduler
from dy2stat.optimizer.optimizer import Accumulator, Optimizer
from dy2stat.regularizer import L2Decay

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam with bias correction through running powers of the betas (Paddle's ``adam``).

    ``weight_decay`` adds an L2 term to the gradients; use ``AdamW`` for
    decoupled decay.
    """

    _op_type = "adam"
    _accumulators = (
        Accumulator("moment1"),
        Accumulator("moment2"),
        Accumulator("beta1_pow_acc", scalar=True, init="_beta1"),
        Accumulator("beta2_pow_acc", scalar=True, init="_beta2"),
    )

    def __init__(self, learning_rate: float | LRScheduler = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, name: str | None = None):
        for label, value in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{type(self).__name__}: {label} must be in [0, 1), got {value}")
        if epsilon < 0:
            raise ValueError(f"{type(self).__name__}: epsilon must be non-negative, got {epsilon}")
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _attrs(self) -> dict:
        return {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}


class AdamW(Adam):
    """Adam whose parameters first decay by ``lr * weight_decay`` each step
    (Loshchilov & Hutter), not through the gradient. (A parameter's own
    ``ParamAttr(regularizer=...)`` still adds its term to the gradient.)"""

    _op_type = "adamw"
    _l2_decay = False

    def __init__(self, learning_rate: float | LRScheduler = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, parameters=None,
                 weight_decay: float = 0.01, grad_clip=None, name: str | None = None):
        if weight_decay is None:
            weight_decay = 0.0
        elif isinstance(weight_decay, L2Decay):
            weight_decay = weight_decay.coeff
        if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)):
            raise TypeError(f"AdamW: weight_decay must be a float (the decoupled decay "
                            f"coefficient), not {type(weight_decay).__name__}")
        self._weight_decay = float(weight_decay)
        super().__init__(learning_rate, beta1, beta2, epsilon, parameters, None, grad_clip,
                         name)

    def _attrs(self) -> dict:
        return {**super()._attrs(), "coeff": self._weight_decay}
