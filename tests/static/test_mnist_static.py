"""The first seed's MNIST model as a static program, trained with SGD built in
static mode: ``append_backward`` plus update ops that write each parameter.

Model (Paddle 1.8's example): Conv2D(1, 20, 5, act=relu) -> max pool 2x2 ->
reshape -> Linear(20 * 12 * 12, 10) -> softmax; loss: cross entropy.
The data: 64 fixed random 1x28x28 images, labelled by a fixed rule (the
argmax of 10 fixed random projections), so a linear read-out can learn it.
"""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dispatch import apply
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Operator
from dy2stat.runtime.verify import verify
from tests.static.helpers import building

STEPS = 30
LEARNING_RATE = 0.05


def _data():
    rng = np.random.default_rng(1234)
    images = rng.random((64, 1, 28, 28)).astype(np.float32)
    projections = rng.standard_normal((784, 10)).astype(np.float32)
    centered = images.reshape(64, 784) - images.reshape(64, 784).mean(axis=0)
    labels = np.argmax(centered @ projections, axis=1).astype(np.int64).reshape(64, 1)
    return images, labels


def _model(img):
    """Conv -> pool -> reshape -> fc; returns (logits, probabilities)."""
    bound = 1.0 / np.sqrt(25)
    conv_w = d2s.static.create_parameter(
        [20, 1, 5, 5], name="conv.w", initializer=("uniform", {"min": -bound, "max": bound,
                                                              "seed": 7}))
    conv_b = d2s.static.create_parameter([20], name="conv.b",
                                         initializer=("full", {"value": 0.0}))
    h = apply("conv2d", img, conv_w, stride=[1, 1], padding=[0, 0])
    h = apply("relu", h + conv_b.reshape([1, 20, 1, 1]))
    h = apply("max_pool2d", h, kernel_size=[2, 2], stride=[2, 2])
    assert h.shape == [-1, 20, 12, 12]
    flat = h.reshape([-1, 20 * 12 * 12])
    logits = d2s.static.nn.fc(flat, 10, name="fc")
    return logits, apply("softmax", logits, axis=-1)


def _sgd_updates(block, pairs, lr):
    """``p_new = p - lr * g`` then an ``assign`` whose output is the parameter itself."""
    for param, grad in pairs:
        new = param - grad * lr
        block.append_op(Operator("assign", {"X": [new.name]}, {"Out": [param.name]}, {}))


def _build(minimize):
    with building() as (main, startup):
        img = d2s.static.data("img", [None, 1, 28, 28])
        label = d2s.static.data("label", [None, 1], "int64")
        logits, prob = _model(img)
        loss = apply("cross_entropy", logits, label)
        accuracy = (prob.argmax(axis=1) == label.reshape([-1])).astype("float32").mean()
        params = minimize(main, loss)
    return main, startup, loss, accuracy, prob, params


def _manual_sgd(main, loss):
    pairs = d2s.static.append_backward(loss)
    _sgd_updates(main.global_block(), pairs, LEARNING_RATE)
    return [p.name for p, _ in pairs]


def _train(main, startup, loss, accuracy):
    images, labels = _data()
    scope = Scope()
    exe = d2s.static.Executor()
    d2s.seed(2024)  # the fc weights are drawn from the global generator
    exe.run(startup, scope=scope)
    losses, accuracies = [], []
    for _ in range(STEPS):
        value, acc = exe.run(main, feed={"img": images, "label": labels},
                             fetch_list=[loss, accuracy], scope=scope)
        losses.append(float(value))
        accuracies.append(float(acc))
    return losses, accuracies, scope


def test_mnist_trains_with_static_sgd():
    main, startup, loss, accuracy, prob, params = _build(_manual_sgd)
    assert sorted(params) == ["conv.b", "conv.w", "fc.b", "fc.w"]
    types = [op.type for op in main.global_block().ops]
    for t in ("conv2d", "max_pool2d", "reshape", "matmul", "softmax", "cross_entropy",
              "conv2d_grad_filter", "max_pool2d_grad", "cross_entropy_grad"):
        assert t in types, t
    assert "conv2d_grad_input" not in types  # the image needs no gradient
    writes = [op for op in main.global_block().ops if op.output_names()[0] in params]
    assert [op.type for op in writes] == ["assign"] * 4
    verify(main, feed_names=["img", "label"])

    losses, accuracies, scope = _train(main, startup, loss, accuracy)
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.75 * losses[0], losses
    windows = [np.mean(losses[k:k + 5]) for k in range(0, STEPS, 5)]
    assert all(a > b for a, b in zip(windows, windows[1:])), windows  # falls steadily
    assert accuracies[-1] > accuracies[0], accuracies
    for name in params:  # the parameters live (updated) in the scope
        assert np.isfinite(np.asarray(scope[name])).all()


def test_one_static_sgd_step_matches_numpy():
    """The update ops do what they say: p <- p - lr * dL/dp, with dL/dp from the program."""
    main, startup, loss, accuracy, prob, params = _build(_manual_sgd)
    grads = {p: main.global_block().vars[f"{p}@GRAD"] for p in params}
    images, labels = _data()
    scope = Scope()
    exe = d2s.static.Executor()
    exe.run(startup, scope=scope)
    before = {p: np.array(scope[p]) for p in params}
    got = exe.run(main, feed={"img": images[:8], "label": labels[:8]},
                  fetch_list=[grads[p].name for p in params], scope=scope)
    for p, g in zip(params, got):
        np.testing.assert_allclose(np.asarray(scope[p]), before[p] - LEARNING_RATE * g,
                                   rtol=1e-5, atol=1e-7)


def test_the_optimizer_package_builds_the_same_training_step():
    optimizer = pytest.importorskip("dy2stat.optimizer")

    def minimize(main, loss):
        _, pairs = optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
        return [p.name for p, _ in pairs]

    main, startup, loss, accuracy, _, params = _build(minimize)
    assert sorted(params) == ["conv.b", "conv.w", "fc.b", "fc.w"]
    losses, _, _ = _train(main, startup, loss, accuracy)
    manual = _build(_manual_sgd)
    expected, _, _ = _train(manual[0], manual[1], manual[2], manual[3])
    np.testing.assert_allclose(losses, expected, rtol=1e-4)
