"""RMSProp, Adagrad, Adamax and Lamb, written with ops (``Optimizer._update``)."""

from __future__ import annotations

from dy2stat import ops
from dy2stat.optimizer.lr import LRScheduler
from dy2stat.optimizer.optimizer import Accumulator, Optimizer

__all__ = ["Adagrad", "Adamax", "Lamb", "RMSProp"]


def _check_beta(owner, label, value):
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{owner}: {label} must be in [0, 1), got {value}")


class RMSProp(Optimizer):
    """Divides the gradient by a running root mean square (Paddle's ``rmsprop``):
    ``ms = rho * ms + (1 - rho) * g^2``; ``mom = momentum * mom + lr * g /
    sqrt(ms + epsilon)``; ``param -= mom``. ``centered`` subtracts the square of the
    running mean gradient inside the root."""

    _accumulators = (Accumulator("momentum"), Accumulator("mean_square"),
                     Accumulator("mean_grad"))

    def __init__(self, learning_rate: float | LRScheduler, rho: float = 0.95,
                 epsilon: float = 1e-6, momentum: float = 0.0, centered: bool = False,
                 parameters=None, weight_decay=None, grad_clip=None, name: str | None = None):
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"RMSProp: rho must be in [0, 1], got {rho}")
        if epsilon < 0 or momentum < 0:
            raise ValueError("RMSProp: epsilon and momentum must be non-negative")
        self._rho, self._epsilon = float(rho), float(epsilon)
        self._momentum, self._centered = float(momentum), bool(centered)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, param, grad, state, lr):
        moment, mean_square, mean_grad = state
        rho = self._rho
        mean_square = ops.add(ops.scale(mean_square, rho),
                              ops.scale(ops.multiply(grad, grad), 1.0 - rho))
        if self._centered:
            mean_grad = ops.add(ops.scale(mean_grad, rho), ops.scale(grad, 1.0 - rho))
            spread = ops.subtract(mean_square, ops.multiply(mean_grad, mean_grad))
        else:
            spread = mean_square
        step = ops.divide(ops.multiply(grad, lr), ops.sqrt(ops.add(spread, self._epsilon)))
        moment = ops.add(ops.scale(moment, self._momentum), step)
        return ops.subtract(param, moment), moment, mean_square, mean_grad


class Adagrad(Optimizer):
    """Divides the gradient by the root of the sum of its squares so far:
    ``m += g^2``; ``param -= lr * g / (sqrt(m) + epsilon)``."""

    _accumulators = (Accumulator("moment", init="_initial_accumulator_value"),)

    def __init__(self, learning_rate: float | LRScheduler, epsilon: float = 1e-6,
                 parameters=None, weight_decay=None, grad_clip=None, name: str | None = None,
                 initial_accumulator_value: float = 0.0):
        if epsilon < 0:
            raise ValueError(f"Adagrad: epsilon must be non-negative, got {epsilon}")
        self._epsilon = float(epsilon)
        self._initial_accumulator_value = float(initial_accumulator_value)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, param, grad, state, lr):
        (moment,) = state
        moment = ops.add(moment, ops.multiply(grad, grad))
        step = ops.divide(ops.multiply(grad, lr), ops.add(ops.sqrt(moment), self._epsilon))
        return ops.subtract(param, step), moment


class Adamax(Optimizer):
    """Adam with the infinity norm: ``m = beta1 * m + (1 - beta1) * g``;
    ``u = max(beta2 * u + epsilon, |g|)``; ``param -= lr / (1 - beta1^t) * m / u``."""

    _accumulators = (Accumulator("moment"), Accumulator("inf_norm"),
                     Accumulator("beta1_pow_acc", scalar=True, init="_beta1"))

    def __init__(self, learning_rate: float | LRScheduler = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, name: str | None = None):
        _check_beta("Adamax", "beta1", beta1)
        _check_beta("Adamax", "beta2", beta2)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, param, grad, state, lr):
        moment, inf_norm, beta1_pow = state
        b1 = self._beta1
        moment = ops.add(ops.scale(moment, b1), ops.scale(grad, 1.0 - b1))
        inf_norm = ops.maximum(ops.scale(inf_norm, self._beta2, self._epsilon), ops.abs(grad))
        rate = ops.divide(lr, ops.scale(ops.reshape(beta1_pow, []), -1.0, 1.0))
        param = ops.subtract(param, ops.multiply(rate, ops.divide(moment, inf_norm)))
        return param, moment, inf_norm, ops.scale(beta1_pow, b1)


class Lamb(Optimizer):
    """Layer-wise adaptive moments (You et al.): the bias-corrected Adam direction
    ``r = m_hat / (sqrt(v_hat) + epsilon) + lamb_weight_decay * param`` is scaled by the
    trust ratio ``||param|| / ||r||`` (1 when either norm is 0): ``param -= lr * trust *
    r``. ``exclude_from_weight_decay_fn(param)`` True leaves a parameter undecayed."""

    _accumulators = (Accumulator("moment1"), Accumulator("moment2"),
                     Accumulator("beta1_pow_acc", scalar=True, init="_beta1"),
                     Accumulator("beta2_pow_acc", scalar=True, init="_beta2"))

    def __init__(self, learning_rate: float | LRScheduler = 0.001,
                 lamb_weight_decay: float = 0.01, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, parameters=None, grad_clip=None,
                 exclude_from_weight_decay_fn=None, multi_precision: bool = False,
                 name: str | None = None):
        _check_beta("Lamb", "beta1", beta1)
        _check_beta("Lamb", "beta2", beta2)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        self._lamb_weight_decay = float(lamb_weight_decay)
        self._exclude = exclude_from_weight_decay_fn
        super().__init__(learning_rate, parameters, None, grad_clip, name)

    def _update(self, param, grad, state, lr):
        moment1, moment2, beta1_pow, beta2_pow = state
        b1, b2 = self._beta1, self._beta2
        moment1 = ops.add(ops.scale(moment1, b1), ops.scale(grad, 1.0 - b1))
        moment2 = ops.add(ops.scale(moment2, b2), ops.scale(ops.multiply(grad, grad), 1.0 - b2))
        m_hat = ops.divide(moment1, ops.scale(ops.reshape(beta1_pow, []), -1.0, 1.0))
        v_hat = ops.divide(moment2, ops.scale(ops.reshape(beta2_pow, []), -1.0, 1.0))
        r = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self._epsilon))
        decay = 0.0 if self._exclude is not None and self._exclude(param) else \
            self._lamb_weight_decay
        if decay:
            r = ops.add(r, ops.scale(param, decay))
        w_norm = ops.sqrt(ops.sum(ops.multiply(param, param)))
        r_norm = ops.sqrt(ops.sum(ops.multiply(r, r)))
        both = ops.logical_and(ops.greater_than(w_norm, 0.0), ops.greater_than(r_norm, 0.0))
        trust = ops.where(both, ops.divide(w_norm, ops.where(both, r_norm, 1.0)), 1.0)
        param = ops.subtract(param, ops.multiply(ops.multiply(lr, trust), r))
        return param, moment1, moment2, ops.scale(beta1_pow, b1), ops.scale(beta2_pow, b2)
