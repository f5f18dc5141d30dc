"""Kernel checks run on every array module (the ``xp`` fixture: numpy, and cupy on a GPU).

Each check compares a kernel against a reference computed on the host: a
naive loop, a closed form, or an identity the kernel must satisfy (the
adjoint identities of the linear convolution and pooling gradients). The op
kernels (``get_op(...).kernel``) are checked too: on CuPy they go through
the backend table (cuDNN where CuPy exposes it).
"""

import math

import numpy as np
import pytest

import dy2stat.kernels.nn as nnk
from dy2stat.kernels import backend
from dy2stat.kernels import random as rk
from dy2stat.runtime.registry import get_op
from tests.kernels.test_nn_kernels import conv_ref, pair, pool_ref

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def host(a):
    return backend.to_host(a)


def dot(a, b) -> float:
    return float(np.sum(host(a).astype(np.float64) * host(b).astype(np.float64)))


# ------------------------------------------------------------------ conv2d


CONV_CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 6, 5), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), (1, 2), 1, 1),
    ((1, 2, 8, 7), (3, 2, 3, 3), 2, 1, 2, 1),
    ((2, 4, 6, 6), (6, 2, 3, 3), 1, 1, 1, 2),
    ((3, 1, 28, 28), (6, 1, 3, 3), 1, 1, 1, 1),  # LeNet's first layer
]
KERNELS = {
    "generic": (nnk.conv2d, nnk.conv2d_grad_input, nnk.conv2d_grad_filter),
    "op table": tuple(get_op(t).kernel for t in
                      ("conv2d", "conv2d_grad_input", "conv2d_grad_filter")),
}


@pytest.mark.parametrize("which", list(KERNELS))
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_and_its_gradients(xp, which, xs, ws, stride, padding, dilation, groups):
    forward, grad_input, grad_filter = KERNELS[which]
    x, w = rand(*xs), rand(*ws)
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    X, W = xp.asarray(x), xp.asarray(w)
    y = forward(xp, X, W, **attrs)
    assert backend.array_module(y) is xp and y.dtype == np.float64
    want = conv_ref(x, w, stride, padding, dilation, groups)
    np.testing.assert_allclose(host(y), want, rtol=1e-9, atol=1e-10)
    dy = rand(*want.shape)
    dx = grad_input(xp, X, W, xp.asarray(dy), **attrs)
    dw = grad_filter(xp, X, xp.asarray(dy), W, **attrs)
    assert dx.shape == x.shape and dw.shape == w.shape
    # conv is bilinear: <conv(x, w), dy> = <x, dL/dx> = <w, dL/dw>
    total = dot(want, dy)
    assert math.isclose(dot(x, dx), total, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(dot(w, dw), total, rel_tol=1e-9, abs_tol=1e-9)


def test_conv2d_float32_stays_float32(xp):
    x, w = rand(4, 3, 12, 12, dtype=np.float32), rand(8, 3, 3, 3, dtype=np.float32)
    want = conv_ref(x.astype(np.float64), w.astype(np.float64), 1, 1, 1, 1)
    for kernel in (nnk.conv2d, get_op("conv2d").kernel):
        y = kernel(xp, xp.asarray(x), xp.asarray(w), padding=1)
        assert y.dtype == np.float32
        # loose: cuDNN may use TF32 tensor cores for float32
        np.testing.assert_allclose(host(y), want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


# ----------------------------------------------------------------- pooling


POOL_CASES = [
    # x shape, kernel, stride, padding, ceil_mode
    ((2, 3, 6, 6), 2, None, 0, False),
    ((1, 2, 7, 5), 3, 2, 1, False),
    ((1, 2, 7, 5), 3, 2, 1, True),
    ((2, 1, 6, 7), (2, 3), (2, 2), (1, 1), True),
    ((1, 2, 5, 5), 2, 2, 0, True),  # a window past the padding: cuDNN declines, generic runs
]


@pytest.mark.parametrize("table", [False, True], ids=["generic", "op table"])
@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_max_pool2d_and_gradient(xp, table, xs, k, s, p, ceil_mode):
    forward = get_op("max_pool2d").kernel if table else nnk.max_pool2d
    backward = get_op("max_pool2d_grad").kernel if table else nnk.max_pool2d_grad
    x = rand(*xs)
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
    y = forward(xp, xp.asarray(x), **attrs)
    want = pool_ref(x, pair(k), pair(k if s is None else s), pair(p), ceil_mode, "max")
    np.testing.assert_array_equal(host(y), want)
    dy = rand(*want.shape)
    dx = backward(xp, xp.asarray(x), y, xp.asarray(dy), **attrs)
    # no ties in random data: each output is one input, so <y, dy> = <x, dx>
    assert math.isclose(dot(x, dx), dot(want, dy), rel_tol=1e-12, abs_tol=1e-12)
    assert dx.shape == x.shape


@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("table", [False, True], ids=["generic", "op table"])
@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_avg_pool2d_and_gradient(xp, table, exclusive, xs, k, s, p, ceil_mode):
    forward = get_op("avg_pool2d").kernel if table else nnk.avg_pool2d
    backward = get_op("avg_pool2d_grad").kernel if table else nnk.avg_pool2d_grad
    x = rand(*xs)
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode, exclusive=exclusive)
    y = forward(xp, xp.asarray(x), **attrs)
    want = pool_ref(x, pair(k), pair(k if s is None else s), pair(p), ceil_mode, "avg",
                    exclusive)
    np.testing.assert_allclose(host(y), want, rtol=1e-12)
    dy = rand(*want.shape)
    dx = backward(xp, xp.asarray(x), xp.asarray(dy), **attrs)
    # avg pooling is linear: its gradient is its adjoint
    assert math.isclose(dot(x, dx), dot(want, dy), rel_tol=1e-10, abs_tol=1e-12)


def test_max_pool2d_integer_input_uses_the_generic_kernel(xp):
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    y = get_op("max_pool2d").kernel(xp, xp.asarray(x), kernel_size=3, stride=2, padding=1,
                                    ceil_mode=True)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(host(y), pool_ref(x, (3, 3), (2, 2), (1, 1), True, "max"))


# ------------------------------------------------------- the other nn kernels


def test_softmax_log_softmax_relu(xp):
    x = rand(3, 4, 5) * 30
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(host(nnk.softmax(xp, xp.asarray(x), 1)), want, rtol=1e-12)
    np.testing.assert_allclose(host(nnk.log_softmax(xp, xp.asarray(x), 1)), np.log(want),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(host(nnk.relu(xp, xp.asarray(x))), np.maximum(x, 0))


def test_erfc_and_gelu(xp):
    z = np.linspace(-6, 6, 241)
    want = np.array([math.erfc(v) for v in z])
    np.testing.assert_allclose(host(nnk.erfc(xp, xp.asarray(z))), want, rtol=1e-12,
                               atol=1e-300)
    gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in z])
    np.testing.assert_allclose(host(nnk.gelu(xp, xp.asarray(z))), gelu, rtol=1e-12,
                               atol=1e-15)
    dy = rand(*z.shape)
    g = host(nnk.gelu_grad(xp, xp.asarray(z), xp.asarray(dy)))
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in z])
    pdf = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(g, dy * (cdf + z * pdf), rtol=1e-11, atol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_gradient(xp, reduction):
    logits, label = rand(6, 5), RNG.integers(0, 5, (6, 1))
    label[2] = -100  # ignored
    lse = np.log(np.exp(logits).sum(axis=1))
    rows = np.where(label[:, 0] == -100, 0.0,
                    lse - logits[np.arange(6), np.maximum(label[:, 0], 0)])
    want = {"none": rows, "sum": rows.sum(), "mean": rows.sum() / 5}[reduction]
    got = nnk.cross_entropy(xp, xp.asarray(logits), xp.asarray(label), reduction=reduction)
    np.testing.assert_allclose(host(got), want, rtol=1e-12)
    dloss = rand(6) if reduction == "none" else np.array(1.3)
    g = host(nnk.cross_entropy_grad(xp, xp.asarray(logits), xp.asarray(label),
                                    xp.asarray(dloss), reduction=reduction))
    p = np.exp(logits - lse[:, None])
    onehot = np.eye(5)[np.maximum(label[:, 0], 0)]
    scale = dloss[:, None] if reduction == "none" else dloss / (5 if reduction == "mean" else 1)
    want_g = (p - onehot) * (label != -100) * scale
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-14)


