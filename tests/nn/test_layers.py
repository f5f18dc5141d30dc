"""Every layer's forward against a NumPy reference, and its parameters' gradients
against finite differences (float64)."""

import math

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import (
    check_param_grads,
    double,
    erf,
    params_np,
    randn,
    sigmoid,
    softmax,
    tensor,
)


def conv2d_ref(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, oh, ow))
    per_group = cout // groups
    for o in range(cout):
        g = o // per_group
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def pool_ref(x, k, s, p, reduce, exclusive=True):
    n, c, h, w = x.shape
    fill = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ones = np.pad(np.ones((h, w)), ((p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            if reduce == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = ones[i * s:i * s + k, j * s:j * s + k].sum() if exclusive else k * k
                out[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return out


# ------------------------------------------------------------------- linear
def test_linear_forward_and_layout():
    layer = nn.Linear(3, 4)
    assert layer.weight.shape == [3, 4] and layer.bias.shape == [4]
    x = randn(2, 3, dtype="float32")
    p = params_np(layer)
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x @ p["weight"] + p["bias"], rtol=1e-5)
    assert not np.any(p["bias"])  # biases start at zero


def test_linear_without_bias():
    layer = nn.Linear(3, 2, bias_attr=False)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    x = randn(4, 3, dtype="float32")
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x @ layer.weight.numpy(), rtol=1e-5)


def test_linear_on_higher_rank_inputs():
    layer = nn.Linear(3, 2)
    x = randn(2, 5, 3, dtype="float32")
    p = params_np(layer)
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x @ p["weight"] + p["bias"],
                               rtol=1e-5, atol=1e-6)


def test_linear_gradients():
    check_param_grads(nn.Linear(3, 2), tensor(randn(4, 3)))


# --------------------------------------------------------------------- conv
CONV_CASES = [
    dict(in_channels=2, out_channels=3, kernel_size=3),
    dict(in_channels=2, out_channels=4, kernel_size=(2, 3), stride=2, padding=1),
    dict(in_channels=4, out_channels=2, kernel_size=3, padding=2, dilation=2, groups=2),
    dict(in_channels=2, out_channels=2, kernel_size=3, padding="SAME", bias_attr=False),
]


@pytest.mark.parametrize("config", CONV_CASES)
def test_conv2d_forward(config):
    layer = nn.Conv2D(**config)
    x = randn(2, config["in_channels"], 6, 5, dtype="float32")
    p = params_np(layer)
    ref = conv2d_ref(x, p["weight"], p.get("bias"), layer.stride, layer.padding, layer.dilation,
                     layer.groups)
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_conv2d_weight_shape_and_init():
    d2s.seed(3)
    layer = nn.Conv2D(4, 8, 3, groups=2)
    assert layer.weight.shape == [8, 2, 3, 3] and layer.bias.shape == [8]
    std = layer.weight.numpy().std()
    assert 0.5 * math.sqrt(2 / 18) < std < 1.5 * math.sqrt(2 / 18)  # Kaiming normal


@pytest.mark.parametrize("config", CONV_CASES[:3])
def test_conv2d_gradients(config):
    layer = nn.Conv2D(**config)
    check_param_grads(layer, tensor(randn(1, config["in_channels"], 5, 4)))


def test_conv2d_rejects_bad_groups():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2D(3, 4, 3, groups=2)


# ------------------------------------------------------------------ pooling
def test_max_pool2d():
    x = randn(2, 3, 6, 6, dtype="float32")
    np.testing.assert_allclose(nn.MaxPool2D(2)(tensor(x)).numpy(), pool_ref(x, 2, 2, 0, "max"))
    np.testing.assert_allclose(nn.MaxPool2D(3, stride=2, padding=1)(tensor(x)).numpy(),
                               pool_ref(x, 3, 2, 1, "max"))


def test_avg_pool2d():
    x = randn(2, 3, 6, 6, dtype="float32")
    np.testing.assert_allclose(nn.AvgPool2D(2)(tensor(x)).numpy(), pool_ref(x, 2, 2, 0, "avg"),
                               rtol=1e-5)
    for exclusive in (True, False):
        layer = nn.AvgPool2D(3, stride=2, padding=1, exclusive=exclusive)
        np.testing.assert_allclose(layer(tensor(x)).numpy(),
                                   pool_ref(x, 3, 2, 1, "avg", exclusive), rtol=1e-5)


def test_pool_ceil_mode_shape():
    x = tensor(randn(1, 1, 5, 5, dtype="float32"))
    assert nn.MaxPool2D(2, ceil_mode=True)(x).shape == [1, 1, 3, 3]
    assert nn.MaxPool2D(2)(x).shape == [1, 1, 2, 2]


# -------------------------------------------------------------- activations
ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.Sigmoid(), sigmoid),
    (nn.Tanh(), np.tanh),
    (nn.Softmax(), softmax),
    (nn.Softmax(axis=1), lambda x: softmax(x, 1)),
    (nn.LogSoftmax(), lambda x: np.log(softmax(x))),
    (nn.GELU(), lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))),
    (nn.GELU(approximate=True),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
]


