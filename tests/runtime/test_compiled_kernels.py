"""Kernels compiled in the background give their NumPy form's bits exactly."""

import numpy as np
import pytest

from dy2stat.kernels import adam_loop, compiled, conv
from dy2stat.runtime.ops import optimizer

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def pool_grad_2x2():
    loop = compiled.build_now("max_pool2d_grad_2x2", conv._compile_pool_grad_2x2)
    assert loop is not None
    return loop


@pytest.fixture(scope="module")
def pool_2x2():
    loop = compiled.build_now("max_pool2d_2x2", conv._compile_pool_2x2)
    assert loop is not None
    return loop


def _numpy_form(x, y, dy):
    loop = compiled._built.pop("max_pool2d_grad_2x2")
    try:
        return conv.max_pool2d_grad(np, x, y, dy, 2, 2)
    finally:
        compiled._built["max_pool2d_grad_2x2"] = loop


def _numpy_pooling(x, **attrs):
    loop = compiled._built.pop("max_pool2d_2x2")
    try:
        return conv.max_pool2d(np, x, 2, **attrs)
    finally:
        compiled._built["max_pool2d_2x2"] = loop


def _with_specials(x, rng):
    """``x`` with signed zeros and NaNs of both signs and other payloads at random."""
    specials = np.array([0.0, -0.0, np.nan], x.dtype)
    bits = specials.view(np.uint32 if x.dtype == np.float32 else np.uint64).copy()
    other_nans = bits[2:] | np.array([0x123], bits.dtype)
    specials = np.concatenate([specials, other_nans.view(x.dtype), -specials[2:]])
    where = rng.random(x.shape) < 0.3
    x[where] = rng.choice(specials, size=int(where.sum()))
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3, 8, 6), (2, 1, 2, 2), (64, 6, 28, 28)])
def test_the_compiled_max_pooling_keeps_numpys_bits(pool_2x2, dtype, shape):
    """Ties of -0.0 and 0.0, NaN payloads and signs: the element NumPy's chain of
    ``maximum`` over the window views keeps, for a contiguous input and a view."""
    rng = np.random.default_rng(sum(shape))
    x = _with_specials(rng.integers(-2, 3, shape).astype(dtype), rng)
    for value in (x, np.asfortranarray(x), x.transpose(1, 0, 2, 3)):
        want = _numpy_pooling(value, stride=2)
        got = conv.max_pool2d(np, value, 2, 2)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                      np.ascontiguousarray(want).view(np.uint8))


def test_pooling_that_does_not_tile_stays_numpy(pool_2x2):
    """Odd maps, padding, ceil_mode with a partial window, other strides: NumPy's form."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 7, 7)).astype("float32")
    for attrs in ({"stride": 2}, {"stride": 2, "padding": 1}, {"stride": 2, "ceil_mode": True},
                  {"stride": 1}):
        np.testing.assert_array_equal(conv.max_pool2d(np, x, 2, **attrs),
                                      _numpy_pooling(x, **attrs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3, 8, 6), (2, 1, 2, 2), (64, 6, 28, 28)])
def test_the_compiled_max_pool_gradient_selects_as_numpy(pool_grad_2x2, dtype, shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(-2, 3, shape).astype(dtype)  # small integers: windows with ties
    x.flat[0], x.flat[-1] = np.nan, -0.0
    y = conv.max_pool2d(np, x, 2, 2)
    dy = rng.standard_normal(y.shape).astype(dtype)
    want = _numpy_form(x, y, dy)
    for upstream in (dy, np.asfortranarray(dy)):  # a non-contiguous gradient too
        got = conv.max_pool2d_grad(np, x, y, upstream, 2, 2)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_windows_that_do_not_tile_stay_numpy(pool_grad_2x2):
    """Odd maps (the last row and column dropped) and 3x3 windows run the NumPy form:
    each window's gradient lands once, nothing in the dropped row and column."""
    rng = np.random.default_rng(3)
    for shape, k in (((2, 2, 7, 7), 2), ((2, 2, 9, 9), 3)):
        x = rng.standard_normal(shape).astype("float32")
        y = conv.max_pool2d(np, x, k, k)
        dy = rng.standard_normal(y.shape).astype("float32")
        got = conv.max_pool2d_grad(np, x, y, dy, k, k)
        assert got.shape == x.shape
        np.testing.assert_allclose(got.sum(axis=(2, 3)), dy.sum(axis=(2, 3)), rtol=1e-5)
        assert np.count_nonzero(got) == dy.size


# ------------------------------------------------------------------ Adam


@pytest.fixture(scope="module")
def adam_update():
    loop = compiled.build_now("adam_update", adam_loop._compile)
    assert loop is not None
    return loop


def _numpy_adam(*args):
    loop = compiled._built.pop("adam_update")
    try:
        return optimizer._adam_update(np, *args)
    finally:
        compiled._built["adam_update"] = loop


def _adam_operands(rng, dtype, shape):
    param, grad, m1 = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    m2 = np.abs(rng.standard_normal(shape)) * rng.choice([0.0, 1e-30, 1e-8, 1.0, 1e8], shape)
    flat = grad.reshape(-1)
    flat[: min(6, flat.size)] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40][: min(6, flat.size)]
    return param, grad, m1, np.asarray(m2, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (120, 400), (3, 1, 5, 5), ()])
def test_the_compiled_adam_update_keeps_numpys_bits(adam_update, dtype, shape):
    """Each result bit for bit as the NumPy form's, with zeros, infinities, NaNs and
    subnormal gradients, second moments of zero, and the step's scalars as the Adam
    kernels compute them (0-d arrays of the dtype, Python floats for the betas)."""
    rng = np.random.default_rng(len(shape))
    param, grad, m1, m2 = _adam_operands(rng, dtype, shape)
    b1p, b2p = np.asarray(0.9**3, dtype), np.asarray(0.999**3, dtype)
    correction = np.sqrt(1 - b2p)
    lr_t = np.asarray(1e-3, dtype) * correction / (1 - b1p)
    args = (param, grad, m1, m2, lr_t, 1e-8 * correction, 0.9, 0.999)
    with np.errstate(all="ignore"):
        want = _numpy_adam(*args)
        assert adam_loop.adam_update(*args) is not None  # the compiled loop takes these
        got = optimizer._adam_update(np, *args)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


def test_the_compiled_adam_update_leaves_other_operands_to_numpy(adam_update):
    """Per-element learning rates (parameters at different steps), mixed dtypes and
    strided views take the NumPy form (the loop declines them)."""
    rng = np.random.default_rng(3)
    param, grad, m1, m2 = _adam_operands(rng, "float32", (8, 6))
    lr_rows = np.full(param.shape, 1e-3, "float32")
    assert adam_loop.adam_update(param, grad, m1, m2, lr_rows, 1e-8, 0.9, 0.999) is None
    assert adam_loop.adam_update(param, grad.astype("float64"), m1, m2, 1e-3, 1e-8, 0.9,
                                 0.999) is None
    assert adam_loop.adam_update(param.T, grad.T, m1.T, m2.T, 1e-3, 1e-8, 0.9, 0.999) is None
    with np.errstate(all="ignore"):
        got = optimizer._adam_update(np, param, grad, m1, m2, lr_rows, np.float32(1e-8), 0.9,
                                     0.999)
        want = _numpy_adam(param, grad, m1, m2, lr_rows, np.float32(1e-8), 0.9, 0.999)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
