"""What CuPy 14 does differently, as a user meets it (``gpu``-marked: a GPU, or the
strict test double ``fake_cupy``): NumPy scalars beside device tensors, nothing
converted to the host behind the user's back (metrics, optimizers, ``Model``,
callbacks), and values cached per device, not per array module."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, metric, nn, optimizer
from dy2stat.hapi import Callback, EarlyStopping, Model
from dy2stat.io import TensorDataset
from dy2stat.kernels import backend

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu():
    d2s.set_device("gpu")
    yield backend.cupy
    d2s.set_device("cpu")


def two_gpus():
    return pytest.mark.skipif(not d2s.is_compiled_with_cuda() or
                              backend.cupy.cuda.runtime.getDeviceCount() < 2,
                              reason="needs two GPUs")


# ------------------------------------------------------- NumPy scalars are scalars

SCALAR_CASES = [
    ("mul f32", lambda t: t * np.float32(2)),
    ("rmul f64", lambda t: np.float64(3) * t),
    ("add i64", lambda t: t + np.int64(1)),
    ("pow", lambda t: t ** np.float32(2)),
    ("compare", lambda t: t > np.float32(0.5)),
    ("reflected compare", lambda t: np.float32(0.5) < t),
    ("reflected divide", lambda t: np.float32(3) / (t + 1)),
    ("reflected subtract i64", lambda t: np.int64(2) - t),
    ("maximum", lambda t: d2s.maximum(t, np.float32(0.25))),
    ("where", lambda t: d2s.where(t > 0.5, t, np.float32(-1))),
    ("int tensor", lambda t: t.astype("int32") * np.int32(3)),
]


@pytest.mark.parametrize("name, fn", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_numpy_scalars_are_scalars_on_every_device(gpu, name, fn):
    host = np.array([0.0, 0.5, 1.5], "float32")
    want = fn(d2s.to_tensor(host, place="cpu"))
    got = fn(d2s.to_tensor(host))
    assert got.place == "gpu:0" and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_numpy_scalars_in_converted_code_and_gradients(gpu):
    @jit.to_static
    def f(x):
        y = x * np.float32(2) + np.float64(1)
        if y.sum() > np.float32(3):
            y = y - np.float32(1)
        return y

    x = d2s.to_tensor([1.0, 2.0], stop_gradient=False)
    out = f(x)
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0])
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_a_host_array_beside_a_device_tensor_is_still_an_error(gpu):
    with pytest.raises(ValueError, match="cpu and gpu:0"):
        d2s.ones([2]) + np.ones(2, "float32")


# ------------------------------------------- no np.asarray of a device array

def test_metrics_take_device_tensors_and_arrays(gpu):
    pred = d2s.to_tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    label = d2s.to_tensor([[1], [0], [0]])
    acc = metric.Accuracy()
    acc.update(acc.compute(pred, label))
    assert acc.accumulate() == pytest.approx(2 / 3)
    acc.update(acc.compute(pred._data, label._data))  # raw device arrays too
    assert acc.accumulate() == pytest.approx(2 / 3)
    for cls in (metric.Precision, metric.Recall, metric.Auc):
        m = cls()
        m.update(pred[:, 1:], label)
        m.update(pred._data[:, 1:], label._data)
        assert 0.0 <= m.accumulate() <= 1.0


def test_optimizer_state_round_trips_on_the_gpu(gpu):
    d2s.seed(0)
    net = nn.Linear(3, 2)
    opt = optimizer.Adam(parameters=net.parameters(), learning_rate=0.1)
    net(d2s.randn([4, 3])).sum().backward()
    opt.step()
    state = opt.state_dict()
    raw = {k: (v._data if hasattr(v, "_data") else v) for k, v in state.items()}
    fresh = optimizer.Adam(parameters=net.parameters(), learning_rate=0.1)
    fresh.set_state_dict(raw)  # device arrays, not Tensors
    for key, value in fresh.state_dict().items():
        if hasattr(value, "numpy"):
            np.testing.assert_array_equal(value.numpy(), state[key].numpy())


OPTIMIZERS = {
    "SGD": lambda ps: optimizer.SGD(0.1, parameters=ps, weight_decay=0.01),
    "Momentum": lambda ps: optimizer.Momentum(0.1, parameters=ps, use_nesterov=True,
                                              grad_clip=optimizer.ClipGradByNorm(0.5)),
    "Adam": lambda ps: optimizer.Adam(0.05, parameters=ps,
                                      grad_clip=optimizer.ClipGradByGlobalNorm(0.5)),
    "AdamW": lambda ps: optimizer.AdamW(0.05, parameters=ps,
                                        grad_clip=optimizer.ClipGradByValue(0.2)),
    "RMSProp": lambda ps: optimizer.RMSProp(0.05, parameters=ps, momentum=0.5, centered=True),
    "Adagrad": lambda ps: optimizer.Adagrad(0.1, parameters=ps),
    "Adamax": lambda ps: optimizer.Adamax(0.05, parameters=ps),
    "Lamb": lambda ps: optimizer.Lamb(0.05, parameters=ps),
    "Adam, ReduceOnPlateau": lambda ps: optimizer.Adam(
        optimizer.lr.ReduceOnPlateau(0.05, patience=0, factor=0.5), parameters=ps),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_every_optimizer_trains_on_the_gpu_as_on_the_cpu(gpu, name):
    """Updates, gradient clipping and a schedule fed the device loss: the CPU's numbers."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 3)).astype("float32"), rng.standard_normal((8, 2))
    runs = []
    for place in ("cpu", "gpu"):
        d2s.set_device(place)
        d2s.seed(0)
        net = nn.Linear(3, 2)
        opt = OPTIMIZERS[name](net.parameters())
        losses = []
        for _ in range(3):
            loss = ((net(d2s.to_tensor(x)) - d2s.to_tensor(y.astype("float32"))) ** 2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
            if isinstance(opt._learning_rate, optimizer.lr.LRScheduler):
                opt._learning_rate.step(loss)  # a device value, as the loss is
            losses.append(loss.item())
        runs.append((losses, net.weight.numpy(), opt.get_lr()))
    for got, want in zip(runs[1], runs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _Seen(Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, step, logs=None):
        self.logs.append(dict(logs or {}))


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_model_fits_and_evaluates_on_the_gpu(gpu, tmp_path, static):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("int64")
    data = TensorDataset([d2s.to_tensor(x), d2s.to_tensor(y)])  # device tensors
    d2s.seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    inputs = [d2s.static.InputSpec([-1, 4], "float32", "x")] if static else None
    labels = [d2s.static.InputSpec([-1, 1], "int64", "y")] if static else None
    model = Model(net, inputs, labels)
    model.prepare(optimizer.Adam(parameters=net.parameters(), learning_rate=0.05),
                  nn.CrossEntropyLoss(), metric.Accuracy())
    seen = _Seen()
    stop = EarlyStopping(monitor="loss", patience=5, verbose=0, save_best_model=False)
    history = model.fit(data, data, epochs=3, batch_size=8, verbose=0, callbacks=[seen, stop])
    losses = [epoch[0] for epoch in history["loss"]]
    assert losses[-1] < losses[0] and seen.logs
    result = model.evaluate(data, batch_size=16, verbose=0)
    assert 0.5 <= result["acc"] <= 1.0
    model.save(str(tmp_path / "m"))
    model.load(str(tmp_path / "m"))
    (pred,) = model.predict(data, batch_size=16, stack_outputs=True, verbose=0)
    assert pred.shape == (32, 2)


# ------------------------------------------------------- per device, not per module

@two_gpus()
def test_a_converted_function_runs_on_each_gpu_with_its_own_constants(gpu):
    @jit.to_static
    def f(x):
        i = 0
        while i < 3:
            x = x * 2.0 + 1.0
            i += 1
        return d2s.relu(x) + d2s.full([2], 0.5)

    want = np.array([15.5, 0.5], "float32")
    for name in ("gpu:0", "gpu:1", "gpu:0"):
        d2s.set_device(name)
        x = d2s.to_tensor([1.0, -10.0])
        out = f(x)
        assert out.place == name
        np.testing.assert_allclose(out.numpy(), want)


@two_gpus()
def test_random_draws_and_layers_on_the_second_gpu(gpu):
    d2s.set_device("gpu:1")
    d2s.seed(3)
    a = d2s.randn([4])
    layer = nn.Linear(4, 2)
    assert a.place == "gpu:1" and layer.weight.place == "gpu:1"
    d2s.set_device("gpu:0")
    b = d2s.randn([4])
    assert b.place == "gpu:0"
    out = layer(a.reshape([1, 4]))
    assert out.place == "gpu:1"
