"""NN kernels against naive NumPy references; gradients against finite differences."""

import math

import numpy as np
import pytest

import dy2stat.kernels.conv as convk
import dy2stat.kernels.nn as nnk

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def numgrad(f, x, eps=1e-6):
    """Central finite differences of the scalar f() with respect to the array x (in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        hi = f()
        x[i] = old - eps
        lo = f()
        x[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


def check_grad(forward, x, grad, dy, atol=1e-6):
    """grad (the kernel's answer for upstream dy) matches d sum(forward(x) * dy) / dx."""
    want = numgrad(lambda: float(np.sum(forward() * dy)), x)
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=atol)


# ------------------------------------------------------------------ conv2d


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_ref(x, w, stride, padding, dilation, groups):
    """Direct convolution, one output pixel at a time (stride etc.: ints or pairs)."""
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    xp_ = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, cout, oh, ow), x.dtype)
    per = cout // groups
    for o in range(cout):
        g = o // per
        for i in range(oh):
            for j in range(ow):
                patch = xp_[
                    :,
                    g * cg : (g + 1) * cg,
                    i * sh : i * sh + dh * (kh - 1) + 1 : dh,
                    j * sw : j * sw + dw * (kw - 1) + 1 : dw,
                ]
                y[:, o, i, j] = np.einsum("nckl,ckl->n", patch, w[o])
    return y


CONV_CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 5, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), (1, 2), 1, 1),
    ((1, 2, 8, 7), (3, 2, 3, 3), 2, 1, 2, 1),
    ((2, 4, 6, 6), (6, 2, 3, 3), 1, 1, 1, 2),
    ((1, 6, 5, 5), (6, 1, 3, 3), (1, 2), (2, 1), (2, 1), 6),
    ((3, 2, 4, 4), (2, 2, 1, 1), 3, 0, 1, 1),
    # output rows of 16 or more take the batch-major column layout
    ((2, 2, 3, 18), (3, 2, 2, 3), 1, (0, 1), 1, 1),
    ((1, 4, 3, 40), (4, 2, 1, 3), (1, 2), 1, (1, 2), 2),
]


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_forward_and_grads(xs, ws, stride, padding, dilation, groups):
    x, w = rand(*xs), rand(*ws)
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = nnk.conv2d(np, x, w, **attrs)
    pair = lambda v: (v, v) if isinstance(v, int) else v
    want = conv_ref(x, w, pair(stride), pair(padding), pair(dilation), groups)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    dy = rand(*y.shape)
    dx = nnk.conv2d_grad_input(np, x, w, dy, **attrs)
    check_grad(lambda: nnk.conv2d(np, x, w, **attrs), x, dx, dy)
    dw = nnk.conv2d_grad_filter(np, x, dy, w, **attrs)
    check_grad(lambda: nnk.conv2d(np, x, w, **attrs), w, dw, dy)
    assert dx.shape == x.shape and dw.shape == w.shape
    assert y.flags.c_contiguous and dx.flags.c_contiguous