def test_layer_norm_and_batch_norm(xp):
    x = rand(4, 3, 5)
    y, mean, var = nnk.layer_norm(xp, xp.asarray(x), None, None, 1e-5, 1)
    flat = x.reshape(4, -1)
    want = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(host(y), want.reshape(x.shape), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(var), flat.var(1), rtol=1e-12)
    c = x.shape[1]
    out = nnk.batch_norm(xp, xp.asarray(x), xp.zeros(c), xp.ones(c), xp.ones(c), xp.zeros(c))
    m, v = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    want = (x - m[None, :, None]) / np.sqrt(v[None, :, None] + 1e-5)
    np.testing.assert_allclose(host(out[0]), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(out[1]), 0.1 * m, rtol=1e-12)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_and_gradient(xp, padding_idx):
    table, ids = rand(5, 3), np.array([[1, 3, 3], [0, 3, 2]])
    out = host(nnk.embedding(xp, xp.asarray(ids), xp.asarray(table), padding_idx))
    want = table[ids] * (ids != padding_idx)[..., None]
    np.testing.assert_array_equal(out, want)
    dout = rand(2, 3, 3)
    dw = host(nnk.embedding_grad(xp, xp.asarray(ids), xp.asarray(table), xp.asarray(dout),
                                 padding_idx))
    want = np.zeros_like(table)
    np.add.at(want, ids.reshape(-1), dout.reshape(-1, 3))  # repeated ids add up
    if padding_idx is not None:
        want[padding_idx] = 0
    np.testing.assert_allclose(dw, want, rtol=1e-12)


def test_dropout(xp):
    x = rand(4, 5, dtype=np.float32)
    mask = (RNG.random((4, 5)) > 0.3).astype(np.float32)
    y = host(nnk.dropout(xp, xp.asarray(x), xp.asarray(mask), p=0.3))
    np.testing.assert_allclose(y, x * mask / np.float32(0.7), rtol=1e-6)


# ------------------------------------------------------------------ random


def test_seeded_draws_repeat_on_every_module(xp):
    draws = []
    for _ in range(2):
        rk.seed(123)
        draws.append([host(rk.uniform(xp, [64], -2.0, 3.0, "float32")),
                      host(rk.normal(xp, [64], 1.0, 2.0, "float64")),
                      host(rk.randint(xp, [64], 3, 9, "int32")),
                      host(rk.bernoulli(xp, [64], 0.25, "float32"))])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a, b)
    u, z, i, m = draws[0]
    assert u.dtype == np.float32 and -2 <= u.min() and u.max() < 3
    assert z.dtype == np.float64 and i.dtype == np.int32 and 3 <= i.min() and i.max() < 9
    assert set(np.unique(m)) <= {0.0, 1.0}
    fixed = [host(rk.normal(xp, [8], 0.0, 1.0, "float32", seed=5)) for _ in range(2)]
    np.testing.assert_array_equal(*fixed)  # a per-op seed gives the same values every time
