"""Auc against the exact rank statistic, Precision/Recall against counts, and
accuracy (written with ops) eagerly, in a static program and in converted code."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.metric import Auc, Precision, Recall, accuracy
from dy2stat.static import InputSpec

rng = np.random.default_rng(11)


def rank_auc(scores, labels):
    """P(score of a positive > score of a negative), ties counted half (Mann-Whitney)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return (greater + 0.5 * ties) / (len(pos) * len(neg))


@pytest.mark.parametrize("num_thresholds", [4095, 7])
def test_auc_is_the_rank_statistic_of_the_binned_scores(num_thresholds):
    metric = Auc(num_thresholds=num_thresholds)
    all_p, all_y = [], []
    for _ in range(3):  # accumulates over batches
        p = rng.uniform(0, 1, 40)
        y = (rng.uniform(0, 1, 40) < p).astype("int64")  # informative scores
        metric.update(np.stack([1 - p, p], axis=1), y.reshape(-1, 1))
        all_p.append(p)
        all_y.append(y)
    p, y = np.concatenate(all_p), np.concatenate(all_y)
    bins = np.floor(p * num_thresholds)
    assert metric.accumulate() == pytest.approx(rank_auc(bins, y), rel=1e-12)
    if num_thresholds == 4095:
        assert metric.accumulate() == pytest.approx(rank_auc(p, y), abs=2e-3)
    assert metric.name() == "auc"


def test_auc_edge_cases():
    metric = Auc()
    assert metric.accumulate() == 0.0
    metric.update(d2s.to_tensor(np.array([0.9, 0.8, 0.1])), np.array([1, 1, 1]))
    assert metric.accumulate() == 0.0  # no negatives yet
    metric.update(np.array([[0.2]]), np.array([0]))
    assert metric.accumulate() == pytest.approx(2 / 3)
    metric.update(np.array([1.0]), np.array([0]))  # a score of exactly 1 is the top bin
    assert metric.accumulate() == pytest.approx(rank_auc(np.array([0.9, 0.8, 0.1, 0.2, 1.0]),
                                                         np.array([1, 1, 1, 0, 0])))
    metric.reset()
    assert metric.accumulate() == 0.0
    with pytest.raises(NotImplementedError, match="ROC"):
        Auc(curve="PR")
    with pytest.raises(ValueError, match="labels"):
        metric.update(np.array([0.5, 0.5]), np.array([1]))


def test_precision_and_recall_against_counts():
    preds = rng.uniform(0, 1, 50)
    labels = rng.integers(0, 2, 50)
    p, r = Precision(), Recall()
    for part in (slice(0, 20), slice(20, 50)):
        p.update(preds[part], labels[part])
        r.update(d2s.to_tensor(preds[part]), d2s.to_tensor(labels[part]))
    hard = preds >= 0.5
    tp = (hard & (labels == 1)).sum()
    assert p.accumulate() == pytest.approx(tp / hard.sum())
    assert r.accumulate() == pytest.approx(tp / (labels == 1).sum())


def accuracy_ref(scores, labels, k):
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return (order == labels.reshape(-1, 1)).any(axis=1).mean()


SCORES = np.array([[0.1, 0.5, 0.5, 0.2], [0.3, 0.3, 0.3, 0.1], [0.9, 0.0, 0.05, 0.05],
                   [0.25, 0.25, 0.25, 0.25], [0.0, 0.1, 0.2, 0.7]], dtype="float32")
LABELS = np.array([2, 2, 3, 0, 3])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_accuracy_matches_a_stable_sort_with_ties(k):
    got = accuracy(d2s.to_tensor(SCORES), d2s.to_tensor(LABELS.reshape(-1, 1)), k=k)
    assert got.shape == [] and got.dtype == np.float32
    assert got.item() == pytest.approx(accuracy_ref(SCORES, LABELS, k))
    flat = d2s.static.accuracy(d2s.to_tensor(SCORES), d2s.to_tensor(LABELS), k=k)
    assert flat.item() == got.item()
    one_hot = np.eye(4, dtype="float32")[LABELS]
    assert accuracy(d2s.to_tensor(SCORES), d2s.to_tensor(one_hot), k=k).item() == got.item()


def test_accuracy_counts_and_errors():
    correct = d2s.zeros([1], "int64")
    total = d2s.zeros([1], "int64")
    accuracy(d2s.to_tensor(SCORES), d2s.to_tensor(LABELS), k=2, correct=correct, total=total)
    assert (correct.item(), total.item()) == (round(accuracy_ref(SCORES, LABELS, 2) * 5), 5)
    with pytest.raises(ValueError, match="classes"):
        accuracy(d2s.to_tensor(SCORES), d2s.to_tensor(LABELS), k=5)


def test_accuracy_in_a_static_program():
    main = d2s.static.Program()
    d2s.enable_static()
    try:
        with d2s.static.program_guard(main, d2s.static.Program()):
            scores = d2s.static.data("scores", [None, 4])
            labels = d2s.static.data("labels", [None, 1], "int64")
            acc = d2s.static.accuracy(scores, labels, k=2)
    finally:
        d2s.disable_static()
    (value,) = d2s.static.Executor().run(main, feed={"scores": SCORES,
                                                     "labels": LABELS.reshape(-1, 1)},
                                         fetch_list=[acc])
    assert float(value) == pytest.approx(accuracy_ref(SCORES, LABELS, 2))


def test_accuracy_inside_converted_code():
    @d2s.jit.to_static(input_spec=[InputSpec([None, 4], "float32"),
                                   InputSpec([None, 1], "int64")])
    def evaluate(scores, labels):
        probs = d2s.nn.functional.softmax(scores)
        return d2s.static.accuracy(probs, labels, k=1), d2s.metric.accuracy(probs, labels, k=3)

    for rows in (SCORES, SCORES[:3]):
        labels = LABELS[:len(rows)].reshape(-1, 1)
        top1, top3 = evaluate(d2s.to_tensor(rows), d2s.to_tensor(labels))
        assert top1.item() == pytest.approx(accuracy_ref(rows, labels, 1))
        assert top3.item() == pytest.approx(accuracy_ref(rows, labels, 3))
