"""The Layer base class: registration, traversal, modes, naming, repr, to()."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import randn, tensor


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.drop = nn.Dropout(0.5)
        self.scale = self.create_parameter([4], default_initializer=nn.initializer.Constant(2.0))
        self.register_buffer("steps", d2s.zeros([1]))
        self.register_buffer("cache", d2s.zeros([2]), persistable=False)
        self.note = "plain attribute"

    def forward(self, x):
        return self.drop(self.fc(x)) * self.scale


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x))


def test_registration_by_attribute():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "block.scale", "block.fc.weight", "block.fc.bias", "head.weight", "head.bias"]
    assert len(net.parameters()) == 5
    assert net.parameters(include_sublayers=False) == []
    assert [n for n, _ in net.named_parameters(prefix="net")][0] == "net.block.scale"
    assert [n for n, _ in net.named_sublayers()] == ["block", "block.fc", "block.drop", "head"]
    assert net.sublayers() == [net.block, net.block.fc, net.block.drop, net.head]
    assert net.sublayers(include_self=True)[0] is net
    assert list(net.children()) == [net.block, net.head]
    assert [n for n, _ in net.named_buffers()] == ["block.steps", "block.cache"]
    assert len(net.buffers()) == 2
    assert net.block.note == "plain attribute"
    assert "fc" in dir(net.block) and "scale" in dir(net.block)
    np.testing.assert_array_equal(net.block.scale.numpy(), [2.0] * 4)


def test_parameters_require_gradients_and_are_parameters():
    net = Net()
    for p in net.parameters():
        assert isinstance(p, nn.Parameter) and isinstance(p, d2s.Tensor)
        assert p.stop_gradient is False and p.trainable
    frozen = nn.Linear(2, 2, weight_attr=nn.ParamAttr(trainable=False))
    assert frozen.weight.stop_gradient and not frozen.weight.trainable


def test_parameter_names_are_unique_and_readable():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    assert a.full_name() != b.full_name() and a.full_name().startswith("linear_")
    assert a.weight.name == f"{a.full_name()}.weight" and a.bias.name == f"{a.full_name()}.bias"
    bn = nn.BatchNorm2D(2)
    assert bn.full_name().startswith("batch_norm2d_")
    assert bn._mean.name == f"{bn.full_name()}._mean"
    named = nn.Linear(2, 2, weight_attr=nn.ParamAttr(name="my_w"))
    assert named.weight.name == "my_w"
    assert nn.LSTM(2, 3).weight_hh_l0.name.endswith(".weight_hh_l0")


def test_shared_parameter_counted_once_and_keeps_its_name():
    a = nn.Linear(2, 2)
    b = nn.Linear(2, 2)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    assert len(model.parameters()) == 3
    assert b.weight.name == f"{a.full_name()}.weight"


def test_setattr_rules():
    layer = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="parameter 'weight'"):
        layer.weight = d2s.zeros([2, 2])
    layer.bias = None
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    layer.extra = nn.Parameter(np.zeros(3, dtype="float32"))
    assert layer.extra.name == f"{layer.full_name()}.extra"
    del layer.extra
    assert "extra" not in dict(layer.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        layer.missing  # noqa: B018


def test_forgetting_super_init_is_a_clear_error():
    class Bad(nn.Layer):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(RuntimeError, match="super\\(\\).__init__"):
        Bad()


def test_add_sublayer_add_parameter_register_buffer():
    layer = nn.Layer()
    fc = layer.add_sublayer("fc", nn.Linear(2, 3))
    assert layer.fc is fc
    p = layer.add_parameter("w", nn.Parameter(np.ones(2, dtype="float32")))
    assert layer.w is p and not p.stop_gradient
    layer.register_buffer("running", d2s.ones([3]))
    assert list(layer.state_dict()) == ["w", "running", "fc.weight", "fc.bias"]
    with pytest.raises(KeyError, match="without '.'"):
        layer.add_sublayer("a.b", nn.ReLU())
    with pytest.raises(TypeError, match="expected a Layer"):
        layer.add_sublayer("x", 3)
    with pytest.raises(TypeError, match="expected a Tensor"):
        layer.register_buffer("x", [1, 2])
    with pytest.raises(KeyError, match="already a parameter"):
        layer.register_buffer("w", d2s.ones([2]))


def test_create_parameter_attr_false_and_default_initializers():
    layer = nn.Layer()
    assert layer.create_parameter([2], attr=False) is None
    bias = layer.create_parameter([3], is_bias=True)
    np.testing.assert_array_equal(bias.numpy(), np.zeros(3))
    w = layer.create_parameter([3, 4], dtype="float64")
    assert w.dtype == np.float64
    limit = np.sqrt(6 / 7)
    assert np.abs(w.numpy()).max() <= limit
    w2 = layer.create_parameter([2, 2], attr=nn.initializer.Constant(0.5))
    np.testing.assert_array_equal(w2.numpy(), np.full((2, 2), 0.5))


def test_train_eval_propagate_and_only_change_dropout_and_batch_norm():
    net = Net()
    assert all(layer.training for layer in net.sublayers(include_self=True))
    assert net.eval() is net
    assert not any(layer.training for layer in net.sublayers(include_self=True))
    x = tensor(randn(5, 3, dtype="float32"))
    a, b = net(x).numpy(), net(x).numpy()
    np.testing.assert_array_equal(a, b)  # dropout off
    net.block.train()
    assert net.block.fc.training and not net.training and not net.head.training
    net.train()
    assert all(layer.training for layer in net.sublayers(include_self=True))


def test_eval_still_computes_gradients():
    net = Net().eval()
    net(tensor(randn(2, 3))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.clear_gradients()
    assert all(p.grad is None for p in net.parameters())


def test_apply_visits_children_first():
    net = Net()
    seen = []
    assert net.apply(lambda layer: seen.append(type(layer).__name__)) is net
    assert seen == ["Linear", "Dropout", "Block", "Linear", "Net"]


def test_to_dtype_keeps_tensor_objects():
    net = Net()
    weight = net.head.weight
    net.head(tensor(randn(1, 4, dtype="float32"))).sum().backward()
    net.to(dtype="float64")
    assert net.head.weight is weight and weight.dtype == np.float64
    assert weight.grad.dtype == np.float64
    assert net.block.steps.dtype == np.float64
    assert net.create_parameter([2]).dtype == np.float64
    net.to("float32")
    assert weight.dtype == np.float32
    assert net.to("cpu") is net and weight.place == "cpu"
    with pytest.raises(TypeError, match="float dtype"):
        net.to(dtype="int64")


def test_repr():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Tanh())))
    assert text == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, dtype=float32)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Tanh()\n"
        "  )\n"
        ")"
    )
    assert repr(nn.Conv2D(1, 2, 3)) == ("Conv2D(1, 2, kernel_size=[3, 3], stride=[1, 1], "
                                        "padding=[0, 0])")


def test_forward_must_be_defined():
    with pytest.raises(NotImplementedError, match="does not define forward"):
        nn.Layer()(1)


def test_layer_works_with_functional_ops_and_kwargs():
    class Scaled(nn.Layer):
        def forward(self, x, factor=1.0):
            return nn.functional.relu(x) * factor

    out = Scaled()(tensor(np.array([-1.0, 2.0])), factor=3.0)
    np.testing.assert_array_equal(out.numpy(), [0.0, 6.0])
