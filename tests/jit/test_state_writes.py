"""State a converted forward writes reaches the Layer (and globals) after every call, as
it does eagerly: BatchNorm's running statistics, buffers, attributes, counters."""

import os

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.jit.trace_record import SideEffectError
from dy2stat.static import InputSpec, Variable
from dy2stat.tensor import Tensor
from tests.jit.helpers import tensor


class ConvBN(nn.Layer):
    """A small conv + BatchNorm classifier of 1x8x8 images."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)
        self.fc = nn.Linear(4 * 8 * 8, 2)

    def forward(self, x):
        h = nn.functional.relu(self.bn(self.conv(x)))
        return self.fc(d2s.flatten(h, 1))


def _data():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 1, 8, 8)) * 2 + 1).astype("float32")
    y = (x.mean(axis=(1, 2, 3)) > 1).astype("int64")[:, None]
    return x, y


def _train(net, x, y, epochs=2, batch=16):
    opt = d2s.optimizer.Momentum(parameters=net.parameters(), learning_rate=0.05)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for i in range(0, len(x), batch):
            loss = loss_fn(net(d2s.to_tensor(x[i:i + batch])), d2s.to_tensor(y[i:i + batch]))
            loss.backward()
            opt.step()
            opt.clear_grad()
    net.eval()
    with d2s.no_grad():
        logits = net(d2s.to_tensor(x)).numpy()
    return logits, (logits.argmax(1) == y[:, 0]).mean()


def _statistics(net):
    return net.bn._mean.numpy(), net.bn._variance.numpy()


@pytest.mark.parametrize("spec", [None, [InputSpec([-1, 1, 8, 8], "float32")]])
def test_batchnorm_trained_converted_keeps_eager_running_statistics(spec, tmp_path):
    x, y = _data()
    d2s.seed(3)
    eager = ConvBN()
    converted = ConvBN()
    converted.set_state_dict(eager.state_dict())
    jit.to_static(converted, input_spec=spec)
    eager_logits, eager_acc = _train(eager, x, y)
    logits, acc = _train(converted, x, y)
    for a, b in zip(_statistics(converted), _statistics(eager)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(_statistics(eager)[0], 0)  # the statistics did move
    np.testing.assert_allclose(logits, eager_logits, rtol=1e-4, atol=1e-5)
    assert acc == eager_acc
    # the saved program normalizes with the trained statistics too
    path = os.path.join(tmp_path, "convbn")
    jit.save(converted, path, input_spec=[InputSpec([-1, 1, 8, 8], "float32")])
    loaded = jit.load(path)
    np.testing.assert_allclose(loaded(d2s.to_tensor(x)).numpy(), eager_logits, rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("convert", [False, True])
def test_batchnorm_through_model_fit_with_input_specs(convert):
    x, y = _data()
    dataset = d2s.io.TensorDataset([x, y])
    results = []
    for inputs in (None, InputSpec([-1, 1, 8, 8], "float32", "x")):
        if not convert and inputs is not None:
            continue
        d2s.seed(3)
        net = ConvBN()
        labels = InputSpec([-1, 1], "int64", "y") if inputs is not None else None
        model = d2s.Model(net, inputs=inputs, labels=labels)
        model.prepare(d2s.optimizer.SGD(parameters=net.parameters(), learning_rate=0.05),
                      nn.CrossEntropyLoss(), d2s.metric.Accuracy())
        model.fit(dataset, epochs=2, batch_size=16, verbose=0, shuffle=False)
        results.append((_statistics(net), model.evaluate(dataset, batch_size=64, verbose=0)))
    if convert:
        (stats, ev), (stats_c, ev_c) = results
        for a, b in zip(stats_c, stats):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert ev_c["acc"] == ev["acc"]
        np.testing.assert_allclose(ev_c["loss"], ev["loss"], rtol=1e-5)


def test_batchnorm_inside_a_tensor_branch_updates_only_when_the_branch_runs():
    class Branchy(nn.Layer):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1D(3)

        def forward(self, x):
            if x.mean() > 0:
                y = self.bn(x)
            else:
                y = x * 2
            return y

    means = []
    for convert in (False, True):
        rng = np.random.default_rng(0)
        d2s.seed(1)
        net = Branchy()
        if convert:
            jit.to_static(net)
        for shift in (3, -3, 3):
            net(d2s.to_tensor((rng.standard_normal((4, 3)) + shift).astype("float32")))
        means.append(net.bn._mean.numpy())
    np.testing.assert_allclose(means[1], means[0], rtol=1e-6)


class Stateful(nn.Layer):
    """Buffers and attributes a forward writes, the ways users write them."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("steps", d2s.zeros([1]))
        self.register_buffer("ema", d2s.zeros([3]))
        self.register_buffer("last_sum", d2s.zeros([2]))
        self.cache = None
        self.history = None

    def forward(self, x):
        self.steps = self.steps + 1  # a buffer rebound
        self.ema.set_value(self.ema * 0.9 + x.mean(0) * 0.1)  # updated in place
        self.last_sum[0] = x.sum()  # written by index
        h = self.fc(x)
        self.cache = h.detach()  # a plain attribute holding a tensor
        self.history = [h.mean(), self.steps * 1]  # a list of tensors
        return h * self.steps


