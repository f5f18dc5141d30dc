"""state_dict / set_state_dict: dotted keys, round trips, strictness and clear errors."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import randn, tensor


def _model():
    return nn.Sequential(nn.Conv2D(1, 2, 3), nn.BatchNorm2D(2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8, 3))


def test_keys_are_dotted_paths_in_order():
    assert list(_model().state_dict()) == [
        "0.weight", "0.bias", "1.weight", "1.bias", "1._mean", "1._variance",
        "4.weight", "4.bias"]


def test_values_are_the_live_tensors():
    model = _model()
    state = model.state_dict()
    assert state["4.weight"] is model[4].weight
    assert state["1._mean"] is model[1]._mean


def test_round_trip_between_models_gives_same_outputs():
    a, b = _model(), _model()
    a.train()
    a(tensor(randn(4, 1, 4, 4, dtype="float32")))  # moves the running statistics
    a.eval()
    b.eval()
    x = tensor(randn(2, 1, 4, 4, dtype="float32"))
    assert not np.allclose(a(x).numpy(), b(x).numpy())
    missing, unexpected = b.set_state_dict(a.state_dict())
    assert missing == [] and unexpected == []
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    # values are copied, not shared
    assert b[4].weight is not a[4].weight
    with d2s.no_grad():
        a[4].weight.set_value(np.zeros((8, 3)))
    assert np.any(b[4].weight.numpy())


def test_numpy_values_and_dtype_kept():
    layer = nn.Linear(2, 3)
    weight = layer.weight
    layer.set_state_dict({"weight": np.arange(6.0).reshape(2, 3), "bias": [1.0, 2.0, 3.0]})
    assert layer.weight is weight and weight.dtype == np.float32
    np.testing.assert_array_equal(weight.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(layer.bias.numpy(), [1, 2, 3])
    assert not weight.stop_gradient


def test_shape_mismatch_names_key_and_shapes_and_writes_nothing():
    layer = nn.Linear(2, 3)
    before = layer.bias.numpy().copy()
    with pytest.raises(ValueError, match=r"'weight' has shape \[3, 2\] but the layer expects "
                                         r"\[2, 3\]"):
        layer.set_state_dict({"bias": np.ones(3), "weight": np.zeros((3, 2))})
    np.testing.assert_array_equal(layer.bias.numpy(), before)


def test_strict_reports_missing_and_unexpected_keys():
    layer = nn.Linear(2, 3)
    with pytest.raises(KeyError, match=r"missing keys \['bias'\].*unexpected keys \['b'\]"):
        layer.set_state_dict({"weight": np.zeros((2, 3)), "b": np.zeros(3)})
    missing, unexpected = layer.set_state_dict({"weight": np.zeros((2, 3)), "b": 1},
                                               strict=False)
    assert missing == ["bias"] and unexpected == ["b"]
    np.testing.assert_array_equal(layer.weight.numpy(), np.zeros((2, 3)))


def test_non_persistable_buffers_are_left_out():
    layer = nn.Layer()
    layer.register_buffer("kept", d2s.ones([2]))
    layer.register_buffer("scratch", d2s.ones([2]), persistable=False)
    assert list(layer.state_dict()) == ["kept"]
    assert [n for n, _ in layer.named_buffers()] == ["kept", "scratch"]


def test_rnn_state_dict_uses_paddle_names():
    keys = list(nn.GRU(3, 4, num_layers=2).state_dict())
    assert keys == [f"{kind}_l{k}" for k in range(2)
                    for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def test_state_dict_prefix_and_destination():
    layer = nn.Linear(2, 2)
    dest = {}
    out = layer.state_dict(destination=dest, structured_name_prefix="fc.")
    assert out is dest and list(dest) == ["fc.weight", "fc.bias"]
