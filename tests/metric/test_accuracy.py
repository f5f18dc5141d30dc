"""metric.Accuracy (Paddle semantics), Precision, Recall, accuracy()."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.metric import Accuracy, Metric, Precision, Recall, accuracy

PRED = np.array([
    [0.1, 0.7, 0.2],   # top1 1, top2 {1, 2}
    [0.5, 0.3, 0.2],   # top1 0, top2 {0, 1}
    [0.2, 0.3, 0.5],   # top1 2, top2 {2, 1}
    [0.6, 0.1, 0.3],   # top1 0, top2 {0, 2}
], "float32")
LABEL = np.array([[1], [1], [0], [2]])  # top1 hits: 1 of 4; top2 hits: 3 of 4


def test_top1():
    m = Accuracy()
    correct = m.compute(d2s.to_tensor(PRED), d2s.to_tensor(LABEL))
    assert isinstance(correct, d2s.Tensor) and correct.shape == [4, 1]
    assert correct.dtype == np.float32
    assert m.update(correct) == 0.25
    assert m.accumulate() == 0.25
    assert m.name() == ["acc"]


def test_topk_list_and_accumulation():
    m = Accuracy(topk=(1, 2), name="a")
    assert m.name() == ["a_top1", "a_top2"]
    assert m.update(m.compute(PRED, LABEL)) == [0.25, 0.75]
    assert m.update(m.compute(PRED[:2], LABEL[:2])) == [0.5, 1.0]
    np.testing.assert_allclose(m.accumulate(), [2 / 6, 5 / 6])
    m.reset()
    assert m.accumulate() == [0.0, 0.0]


def test_label_shapes_and_one_hot():
    m = Accuracy()
    flat = m.compute(PRED, LABEL.reshape(-1)).numpy()
    one_hot = m.compute(PRED, np.eye(3)[LABEL.reshape(-1)]).numpy()
    np.testing.assert_array_equal(flat, one_hot)
    np.testing.assert_array_equal(flat[:, 0], [1, 0, 0, 0])


def test_update_accepts_numpy():
    m = Accuracy()
    assert m.update(np.array([[1.0], [0.0]])) == 0.5


def test_errors():
    with pytest.raises(ValueError, match="topk"):
        Accuracy(topk=(0,))
    with pytest.raises(ValueError, match="top-5 needs at least 5 classes"):
        Accuracy(topk=(5,)).compute(PRED, LABEL)


def test_accuracy_function():
    value = accuracy(d2s.to_tensor(PRED), d2s.to_tensor(LABEL), k=2)
    assert value.shape == [] and float(value) == pytest.approx(0.75)


def test_precision_and_recall():
    preds, labels = np.array([0.9, 0.6, 0.2, 0.5, 0.1]), np.array([1, 0, 1, 1, 0])
    p, r = Precision(), Recall()
    p.update(preds, labels)
    r.update(preds, labels)
    assert p.accumulate() == pytest.approx(2 / 3)  # 0.5 rounds up, as in Paddle
    assert r.accumulate() == pytest.approx(2 / 3)
    assert (p.name(), r.name()) == ("precision", "recall")
    p.reset()
    assert p.accumulate() == 0.0


def test_base_class_is_abstract():
    m = Metric()
    assert m.compute(1, 2) == (1, 2)
    with pytest.raises(NotImplementedError):
        m.update(1)
