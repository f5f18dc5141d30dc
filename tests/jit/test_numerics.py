"""With the default flags a converted Layer trains as its eager self.

Each case trains a model a few steps from the same weights twice, through the
ordinary eager loop (``loss.backward(); opt.step(); opt.clear_grad()``):
eagerly, and converted (``jit.to_static``). The losses of every step and the
final parameters must agree bit for bit (more than the ``rtol=1e-5`` of
Paddle's own dynamic-to-static tests): the converted plan runs eager mode's
kernels on the same values (docs/performance.md), and eager backward adds a
weight's gradients newest first, as a ``while`` loop's backward adds them over
its iterations.

Models: ``vision.models.LeNet``; the models of examples/; the LSTM language
model of benchmarks/train_step.py; conv / BatchNorm / depthwise networks at
64x64 px, at batch sizes that the opt-in batch splitting would and would not
split. BatchNorm's running statistics are not compared (training mode uses
the batch's statistics).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.nn import functional as F
from dy2stat.runtime import batch_split
from dy2stat.static import InputSpec
from dy2stat.vision.models import LeNet

ROOT = Path(__file__).resolve().parents[2]


def _module(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mnist_example = _module("examples/mnist_declarative.py")
rnn_example = _module("examples/rnn_dynamic_loop.py")
mlp_example = _module("examples/hybrid_mlp.py")
hook_example = _module("examples/forward_pre_hook.py")
train_step = _module("benchmarks/train_step.py")


class MobileNetLike(nn.Layer):
    """conv-BN-ReLU (stride 2), then blocks of depthwise conv-BN-ReLU (groups ==
    channels) and pointwise conv-BN-ReLU, a global mean, Linear."""

    def __init__(self, width=8, blocks=2, classes=10):
        super().__init__()
        layers = self._unit(3, width, 3, 2, 1)
        for i in range(blocks):
            layers += self._unit(width, width, 3, 2 if i == 0 else 1, width)
            layers += self._unit(width, 2 * width, 1, 1, 1)
            width *= 2
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(width, classes)

    @staticmethod
    def _unit(cin, cout, k, stride, groups):
        return [nn.Conv2D(cin, cout, k, stride=stride, padding=k // 2, groups=groups,
                          bias_attr=False), nn.BatchNorm2D(cout), nn.ReLU()]

    def forward(self, x):
        return self.fc(self.features(x).mean(axis=[2, 3]))


class DepthwiseNet(nn.Layer):
    """Conv, depthwise and pointwise convolutions with biases, max and global average
    pooling: every op treats the batch rows apart, so batch splitting could run it."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Conv2D(3, width, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2D(width, width, 3, padding=1, groups=width)
        self.pointwise = nn.Conv2D(width, 2 * width, 1)
        self.pool = nn.MaxPool2D(2)
        self.gap = nn.AvgPool2D(16)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        h = F.relu(self.stem(x))
        h = self.pool(F.relu(self.depthwise(h)))
        h = self.gap(F.relu(self.pointwise(h)))
        return self.fc(h.flatten(1))


def _images(batch, channels, size, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, size, size)).astype("float32")
    return x, rng.integers(0, classes, (batch, 1)).astype("int64")


def classifier(make, batch, channels, size, loss_fn=None, spec=None):
    """A case: the model maker, the loss of a model, the input spec to convert with."""
    x, y = _images(batch, channels, size)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    return make, lambda net: loss_fn(net(d2s.to_tensor(x)), d2s.to_tensor(y)), spec


def mnist():
    """The example's model on its synthetic digits, with its loss (the forward ends
    in a softmax)."""
    x, y = (d2s.to_tensor(a) for a in mnist_example.synthetic_digits(16))
    return (mnist_example.MNIST,
            lambda net: F.cross_entropy(net(x), y, use_softmax=False), None)


def dynamic_rnn():
    x, length, label = next(rnn_example.batches(1, 16, seed=2))
    spec = [InputSpec([-1, rnn_example.MAX_LEN, rnn_example.FEATURES], "float32", name="x"),
            InputSpec([], "int64", name="length")]
    x, length, label = (d2s.to_tensor(a) for a in (x, length, label))
    return (rnn_example.DynamicRNN,
            lambda net: F.cross_entropy(net(x, length), label), spec)


def hybrid_mlp():
    x = d2s.to_tensor(np.random.default_rng(3).standard_normal((4, 512)).astype("float32"))
    return mlp_example.get_net, lambda net: (net(x) ** 2).mean(), None


def hooked_model():
    """The example's Model (a tensor ``if`` in its converted forward) whose Linear
    doubles its input in a forward pre-hook."""

    def make():
        linear = nn.Linear(13, 5)
        linear.register_forward_pre_hook(hook_example.forward_pre_hook)
        return hook_example.Model(linear)

    x = d2s.to_tensor(np.random.default_rng(4).standard_normal((8, 13)).astype("float32"))
    return make, lambda net: (net(x) ** 2).mean(), None


def language_model():
    ids = d2s.to_tensor(np.random.default_rng(5).integers(0, 50, (8, 11)).astype("int64"))
    length = d2s.to_tensor(np.array(10, "int64"))
    return (lambda: train_step.LanguageModel(50, 16, 32)), lambda net: net(ids, length), None