def test_random_conv_geometries_satisfy_the_adjoint_identities():
    """Both column layouts, groups, strides, dilation, a batch above the chunk size and
    non-contiguous input: the forward against loops, the gradients by linearity
    (<dy, conv(x, w)> = <grad_input(dy), x> = <grad_filter(dy), w>)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        groups = int(rng.choice([1, 2, 3]))
        cg, cout = int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        padding = (int(rng.integers(0, 2)), int(rng.integers(0, 2)))
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        n = int(rng.choice([1, 2, 5, 400]))
        h = int(rng.integers(dilation[0] * (kh - 1) + 1, 9))
        wd = int(rng.integers(dilation[1] * (kw - 1) + 1, 40))
        x = rng.standard_normal((n, cg * groups, h, wd))
        if rng.random() < 0.3:
            x = np.asfortranarray(x)
        w = rng.standard_normal((cout, cg, kh, kw))
        attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        y = nnk.conv2d(np, x, w, **attrs)
        np.testing.assert_allclose(y, conv_ref(x, w, stride, padding, dilation, groups),
                                   rtol=1e-9, atol=1e-9, err_msg=str(attrs))
        dy = rng.standard_normal(y.shape)
        total = float((dy * y).sum())
        dx = nnk.conv2d_grad_input(np, x, w, dy, **attrs)
        dw = nnk.conv2d_grad_filter(np, x, dy, w, **attrs)
        for grad, arg in ((dx, x), (dw, w)):
            assert abs(float((grad * arg).sum()) - total) <= 1e-7 * max(1.0, abs(total))


def test_conv2d_column_layouts_agree():
    """Short output rows use batch-minor columns, long ones batch-major: same answer."""
    x, w = rand(3, 4, 9, 20), rand(6, 2, 3, 3)
    attrs = dict(stride=1, padding=1, dilation=1, groups=2)
    wide = nnk.conv2d(np, x, w, **attrs)
    narrow = np.concatenate(  # the same convolution, 5 output columns at a time
        [nnk.conv2d(np, x[..., max(0, j - 1):j + 6], w, **attrs)[..., int(j > 0):][..., :5]
         for j in range(0, 20, 5)], axis=-1)
    np.testing.assert_allclose(narrow, wide, rtol=1e-12, atol=1e-12)


def test_conv2d_keeps_float32_and_rejects_bad_shapes():
    x, w = rand(2, 3, 6, 6, dtype=np.float32), rand(4, 3, 3, 3, dtype=np.float32)
    y = nnk.conv2d(np, x, w, padding=1)
    assert y.dtype == np.float32 and y.shape == (2, 4, 6, 6) and y.flags.c_contiguous
    dy = np.ones_like(y)
    assert nnk.conv2d_grad_input(np, x, w, dy, padding=1).dtype == np.float32
    assert nnk.conv2d_grad_filter(np, x, dy, w, padding=1).dtype == np.float32
    with pytest.raises(ValueError):
        nnk.conv2d(np, x, rand(4, 2, 3, 3))
    with pytest.raises(ValueError):
        nnk.conv2d(np, x, rand(4, 3, 7, 7))


# ------------------------------------------------------------------ pooling


def pool_out(size, k, s, p, ceil_mode):
    if ceil_mode:
        out = math.ceil((size + 2 * p - k) / s) + 1
        if (out - 1) * s >= size + p:
            out -= 1
        return out
    return (size + 2 * p - k) // s + 1


def pool_ref(x, k, s, p, ceil_mode, kind, exclusive=True):
    n, c, h, w = x.shape
    oh, ow = pool_out(h, k[0], s[0], p[0], ceil_mode), pool_out(w, k[1], s[1], p[1], ceil_mode)
    y = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            win = x[:, :, max(h0, 0) : min(h0 + k[0], h), max(w0, 0) : min(w0 + k[1], w)]
            if kind == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = win.shape[2] * win.shape[3] if exclusive else k[0] * k[1]
                y[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return y


POOL_CASES = [
    # x shape, kernel, stride, padding, ceil_mode
    ((2, 3, 6, 6), 2, None, 0, False),
    ((1, 2, 7, 5), 3, 2, 1, False),
    ((1, 2, 7, 5), 3, 2, 1, True),
    ((2, 1, 6, 7), (2, 3), (2, 2), (1, 1), True),
    ((1, 2, 5, 5), 2, 2, 0, True),
    ((1, 1, 9, 9), 3, 3, 1, True),
    ((1, 1, 4, 4), 3, 1, 1, False),
]


@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_max_pool2d(xs, k, s, p, ceil_mode):
    x = rand(*xs)
    pair = lambda v: (v, v) if isinstance(v, int) else v
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
    y = nnk.max_pool2d(np, x, **attrs)
    want = pool_ref(x, pair(k), pair(k if s is None else s), pair(p), ceil_mode, "max")
    np.testing.assert_array_equal(y, want)
    dy = rand(*y.shape)
    dx = nnk.max_pool2d_grad(np, x, y, dy, **attrs)
    check_grad(lambda: nnk.max_pool2d(np, x, **attrs), x, dx, dy)


@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("xs,k,s,p,ceil_mode", POOL_CASES)
def test_avg_pool2d(xs, k, s, p, ceil_mode, exclusive):
    x = rand(*xs)
    pair = lambda v: (v, v) if isinstance(v, int) else v
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode, exclusive=exclusive)
    y = nnk.avg_pool2d(np, x, **attrs)
    want = pool_ref(x, pair(k), pair(k if s is None else s), pair(p), ceil_mode, "avg", exclusive)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    dy = rand(*y.shape)
    dx = nnk.avg_pool2d_grad(np, x, dy, **attrs)
    check_grad(lambda: nnk.avg_pool2d(np, x, **attrs), x, dx, dy)


def test_max_pool2d_grad_ties_go_to_first_max():
    x = np.ones((1, 1, 4, 4), np.float32)
    y = nnk.max_pool2d(np, x, 2)
    dx = nnk.max_pool2d_grad(np, x, y, np.ones_like(y), 2)
    want = np.zeros((4, 4), np.float32)
    want[::2, ::2] = 1
    np.testing.assert_array_equal(dx[0, 0], want)
    assert y.dtype == dx.dtype == np.float32


def max_pool_grad_ref(x, dy, k, s, p):
    """Loops: each window's dy goes to its first maximum (row-major order)."""
    (kh, kw), (sh, sw), (ph, pw) = k, s, p
    oh, ow = dy.shape[2:]
    h = max(x.shape[2] + 2 * ph, (oh - 1) * sh + kh)  # ceil_mode may reach past the padding
    w = max(x.shape[3] + 2 * pw, (ow - 1) * sw + kw)
    xpad = np.full(x.shape[:2] + (h, w), -np.inf)
    xpad[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]] = x
    dx = np.zeros_like(xpad)
    for n, c, i, j in np.ndindex(dy.shape):
        win = xpad[n, c, i * sh : i * sh + kh, j * sw : j * sw + kw]
        a, b = np.unravel_index(np.argmax(win), win.shape)
        dx[n, c, i * sh + a, j * sw + b] += dy[n, c, i, j]
    return dx[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (2, 3, 0)])
