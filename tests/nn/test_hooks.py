"""Forward pre-/post-hooks: they can replace inputs and outputs, and stop after remove()."""

import numpy as np

from dy2stat import nn
from tests.nn.helpers import randn, tensor


def _linear():
    layer = nn.Linear(3, 2)
    layer.set_state_dict({"weight": randn(3, 2), "bias": randn(2)})
    return layer


def test_pre_hook_replaces_inputs_and_stops_after_remove():
    layer = _linear()
    x = randn(4, 3, dtype="float32")
    seen = []

    def double_input(lay, inputs):
        seen.append((lay, len(inputs)))
        return (inputs[0] * 2,)

    handle = layer.register_forward_pre_hook(double_input)
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               (2 * x) @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)
    assert seen[0] == (layer, 1)
    handle.remove()
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               x @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)
    handle.remove()  # removing twice is harmless


def test_pre_hook_single_value_becomes_the_only_input():
    layer = _linear()
    x = randn(2, 3, dtype="float32")
    layer.register_forward_pre_hook(lambda lay, inputs: inputs[0] + 1)
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               (x + 1) @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)


def test_pre_hook_returning_none_keeps_inputs():
    layer = _linear()
    x = randn(2, 3, dtype="float32")
    calls = []
    layer.register_forward_pre_hook(lambda lay, inputs: calls.append(inputs))
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               x @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)
    assert len(calls) == 1


def test_post_hook_replaces_outputs_and_sees_inputs():
    layer = _linear()
    x = randn(2, 3, dtype="float32")
    record = {}

    def hook(lay, inputs, outputs):
        record["inputs"], record["outputs"] = inputs, outputs
        return outputs * 0 + 5

    handle = layer.register_forward_post_hook(hook)
    np.testing.assert_array_equal(layer(tensor(x)).numpy(), np.full((2, 2), 5.0))
    np.testing.assert_array_equal(record["inputs"][0].numpy(), x)
    assert record["outputs"].shape == [2, 2]
    handle.remove()
    np.testing.assert_allclose(layer(tensor(x)).numpy(),
                               x @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)


def test_hooks_run_in_registration_order_and_see_replacements():
    layer = nn.Identity()
    order = []
    layer.register_forward_pre_hook(lambda lay, inp: order.append("pre1") or (inp[0] + 1,))
    layer.register_forward_pre_hook(lambda lay, inp: order.append("pre2") or (inp[0] * 10,))
    layer.register_forward_post_hook(lambda lay, inp, out: order.append("post1") or out - 1)
    h = layer.register_forward_post_hook(lambda lay, inp, out: order.append("post2") or out * 2)
    out = layer(tensor(np.array([1.0])))
    assert order == ["pre1", "pre2", "post1", "post2"]
    np.testing.assert_allclose(out.numpy(), [((1 + 1) * 10 - 1) * 2])
    h.remove()
    np.testing.assert_allclose(layer(tensor(np.array([1.0]))).numpy(), [19.0])


def test_hook_on_sublayer_runs_inside_parent():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    handle = model[1].register_forward_post_hook(lambda lay, inp, out: out * 0 - 1)
    np.testing.assert_array_equal(model(tensor(randn(3, 2))).numpy(), -np.ones((3, 2)))
    handle.remove()
    assert (model(tensor(randn(3, 2))).numpy() >= 0).all()


def test_hook_gradient_flows_through_replacement():
    layer = _linear()
    layer.register_forward_post_hook(lambda lay, inp, out: out * 3)
    x = tensor(randn(2, 3))
    layer(x).sum().backward()
    np.testing.assert_allclose(layer.bias.grad.numpy(), [6.0, 6.0])
