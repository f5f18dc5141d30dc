"""PyLayer: custom forward/backward eagerly, in double grad, in static programs and in
converted code (where the program's backward is the user's backward)."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import autograd_function
from dy2stat.autograd import PyLayer, PyLayerContext
from dy2stat.static import InputSpec


class Cube(PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensor()
        return grad * 3.0 * x * x


class StraightThroughSign(PyLayer):
    """sign(x) forward, the identity backward: a gradient autodiff would not give."""

    @staticmethod
    def forward(ctx, x):
        return d2s.sign(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ScaledPair(PyLayer):
    """Two inputs, a Python argument, two outputs; the second input gets no gradient."""

    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.scale = scale
        ctx.save_for_backward(a, b)
        return a * b * scale, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensor()
        return g_prod * b * ctx.scale + g_sum, None


def _t(values, grad=True):
    return d2s.to_tensor(np.asarray(values, dtype="float64"), stop_gradient=not grad)


X = np.array([1.0, -2.0, 0.5, 3.0])


def test_eager_forward_and_custom_backward():
    x = _t(X)
    y = StraightThroughSign.apply(x)
    np.testing.assert_array_equal(y.numpy(), np.sign(X))
    assert not y.stop_gradient
    (y * _t([1.0, 2.0, 3.0, 4.0], grad=False)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0, 4.0])  # not sign's zeros


def test_several_inputs_outputs_and_context_attributes():
    a, b = _t(X), _t(X[::-1].copy())
    prod, total = ScaledPair.apply(a, b, 2.0)
    np.testing.assert_allclose(prod.numpy(), X * X[::-1] * 2)
    np.testing.assert_allclose(total.numpy(), X + X[::-1])
    (prod.sum() + 3.0 * total.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), X[::-1] * 2 + 3.0)
    assert b.grad is None


def test_no_recording_when_no_input_needs_a_gradient():
    y = Cube.apply(_t(X, grad=False))
    assert y.stop_gradient and y._node is None
    with d2s.no_grad():
        assert Cube.apply(_t(X))._node is None


def test_double_grad_through_a_differentiable_backward():
    x = _t(X)
    (g,) = d2s.grad(Cube.apply(x).sum(), [x], create_graph=True)
    np.testing.assert_allclose(g.numpy(), 3 * X ** 2)
    (gg,) = d2s.grad(g.sum(), [x])
    np.testing.assert_allclose(gg.numpy(), 6 * X)


def test_context():
    ctx = PyLayerContext()
    assert ctx.saved_tensor() == ()
    ctx.save_for_backward(1, 2)
    assert ctx.saved_tensor() == (1, 2)


class WrongCount(PyLayer):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g


class WrongShape(PyLayer):
    @staticmethod
    def forward(ctx, a):
        return a.sum()

    @staticmethod
    def backward(ctx, g):
        return g


class NotATensor(PyLayer):
    @staticmethod
    def forward(ctx, a):
        return 3


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="WrongCount.backward returned 1 gradients for 2"):
        WrongCount.apply(_t(X), _t(X)).sum().backward()
    with pytest.raises(ValueError, match=r"WrongShape.backward: gradient 0 has shape \[\]"):
        WrongShape.apply(_t(X)).backward()
    with pytest.raises(TypeError, match="NotATensor.forward must return tensors"):
        NotATensor.apply(_t(X))


# ------------------------------------------------------------------ converted code
def _grads(fn, *arrays):
    xs = [_t(a) for a in arrays]
    out = fn(*xs)
    out.backward()
    return out.numpy(), [None if x.grad is None else x.grad.numpy() for x in xs]


def straight_through(x):
    return (StraightThroughSign.apply(x * 2.0) * x).sum()


def cube_and_pair(a, b):
    prod, total = ScaledPair.apply(Cube.apply(a), b, 0.5)
    return (prod * total).sum()


@pytest.mark.parametrize("fn, arrays", [
    (straight_through, [X]),
    (cube_and_pair, [X, X[::-1] * 0.5]),
])
def test_converted_equals_eager_with_the_custom_backward(fn, arrays):
    eager_out, eager_grads = _grads(fn, *arrays)
    spec = [InputSpec([None], "float64") for _ in arrays]
    converted = d2s.jit.to_static(fn, input_spec=spec)
    out, grads = _grads(converted, *arrays)
    np.testing.assert_allclose(out, eager_out, rtol=1e-12)
    for a, b in zip(grads, eager_grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12)
    assert "py_layer" in [op.type for op in converted.main_program.all_ops()]


class GatedRelu(PyLayer):
    """A tensor-dependent branch in forward: converted code converts it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        if x.sum() > 0:
            y = d2s.nn.functional.relu(x)
        else:
            y = x * 0.5
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensor()
        return g * 10.0


def gated(x):
    return GatedRelu.apply(x).sum()


def test_tensor_dependent_forward_converts():
    converted = d2s.jit.to_static(gated, input_spec=[InputSpec([None], "float64")])
    for values in (X, -X):
        eager_out, eager_grads = _grads(gated, values)
        out, grads = _grads(converted, values)
        np.testing.assert_allclose(out, eager_out)
        np.testing.assert_allclose(grads[0], eager_grads[0])
        np.testing.assert_allclose(grads[0], 10.0)