def test_buffers_and_attributes_written_by_a_converted_forward_reach_the_layer():
    d2s.seed(0)
    eager = Stateful()
    converted = Stateful()
    converted.set_state_dict(eager.state_dict())
    jit.to_static(converted)
    buffers = [converted.steps, converted.ema, converted.last_sum]
    for seed in range(4):
        x = tensor([2, 3], seed=seed)
        np.testing.assert_allclose(converted(x).numpy(), eager(x).numpy(), rtol=1e-6)
        for name in ("steps", "ema", "last_sum", "cache"):
            a, b = getattr(converted, name), getattr(eager, name)
            assert isinstance(a, Tensor), name
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=name)
        assert isinstance(converted.history, list) and len(converted.history) == 2
        for a, b in zip(converted.history, eager.history):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    # buffers stay the same tensors (state_dict, optimizers and programs hold them)
    assert [converted.steps, converted.ema, converted.last_sum] == buffers
    assert converted.state_dict()["steps"] is converted.steps
    assert len(converted.forward.program_cache) == 1
    assert not any(isinstance(v, Variable) for v in vars(converted).values())


def test_a_python_counter_attribute_counts_every_call():
    class Counting(nn.Layer):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    net = jit.to_static(Counting())
    x = tensor([3])
    for n in range(1, 4):
        np.testing.assert_allclose(net(x).numpy(), x.numpy() * n, rtol=1e-6)
    assert net.calls == 3


ACCUMULATED = None
RUNS = 0


