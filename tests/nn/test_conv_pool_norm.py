"""Conv1D, Conv2DTranspose, the adaptive and 1-D pools, GroupNorm, InstanceNorm,
Paddle 1.8's BatchNorm and Upsample: forward against NumPy, gradients against finite
differences (float64), converted code against eager."""

import math

import numpy as np
import pytest

from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec
from tests.nn.helpers import (
    check_converted,
    check_input_grads,
    check_param_grads,
    double,
    params_np,
    randn,
    tensor,
)
from tests.nn.test_layers import conv2d_ref


# --------------------------------------------------------------------- Conv1D
def conv1d_ref(x, w, b, stride, padding, dilation, groups):
    out = conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding),
                     (1, dilation), groups)
    return out[:, :, 0]


@pytest.mark.parametrize("config", [
    dict(in_channels=2, out_channels=3, kernel_size=3),
    dict(in_channels=4, out_channels=2, kernel_size=2, stride=2, padding=1, groups=2),
    dict(in_channels=2, out_channels=2, kernel_size=3, padding="SAME", dilation=2,
         bias_attr=False),
])
def test_conv1d(config):
    layer = double(nn.Conv1D(**config))
    assert layer.weight.shape == [config["out_channels"],
                                  config["in_channels"] // config.get("groups", 1),
                                  config["kernel_size"]]
    x = randn(2, config["in_channels"], 7)
    p = params_np(layer)
    pad = 2 if config.get("padding") == "SAME" else config.get("padding", 0)
    ref = conv1d_ref(x, p["weight"], p.get("bias"), config.get("stride", 1), pad,
                     config.get("dilation", 1), config.get("groups", 1))
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref, rtol=1e-10, atol=1e-12)
    check_param_grads(layer, tensor(randn(1, config["in_channels"], 6)))
    check_converted(lambda v: layer(v), x, params=layer.parameters(),
                    input_spec=[InputSpec([None, config["in_channels"], None], "float64")])


# ----------------------------------------------------------- Conv2DTranspose
def conv2d_transpose_ref(x, w, b, stride, padding, output_padding, dilation, groups):
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + 1 + oph
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, cout_g * groups, oh + 2 * ph + sh, ow + 2 * pw + sw))
    cin_g = cin // groups
    for c in range(cin):
        g = c // cin_g
        for o in range(cout_g):
            for i in range(h):
                for j in range(wd):
                    for a in range(kh):
                        for e in range(kw):
                            full[:, g * cout_g + o, i * sh + a * dh, j * sw + e * dw] += (
                                x[:, c, i, j] * w[c, o, a, e])
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    return out if b is None else out + b.reshape(1, -1, 1, 1)


TRANSPOSE_CASES = [
    dict(in_channels=2, out_channels=3, kernel_size=3),
    dict(in_channels=2, out_channels=2, kernel_size=(2, 3), stride=2, padding=1,
         output_padding=1),
    dict(in_channels=4, out_channels=2, kernel_size=3, stride=(2, 1), dilation=2, groups=2,
         bias_attr=False),
]


