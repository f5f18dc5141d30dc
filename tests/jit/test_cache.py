"""StaticFunction's cache: one trace per input signature, under the input_spec contract."""

import logging

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.static import InputSpec
from tests.jit.helpers import op_types, tensor


def counting(traces):
    @jit.to_static
    def f(x, scale=1.0):
        traces.append(x.shape)  # Python side effect: runs once per trace
        return x * scale + 1

    return f


def test_same_shapes_do_not_retrace():
    traces = []
    f = counting(traces)
    for seed in range(3):
        x = tensor([2, 3], seed=seed)
        np.testing.assert_allclose(f(x).numpy(), (x + 1).numpy(), rtol=1e-6)
    assert traces == [[2, 3]] and len(f.program_cache) == 1


def test_a_new_shape_retraces_and_logs_which_argument_changed(caplog):
    traces = []
    f = counting(traces)
    jit.set_verbosity(1)
    caplog.set_level(logging.INFO, logger="dy2stat")
    f(tensor([2, 3]))
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]
    f(tensor([4, 3]))
    assert traces == [[2, 3], [4, 3]] and len(f.program_cache) == 2
    (record,) = [r for r in caplog.records if "retracing" in r.getMessage()]
    assert record.name == "dy2stat"
    message = record.getMessage()
    assert "'x'" in message and "[2, 3]" in message and "[4, 3]" in message
    f(tensor([2, 3]))  # back to the first shape: cached, but logged as a switch
    assert len(traces) == 2


def test_verbosity_zero_logs_nothing(caplog):
    f = counting([])
    caplog.set_level(logging.INFO, logger="dy2stat")
    jit.set_verbosity(0)
    f(tensor([2]))
    f(tensor([3]))
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]


def test_input_spec_with_a_none_dim_serves_every_batch_size():
    traces = []

    @jit.to_static(input_spec=[InputSpec([None, 4])])
    def f(x):
        traces.append(1)
        return x.sum(axis=1) * 2

    for batch in (2, 5, 1):
        x = tensor([batch, 4], seed=batch)
        np.testing.assert_allclose(f(x).numpy(), x.numpy().sum(1) * 2, rtol=1e-5)
    assert len(traces) == 1 and len(f.program_cache) == 1
    assert f.concrete_program.inputs[0].shape == [-1, 4]


@pytest.mark.parametrize("shape, dtype, what", [
    ([2, 4, 1], "float32", "rank"),
    ([2, 5], "float32", "shape"),
    ([2, 4], "float64", "dtype"),
])
def test_a_call_contradicting_the_input_spec_is_an_error_naming_the_argument(shape, dtype, what):
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        @jit.to_static(input_spec=[InputSpec([None, 4], "float32")])
        def forward(self, features):
            return self.fc(features)

    net = Net()
    net(tensor([3, 4]))
    with pytest.raises(ValueError, match=f"'features'.*{what}"):
        net(tensor(shape, dtype=dtype))
    assert len(net.forward.program_cache) == 1  # no silent retrace


def test_python_argument_values_are_part_of_the_key():
    traces = []
    f = counting(traces)
    x = tensor([3])
    for scale in (2.0, 3.0, 2.0, 3.0):
        np.testing.assert_allclose(f(x, scale).numpy(), (x * scale + 1).numpy(), rtol=1e-6)
    assert len(traces) == 2 and len(f.program_cache) == 2


def test_python_flags_pick_programs():
    @jit.to_static
    def f(x, square):
        if square:
            return x * x
        return x + x

    x = tensor([4])
    np.testing.assert_allclose(f(x, True).numpy(), (x * x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(x, False).numpy(), (x + x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(x, square=True).numpy(), (x * x).numpy(), rtol=1e-6)
    assert "cond" not in op_types(f.main_program)


class DropNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 64)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))


def test_train_and_eval_use_different_programs(caplog):
    d2s.seed(0)
    net = jit.to_static(DropNet())
    x = tensor([16, 4])
    with d2s.no_grad():
        reference = net.fc(x).numpy()
        train_out = net(x).numpy()
        train_program = net.forward.main_program
        assert 0.3 < (train_out == 0).mean() < 0.7  # dropout is active
        kept = train_out != 0
        np.testing.assert_allclose(train_out[kept], 2 * reference[kept], rtol=1e-5)
        assert "dropout" in op_types(train_program)

        jit.set_verbosity(1)
        caplog.set_level(logging.INFO, logger="dy2stat")
        net.eval()
        np.testing.assert_allclose(net(x).numpy(), reference, rtol=1e-6)  # identity
        assert net.forward.main_program is not train_program
        assert "dropout" not in op_types(net.forward.main_program)
        assert len(net.forward.program_cache) == 2
        assert any("train/eval" in r.getMessage() for r in caplog.records)
        net.train()
        assert not np.array_equal(net(x).numpy(), reference)
        assert len(net.forward.program_cache) == 2


def test_positional_keyword_and_default_calls_share_one_program():
    traces = []

    @jit.to_static
    def f(x, y):
        traces.append(1)
        return x * 2 + y

    x, y = tensor([3], seed=1), tensor([3], seed=2)
    want = x.numpy() * 2 + y.numpy()
    for call in (lambda: f(x, y), lambda: f(x, y=y), lambda: f(y=y, x=x), lambda: f(x, y)):
        np.testing.assert_allclose(call().numpy(), want, rtol=1e-6)
    assert traces == [1] and len(f.program_cache) == 1
    g = counting(traces := [])
    g(x)  # the default scale
    g(x, 1.0)
    g(x, 2.0)
    assert len(g.program_cache) == 2 and len(traces) == 2


def test_a_changed_global_retraces_a_call_of_tensors_only():
    global SCALE
    SCALE = 2.0

    @jit.to_static
    def f(x):
        return x * SCALE

    x = tensor([3], seed=3)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 2, rtol=1e-6)
    SCALE = 5.0
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 5, rtol=1e-6)
    assert len(f.program_cache) == 2


def test_a_parameter_or_an_array_as_argument_is_fed_like_a_tensor():
    @jit.to_static
    def f(x):
        return x + 1

    weight = nn.Linear(2, 3).weight  # a Parameter: a Tensor subclass
    np.testing.assert_allclose(f(weight).numpy(), weight.numpy() + 1, rtol=1e-6)
    a = np.ones([2, 3], "float32")
    np.testing.assert_allclose(f(a).numpy(), a + 1, rtol=1e-6)
    assert len(f.program_cache) == 1
