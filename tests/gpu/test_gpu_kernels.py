"""The GPU kernels (``gpu``-marked: a GPU, or the test double): pooling in one kernel a
call, the generic convolution as one batched product, convolutions through the cuDNN
frontend with their plans cached, and ``device.info`` saying which path runs."""

import shutil

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import device, flags, nn
from dy2stat.kernels import backend, cudnn, pool_cuda
from dy2stat.kernels import conv as convk
from dy2stat.runtime.registry import get_op

pytestmark = pytest.mark.gpu
FAKE = backend.has_cupy() and backend.cupy.__version__.endswith("+fake")
if FAKE:
    from tests.gpu import fake_cupy
needs_fake = pytest.mark.skipif(not FAKE, reason="counts launches on the test double")
RNG = np.random.default_rng(3)

POOL_CASES = [
    # x shape, kernel, stride, padding, ceil_mode
    ((2, 3, 6, 6), 2, None, 0, False),
    ((1, 2, 7, 5), 3, 2, 1, False),
    ((1, 2, 7, 5), 3, 2, 1, True),
    ((2, 1, 6, 7), (2, 3), (2, 2), (1, 1), True),
    ((1, 2, 5, 5), 2, 2, 0, True),
    ((1, 1, 9, 9), 3, 1, 1, False),  # overlapping windows
]


def pool_results(cp, x, dy_of, k, s, p, ceil_mode, exclusive):
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
    X = cp.asarray(x)
    y = pool_cuda.max_pool2d(cp, X, **attrs)
    dy = dy_of(y.shape)
    dx = pool_cuda.max_pool2d_grad(cp, X, y, cp.asarray(dy), **attrs)
    a = pool_cuda.avg_pool2d(cp, X, exclusive=exclusive, **attrs)
    da = pool_cuda.avg_pool2d_grad(cp, X, cp.asarray(dy), exclusive=exclusive, **attrs)
    return [backend.to_host(v) for v in (y, dx, a, da)], dy


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_pooling_kernels_match_the_generic_kernels(xs, k, s, p, ceil_mode, exclusive, dtype):
    cp = backend.cupy
    x = RNG.standard_normal(xs).astype(dtype)
    x[0, 0, 0, :2] = x[0, 0, 0, 2]  # ties: the gradient goes to the first maximum

    def dy_of(shape):
        return RNG.standard_normal(shape).astype(dtype)

    got, dy = pool_results(cp, x, dy_of, k, s, p, ceil_mode, exclusive)
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
    y = convk.max_pool2d(np, x, **attrs)
    want = [y, convk.max_pool2d_grad(np, x, y, dy, **attrs),
            convk.avg_pool2d(np, x, exclusive=exclusive, **attrs),
            convk.avg_pool2d_grad(np, x, dy, exclusive=exclusive, **attrs)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6 if dtype == "float32" else 1e-13)


@needs_fake
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_the_pooling_kernels_cuda_source_computes_the_generic_results(xs, k, s, p, ceil_mode):
    cp = backend.cupy
    x = RNG.standard_normal(xs).astype("float32")
    dy = None

    def dy_of(shape):
        nonlocal dy
        dy = RNG.standard_normal(shape).astype("float32")
        return dy

    with fake_cupy.running_sources():
        from_source, _ = pool_results(cp, x, dy_of, k, s, p, ceil_mode, True)
    reference, _ = pool_results(cp, x, lambda shape: dy, k, s, p, ceil_mode, True)
    for g, w in zip(from_source, reference):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@needs_fake
def test_each_pooling_call_is_one_kernel():
    cp = backend.cupy
    x = cp.asarray(RNG.standard_normal((4, 3, 8, 8)).astype("float32"))
    for op, args in (("max_pool2d", (x,)), ("avg_pool2d", (x,))):
        with fake_cupy.counting() as n:
            get_op(op).kernel(cp, *args, kernel_size=2)
        assert n.launches == 1, n.ops
    y = get_op("max_pool2d").kernel(cp, x, kernel_size=2)
    with fake_cupy.counting() as n:
        get_op("max_pool2d_grad").kernel(cp, x, y, y, kernel_size=2)
    assert n.launches == 1, n.ops