@pytest.mark.parametrize("config", TRANSPOSE_CASES)
def test_conv2d_transpose(config):
    layer = double(nn.Conv2DTranspose(**config))
    groups = config.get("groups", 1)
    assert layer.weight.shape[:2] == [config["in_channels"], config["out_channels"] // groups]
    x = randn(2, config["in_channels"], 3, 4)
    p = params_np(layer)
    ref = conv2d_transpose_ref(x, p["weight"], p.get("bias"), layer.stride, layer.padding,
                               layer.output_padding, layer.dilation, groups)
    out = layer(tensor(x))
    assert out.shape == list(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)
    check_param_grads(layer, tensor(randn(1, config["in_channels"], 2, 3)))
    check_input_grads(lambda v: layer(v), randn(1, config["in_channels"], 2, 2))
    check_converted(lambda v: layer(v), x, params=layer.parameters(),
                    input_spec=[InputSpec([None, config["in_channels"], 3, 4], "float64")])


def test_conv2d_transpose_output_size_picks_the_padding():
    layer = double(nn.Conv2DTranspose(2, 2, 3, stride=2, padding=1))
    x = randn(1, 2, 3, 3)
    assert layer(tensor(x)).shape == [1, 2, 5, 5]
    out = layer(tensor(x), output_size=[6, 6])
    p = params_np(layer)
    ref = conv2d_transpose_ref(x, p["weight"], p["bias"], [2, 2], [1, 1], [1, 1], [1, 1], 1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="output_padding"):
        layer(tensor(x), output_size=[8, 8])


def test_conv2d_transpose_default_init_scale():
    layer = nn.Conv2DTranspose(16, 4, 3)
    std = layer.weight.numpy().std()
    assert 0.7 * math.sqrt(2 / 144) < std < 1.3 * math.sqrt(2 / 144)  # fan-in 16 * 3 * 3


# ------------------------------------------------------------------- pooling
def adaptive_ref(x, out_sizes, reduce):
    for axis, out in zip(range(2, x.ndim), out_sizes):
        n = x.shape[axis]
        parts = []
        for i in range(out):
            start, stop = math.floor(i * n / out), math.ceil((i + 1) * n / out)
            parts.append(reduce(np.take(x, range(start, stop), axis=axis), axis=axis,
                                keepdims=True))
        x = np.concatenate(parts, axis=axis)
    return x


@pytest.mark.parametrize("output_size, sizes", [(1, [1, 1]), (2, [2, 2]), ([3, 2], [3, 2]),
                                                ([None, 4], [5, 4]), ([5, 7], [5, 7])])
def test_adaptive_pool2d(output_size, sizes):
    x = randn(2, 3, 5, 7)
    avg = nn.AdaptiveAvgPool2D(output_size)(tensor(x))
    mx = nn.AdaptiveMaxPool2D(output_size)(tensor(x))
    np.testing.assert_allclose(avg.numpy(), adaptive_ref(x, sizes, np.mean), rtol=1e-12)
    np.testing.assert_allclose(mx.numpy(), adaptive_ref(x, sizes, np.max), rtol=1e-12)


def test_adaptive_avg_pool2d_of_a_multiple_uses_equal_windows():
    x = randn(1, 2, 6, 4)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(tensor(x), [3, 2]).numpy(),
                               adaptive_ref(x, [3, 2], np.mean), rtol=1e-12)


def test_adaptive_pool1d_and_gradients():
    x = randn(2, 3, 7)
    np.testing.assert_allclose(nn.AdaptiveAvgPool1D(3)(tensor(x)).numpy(),
                               adaptive_ref(x, [3], np.mean), rtol=1e-12)
    np.testing.assert_allclose(nn.AdaptiveMaxPool1D(3)(tensor(x)).numpy(),
                               adaptive_ref(x, [3], np.max), rtol=1e-12)
    check_input_grads(lambda v: F.adaptive_avg_pool2d(v, [2, 3]), randn(1, 2, 5, 4))
    check_input_grads(lambda v: F.adaptive_max_pool2d(v, [2, 3]), randn(1, 2, 5, 4))
    check_input_grads(lambda v: F.adaptive_avg_pool1d(v, 2), randn(1, 2, 5))


def test_adaptive_pools_convert_with_an_unknown_batch():
    check_converted(lambda v: F.adaptive_avg_pool2d(v, [2, 3]) * 2.0, randn(2, 2, 5, 4),
                    input_spec=[InputSpec([None, 2, 5, 4], "float64")])
    check_converted(lambda v: F.adaptive_max_pool2d(v, 2) * 2.0, randn(2, 2, 5, 4),
                    input_spec=[InputSpec([None, 2, 5, 4], "float64")])
    # output size 1 needs no known spatial size
    check_converted(lambda v: F.adaptive_avg_pool2d(v, 1) * 2.0, randn(2, 2, 5, 4),
                    input_spec=[InputSpec([None, 2, None, None], "float64")])


def test_adaptive_pool_of_an_unknown_size_is_a_clear_error():
    def f(v):
        return F.adaptive_avg_pool2d(v, 2)

    with pytest.raises(Exception, match="must be known"):
        check_converted(f, randn(1, 2, 4, 4),
                        input_spec=[InputSpec([None, 2, None, None], "float64")])


