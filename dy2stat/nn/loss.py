"""Loss layers (see ``nn.functional`` for the math)."""

from __future__ import annotations

from dy2stat.nn import functional as F
from dy2stat.nn.layer import Layer

_REDUCTIONS = ("mean", "sum", "none")


def _checked(kind: str, reduction: str, allowed=_REDUCTIONS) -> str:
    if reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed)
        raise ValueError(f"{kind}: reduction must be one of {names}, got {reduction!r}")
    return reduction


class _Loss(Layer):
    def __init__(self, reduction: str = "mean", name: str | None = None):
        super().__init__(name)
        self.reduction = _checked(type(self).__name__, reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class CrossEntropyLoss(_Loss):
    """Softmax cross entropy (see ``F.cross_entropy``); ``weight`` is per class."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 soft_label: bool = False, axis: int = -1, use_softmax: bool = True,
                 name: str | None = None):
        super().__init__(reduction, name)
        self.weight = weight
        self.ignore_index = int(ignore_index)
        self.soft_label, self.axis, self.use_softmax = bool(soft_label), int(axis), use_softmax

    def forward(self, input, label):
        return F.cross_entropy(input, label, self.weight, self.ignore_index, self.reduction,
                               self.soft_label, self.axis, self.use_softmax)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, soft_label={self.soft_label}"


class MSELoss(_Loss):
    """Mean (or sum, or elementwise) squared difference."""

    def forward(self, input, label):
        return F.mse_loss(input, label, self.reduction)


class L1Loss(_Loss):
    """Mean (or sum, or elementwise) absolute difference."""

    def forward(self, input, label):
        return F.l1_loss(input, label, self.reduction)


class SmoothL1Loss(_Loss):
    """Huber loss with threshold ``delta`` (see ``F.smooth_l1_loss``)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0, name: str | None = None):
        super().__init__(reduction, name)
        self.delta = float(delta)

    def forward(self, input, label):
        return F.smooth_l1_loss(input, label, self.reduction, self.delta)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities; ``weight`` scales each element."""

    def __init__(self, weight=None, reduction: str = "mean", name: str | None = None):
        super().__init__(reduction, name)
        self.weight = weight

    def forward(self, input, label):
        return F.binary_cross_entropy(input, label, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid cross entropy of logits; ``pos_weight`` weighs the positive term."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None,
                 name: str | None = None):
        super().__init__(reduction, name)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, logit, label):
        return F.binary_cross_entropy_with_logits(logit, label, self.weight, self.reduction,
                                                  self.pos_weight)


class NLLLoss(_Loss):
    """Negative log likelihood of log-probabilities at integer labels."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 name: str | None = None):
        super().__init__(reduction, name)
        self.weight, self.ignore_index = weight, int(ignore_index)

    def forward(self, input, label):
        return F.nll_loss(input, label, self.weight, self.ignore_index, self.reduction)


class KLDivLoss(Layer):
    """Kullback-Leibler divergence of log-probabilities from probabilities;
    ``reduction`` also takes 'batchmean'."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__()
        self.reduction = _checked("KLDivLoss", reduction, ("mean", "batchmean", "sum", "none"))
        self.log_target = bool(log_target)

    def forward(self, input, label):
        return F.kl_div(input, label, self.reduction, self.log_target)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MarginRankingLoss(_Loss):
    """``max(0, -label * (input - other) + margin)``."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean", name: str | None = None):
        super().__init__(reduction, name)
        self.margin = float(margin)

    def forward(self, input, other, label):
        return F.margin_ranking_loss(input, other, label, self.margin, self.reduction)