def test_max_pool2d_grad_large_with_ties(k, s, p):
    """Big enough for the branch-free selection; ReLU-like input has many tied zeros."""
    x = np.maximum(rand(8, 8, 40, 40, dtype=np.float32), 0)
    y = nnk.max_pool2d(np, x, k, s, p)
    assert y[0].size >= 4096 // 8
    dy = rand(*y.shape, dtype=np.float32)
    dx = nnk.max_pool2d_grad(np, x, y, dy, k, s, p)
    # overlapping windows add in another order: equal up to rounding
    want = max_pool_grad_ref(x, dy, (k, k), (s, s), (p, p))
    np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-6)


def test_random_pool_geometries_against_loops():
    """Windows, strides, padding and ceil_mode drawn at random; inputs full of ties."""
    rng = np.random.default_rng(9)
    for _ in range(100):
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        p = (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1)))
        ceil_mode = bool(rng.random() < 0.3)
        shape = (int(rng.choice([1, 3, 40])), int(rng.integers(1, 4)),
                 int(rng.integers(k[0], 14)), int(rng.integers(k[1], 14)))
        x = np.maximum(rng.standard_normal(shape), 0).round(1)
        attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)
        y = nnk.max_pool2d(np, x, **attrs)
        np.testing.assert_array_equal(y, pool_ref(x, k, s, p, ceil_mode, "max"))
        dy = rng.standard_normal(y.shape)
        np.testing.assert_allclose(nnk.max_pool2d_grad(np, x, y, dy, **attrs),
                                   max_pool_grad_ref(x, dy, k, s, p), rtol=1e-12, atol=1e-12,
                                   err_msg=str(attrs))
        np.testing.assert_allclose(nnk.avg_pool2d(np, x, **attrs),
                                   pool_ref(x, k, s, p, ceil_mode, "avg"), rtol=1e-12)


def test_pools_keep_float32():
    x = rand(2, 3, 5, 5, dtype=np.float32)
    for fn in (nnk.max_pool2d, nnk.avg_pool2d):
        assert fn(np, x, 3, 2, 1, True).dtype == np.float32
    y = nnk.avg_pool2d(np, x, 3, 2, 1)
    assert nnk.avg_pool2d_grad(np, x, np.ones_like(y), 3, 2, 1).dtype == np.float32


def test_conv_reexported():
    assert nnk.conv2d is convk.conv2d and nnk.max_pool2d_grad is convk.max_pool2d_grad


# ------------------------------------------------------------ activations


def test_softmax_and_log_softmax_are_stable():
    x = rand(3, 4, 5) * 50 + 1000
    for axis in (-1, 1, 0):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        want = e / e.sum(axis=axis, keepdims=True)
        np.testing.assert_allclose(nnk.softmax(np, x, axis), want, rtol=1e-12)
        np.testing.assert_allclose(nnk.log_softmax(np, x, axis), np.log(want), atol=1e-10)
    x32 = x.astype(np.float32)
    assert nnk.softmax(np, x32).dtype == nnk.log_softmax(np, x32).dtype == np.float32
    assert np.isfinite(nnk.log_softmax(np, x32)).all()