def looped(x, n):
    total = x.sum() * 0.0
    i = 0
    while i < n:
        total = total + Cube.apply(x + i).sum()
        i += 1
    return total


def test_inside_a_tensor_dependent_loop():
    converted = d2s.jit.to_static(looped, input_spec=[InputSpec([None], "float64"),
                                                      InputSpec([], "int64")])
    n = d2s.to_tensor(np.array(3))
    x_eager, x_conv = _t(X), _t(X)
    looped(x_eager, 3).backward()
    out = converted(x_conv, n)
    out.backward()
    assert "while" in [op.type for op in converted.main_program.all_ops()]
    np.testing.assert_allclose(out.numpy(), sum((X + i) ** 3 for i in range(3)).sum())
    np.testing.assert_allclose(x_conv.grad.numpy(), x_eager.grad.numpy(), rtol=1e-12)


class Affine(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w = self.create_parameter([4], "float64")

    def forward(self, x):
        return Cube.apply(x * self.w).sum()


def test_a_converted_layer_trains_its_parameters_through_the_pylayer():
    eager, converted = Affine(), Affine()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for layer in (eager, converted):
        layer(_t(X, grad=False)).backward()
    np.testing.assert_allclose(converted.w.grad.numpy(), eager.w.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(eager.w.grad.numpy(), 3 * (X * eager.w.numpy()) ** 2 * X)


def test_static_program_backward_is_the_custom_rule():
    main = d2s.static.Program()
    d2s.enable_static()
    try:
        with d2s.static.program_guard(main, d2s.static.Program()):
            x = d2s.static.data("x", [None], "float64")
            loss = (StraightThroughSign.apply(x) * 3.0).sum()
            (grad,) = d2s.static.gradients([loss], [x])
    finally:
        d2s.disable_static()
    value, g = d2s.static.Executor().run(main, feed={"x": X}, fetch_list=[loss, grad])
    assert float(value) == pytest.approx(3 * np.sign(X).sum())
    np.testing.assert_array_equal(g, np.full(4, 3.0))


def test_saved_program_runs_its_forward(tmp_path):
    @d2s.jit.to_static(input_spec=[InputSpec([None], "float64")])
    def f(x):
        return Cube.apply(x) + 1.0

    path = str(tmp_path / "cube")
    d2s.jit.save(f, path)
    loaded = d2s.jit.load(path)
    np.testing.assert_allclose(loaded(_t(X, grad=False)).numpy(), X ** 3 + 1.0)


def test_a_program_traced_elsewhere_cannot_run_the_backward(tmp_path, monkeypatch):
    @d2s.jit.to_static(input_spec=[InputSpec([None], "float64")])
    def f(x):
        return Cube.apply(x).sum()

    path = str(tmp_path / "cube_sum")
    d2s.jit.save(f, path)
    monkeypatch.setattr(autograd_function, "_traced", {})  # as in a fresh process
    loaded = d2s.jit.load(path)
    assert loaded(_t(X, grad=False)).item() == pytest.approx((X ** 3).sum())
    with pytest.raises(RuntimeError, match="Cube .a PyLayer. has no backward in this process"):
        loaded(_t(X)).backward()


class Weighted(PyLayer):
    """A keyword tensor argument, and a constant the backward needs (saved for it)."""

    @staticmethod
    def forward(ctx, x, *, weight):
        scale = d2s.to_tensor(np.array([2.0, 3.0, 4.0, 5.0]))
        ctx.save_for_backward(weight, scale)
        return x * weight

    @staticmethod
    def backward(ctx, g):
        weight, scale = ctx.saved_tensor()
        return g * weight * scale, g


def weighted(x, w):
    return Weighted.apply(x, weight=w).sum()


def test_keyword_tensors_get_gradients_and_saved_constants_reach_the_backward():
    eager_out, eager_grads = _grads(weighted, X, X * 0.5)
    np.testing.assert_allclose(eager_grads[0], X * 0.5 * np.array([2.0, 3.0, 4.0, 5.0]))
    np.testing.assert_allclose(eager_grads[1], 1.0)
    converted = d2s.jit.to_static(weighted, input_spec=[InputSpec([4], "float64")] * 2)
    out, grads = _grads(converted, X, X * 0.5)
    np.testing.assert_allclose(out, eager_out)
    for a, b in zip(grads, eager_grads):
        np.testing.assert_allclose(a, b)


class ReadsAnUnsavedConstant(PyLayer):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * d2s.to_tensor(np.array([2.0, 3.0, 4.0, 5.0]))


def reads_unsaved(x):
    return ReadsAnUnsavedConstant.apply(x).sum()


def test_a_backward_reading_an_unsaved_tensor_says_to_save_it():
    _grads(reads_unsaved, X)  # eagerly it just works
    converted = d2s.jit.to_static(reads_unsaved, input_spec=[InputSpec([4], "float64")])
    with pytest.raises(RuntimeError, match="save_for_backward"):
        _grads(converted, X)