OPTIMIZERS = {
    "sgd": lambda params, lr: d2s.optimizer.SGD(parameters=params, learning_rate=lr),
    "momentum": lambda params, lr: d2s.optimizer.Momentum(parameters=params, learning_rate=lr,
                                                          momentum=0.9),
    "adam": lambda params, lr: d2s.optimizer.Adam(parameters=params, learning_rate=lr),
}
RATES = {"sgd": 0.05, "momentum": 0.05, "adam": 1e-2}
STEPS = 3


class Case(NamedTuple):
    make: Callable  # -> (model maker, loss of a model, input spec to convert with)
    optimizer: str
    lr: float
    steps: int = STEPS


# DepthwiseNet at 128 rows is past the batch-splitting threshold, at 8 it is not
# (see the last test); MobileNetLike's mean over the map keeps it whole.
CASES = {
    "LeNet": Case(lambda: classifier(LeNet, 16, 1, 28), "sgd", 1e-3),
    "MNIST (mnist_declarative)": Case(mnist, "adam", 1e-2),
    "DynamicRNN (rnn_dynamic_loop)": Case(dynamic_rnn, "adam", 1e-2),
    "42x512 MLP (hybrid_mlp)": Case(hybrid_mlp, "sgd", 1e-6, steps=2),  # 11M weights
    "hooked Model (forward_pre_hook)": Case(hooked_model, "momentum", 0.05),
    "LSTM LM (train_step)": Case(language_model, "adam", 1e-2),
    "MobileNetLike b4": Case(lambda: classifier(MobileNetLike, 4, 3, 64), "momentum", 0.05),
    "MobileNetLike b32": Case(lambda: classifier(MobileNetLike, 32, 3, 64), "adam", 1e-2),
    "DepthwiseNet b8": Case(lambda: classifier(DepthwiseNet, 8, 3, 64), "adam", 1e-2),
    "DepthwiseNet b128": Case(lambda: classifier(DepthwiseNet, 128, 3, 64), "sgd", 0.05),
}


def train(case: Case, convert: bool):
    """Losses of the case's training steps and the final parameters."""
    make, loss_of, spec = case.make()
    jit.enable_to_static(convert)  # decorated forwards (the examples') run eagerly when off
    d2s.seed(11)
    net = make()
    if convert:
        jit.to_static(net, input_spec=spec)
    opt = OPTIMIZERS[case.optimizer](net.parameters(), case.lr)
    losses = []
    for _ in range(case.steps):
        loss = loss_of(net)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    return np.array(losses), [p.numpy() for p in net.parameters()]


def assert_same_training(got, want):
    """Losses and parameters ``(losses, params)`` of a converted run against eager's:
    the same kernels on the same values, so the same bits."""
    (losses, params), (eager_losses, eager_params) = got, want
    assert np.isfinite(eager_losses).all()
    np.testing.assert_array_equal(losses, eager_losses)
    for p, e in zip(params, eager_params, strict=True):
        np.testing.assert_array_equal(p, e)


@pytest.mark.parametrize("name", CASES)
def test_a_converted_model_trains_as_its_eager_self(name):
    case = CASES[name]
    assert_same_training(train(case, convert=True), train(case, convert=False))


@pytest.mark.parametrize("blas", [1, 2])
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_optimizer_on_one_and_two_blas_threads(optimizer, blas):
    """On one BLAS thread a plan overlaps its heavy ops on the worker thread; on
    two it runs them in turn: eager's bits either way."""
    case = Case(lambda: classifier(MobileNetLike, 8, 3, 64), optimizer, RATES[optimizer])
    with threadpool_limits(limits=blas, user_api="blas"):
        assert_same_training(train(case, convert=True), train(case, convert=False))


def test_model_fit_with_input_specs_trains_as_without(tmp_path):
    """examples/lenet_model.py: ``Model.fit`` converts the network when given
    ``inputs`` specs (batch dim -1) and trains it with the same eager loop."""
    x, y = _images(24, 1, 28)
    results = []
    for inputs in (None, InputSpec([-1, 1, 28, 28], "float32", "x")):
        d2s.seed(12)
        model = d2s.Model(LeNet(), inputs=inputs,
                          labels=None if inputs is None else InputSpec([-1, 1], "int64", "y"))
        model.prepare(d2s.optimizer.Adam(learning_rate=2e-3, parameters=model.parameters()),
                      nn.CrossEntropyLoss())
        history = model.fit(d2s.io.TensorDataset([x, y]), batch_size=8, epochs=1,
                            shuffle=False, verbose=0)
        results.append((np.array(history["loss"]).ravel(),
                        [p.numpy() for p in model.parameters()]))
    assert model._adapter.converted
    assert_same_training(results[1], results[0])


@pytest.mark.parametrize("name, splits", [("DepthwiseNet b8", False),
                                          ("DepthwiseNet b128", True)])
def test_the_large_batches_above_would_split_if_asked(monkeypatch, name, splits):
    """So the exactness above covers batches that batch splitting (opt-in) would
    run as two halves, and batches that it would run whole."""
    calls = []
    run = batch_split.run_halves
    monkeypatch.setattr(batch_split, "run_halves", lambda *a: calls.append(a) or run(*a))
    make, loss_of, _ = CASES[name].make()
    d2s.set_flags({"batch_parallelism": True})
    loss_of(jit.to_static(make())).backward()
    assert len(calls) == (2 if splits else 0)  # the forward and the backward