def test_relu():
    x = rand(4, 5, dtype=np.float32)
    y = nnk.relu(np, x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.where(x > 0, x, 0))


def test_erfc_accuracy():
    z = np.concatenate([np.linspace(-6, 6, 2001), [0.0, -0.0, 1e-300, 10.0, -10.0, 26.0]])
    want = np.array([math.erfc(v) for v in z])
    np.testing.assert_allclose(nnk.erfc(np, z), want, rtol=1e-13, atol=1e-300)
    z32 = z.astype(np.float32)
    got32 = nnk.erfc(np, z32)
    assert got32.dtype == np.float32  # exp(-z*z) in float32 costs ~z*z ulps
    want32 = np.array([math.erfc(v) for v in z32.astype(np.float64)])
    np.testing.assert_allclose(got32, want32, rtol=1e-5, atol=1e-37)
    assert nnk.erfc(np, z.astype(np.float16)).dtype == np.float16


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate):
    x = np.linspace(-8, 8, 101)
    if approximate:
        want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    else:
        want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(nnk.gelu(np, x, approximate), want, rtol=1e-13, atol=1e-15)
    x = rand(3, 4)
    dy = rand(3, 4)
    check_grad(lambda: nnk.gelu(np, x, approximate), x, nnk.gelu_grad(np, x, dy, approximate), dy)
    x32 = x.astype(np.float32)
    assert nnk.gelu(np, x32, approximate).dtype == np.float32
    assert nnk.gelu_grad(np, x32, x32, approximate).dtype == np.float32


def test_dropout():
    x = rand(4, 5, dtype=np.float32)
    mask = (RNG.random((4, 5)) > 0.3).astype(np.float32)
    y = nnk.dropout(np, x, mask, p=0.3)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x * mask / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(nnk.dropout(np, x, mask, 0.3, "downscale_in_infer"), x * mask)
    assert not nnk.dropout(np, x, np.zeros_like(x), p=1.0).any()


# ------------------------------------------------------------ cross entropy


def ce_ref(logits, label, soft, ignore_index, reduction):
    """Class axis last; label without the class axis (hard) or like logits (soft)."""
    flat = logits.reshape(-1, logits.shape[-1])
    out, count = [], 0
    for r, row in enumerate(flat):
        lse = math.log(sum(math.exp(v - row.max()) for v in row)) + row.max()
        if soft:
            out.append(-sum(p * (v - lse) for p, v in zip(label.reshape(flat.shape)[r], row)))
            count += 1
        else:
            lab = int(label.reshape(-1)[r])
            out.append(0.0 if lab == ignore_index else lse - row[lab])
            count += lab != ignore_index
    out = np.array(out).reshape(logits.shape[:-1])
    if reduction == "none":
        return out
    return out.sum() if reduction == "sum" else out.sum() / max(count, 1)


def make_labels(shape, classes, with_ignored):
    label = RNG.integers(0, classes, shape)
    if with_ignored:
        label.reshape(-1)[::3] = -100
    return label


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("trailing_one", [False, True])
@pytest.mark.parametrize("with_ignored", [False, True])
def test_cross_entropy_hard(reduction, trailing_one, with_ignored):
    logits = rand(6, 5)
    label = make_labels((6,), 5, with_ignored)
    want = ce_ref(logits, label, False, -100, reduction)
    arg = label[:, None] if trailing_one else label
    loss = nnk.cross_entropy(np, logits, arg, reduction=reduction)
    assert isinstance(loss, np.ndarray) and loss.shape == np.shape(want)
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    dloss = rand(6) if reduction == "none" else np.array(1.7)
    grad = nnk.cross_entropy_grad(np, logits, arg, dloss, reduction=reduction)
    check_grad(lambda: nnk.cross_entropy(np, logits, arg, reduction=reduction), logits, grad, dloss)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_soft(reduction):
    logits = rand(2, 3, 4)
    label = nnk.softmax(np, rand(2, 3, 4))
    want = ce_ref(logits, label, True, -100, reduction)
    loss = nnk.cross_entropy(np, logits, label, soft_label=True, reduction=reduction)
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    dloss = rand(2, 3) if reduction == "none" else np.array(0.6)
    grad = nnk.cross_entropy_grad(np, logits, label, dloss, soft_label=True, reduction=reduction)
    check_grad(
        lambda: nnk.cross_entropy(np, logits, label, soft_label=True, reduction=reduction),
        logits,
        grad,
        dloss,
    )


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_class_axis_1(reduction):
    logits = rand(2, 4, 3)  # classes on axis 1
    label = make_labels((2, 1, 3), 4, True)
    moved = np.moveaxis(logits, 1, -1)
    want = ce_ref(moved, label[:, 0], False, -100, reduction)
    loss = nnk.cross_entropy(np, logits, label, reduction=reduction, axis=1)
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    dloss = rand(2, 3) if reduction == "none" else np.array(1.0)
    grad = nnk.cross_entropy_grad(np, logits, label, dloss, reduction=reduction, axis=1)
    check_grad(
        lambda: nnk.cross_entropy(np, logits, label, reduction=reduction, axis=1),
        logits,
        grad,
        dloss,
    )


