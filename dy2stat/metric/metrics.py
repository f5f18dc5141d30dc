"""Metrics (Paddle's ``paddle.metric``): ``compute`` per batch, ``update`` to accumulate,
``accumulate`` for the running value, ``reset`` between epochs. The metric objects
accumulate on the host; ``accuracy`` is written with ops, so it also runs inside
converted code and static programs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dy2stat import creation, device, ops
from dy2stat.kernels.backend import to_host
from dy2stat.nn.functional.common import constant_like
from dy2stat.tensor import Tensor

__all__ = ["Accuracy", "Auc", "Metric", "Precision", "Recall", "accuracy"]


def _numpy(value) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    if getattr(value, "is_static", False):
        raise TypeError("metrics compute on values, not static Variables: fetch them first")
    return to_host(value)


def _tensor(array: np.ndarray) -> Tensor:
    return Tensor(device.current.xp.asarray(array))


class Metric:
    """Base class: define ``update``, ``accumulate``, ``reset`` and ``name``.

    ``compute(*outputs_and_labels)`` turns a batch's predictions and labels
    into what ``update`` takes (by default, the inputs unchanged); ``Model``
    calls ``update(*compute(...))`` for every batch.
    """

    def reset(self) -> None:
        """Forget what was accumulated (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define reset()")

    def update(self, *args):
        """Add one batch (what ``compute`` returned); may return the batch's value
        (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define update()")

    def accumulate(self):
        """The metric over everything since the last ``reset`` (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define accumulate()")

    def name(self):
        """The metric's name, or a list of names (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define name()")

    def compute(self, *args):
        """What ``update`` takes, from a batch's predictions and labels (by default, the
        inputs unchanged)."""
        return args


class Accuracy(Metric):
    """The fraction of samples whose label is among the ``k`` highest scores, per ``k``
    in ``topk``.

    ``compute(pred, label)`` → a float32 [N, maxk] Tensor of hits (label ids
    shaped [N] or [N, 1], or one-hot [N, C]); ``update(correct)`` returns the
    batch accuracy; ``accumulate()`` the running one (a float, or a list when
    ``topk`` has several entries).
    """

    def __init__(self, topk: Sequence[int] = (1,), name: str | None = None, *args, **kwargs):
        topk = (topk,) if isinstance(topk, int) else tuple(topk)
        if not topk or any(not isinstance(k, int) or k < 1 for k in topk):
            raise ValueError(f"Accuracy: topk must be positive ints, got {topk!r}")
        self.topk = topk
        self.maxk = max(topk)
        name = name or "acc"
        self._name = [f"{name}_top{k}" for k in topk] if self.maxk != 1 else [name]
        self.reset()

    def compute(self, pred, label, *args) -> Tensor:
        pred, label = _numpy(pred), _numpy(label)
        if pred.shape[-1] < self.maxk:
            raise ValueError(f"Accuracy: top-{self.maxk} needs at least {self.maxk} classes, "
                             f"pred has {pred.shape[-1]}")
        top = np.argsort(-pred, axis=-1, kind="stable")[..., :self.maxk]
        if label.ndim == pred.ndim and label.shape[-1] != 1:
            label = np.argmax(label, axis=-1)[..., None]  # one-hot
        else:
            label = label.reshape(*pred.shape[:-1], 1)
        return _tensor((top == label).astype(np.float32))

    def update(self, correct, *args):
        correct = _numpy(correct)
        num_samples = int(np.prod(correct.shape[:-1]))
        accs = []
        for i, k in enumerate(self.topk):
            hits = float(correct[..., :k].sum())
            accs.append(hits / num_samples if num_samples else 0.0)
            self.total[i] += hits
            self.count[i] += num_samples
        return accs[0] if len(self.topk) == 1 else accs

    def reset(self) -> None:
        self.total = [0.0] * len(self.topk)
        self.count = [0] * len(self.topk)

    def accumulate(self):
        res = [t / c if c > 0 else 0.0 for t, c in zip(self.total, self.count)]
        return res[0] if len(self.topk) == 1 else res

    def name(self) -> list[str]:
        return self._name


class _BinaryMetric(Metric):
    """Precision/recall of binary predictions: ``pred`` probabilities, ``labels`` 0/1."""

    def __init__(self, name: str, *args, **kwargs):
        self._name = name
        self.reset()

    def update(self, preds, labels):
        preds = np.floor(_numpy(preds) + 0.5).astype(np.int64).reshape(-1)
        labels = _numpy(labels).astype(np.int64).reshape(-1)
        if preds.shape != labels.shape:
            raise ValueError(f"{type(self).__name__}: {preds.size} predictions for "
                             f"{labels.size} labels")
        self.tp += int(((preds == 1) & (labels == 1)).sum())
        self.fp += int(((preds == 1) & (labels == 0)).sum())
        self.fn += int(((preds == 0) & (labels == 1)).sum())

    def reset(self) -> None:
        self.tp = self.fp = self.fn = 0

    def name(self) -> str:
        return self._name


class Precision(_BinaryMetric):
    """``tp / (tp + fp)`` over binary predictions (0.0 when nothing is predicted positive)."""

    def __init__(self, name: str = "precision", *args, **kwargs):
        super().__init__(name)

    def accumulate(self) -> float:
        predicted = self.tp + self.fp
        return self.tp / predicted if predicted else 0.0


class Recall(_BinaryMetric):
    """``tp / (tp + fn)`` over binary predictions (0.0 when there are no positives)."""

    def __init__(self, name: str = "recall", *args, **kwargs):
        super().__init__(name)

    def accumulate(self) -> float:
        actual = self.tp + self.fn
        return self.tp / actual if actual else 0.0


class Auc(Metric):
    """The area under the ROC curve, from predictions binned at ``num_thresholds``
    thresholds (Paddle's ``Auc``).

    ``update(preds, labels)``: ``preds`` [N, 2] class probabilities (column 1 is the
    positive class) or [N] / [N, 1] positive-class probabilities; ``labels`` 0/1.
    """

    def __init__(self, curve: str = "ROC", num_thresholds: int = 4095, name: str = "auc",
                 *args, **kwargs):
        if curve != "ROC":
            raise NotImplementedError(f"Auc: only curve='ROC' is supported, got {curve!r}")
        if num_thresholds < 1:
            raise ValueError(f"Auc: num_thresholds must be positive, got {num_thresholds}")
        self._curve, self._num_thresholds, self._name = curve, int(num_thresholds), name
        self.reset()

    def update(self, preds, labels):
        preds, labels = _numpy(preds), _numpy(labels).reshape(-1)
        positive = preds[:, 1] if preds.ndim == 2 and preds.shape[1] == 2 else preds.reshape(-1)
        if positive.shape != labels.shape:
            raise ValueError(f"Auc: {positive.size} predictions for {labels.size} labels")
        bins = np.clip((positive * self._num_thresholds).astype(np.int64), 0,
                       self._num_thresholds)
        is_positive = labels.astype(bool)
        np.add.at(self._stat_pos, bins[is_positive], 1)
        np.add.at(self._stat_neg, bins[~is_positive], 1)

    def reset(self) -> None:
        self._stat_pos = np.zeros(self._num_thresholds + 1, dtype=np.int64)
        self._stat_neg = np.zeros(self._num_thresholds + 1, dtype=np.int64)

    def accumulate(self) -> float:
        """The trapezoid area under the curve swept from the highest threshold down
        (0.0 until both classes have been seen)."""
        pos = np.concatenate([[0], np.cumsum(self._stat_pos[::-1])]).astype(np.float64)
        neg = np.concatenate([[0], np.cumsum(self._stat_neg[::-1])]).astype(np.float64)
        if pos[-1] == 0 or neg[-1] == 0:
            return 0.0
        area = (np.abs(neg[1:] - neg[:-1]) * (pos[1:] + pos[:-1]) / 2).sum()
        return float(area / pos[-1] / neg[-1])

    def name(self) -> str:
        return self._name


def accuracy(input, label, k: int = 1, correct=None, total=None):  # noqa: A002
    """Top-``k`` accuracy of one batch as a float32 0-D tensor (Paddle's
    ``metric.accuracy`` and ``static.accuracy``).

    ``input`` [N, C] scores; ``label`` class ids [N] or [N, 1] (or one-hot [N, C]). A
    sample is a hit when fewer than ``k`` classes rank above its label's in a stable
    descending sort (higher score first, a lower index first among equal scores).
    Written with ops: it runs eagerly, in static programs and inside converted code.
    ``correct`` and ``total`` (int tensors), when given, receive the hit and sample
    counts.
    """
    if k < 1:
        raise ValueError(f"accuracy: k must be positive, got {k}")
    if len(input.shape) != 2:
        raise ValueError(f"accuracy: input must be [N, C] scores, got shape {list(input.shape)}")
    classes = input.shape[1]
    if classes < 0:
        raise ValueError("accuracy: the number of classes (input.shape[1]) must be known")
    if k > classes:
        raise ValueError(f"accuracy: top-{k} needs at least {k} classes, input has {classes}")
    if len(label.shape) == 2 and label.shape[1] == classes and classes != 1:
        label = ops.argmax(label, axis=-1)  # one-hot
    label = ops.reshape(label, [-1, 1])
    index = constant_like(np.arange(classes, dtype=label.dtype), label)
    picked = ops.sum(ops.where(ops.equal(index, label), input, creation.zeros_like(input)),
                     axis=-1, keepdim=True)  # each sample's score of its label
    ahead = ops.logical_or(ops.greater_than(input, picked),
                           ops.logical_and(ops.equal(input, picked),
                                           ops.less_than(index, label)))
    hits = ops.cast(ops.less_than(ops.sum(ops.cast(ahead, "int64"), axis=-1), k), "float32")
    for target, count in ((correct, ops.sum(hits)), (total, ops.numel(hits))):
        if target is not None:
            target.set_value(ops.reshape(ops.cast(count, target.dtype), list(target.shape)))
    return ops.mean(hits)
