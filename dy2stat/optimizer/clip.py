"""Gradient clipping applied by an optimizer before its updates (Paddle's ``grad_clip``).

A clip is called with ``[(param, grad)]`` and returns new pairs. It is
written with ordinary ops, so the same object clips eager gradients and
appends clipping ops to a static program.
"""

from __future__ import annotations

from dy2stat import ops

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue"]

Pairs = list  # [(param, grad)]


class ClipGradByValue:
    """Clip every gradient element into ``[min, max]`` (``min`` defaults to ``-max``)."""

    def __init__(self, max: float, min: float | None = None):  # noqa: A002
        self.max = float(max)
        self.min = -self.max if min is None else float(min)
        if self.min > self.max:
            raise ValueError(f"ClipGradByValue: min {self.min} is greater than max {self.max}")

    def __call__(self, params_grads: Pairs) -> Pairs:
        return [(p, ops.clip(g, self.min, self.max)) for p, g in params_grads]


class ClipGradByNorm:
    """Scale each gradient whose L2 norm exceeds ``clip_norm`` down to that norm."""

    def __init__(self, clip_norm: float):
        if clip_norm <= 0:
            raise ValueError(f"ClipGradByNorm: clip_norm must be positive, got {clip_norm}")
        self.clip_norm = float(clip_norm)

    def __call__(self, params_grads: Pairs) -> Pairs:
        clipped = []
        for p, g in params_grads:
            norm = ops.sqrt(ops.sum(g * g))
            clipped.append((p, g * (self.clip_norm / ops.maximum(norm, self.clip_norm))))
        return clipped


class ClipGradByGlobalNorm:
    """Scale all gradients by ``clip_norm / max(global_norm, clip_norm)``, where
    ``global_norm`` is the L2 norm of all gradients taken together."""

    def __init__(self, clip_norm: float, group_name: str = "default_group"):
        if clip_norm <= 0:
            raise ValueError(f"ClipGradByGlobalNorm: clip_norm must be positive, got {clip_norm}")
        self.clip_norm = float(clip_norm)
        self.group_name = group_name

    def __call__(self, params_grads: Pairs) -> Pairs:
        if not params_grads:
            return []
        total = None
        for _, g in params_grads:
            square = ops.sum(g * g)
            if square.dtype != params_grads[0][1].dtype:
                square = ops.cast(square, params_grads[0][1].dtype)
            total = square if total is None else total + square
        factor = self.clip_norm / ops.maximum(ops.sqrt(total), self.clip_norm)
        return [(p, g * ops.cast(factor, g.dtype)) for p, g in params_grads]

    def __repr__(self) -> str:
        return f"ClipGradByGlobalNorm(clip_norm={self.clip_norm})"
