"""LayerDict and ParameterList: their owner sees and trains what they hold."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import randn, tensor


def test_layer_dict():
    layers = nn.LayerDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    layers["c"] = nn.Linear(3, 1)
    assert list(layers) == ["a", "b", "c"] and len(layers) == 3 and "b" in layers
    assert [n for n, _ in layers.named_parameters()] == ["a.weight", "a.bias", "c.weight",
                                                        "c.bias"]
    replacement = nn.Linear(2, 3)
    layers["a"] = replacement
    assert list(layers.keys()) == ["a", "b", "c"] and layers["a"] is replacement
    assert layers.pop("b").__class__ is nn.ReLU and list(layers) == ["a", "c"]
    layers.update([("d", nn.Tanh())])
    assert list(layers.items())[-1][0] == "d" and len(list(layers.values())) == 3
    del layers["d"]
    x = tensor(randn(4, 2, dtype="float32"))
    np.testing.assert_allclose(layers["c"](layers["a"](x)).numpy(),
                               x.numpy() @ replacement.weight.numpy() @ layers["c"].weight.numpy()
                               + replacement.bias.numpy() @ layers["c"].weight.numpy()
                               + layers["c"].bias.numpy(), rtol=1e-5, atol=1e-6)
    layers.clear()
    assert len(layers) == 0
    with pytest.raises(TypeError, match="Layers"):
        layers["x"] = 3


def test_parameter_list_is_trained_by_its_owner():
    class Model(nn.Layer):
        def __init__(self):
            super().__init__()
            self.weights = nn.ParameterList(
                [d2s.create_parameter([2, 2], "float64") for _ in range(2)])

        def forward(self, x):
            for w in self.weights:
                x = x @ w
            return x

    model = Model()
    assert len(model.weights) == 2
    assert [n for n, _ in model.named_parameters()] == ["weights.0", "weights.1"]
    assert model.weights[0].name == model.weights._full_name + ".0"
    x = randn(3, 2)
    opt = d2s.optimizer.SGD(0.125, parameters=model.parameters())  # exact in float32
    w0 = [w.numpy().copy() for w in model.weights]
    model(tensor(x)).sum().backward()
    grads = [w.grad.numpy() for w in model.weights]
    opt.step()
    for before, g, w in zip(w0, grads, model.weights):
        np.testing.assert_allclose(w.numpy(), before - 0.125 * g, rtol=1e-12)
    extra = d2s.create_parameter([2, 2], "float64")
    model.weights.append(extra)
    assert model.weights[-1] is extra and len(model.parameters()) == 3
    other = d2s.create_parameter([2, 2], "float64")
    model.weights[0] = other
    assert model.weights[0] is other and [n for n, _ in model.named_parameters()] == [
        "weights.0", "weights.1", "weights.2"]
    assert set(model.state_dict()) == {"weights.0", "weights.1", "weights.2"}