@pytest.mark.parametrize("layer, ref", ACTIVATIONS, ids=lambda v: repr(v) if
                         isinstance(v, nn.Layer) else "")
def test_activation(layer, ref):
    x = randn(3, 4)
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref(x), rtol=1e-6, atol=1e-7)
    assert layer.parameters() == []


# ------------------------------------------------------------------ dropout
def test_dropout_train_and_eval():
    d2s.seed(0)
    x = np.ones((200, 50), dtype="float32")
    layer = nn.Dropout(0.3)
    y = layer(tensor(x)).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    layer.eval()
    np.testing.assert_array_equal(layer(tensor(x)).numpy(), x)


def test_dropout_downscale_in_infer():
    x = np.ones((100, 100), dtype="float32")
    layer = nn.Dropout(0.25, mode="downscale_in_infer")
    y = layer(tensor(x)).numpy()
    assert set(np.unique(y)) <= {0.0, 1.0}
    layer.eval()
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x * 0.75)


def test_dropout_is_reproducible_with_seed():
    x = tensor(np.ones((10, 10), dtype="float32"))
    d2s.seed(7)
    a = nn.Dropout(0.5)(x).numpy()
    d2s.seed(7)
    b = nn.Dropout(0.5)(x).numpy()
    np.testing.assert_array_equal(a, b)


def test_dropout_gradient_uses_the_same_mask():
    x = tensor(randn(5, 6), stop_gradient=False)
    y = nn.Dropout(0.5)(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.numpy() != 0) * 2.0)


def test_dropout_rejects_bad_p():
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)


