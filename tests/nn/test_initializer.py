"""Initializers: statistics, fans, and reproducibility under d2s.seed."""

import math

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import initializer as init


def test_constant_uniform_normal():
    np.testing.assert_array_equal(init.Constant(3.0)([2, 2], "float32"), np.full((2, 2), 3.0))
    u = init.Uniform(-0.5, 2.0)([200, 100], "float64")
    assert u.dtype == np.float64 and u.min() >= -0.5 and u.max() < 2.0
    assert abs(u.mean() - 0.75) < 0.02
    n = init.Normal(1.0, 2.0)([200, 100], "float32")
    assert n.dtype == np.float32 and abs(n.mean() - 1) < 0.05 and abs(n.std() - 2) < 0.05


@pytest.mark.parametrize("make, shape, std", [
    (init.XavierUniform, [300, 200], math.sqrt(2 / 500)),
    (init.XavierNormal, [300, 200], math.sqrt(2 / 500)),
    (init.KaimingUniform, [300, 200], math.sqrt(2 / 300)),
    (init.KaimingNormal, [300, 200], math.sqrt(2 / 300)),
    (init.KaimingNormal, [64, 8, 3, 3], math.sqrt(2 / 72)),  # conv: fan_in = in * kh * kw
    (init.XavierUniform, [64, 8, 3, 3], math.sqrt(2 / (72 + 576))),
])
def test_fan_based_initializers(make, shape, std):
    values = make()(shape, "float64")
    assert values.shape == tuple(shape)
    assert abs(values.std() / std - 1) < 0.05


def test_static_op_descriptions():
    assert init.Constant(1.5).static_op([2]) == ("full", {"value": 1.5})
    op, attrs = init.XavierUniform().static_op([3, 5])
    assert op == "uniform" and attrs["max"] == pytest.approx(math.sqrt(6 / 8))
    assert init.Normal(0, 2).static_op([1]) == ("normal", {"mean": 0.0, "std": 2.0})


def test_assign_initializer():
    layer = nn.Linear(2, 2, weight_attr=init.Assign([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(layer.weight.numpy(), [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="does not match"):
        nn.Linear(3, 2, weight_attr=init.Assign(np.zeros((2, 2))))


def test_seed_makes_layers_reproducible():
    def build():
        return nn.Sequential(nn.Linear(4, 3), nn.Conv2D(1, 2, 3), nn.LSTM(2, 3),
                             nn.Embedding(5, 2))

    d2s.seed(123)
    a = build().state_dict()
    d2s.seed(123)
    b = build().state_dict()
    d2s.seed(124)
    c = build().state_dict()
    for key in a:
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    assert not np.array_equal(a["0.weight"].numpy(), c["0.weight"].numpy())


def test_calculate_gain():
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        init.calculate_gain("swishy")


def test_truncated_normal_stays_within_its_bounds():
    d2s.seed(0)
    values = init.TruncatedNormal(1.0, 0.5)([400, 100], "float64")
    assert values.min() >= 0.0 and values.max() <= 2.0  # mean -/+ 2 std
    # a normal cut at +-2 std has std 0.8796 of the untruncated one
    assert abs(values.std() / (0.5 * 0.8796) - 1) < 0.02 and abs(values.mean() - 1) < 0.01
    narrow = init.TruncatedNormal(0.0, 1.0, a=-0.5, b=1.0)([1000], "float32")
    assert narrow.dtype == np.float32 and narrow.min() >= -0.5 and narrow.max() <= 1.0
    d2s.seed(5)
    first = nn.Linear(3, 4, weight_attr=init.TruncatedNormal(std=0.02)).weight.numpy()
    d2s.seed(5)
    again = nn.Linear(3, 4, weight_attr=init.TruncatedNormal(std=0.02)).weight.numpy()
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("make", [
    lambda: init.Assign(np.arange(6.0).reshape(2, 3)),
    lambda: init.TruncatedNormal(std=0.1),
    lambda: init.XavierNormal(),
    lambda: init.XavierUniform(),
    lambda: init.KaimingNormal(),
])
def test_initializers_in_static_mode(make):
    """A layer built in static mode: its startup program gives the parameter the values
    the initializer drew (Assign and TruncatedNormal, which no op draws, included), and
    running the startup program again gives them back."""
    main, startup = d2s.static.Program(), d2s.static.Program()
    d2s.enable_static()
    try:
        with d2s.static.program_guard(main, startup):
            x = d2s.static.data("x", [None, 2])
            layer = nn.Linear(2, 3, weight_attr=make())
            y = layer(x)
    finally:
        d2s.disable_static()
    exe = d2s.static.Executor()
    exe.run(startup)
    weight = np.array(d2s.static.global_scope()[layer.weight.name])
    assert weight.shape == (2, 3)
    out, = exe.run(main, feed={"x": np.eye(2, dtype="float32")}, fetch_list=[y])
    np.testing.assert_allclose(out, weight, rtol=1e-6)
    if isinstance(make(), init.Assign):
        np.testing.assert_array_equal(weight, np.arange(6.0).reshape(2, 3))
    d2s.static.global_scope()[layer.weight.name] = np.zeros((2, 3), "float32")
    exe.run(startup)
    if not isinstance(make(), (init.XavierNormal, init.XavierUniform, init.KaimingNormal)):
        np.testing.assert_array_equal(d2s.static.global_scope()[layer.weight.name], weight)


def test_create_parameter_and_param_attr():
    d2s.seed(1)
    p = d2s.create_parameter([3, 2], "float64")
    assert isinstance(p, nn.Parameter) and p.dtype == np.float64 and not p.stop_gradient
    assert p.name.startswith("create_parameter_")
    attr = d2s.ParamAttr(name="w", initializer=init.Constant(0.5), learning_rate=0.1,
                         regularizer=d2s.regularizer.L1Decay(0.01), trainable=False)
    q = d2s.create_parameter([2], "float32", attr=attr)
    assert q.name == "w" and q.stop_gradient and q.optimize_attr["learning_rate"] == 0.1
    assert isinstance(q.regularizer, d2s.regularizer.L1Decay)
    np.testing.assert_array_equal(q.numpy(), [0.5, 0.5])
    b = d2s.create_parameter([4], "float32", is_bias=True)
    np.testing.assert_array_equal(b.numpy(), np.zeros(4))
    layer = nn.Linear(2, 2, weight_attr=attr)
    assert layer.weight.regularizer is attr.regularizer
    assert d2s.create_parameter([2], attr=False) is None


def test_set_default_dtype():
    assert d2s.get_default_dtype() == "float32"
    d2s.set_default_dtype("float64")
    try:
        assert nn.Linear(2, 3).weight.dtype == np.float64
        assert d2s.to_tensor(1.5).dtype == np.float64
        assert d2s.to_tensor([1.0, 2.0]).dtype == np.float64
        assert d2s.zeros([2]).dtype == np.float64 and d2s.ones([1]).dtype == np.float64
        assert d2s.rand([2]).dtype == np.float64 and d2s.full([2], 0.5).dtype == np.float64
        assert d2s.to_tensor(1).dtype == np.int64 and d2s.full([1], 3).dtype == np.int64
        assert d2s.create_parameter([2]).dtype == np.float64
    finally:
        d2s.set_default_dtype("float32")
    assert nn.Linear(2, 3).weight.dtype == np.float32 and d2s.zeros([1]).dtype == np.float32
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        d2s.set_default_dtype("int32")
