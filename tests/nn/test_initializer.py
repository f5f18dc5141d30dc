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
