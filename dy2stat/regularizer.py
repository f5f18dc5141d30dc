"""Weight decay as a term added to a parameter's gradient (Paddle's ``regularizer``).

Pass one as an optimizer's ``weight_decay`` (a float there means ``L2Decay(float)``),
or as ``ParamAttr(regularizer=...)`` for one parameter, which then uses it instead of
the optimizer's. The term is written with ops, so it applies to eager gradients and to
the gradients of a static program alike.
"""

from __future__ import annotations

from dy2stat import ops

__all__ = ["L1Decay", "L2Decay", "WeightDecayRegularizer"]


class WeightDecayRegularizer:
    """Base: ``regularizer(param, grad)`` is the decayed gradient."""

    def __init__(self, coeff: float = 0.0):
        if isinstance(coeff, bool) or not isinstance(coeff, (int, float)):
            raise TypeError(f"{type(self).__name__}: coeff must be a float, "
                            f"not {type(coeff).__name__}")
        self.coeff = float(coeff)

    def __call__(self, param, grad):
        if not self.coeff:
            return grad
        return ops.add(grad, ops.scale(self._direction(param), self.coeff))

    def _direction(self, param):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(coeff={self.coeff})"


class L1Decay(WeightDecayRegularizer):
    """Adds ``coeff * sign(param)`` to the gradient (the gradient of
    ``coeff * sum(|param|)``)."""

    def _direction(self, param):
        return ops.sign(param)


class L2Decay(WeightDecayRegularizer):
    """Adds ``coeff * param`` to the gradient (the gradient of
    ``coeff / 2 * sum(param ** 2)``)."""

    def _direction(self, param):
        return param