def test_globals_assigned_by_converted_code_hold_tensors_not_variables():
    global ACCUMULATED, RUNS

    def accumulate(x):
        global ACCUMULATED, RUNS
        RUNS += 1
        if x.sum() > 0:
            ACCUMULATED = ACCUMULATED + x
        else:
            ACCUMULATED = ACCUMULATED - x
        return ACCUMULATED * 1

    converted = jit.to_static(accumulate)
    results = {}
    for name, fn in (("eager", accumulate), ("converted", converted)):
        ACCUMULATED, RUNS = d2s.zeros([3]), 0
        outs = [fn(tensor([3], seed=s)).numpy() for s in range(4)]
        results[name] = (outs, ACCUMULATED, RUNS)
    (eager_outs, eager_acc, eager_runs), (outs, acc, runs) = results["eager"], \
        results["converted"]
    assert isinstance(acc, Tensor) and runs == eager_runs == 4
    np.testing.assert_allclose(acc.numpy(), eager_acc.numpy(), rtol=1e-6)
    for a, b in zip(outs, eager_outs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_global_written_in_only_one_tensor_branch_is_an_error_not_a_variable():
    global ACCUMULATED
    ACCUMULATED = 0

    @jit.to_static
    def set_in_branch(x):
        global ACCUMULATED
        if x.sum() > 0:
            ACCUMULATED = x * 2
        return x

    with pytest.raises(Exception, match="ACCUMULATED"):
        set_in_branch(tensor([3]))
    assert ACCUMULATED == 0  # left as it was


def test_a_traced_tensor_appended_to_a_kept_list_is_a_clear_error():
    class Logger(nn.Layer):
        def __init__(self):
            super().__init__()
            self.seen = []

        def forward(self, x):
            self.seen.append(x.mean())
            return x

    net = jit.to_static(Logger())
    with pytest.raises(SideEffectError, match=r"self\.seen"):
        net(tensor([3]))


def test_batchnorm_in_a_static_program_trains_like_eager():
    x, y = _data()
    dataset = d2s.io.TensorDataset([x, y])
    d2s.seed(3)
    eager = ConvBN()
    eager_model = d2s.Model(eager)
    eager_model.prepare(d2s.optimizer.SGD(parameters=eager.parameters(), learning_rate=0.05),
                        nn.CrossEntropyLoss(), d2s.metric.Accuracy())
    eager_model.fit(dataset, epochs=2, batch_size=16, verbose=0, shuffle=False)
    d2s.enable_static()
    try:
        d2s.seed(3)
        net = ConvBN()
        model = d2s.Model(net, inputs=InputSpec([-1, 1, 8, 8], "float32", "x"),
                          labels=InputSpec([-1, 1], "int64", "y"))
        model.prepare(d2s.optimizer.SGD(parameters=net.parameters(), learning_rate=0.05),
                      nn.CrossEntropyLoss(), d2s.metric.Accuracy())
        model.fit(dataset, epochs=2, batch_size=16, verbose=0, shuffle=False)
        state = model._adapter.state_arrays()
    finally:
        d2s.disable_static()
    np.testing.assert_allclose(state["bn._mean"], eager.bn._mean.numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(state["bn._variance"], eager.bn._variance.numpy(), rtol=1e-5)


class ReusedNorm(nn.Layer):
    """One BatchNorm called in a tensor branch, in a tensor loop and after both."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1D(3)

    def forward(self, x):
        if x.mean() > -100:
            x = self.bn(x)
        i = d2s.to_tensor(0)
        while i < 3:
            x = self.bn(x) + 1
            i += 1
        return self.bn(x)


def test_a_norm_called_in_a_branch_then_in_a_loop_sees_its_own_updates_as_eager():
    results = []
    for convert in (False, True):
        rng = np.random.default_rng(0)
        d2s.seed(1)
        net = ReusedNorm()
        if convert:
            jit.to_static(net)
        for shift in (1, -1):
            out = net(d2s.to_tensor((rng.standard_normal((4, 3)) + shift * 3).astype("float32")))
        results.append((net.bn._mean.numpy(), net.bn._variance.numpy(), out.numpy()))
    for eager_value, converted_value in zip(*results):
        np.testing.assert_allclose(converted_value, eager_value, rtol=1e-5, atol=1e-6)


def test_a_norm_only_in_a_branch_whose_result_is_unused_still_updates():
    class Unused(nn.Layer):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1D(3)

        def forward(self, x):
            if x.sum() > 0:
                self.bn(x)
            return x * 2

    means = []
    for convert in (False, True):
        d2s.seed(1)
        net = Unused()
        if convert:
            jit.to_static(net)
        net(tensor((4, 3), seed=3) + 1)
        means.append(net.bn._mean.numpy())
    assert not np.allclose(means[0], 0)
    np.testing.assert_allclose(means[1], means[0], rtol=1e-6)


def test_a_value_returned_twice_gets_the_gradient_of_both_uses():
    @jit.to_static
    def twice(x):
        y = x * 3
        if y.mean() > -100:
            y = y + 1
        return y, y

    x = tensor((2, 3), stop_gradient=False)
    a, b = twice(x)
    (a.sum() * 2 + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 9.0))


def test_an_output_that_is_constant_on_every_path_stops_the_gradient():
    @jit.to_static
    def pick(x):
        if x.mean() > 0:
            y = d2s.zeros([2])
        else:
            y = d2s.ones([2])
        return x * 2, y

    out, const = pick(tensor((2,), stop_gradient=False))
    assert not out.stop_gradient
    assert const.stop_gradient


def test_an_output_needs_a_gradient_as_eagerly_along_the_branch_the_call_took():
    def paths(x, y):
        if x.mean() > 0:
            s = d2s.zeros([])
        else:
            s = (y * 2).min()
        if x.sum() > 0:
            u = x * 2
        else:
            with d2s.no_grad():
                u = x * 5
        return x * 2, s * -1.5, u

    converted = jit.to_static(paths)
    for sign in (1.0, -1.0):
        flags = [_needs_and_gradients(fn, sign) for fn in (paths, converted)]
        assert flags[1] == flags[0]


def _needs_and_gradients(fn, value) -> list:
    """Which outputs of ``fn(x, y)`` stop the gradient (x filled with ``value``), then
    the gradients of x and y through the others."""
    x = d2s.to_tensor(np.full((2, 3), value, "float32"), stop_gradient=False)
    y = d2s.to_tensor(np.ones((2, 3), "float32"), stop_gradient=False)
    outs = fn(x, y)
    flags = [o.stop_gradient for o in outs]
    sum(o.sum() for o in outs if not o.stop_gradient).backward()
    # (an input the path taken does not read: no gradient eagerly, zeros here)
    return flags + [(np.zeros((2, 3)) if t.grad is None else t.grad.numpy()).tolist()
                    for t in (x, y)]


def nested_paths(x, y):
    if x.mean() > 0:
        if x.max() > 1.5:
            s = d2s.zeros([])
        else:
            s = (y * 2).min()
    else:
        with d2s.no_grad():
            s = y.sum()
        if x.min() < -1.5:
            s = s + x.sum()
    return x * 2, s * -1.5


def early_return_paths(x, y):
    if x.mean() > 1.5:
        return x * 2, d2s.zeros([])
    if x.mean() > 0:
        with d2s.no_grad():
            u = y * 3
        return x, u.sum()
    return -x, (y * x).sum()


@pytest.mark.parametrize("fn", [nested_paths, early_return_paths])
def test_a_nested_branch_decides_whether_an_output_needs_a_gradient_as_eagerly(fn):
    converted = jit.to_static(fn)
    for value in (2.0, 1.0, -1.0, -2.0):  # every path of both functions
        flags = [_needs_and_gradients(f, value) for f in (fn, converted)]
        assert flags[1] == flags[0], value


def smaller_of(x, y):
    with d2s.no_grad():
        bound = (y * 3).sum()
    return min(x.sum(), bound), max(bound, x.mean() * 10)


def test_min_and_max_of_tensors_give_the_winner_itself_as_eagerly():
    converted = jit.to_static(smaller_of)
    for value in (2.0, -2.0):  # x's sum wins one time, the no_grad bound the other
        results = []
        for f in (smaller_of, converted):
            x = d2s.to_tensor(np.full((2, 3), value, "float32"), stop_gradient=False)
            y = d2s.to_tensor(np.ones((2, 3), "float32"), stop_gradient=False)
            outs = f(x, y)
            leaves = [o for o in outs if not o.stop_gradient]
            if leaves:
                sum(o.sum() for o in leaves).backward()
            results.append(([o.stop_gradient for o in outs], [o.numpy().tolist() for o in outs],
                            None if x.grad is None else x.grad.numpy().tolist()))
        assert results[1] == results[0], value


def sum_over_a_tensor_count(x, n):
    total = d2s.zeros([])
    i = d2s.to_tensor(0)
    while i < n:
        total = total + (x * x).sum()
        i += 1
    return total


def pick_after_a_loop(x, n):
    best = d2s.zeros([])
    for _ in range(n):
        best = best + x.mean()
    if n > 2:
        return best
    return best * 2


@pytest.mark.parametrize("fn", [sum_over_a_tensor_count, pick_after_a_loop])
def test_a_loop_that_runs_zero_times_leaves_a_constant_as_eagerly(fn):
    converted = jit.to_static(fn)
    for count in (0, 1, 3):
        results = []
        for f in (fn, converted):
            x = d2s.to_tensor(np.full((2, 3), 0.5, "float32"), stop_gradient=False)
            out = f(x, d2s.to_tensor(count))
            if not out.stop_gradient:
                out.backward()
            results.append((out.stop_gradient, out.numpy().tolist(),
                            None if x.grad is None else x.grad.numpy().tolist()))
        assert results[1] == results[0], count