def test_pool1d():
    x = randn(2, 3, 8)
    ref_max = x.reshape(2, 3, 4, 2).max(-1)
    ref_avg = x.reshape(2, 3, 4, 2).mean(-1)
    np.testing.assert_allclose(nn.MaxPool1D(2)(tensor(x)).numpy(), ref_max, rtol=1e-12)
    np.testing.assert_allclose(nn.AvgPool1D(2)(tensor(x)).numpy(), ref_avg, rtol=1e-12)


# ------------------------------------------------------------- normalization
def group_norm_ref(x, groups, w, b, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    shape = [1, c] + [1] * (x.ndim - 2)
    return y.reshape(x.shape) * w.reshape(shape) + b.reshape(shape)


def test_group_norm():
    layer = double(nn.GroupNorm(2, 4))
    layer.weight.set_value(randn(4))
    layer.bias.set_value(randn(4))
    x = randn(3, 4, 2, 3)
    p = params_np(layer)
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               group_norm_ref(x, 2, p["weight"], p["bias"]), rtol=1e-10)
    check_param_grads(layer, tensor(randn(2, 4, 3)))
    check_input_grads(lambda v: layer(v), randn(2, 4, 3), rtol=1e-5, atol=1e-7)
    check_converted(lambda v: layer(v), x, params=layer.parameters(),
                    input_spec=[InputSpec([None, 4, None, None], "float64")])
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_instance_norm2d():
    layer = double(nn.InstanceNorm2D(3))
    layer.scale.set_value(randn(3))
    layer.bias.set_value(randn(3))
    x = randn(2, 3, 4, 5)
    mean, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    ref = ((x - mean) / np.sqrt(var + 1e-5) * layer.scale.numpy().reshape(1, 3, 1, 1)
           + layer.bias.numpy().reshape(1, 3, 1, 1))
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref, rtol=1e-10)
    check_param_grads(layer, tensor(randn(2, 3, 2, 3)))
    check_input_grads(lambda v: layer(v), randn(1, 3, 2, 3), rtol=1e-5, atol=1e-7)
    check_converted(lambda v: layer(v), x, params=layer.parameters(),
                    input_spec=[InputSpec([None, 3, None, None], "float64")])
    with pytest.raises(ValueError, match="4-D"):
        layer(tensor(randn(2, 3, 4)))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 2)])
def test_paddle18_batch_norm_with_act(shape):
    layer = double(nn.BatchNorm(3, act="relu"))
    layer.weight.set_value(randn(3))
    layer.bias.set_value(randn(3))
    x = randn(*shape)
    axes = tuple(i for i in range(len(shape)) if i != 1)
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    bshape = [1, 3] + [1] * (len(shape) - 2)
    ref = np.maximum((x - mean) / np.sqrt(var + 1e-5) * layer.weight.numpy().reshape(bshape)
                     + layer.bias.numpy().reshape(bshape), 0)
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref, rtol=1e-10, atol=1e-12)
    running = 0.9 * np.zeros(3) + 0.1 * mean.reshape(3)
    np.testing.assert_allclose(layer._mean.numpy(), running, rtol=1e-10)
    layer.eval()  # the running statistics normalize now
    y = layer(tensor(x)).numpy()
    rm, rv = layer._mean.numpy().reshape(bshape), layer._variance.numpy().reshape(bshape)
    ref = np.maximum((x - rm) / np.sqrt(rv + 1e-5) * layer.weight.numpy().reshape(bshape)
                     + layer.bias.numpy().reshape(bshape), 0)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)


def test_paddle18_batch_norm_options():
    layer = nn.BatchNorm(4, data_layout="NHWC", use_global_stats=True)
    x = randn(2, 3, 3, 4, dtype="float32")
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x / np.sqrt(1 + 1e-5), rtol=1e-5)
    with pytest.raises(ValueError, match="activation"):
        nn.BatchNorm(3, act="nope")
    check_param_grads(nn.BatchNorm(2, act="sigmoid"), tensor(randn(4, 2, 3)))


