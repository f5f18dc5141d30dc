"""Loss layers: CrossEntropyLoss and MSELoss."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.layer import Layer


class CrossEntropyLoss(Layer):
    """Softmax cross entropy (see ``F.cross_entropy``); ``weight`` is per class."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 soft_label: bool = False, axis: int = -1, use_softmax: bool = True,
                 name: str | None = None):
        super().__init__(name)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"CrossEntropyLoss: reduction must be 'mean', 'sum' or 'none', "
                             f"got {reduction!r}")
        self.weight = weight
        self.ignore_index, self.reduction = int(ignore_index), reduction
        self.soft_label, self.axis, self.use_softmax = bool(soft_label), int(axis), use_softmax

    def forward(self, input, label):
        return F.cross_entropy(input, label, self.weight, self.ignore_index, self.reduction,
                               self.soft_label, self.axis, self.use_softmax)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, soft_label={self.soft_label}"


class MSELoss(Layer):
    """Mean (or sum, or elementwise) squared difference."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"MSELoss: reduction must be 'mean', 'sum' or 'none', "
                             f"got {reduction!r}")
        self.reduction = reduction

    def forward(self, input, label):
        return F.mse_loss(input, label, self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"