def test_cross_entropy_all_ignored_and_float32():
    logits = rand(3, 4, dtype=np.float32)
    label = np.full((3, 1), 7)
    loss = nnk.cross_entropy(np, logits, label, ignore_index=7)
    assert loss.dtype == np.float32 and loss.shape == () and loss == 0
    grad = nnk.cross_entropy_grad(np, logits, label, np.float32(1), ignore_index=7)
    assert grad.dtype == np.float32 and not grad.any()
    with pytest.raises(ValueError):
        nnk.cross_entropy(np, logits, label, ignore_index=7, reduction="avg")


# ------------------------------------------------------------ normalization


@pytest.mark.parametrize("begin", [1, 2])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(begin, affine):
    x = rand(2, 3, 4)
    norm_shape = x.shape[begin:]
    weight, bias = (rand(*norm_shape), rand(*norm_shape)) if affine else (None, None)
    y, mean, var = nnk.layer_norm(np, x, weight, bias, 1e-5, begin)
    flat = x.reshape(int(np.prod(x.shape[:begin])), -1)
    m, v = flat.mean(axis=1), flat.var(axis=1)
    want = ((flat - m[:, None]) / np.sqrt(v[:, None] + 1e-5)).reshape(x.shape)
    if affine:
        want = want * weight + bias
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean, m.reshape(x.shape[:begin]), rtol=1e-12)
    np.testing.assert_allclose(var, v.reshape(x.shape[:begin]), rtol=1e-12)
    dy = rand(*x.shape)
    dx, dw, db = nnk.layer_norm_grad(np, x, weight, mean, var, dy, 1e-5, begin)
    fwd = lambda: nnk.layer_norm(np, x, weight, bias, 1e-5, begin)[0]
    check_grad(fwd, x, dx, dy)
    if affine:
        check_grad(fwd, weight, dw, dy)
        check_grad(fwd, bias, db, dy)


def bn_ref(x, rm, rv, w, b, training, momentum, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        n = x.size // x.shape[1]
        new_rm = momentum * rm + (1 - momentum) * mean
        new_rv = momentum * rv + (1 - momentum) * x.var(axis=axes, ddof=1)
        assert n > 1
    else:
        mean, var, new_rm, new_rv = rm, rv, rm, rv
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    y = y * w.reshape(shape) + b.reshape(shape)
    return y, new_rm, new_rv, mean, 1 / np.sqrt(var + eps)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 5)])