# --------------------------------------------------------------- batch norm
def test_batch_norm2d_training_uses_batch_stats_and_updates_running_stats():
    layer = nn.BatchNorm2D(3, momentum=0.8)
    x = randn(4, 3, 2, 5, dtype="float32") * 2 + 1
    y = layer(tensor(x)).numpy()
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    ref = (x - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    n = x.size // 3
    np.testing.assert_allclose(layer._mean.numpy(), 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer._variance.numpy(), 0.8 + 0.2 * var * n / (n - 1),
                               rtol=1e-5)


def test_batch_norm2d_eval_uses_running_stats_and_leaves_them():
    layer = nn.BatchNorm2D(2)
    layer.set_state_dict({"weight": np.array([2.0, 0.5]), "bias": np.array([0.1, -1.0]),
                          "_mean": np.array([1.0, -1.0]), "_variance": np.array([4.0, 0.25])})
    layer.eval()
    x = randn(3, 2, 2, 2, dtype="float32")
    y = layer(tensor(x)).numpy()
    scale = np.array([2.0, 0.5]) / np.sqrt(np.array([4.0, 0.25]) + 1e-5)
    ref = (x - np.array([1.0, -1.0]).reshape(1, 2, 1, 1)) * scale.reshape(1, 2, 1, 1) \
        + np.array([0.1, -1.0]).reshape(1, 2, 1, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(layer._mean.numpy(), [1.0, -1.0])


def test_batch_norm2d_use_global_stats():
    layer = nn.BatchNorm2D(2, use_global_stats=True)
    x = randn(3, 2, 2, 2, dtype="float32")
    np.testing.assert_allclose(layer(tensor(x)).numpy(), x / np.sqrt(1 + 1e-5), rtol=1e-5)
    np.testing.assert_array_equal(layer._mean.numpy(), [0.0, 0.0])


def test_batch_norm1d_on_2d_and_3d_inputs():
    layer = nn.BatchNorm1D(3)
    x2 = randn(8, 3, dtype="float32")
    ref2 = (x2 - x2.mean(0)) / np.sqrt(x2.var(0) + 1e-5)
    np.testing.assert_allclose(layer(tensor(x2)).numpy(), ref2, rtol=1e-4, atol=1e-5)
    x3 = randn(4, 3, 5, dtype="float32")
    m, v = x3.mean(axis=(0, 2), keepdims=True), x3.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(layer(tensor(x3)).numpy(), (x3 - m) / np.sqrt(v + 1e-5),
                               rtol=1e-4, atol=1e-5)


def test_batch_norm_rejects_wrong_rank():
    with pytest.raises(ValueError, match="BatchNorm2D: expected a 4-D input"):
        nn.BatchNorm2D(3)(tensor(randn(2, 3, dtype="float32")))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm2d_gradients(training):
    layer = nn.BatchNorm2D(2)
    layer.set_state_dict({"weight": randn(2), "bias": randn(2), "_mean": randn(2),
                          "_variance": randn(2) ** 2 + 0.5})
    layer.train(training)
    check_param_grads(layer, tensor(randn(3, 2, 2, 3)))


# --------------------------------------------------------------- layer norm
@pytest.mark.parametrize("shape", [[5], [3, 5]])
def test_layer_norm(shape):
    layer = nn.LayerNorm(shape, epsilon=1e-5)
    layer.set_state_dict({"weight": randn(*shape), "bias": randn(*shape)})
    x = randn(2, 3, 5, dtype="float32")
    axes = tuple(range(3 - len(shape), 3))
    m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    p = params_np(layer)
    ref = (x - m) / np.sqrt(v + 1e-5) * p["weight"] + p["bias"]
    np.testing.assert_allclose(layer(tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_layer_norm_defaults_and_gradients():
    layer = nn.LayerNorm(4)
    np.testing.assert_array_equal(layer.weight.numpy(), np.ones(4))
    np.testing.assert_array_equal(layer.bias.numpy(), np.zeros(4))
    check_param_grads(layer, tensor(randn(3, 4)))


def test_layer_norm_rejects_a_shape_that_does_not_fit():
    with pytest.raises(ValueError, match="normalized_shape"):
        nn.LayerNorm(3)(tensor(randn(2, 4, dtype="float32")))


# ---------------------------------------------------------------- embedding
def test_embedding_with_padding_idx():
    layer = nn.Embedding(6, 3, padding_idx=-1)
    assert layer.padding_idx == 5
    ids = np.array([[0, 5, 2], [5, 1, 1]])
    ref = layer.weight.numpy()[ids] * (ids != 5)[..., None]
    np.testing.assert_allclose(layer(tensor(ids)).numpy(), ref)


def test_embedding_gradients_skip_the_padding_row():
    layer = nn.Embedding(5, 2, padding_idx=0)
    ids = tensor(np.array([[0, 1, 1], [4, 0, 2]]))
    check_param_grads(layer, ids)
    np.testing.assert_array_equal(layer.weight.grad.numpy()[0], [0.0, 0.0])


# ---------------------------------------------------------------- flatten
def test_flatten():
    x = randn(2, 3, 4, 5, dtype="float32")
    assert nn.Flatten()(tensor(x)).shape == [2, 60]
    assert nn.Flatten(0, 1)(tensor(x)).shape == [6, 4, 5]
    np.testing.assert_array_equal(nn.Flatten(1, 2)(tensor(x)).numpy(), x.reshape(2, 12, 5))


# ------------------------------------------------------------------ losses
def ce_ref(logits, label, weight=None, ignore_index=-100, reduction="mean"):
    logp = np.log(softmax(logits))
    valid = label != ignore_index
    safe = np.where(valid, label, 0)
    loss = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * valid
    w = np.ones(logits.shape[1]) if weight is None else weight
    sample_w = w[safe] * valid
    if weight is not None:
        loss = loss * sample_w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / sample_w.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_loss(reduction, weighted):
    logits = randn(6, 4)
    label = np.array([0, 3, 1, -100, 2, 3])
    weight = np.array([0.5, 1.0, 2.0, 0.25]) if weighted else None
    loss = nn.CrossEntropyLoss(weight=None if weight is None else tensor(weight),
                               reduction=reduction)
    out = loss(tensor(logits), tensor(label))
    np.testing.assert_allclose(out.numpy(), ce_ref(logits, label, weight, reduction=reduction),
                               rtol=1e-6)


def test_cross_entropy_label_with_class_axis_and_soft_labels():
    logits = randn(5, 3)
    label = np.array([[2], [0], [1], [1], [0]])
    out = nn.CrossEntropyLoss()(tensor(logits), tensor(label))
    np.testing.assert_allclose(out.numpy(), ce_ref(logits, label[:, 0]), rtol=1e-6)
    soft = softmax(randn(5, 3))
    weight = np.array([1.0, 2.0, 0.5])
    out = nn.CrossEntropyLoss(weight=tensor(weight), soft_label=True)(tensor(logits),
                                                                       tensor(soft))
    per = -(soft * np.log(softmax(logits))).sum(1) * (soft @ weight)
    np.testing.assert_allclose(out.numpy(), per.sum() / (soft @ weight).sum(), rtol=1e-6)


def test_cross_entropy_gradient_of_logits():
    logits = tensor(randn(4, 3), stop_gradient=False)
    label = np.array([2, 0, 1, 1])
    weight = np.array([1.0, 3.0, 0.5])
    nn.CrossEntropyLoss(weight=tensor(weight))(logits, tensor(label)).backward()
    p = softmax(logits.numpy())
    onehot = np.eye(3)[label]
    w = weight[label]
    ref = (p - onehot) * w[:, None] / w.sum()
    np.testing.assert_allclose(logits.grad.numpy(), ref, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("reduction, ref", [
    ("mean", lambda d: (d**2).mean()), ("sum", lambda d: (d**2).sum()), ("none", lambda d: d**2)])
def test_mse_loss(reduction, ref):
    a, b = randn(3, 4), randn(3, 4)
    np.testing.assert_allclose(nn.MSELoss(reduction)(tensor(a), tensor(b)).numpy(), ref(a - b),
                               rtol=1e-6)


def test_loss_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss("avg")


# -------------------------------------------------------------- containers
def test_sequential_forward_indexing_and_names():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert len(model) == 3 and isinstance(model[1], nn.ReLU) and model[-1] is model[2]
    x = randn(5, 3, dtype="float32")
    p = params_np(model)
    ref = np.maximum(x @ p["0.weight"] + p["0.bias"], 0) @ p["2.weight"] + p["2.bias"]
    np.testing.assert_allclose(model(tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-6)
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    head = model[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is model[0]
    with pytest.raises(IndexError):
        model[3]


def test_sequential_named_layers():
    from collections import OrderedDict

    a, b = nn.Linear(2, 2), nn.Tanh()
    for model in (nn.Sequential(("fc", a), ("act", b)),
                  nn.Sequential(OrderedDict([("fc", a), ("act", b)]))):
        assert [n for n, _ in model.named_children()] == ["fc", "act"]
        assert model["fc"] is a and model.fc is a
        assert list(model.state_dict()) == ["fc.weight", "fc.bias"]
        assert list(model) == [a, b]


def test_sequential_gradients():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    assert check_param_grads(model, tensor(randn(2, 3))) == 4


def test_layer_list():
    layers = nn.LayerList([nn.Linear(2, 2), nn.Linear(2, 3)])
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    layers.insert(1, nn.Sigmoid())
    kinds = [type(layer).__name__ for layer in layers]
    assert kinds == ["Linear", "Sigmoid", "Linear", "ReLU", "Tanh"]
    assert len(layers) == 5 and isinstance(layers[-1], nn.Tanh)
    assert list(layers.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    del layers[0]
    assert type(layers[0]).__name__ == "Sigmoid" and list(layers.state_dict())[0] == "1.weight"
    assert isinstance(layers[1:3], nn.LayerList) and len(layers[1:3]) == 2
    layers[0] = nn.Identity()
    assert isinstance(layers[0], nn.Identity)
    with pytest.raises(TypeError, match="LayerList holds Layers"):
        layers.append(3)


def test_layer_list_registers_parameters_with_owner():
    class Stack(nn.Layer):
        def __init__(self):
            super().__init__()
            self.blocks = nn.LayerList([nn.Linear(3, 3) for _ in range(3)])

        def forward(self, x):
            for block in self.blocks:
                x = d2s.tanh(block(x))
            return x

    model = Stack()
    assert len(model.parameters()) == 6
    assert list(model.state_dict())[:2] == ["blocks.0.weight", "blocks.0.bias"]
    check_param_grads(model, tensor(randn(2, 3)))


def test_float64_layers_compute_in_float64():
    layer = double(nn.Linear(2, 2))
    assert layer(tensor(randn(1, 2))).dtype == np.float64
