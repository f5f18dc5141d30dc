"""The Paddle 1.8 entry points: ProgramTranslator and TracedLayer."""

import os

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.jit import ProgramTranslator, TracedLayer
from dy2stat.runtime.ir import Program
from tests.jit.helpers import MLP, op_types, tensor


def double_if_positive(x):
    if x.sum() > 0:
        x = x * 2
    return x - 1


def test_program_translator_is_one_shared_instance():
    assert ProgramTranslator() is ProgramTranslator.get_instance()


def test_get_code_program_and_output():
    pt = ProgramTranslator()
    code = pt.get_code(double_if_positive)
    assert "convert_ifelse" in code and "x = x * 2" in code
    x = tensor([3, 2])
    main, _, inputs, outputs = pt.get_program(double_if_positive, x)
    assert isinstance(main, Program) and "cond" in op_types(main)
    assert len(inputs) == 1 and list(outputs.shape) == [3, 2]
    for sign in (1, -1):
        np.testing.assert_allclose(pt.get_output(double_if_positive, x * sign).numpy(),
                                   double_if_positive(x * sign).numpy(), rtol=1e-6)


def test_disabled_translator_runs_eagerly():
    pt = ProgramTranslator()
    seen = []

    @jit.to_static
    def f(x):
        seen.append(type(x).__name__)
        return x + 1

    pt.enable(False)
    try:
        pt.get_output(f, tensor([2]))
        assert seen == ["Tensor"] and len(f.program_cache) == 0
    finally:
        pt.enable(True)
    pt.get_output(f, tensor([2]))
    assert seen == ["Tensor", "Variable"]


def test_save_inference_model_of_the_last_converted_function(tmp_path):
    d2s.seed(0)
    net = jit.to_static(MLP())
    x = tensor([4, 4])
    expected = net(x).numpy()
    dirname = tmp_path / "pt_model"
    ProgramTranslator().save_inference_model(str(dirname))
    assert sorted(os.listdir(dirname)) == ["model.json", "model.safetensors"]
    loaded = jit.load(str(dirname / "model"))
    np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-6)


def test_save_inference_model_picks_feeds_and_fetches(tmp_path):
    @jit.to_static
    def two_outputs(x, y):
        return x + y, x * y

    x, y = tensor([3], seed=1), tensor([3], seed=2)
    two_outputs(x, y)
    ProgramTranslator().save_inference_model(str(tmp_path / "m"), fetch=[1])
    loaded = jit.load(str(tmp_path / "m" / "model"))
    np.testing.assert_allclose(loaded(x, y).numpy(), (x * y).numpy(), rtol=1e-6)


class Plain(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        return self.fc(x).tanh() + y


def test_traced_layer_matches_eager_and_saves(tmp_path):
    d2s.seed(0)
    layer = Plain()
    x, y = tensor([2, 4], seed=1), tensor([2, 3], seed=2)
    expected = layer(x, y).numpy()
    outputs, traced = TracedLayer.trace(layer, [x, y])
    np.testing.assert_allclose(outputs.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(traced(x, y).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(traced([x * 2, y]).numpy(), layer(x * 2, y).numpy(), rtol=1e-6)
    assert "cond" not in op_types(traced.program)
    traced.save_inference_model(str(tmp_path / "traced"))
    loaded = jit.load(str(tmp_path / "traced"))
    np.testing.assert_allclose(loaded(x, y).numpy(), expected, rtol=1e-6)


def test_traced_layer_includes_the_layers_hooks():
    layer = Plain()
    layer.register_forward_post_hook(lambda m, inputs, outputs: outputs * 10)
    x, y = tensor([2, 4]), tensor([2, 3])
    outputs, traced = TracedLayer.trace(layer, [x, y])
    np.testing.assert_allclose(outputs.numpy(), layer(x, y).numpy(), rtol=1e-6)
    np.testing.assert_allclose(traced(x, y).numpy(), layer(x, y).numpy(), rtol=1e-6)


def test_tracing_a_tensor_used_as_a_python_bool_suggests_to_static():
    with pytest.raises(TypeError, match="to_static"):
        TracedLayer.trace(MLP(), [tensor([2, 4])])