def test_batch_norm(training, shape):
    x = rand(*shape)
    c = shape[1]
    rm, rv, w, b = rand(c), np.abs(rand(c)) + 0.5, rand(c), rand(c)
    out = nnk.batch_norm(np, x, rm, rv, w, b, training=training, momentum=0.9, epsilon=1e-5)
    for got, want in zip(out, bn_ref(x, rm, rv, w, b, training, 0.9, 1e-5)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    dy = rand(*shape)
    dx, dw, db = nnk.batch_norm_grad(np, x, w, out[3], out[4], dy, training=training)
    fwd = lambda: nnk.batch_norm(np, x, rm, rv, w, b, training=training)[0]
    check_grad(fwd, x, dx, dy)
    check_grad(fwd, w, dw, dy)
    check_grad(fwd, b, db, dy)


def test_batch_norm_nhwc_no_affine_float32():
    x = rand(2, 3, 3, 4, dtype=np.float32)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    y, nrm, nrv, mean, invstd = nnk.batch_norm(np, x, rm, rv, None, None, data_format="NHWC")
    assert y.dtype == nrm.dtype == nrv.dtype == np.float32
    want = (x - x.mean(axis=(0, 1, 2))) / np.sqrt(x.var(axis=(0, 1, 2)) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    dx, dw, db = nnk.batch_norm_grad(np, x, None, mean, invstd, np.ones_like(x), data_format="NHWC")
    assert dx.dtype == np.float32 and dw.shape == db.shape == (4,)
    np.testing.assert_allclose(dx, 0, atol=1e-5)  # a constant dy has no effect after norm


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding(padding_idx):
    weight = rand(6, 3)
    ids = np.array([[0, 2, 2], [5, 1, 2]])
    out = nnk.embedding(np, ids, weight, padding_idx)
    pad = None if padding_idx is None else padding_idx % 6
    want = np.stack([[weight[i] if i != pad else np.zeros(3) for i in row] for row in ids])
    np.testing.assert_array_equal(out, want)
    dout = rand(2, 3, 3)
    dw = nnk.embedding_grad(np, ids, weight, dout, padding_idx)
    want = np.zeros_like(weight)
    for i, row in zip(ids.reshape(-1), dout.reshape(-1, 3)):
        if i != pad:
            want[i] += row
    np.testing.assert_allclose(dw, want, rtol=1e-12)
    assert nnk.embedding(np, ids, weight.astype(np.float32), padding_idx).dtype == np.float32


def test_max_pool2d_integer_input():
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    y = nnk.max_pool2d(np, x, 3, 2, 1, True)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, pool_ref(x, (3, 3), (2, 2), (1, 1), True, "max"))


# ------------------------------------------------------------- cupy == numpy


def gpu_cases():
    """(kernel, array args, attrs) run on both backends by test_cupy_matches_numpy."""
    x, w = rand(2, 4, 7, 6), rand(6, 2, 3, 3)
    y = nnk.conv2d(np, x, w, stride=2, padding=1, groups=2)
    dy = rand(*y.shape)
    conv = dict(stride=2, padding=1, dilation=1, groups=2)
    pool = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)
    py = nnk.max_pool2d(np, x, **pool)
    logits, label = rand(5, 4), make_labels((5, 1), 4, True)
    ids, table = np.array([[1, 3, 3], [0, 3, 2]]), rand(5, 3)
    c = x.shape[1]
    return [
        (nnk.conv2d, (x, w), conv),
        (nnk.conv2d_grad_input, (x, w, dy), conv),
        (nnk.conv2d_grad_filter, (x, dy, w), conv),
        (nnk.max_pool2d, (x,), pool),
        (nnk.max_pool2d_grad, (x, py, rand(*py.shape)), pool),
        (nnk.avg_pool2d, (x,), pool),
        (nnk.avg_pool2d_grad, (x, rand(*py.shape)), pool),
        (nnk.softmax, (logits,), {}),
        (nnk.log_softmax, (logits,), {}),
        (nnk.cross_entropy, (logits, label), {}),
        (nnk.cross_entropy_grad, (logits, label, np.array(1.0)), {}),
        (nnk.gelu, (logits,), {}),
        (nnk.gelu_grad, (logits, logits), {}),
        (nnk.layer_norm, (x, None, None), {"begin_norm_axis": 2}),
        (nnk.batch_norm, (x, rand(c), np.ones(c), rand(c), rand(c)), {}),
        (nnk.batch_norm_grad, (x, rand(c), rand(c), np.ones(c), rand(*x.shape)), {}),
        (nnk.embedding, (ids, table), {"padding_idx": 2}),
        (nnk.embedding_grad, (ids, table, rand(2, 3, 3)), {"padding_idx": 2}),
    ]


@pytest.mark.gpu
def test_cupy_matches_numpy():
    cp = pytest.importorskip("cupy")
    for fn, args, attrs in gpu_cases():
        want = fn(np, *args, **attrs)
        got = fn(cp, *[None if a is None else cp.asarray(a) for a in args], **attrs)
        for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
            np.testing.assert_allclose(
                cp.asnumpy(g), w, rtol=1e-10, atol=1e-12, err_msg=fn.__name__
            )