@needs_fake
@pytest.mark.parametrize("ow", [4, 20], ids=["short rows", "long rows"])
def test_the_generic_convolution_is_one_batched_product_on_cupy(ow):
    cp = backend.cupy
    x = cp.asarray(RNG.standard_normal((8, 3, 6, ow + 2)).astype("float32"))
    w = cp.asarray(RNG.standard_normal((5, 3, 3, 3)).astype("float32"))
    with fake_cupy.counting() as n:
        y = convk.conv2d(cp, x, w)
    assert n.ops.count("matmul") == 1, n.ops
    with fake_cupy.counting() as n:
        convk.conv2d_grad_filter(cp, x, y, w)
    assert n.ops.count("matmul") == 1, n.ops
    want = convk.conv2d(np, backend.to_host(x), backend.to_host(w))
    np.testing.assert_allclose(backend.to_host(y), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- cuDNN

needs_cudnn = pytest.mark.skipif(not cudnn.available(), reason="no cuDNN frontend here")


def test_info_says_which_convolution_path_runs():
    report = device.info()
    assert report["gpus"] >= 1 and report["device"] == "cpu"
    assert report["convolution"].startswith("cuDNN frontend" if cudnn.available() else "generic")
    flags.set_flags({"use_cudnn": False})
    assert device.info()["convolution"].startswith("generic")


@needs_cudnn
def test_a_convolution_builds_its_plan_once_per_shape():
    cp = backend.cupy
    d2s.set_device("gpu")
    conv = nn.Conv2D(3, 4, 3, padding=1)
    before = len(cudnn._plans)
    for _ in range(3):
        x = d2s.randn([2, 3, 8, 8], dtype="float32")
        x.stop_gradient = False
        conv(x).sum().backward()
    kinds = {k[0] for k in list(cudnn._plans)[before:]}
    assert kinds == {"forward", "backward_data", "backward_filter"}
    assert len(cudnn._plans) - before == 3  # one per kind: later calls reuse them
    assert isinstance(conv.weight.grad._data, cp.ndarray)


@needs_cudnn
def test_exhaustive_search_times_every_plan_and_deterministic_filters_them():
    flags.set_flags({"cudnn_exhaustive_search": True, "cudnn_deterministic": True})
    cp = backend.cupy
    x = cp.asarray(RNG.standard_normal((2, 3, 9, 9)).astype("float32"))
    w = cp.asarray(RNG.standard_normal((4, 3, 3, 3)).astype("float32"))
    y = get_op("conv2d").kernel(cp, x, w, padding=[1, 1])
    assert any(k[0] == "forward" and k[2] == (2, 3, 9, 9) for k in cudnn.searched())
    want = convk.conv2d(np, backend.to_host(x), backend.to_host(w), padding=1)
    np.testing.assert_allclose(backend.to_host(y), want, rtol=1e-4, atol=1e-4)
    if FAKE:
        from tests.gpu import fake_cudnn

        assert fake_cudnn.calls[-1] == ("conv_fprop", "ALL", True)


@needs_cudnn
def test_a_case_cudnn_declines_runs_the_generic_kernel():
    cp = backend.cupy
    x = cp.asarray(RNG.standard_normal((1, 2, 9, 9)).astype("float64"))
    w = cp.asarray(RNG.standard_normal((3, 2, 3, 3)).astype("float64"))
    y = get_op("conv2d").kernel(cp, x, w, dilation=[2, 2])
    want = convk.conv2d(np, backend.to_host(x), backend.to_host(w), dilation=2)
    np.testing.assert_allclose(backend.to_host(y), want, rtol=1e-10)
    if FAKE:  # the double refuses dilation; a real cuDNN runs it
        assert any(k[0] == "forward" and (2, 2) in k for k in cudnn.declined())
