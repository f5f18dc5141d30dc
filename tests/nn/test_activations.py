"""Activations written with elementwise ops: forward against NumPy, input gradients
against finite differences (float64), converted code against eager."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec
from tests.nn.helpers import (
    check_converted,
    check_input_grads,
    check_param_grads,
    randn,
    sigmoid,
    tensor,
)


def softplus_ref(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, np.log1p(np.exp(np.minimum(z, threshold))) / beta)


CASES = [
    # (layer, functional call, NumPy reference)
    (nn.LeakyReLU(), lambda x: F.leaky_relu(x), lambda x: np.where(x >= 0, x, 0.01 * x)),
    (nn.LeakyReLU(0.2), lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    (nn.ELU(), lambda x: F.elu(x), lambda x: np.where(x > 0, x, np.expm1(x))),
    (nn.ELU(0.5), lambda x: F.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (nn.SiLU(), F.silu, lambda x: x * sigmoid(x)),
    (nn.Mish(), F.mish, lambda x: x * np.tanh(softplus_ref(x))),
    (nn.Hardswish(), F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.ReLU6(), F.relu6, lambda x: np.clip(x, 0, 6)),
    (nn.Softsign(), F.softsign, lambda x: x / (1 + np.abs(x))),
    (nn.Softplus(), F.softplus, softplus_ref),
    (nn.Softplus(beta=2.0, threshold=3.0), lambda x: F.softplus(x, 2.0, 3.0),
     lambda x: softplus_ref(x, 2.0, 3.0)),
]
IDS = [f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)]


def _inputs():
    # wide enough to reach every branch (the clip points of relu6/hardswish and the
    # threshold of softplus), away from the kinks where finite differences break down
    x = np.linspace(-7.3, 7.1, 24).reshape(4, 6)
    x[x == 0] = 0.1
    return x


@pytest.mark.parametrize("layer, fn, ref", CASES, ids=IDS)
def test_forward_matches_numpy(layer, fn, ref):
    x = _inputs()
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fn(tensor(x)).numpy(), ref(x), rtol=1e-12, atol=1e-14)
    out32 = layer(tensor(x.astype("float32")))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32.numpy(), ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer, fn, ref", CASES, ids=IDS)
def test_gradient_matches_finite_differences(layer, fn, ref):
    x = _inputs() + 0.013  # off the kinks (0, -3, 3, 6)
    check_input_grads(fn, x, rtol=1e-6, atol=1e-8)


SMOOTH = [2, 3, 4, 5, 8, 9]  # the two ELUs, SiLU, Mish, Softsign, Softplus


@pytest.mark.parametrize("layer, fn, ref", [CASES[i] for i in SMOOTH],
                         ids=[IDS[i] for i in SMOOTH])
def test_second_derivative_of_the_smooth_ones(layer, fn, ref):
    x = tensor(np.array([-1.3, -0.4, 0.7, 2.2]), stop_gradient=False)
    (g,) = d2s.grad(fn(x).sum(), [x], create_graph=True)
    (gg,) = d2s.grad(g.sum(), [x])
    eps = 1e-5
    base = x.numpy()

    def first(v):
        t = tensor(v, stop_gradient=False)
        return d2s.grad(fn(t).sum(), [t])[0].numpy()

    numeric = (first(base + eps) - first(base - eps)) / (2 * eps)
    np.testing.assert_allclose(gg.numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_silu_softplus_at_zero_have_the_true_slope():
    x = tensor(np.zeros(3), stop_gradient=False)
    (g,) = d2s.grad(F.softplus(x).sum(), [x])
    np.testing.assert_allclose(g.numpy(), 0.5)  # sigmoid(0), not a one-sided slope


@pytest.mark.parametrize("layer, fn, ref", CASES, ids=IDS)
def test_converted_matches_eager(layer, fn, ref):
    check_converted(lambda x: fn(x) * 2.0, _inputs() + 0.013,
                    input_spec=[InputSpec([None, 6], "float64")])


def test_prelu_per_channel_and_shared():
    x = randn(2, 3, 4, 2)
    layer = nn.PReLU(3, init=0.1)
    assert layer.weight.shape == [3]
    layer.weight.set_value(np.array([0.1, 0.2, 0.3], dtype="float32"))
    w = np.array([0.1, 0.2, 0.3]).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(layer(tensor(x.astype("float32"))).numpy(),
                               np.where(x > 0, x, w * x), rtol=1e-6)
    shared = nn.PReLU()
    np.testing.assert_allclose(shared(tensor(x)).numpy(), np.where(x > 0, x, 0.25 * x))
    last = F.prelu(tensor(x), tensor(np.array([0.5, 1.5])), data_format="NHWC")
    np.testing.assert_allclose(last.numpy(), np.where(x > 0, x, np.array([0.5, 1.5]) * x))
    with pytest.raises(ValueError, match="channels"):
        F.prelu(tensor(x), tensor(np.ones(5)))


def test_prelu_gradients_and_conversion():
    layer = nn.PReLU(3)
    check_param_grads(layer, tensor(randn(2, 3, 4)))
    check_input_grads(lambda x, w: F.prelu(x, w), randn(2, 3, 4), np.array([0.1, 0.2, 0.3]))
    check_converted(lambda x: layer(x), randn(2, 3, 4), params=layer.parameters(),
                    input_spec=[InputSpec([None, 3, None], "float64")])


def test_gelu_still_exists():
    x = randn(5)
    assert isinstance(nn.GELU(), nn.Layer)
    assert nn.GELU()(tensor(x)).shape == [5]