# ------------------------------------------------------------------ Upsample
def nearest_ref(x, out, align_corners=False):
    n, c, h, w = x.shape
    rows = [min(int((h - 1) / (out[0] - 1) * i + 0.5) if align_corners else int(h / out[0] * i),
                h - 1) for i in range(out[0])]
    cols = [min(int((w - 1) / (out[1] - 1) * j + 0.5) if align_corners else int(w / out[1] * j),
                w - 1) for j in range(out[1])]
    return x[:, :, rows][:, :, :, cols]


def bilinear_ref(x, out, align_corners=False, align_mode=0):
    n, c, h, w = x.shape
    result = np.zeros((n, c, out[0], out[1]))

    def source(i, size, out_size):
        if align_corners:
            return i * (size - 1) / (out_size - 1)
        ratio = size / out_size
        return max((i + 0.5) * ratio - 0.5, 0) if align_mode == 0 else i * ratio

    for i in range(out[0]):
        for j in range(out[1]):
            y, z = source(i, h, out[0]), source(j, w, out[1])
            y0, z0 = min(int(y), h - 1), min(int(z), w - 1)
            y1, z1 = min(y0 + 1, h - 1), min(z0 + 1, w - 1)
            a, b = y - y0, z - z0
            result[:, :, i, j] = ((1 - a) * (1 - b) * x[:, :, y0, z0]
                                  + (1 - a) * b * x[:, :, y0, z1]
                                  + a * (1 - b) * x[:, :, y1, z0] + a * b * x[:, :, y1, z1])
    return result


@pytest.mark.parametrize("kwargs, out", [
    (dict(scale_factor=2), [6, 8]),
    (dict(size=[5, 7]), [5, 7]),
    (dict(size=[2, 3]), [2, 3]),
])
def test_upsample_nearest(kwargs, out):
    x = randn(2, 3, 3, 4)
    np.testing.assert_allclose(nn.Upsample(**kwargs)(tensor(x)).numpy(), nearest_ref(x, out))
    np.testing.assert_allclose(nn.UpsamplingNearest2D(**kwargs)(tensor(x)).numpy(),
                               nearest_ref(x, out))


@pytest.mark.parametrize("align_corners, align_mode", [(False, 0), (False, 1), (True, 0)])
@pytest.mark.parametrize("out", [[6, 8], [5, 3]])
def test_upsample_bilinear(align_corners, align_mode, out):
    x = randn(2, 3, 3, 4)
    layer = nn.Upsample(size=out, mode="bilinear", align_corners=align_corners,
                        align_mode=align_mode)
    # the sampling positions are computed in float32, as Paddle's kernels do
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               bilinear_ref(x, out, align_corners, align_mode), rtol=1e-5,
                               atol=1e-6)


def test_upsample_gradients_conversion_and_errors():
    bilinear = nn.Upsample(scale_factor=2, mode="bilinear")
    check_input_grads(lambda v: bilinear(v), randn(1, 2, 3, 2))
    check_input_grads(lambda v: nn.Upsample(size=[5, 3])(v), randn(1, 2, 3, 2))
    check_converted(lambda v: bilinear(v), randn(2, 2, 3, 4),
                    input_spec=[InputSpec([None, 2, 3, 4], "float64")])
    np.testing.assert_allclose(nn.UpsamplingBilinear2D(size=[5, 5])(tensor(randn(1, 1, 2, 2)))
                               .shape, [1, 1, 5, 5])
    with pytest.raises(ValueError, match="exactly one"):
        nn.Upsample()
    with pytest.raises(NotImplementedError, match="mode"):
        nn.Upsample(scale_factor=2, mode="bicubic")


def test_paddle18_batch_norm_converted_updates_its_statistics_as_eager():
    eager, converted = double(nn.BatchNorm(3, act="relu")), double(nn.BatchNorm(3, act="relu"))
    x = randn(4, 3, 2)
    for layer in (eager, converted):
        layer.weight.set_value(np.array([1.0, 2.0, 0.5]))
    check_converted(lambda v: converted(v), x, params=converted.parameters(),
                    input_spec=[InputSpec([None, 3, None], "float64")])
    eager(tensor(x))  # once more, as check_converted ran the converted layer twice
    eager(tensor(x))
    np.testing.assert_allclose(converted._mean.numpy(), eager._mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(converted._variance.numpy(), eager._variance.numpy(), rtol=1e-12)
