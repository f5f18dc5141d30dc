"""``to_static`` on functions, methods and Layers; StaticFunction's surface; the switches."""

import ast

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.jit import StaticFunction
from tests.jit.helpers import MLP, copy_weights, op_types, tensor


def branchy(x, n=2):
    if x.mean() > 0:
        y = x * n
    else:
        y = x - 1
    i = d2s.zeros([], "int64")
    while i < 3:
        y = y + 1
        i += 1
    return y


def test_function_matches_eager_on_both_branches():
    sf = jit.to_static(branchy)
    assert isinstance(sf, StaticFunction)
    for sign in (1.0, -1.0):
        x = d2s.to_tensor(np.full((2, 3), sign, "float32"))
        np.testing.assert_allclose(sf(x).numpy(), branchy(x).numpy())
    assert len(sf.program_cache) == 1  # one program takes both branches


def test_main_program_has_cond_and_while_for_tensor_control_flow():
    sf = jit.to_static(branchy)
    sf(tensor([2, 3]))
    types = op_types(sf.main_program)
    assert "cond" in types and "while" in types


def test_python_control_flow_is_unrolled_not_a_cond():
    @jit.to_static
    def scale(x, n):
        if n > 1:
            x = x * n
        for _ in range(n):
            x = x + 1
        return x

    x = tensor([3])
    np.testing.assert_allclose(scale(x, 3).numpy(), (x * 3 + 3).numpy(), rtol=1e-6)
    types = op_types(scale.main_program)
    assert "cond" not in types and "while" not in types


def test_code_is_readable_converted_source():
    sf = jit.to_static(branchy)
    code = sf.code
    ast.parse(code)  # valid Python
    assert code.lstrip().startswith("def branchy(x, n=2):")
    assert "convert_ifelse" in code and "convert_while_loop" in code
    assert "y = x * n" in code and "y = y + 1" in code  # the user's statements, as written


def test_dygraph_function_and_concrete_program():
    sf = jit.to_static(branchy)
    assert sf.dygraph_function is branchy
    with pytest.raises(RuntimeError, match="has not been called yet"):
        sf.concrete_program  # noqa: B018
    out = sf(tensor([2, 3]))
    concrete = sf.concrete_program
    assert concrete.main_program is sf.main_program
    assert len(concrete.inputs) == 1 and concrete.inputs[0].shape == [2, 3]
    assert concrete.outputs.shape == out.shape
    assert concrete.parameters == []


def test_decorating_forward_in_the_class():
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        @jit.to_static
        def forward(self, x):
            h = self.fc(x)
            if h.sum() > 0:
                h = h * 2
            return h

    a, b = Net(), Net()
    assert isinstance(Net.forward, StaticFunction)
    assert isinstance(a.forward, StaticFunction)
    assert a.forward is a.forward  # one StaticFunction per instance
    assert a.forward is not b.forward
    x = tensor([2, 4])
    for net in (a, b):
        h = net.fc(x)
        expected = h * 2 if float(h.sum()) > 0 else h
        np.testing.assert_allclose(net(x).numpy(), expected.numpy(), rtol=1e-6)
    assert "cond" in op_types(a.forward.main_program)
    assert len(a.forward.program_cache) == len(b.forward.program_cache) == 1


def test_to_static_on_a_layer_converts_in_place_and_returns_it():
    d2s.seed(0)
    net = MLP()
    eager = MLP()
    copy_weights(net, eager)
    assert jit.to_static(net) is net
    assert isinstance(net.forward, StaticFunction)
    assert jit.to_static(net) is net  # converting twice changes nothing
    for seed in range(3):
        x = tensor([5, 4], seed=seed)
        np.testing.assert_allclose(net(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6)
    assert "cond" in op_types(net.forward.main_program)


def test_rollback_of_a_function_returns_the_eager_function():
    sf = jit.to_static(branchy)
    sf(tensor([2]))
    assert sf.rollback() is branchy


def test_rollback_of_a_layer_restores_its_eager_forward():
    net = jit.to_static(MLP())
    x = tensor([3, 4])
    converted = net(x).numpy()
    original = net.forward.rollback()
    assert not isinstance(net.forward, StaticFunction)
    assert original.__func__ is MLP.forward and original.__self__ is net
    np.testing.assert_allclose(net(x).numpy(), converted, rtol=1e-6)
    traces = []
    net.register_forward_pre_hook(lambda layer, inputs: traces.append(type(inputs[0])))
    net(x)
    net(x)
    assert traces == [d2s.Tensor, d2s.Tensor]  # eager again: forward sees tensors every call


def test_not_to_static_functions_run_unchanged():
    @jit.not_to_static
    def python_only(x, log):
        log.append(type(x).__name__)  # runs at trace time only, with the static Variable
        if isinstance(x, d2s.Tensor):
            return x * 100
        return x + 1

    @jit.not_to_static
    def needs_conversion(x):
        if x.sum() > 0:  # not converted: a static Variable used as a Python bool
            return x
        return -x

    log = []

    @jit.to_static
    def f(x):
        return python_only(x, log) * 2

    @jit.to_static
    def g(x):
        return needs_conversion(x)

    x = tensor([3])
    np.testing.assert_allclose(f(x).numpy(), ((x + 1) * 2).numpy(), rtol=1e-6)
    f(x)
    assert log == ["Variable"]
    with pytest.raises(TypeError, match="to_static"):
        g(x)


def test_enable_to_static_false_runs_everything_eagerly():
    calls = []

    @jit.to_static
    def f(x):
        calls.append(type(x).__name__)
        if x.mean() > 0:
            return x + 1
        return x - 1

    net = jit.to_static(MLP())
    x = tensor([2, 4])
    jit.enable_to_static(False)
    f(x)
    f(x)
    assert calls == ["Tensor", "Tensor"] and len(f.program_cache) == 0
    net(x)
    assert len(net.forward.program_cache) == 0
    jit.enable_to_static(True)
    f(x)
    f(x)
    assert calls[2:] == ["Variable"] and len(f.program_cache) == 1


def test_declarative_and_full_graph_are_accepted():
    assert d2s.declarative is jit.to_static and jit.declarative is jit.to_static
    sf = jit.to_static(branchy, full_graph=True)
    x = tensor([2, 2])
    np.testing.assert_allclose(sf(x).numpy(), branchy(x).numpy(), rtol=1e-6)


def test_a_converted_layer_called_inside_another_converted_function_is_inlined():
    d2s.seed(0)
    inner = jit.to_static(MLP())
    eager = MLP()
    copy_weights(inner, eager)

    @jit.to_static
    def outer(x):
        return inner(x) * 2

    x = tensor([3, 4])
    np.testing.assert_allclose(outer(x).numpy(), (eager(x) * 2).numpy(), rtol=1e-5, atol=1e-6)
    assert "cond" in op_types(outer.main_program)  # inner's control flow is in outer's program
    assert len(inner.forward.program_cache) == 0


def test_not_to_static_on_a_bound_method():
    class Helper:
        def scale(self, x):
            if x.sum() > 0:  # would need conversion
                return x
            return -x

    helper = Helper()
    assert jit.not_to_static(helper.scale) == helper.scale

    @jit.to_static
    def f(x):
        return helper.scale(x)

    with pytest.raises(TypeError, match="to_static"):
        f(tensor([2]))
