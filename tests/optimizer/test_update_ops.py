"""The update ops: eager results against NumPy, inference, and a static run."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import static
from dy2stat.dispatch import apply
from dy2stat.runtime import build
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Program
from dy2stat.runtime.ops import optimizer as _update_ops  # noqa: F401  (registers the ops)
from dy2stat.runtime.registry import OPS, Meta
from tests.optimizer import reference
from tests.optimizer.op_cases import CASES


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _tensors(x):
    """An input as the op takes it: a Tensor, or a list of them (a variadic slot)."""
    return [d2s.Tensor(np.array(v)) for v in x] if isinstance(x, list) else d2s.Tensor(
        np.array(x))


def _each(values):
    """Slot values end to end (a variadic slot's list opened)."""
    return [v for value in values for v in (value if isinstance(value, list) else [value])]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_update_matches_numpy(case):
    out = _flat(apply(case.op, *[_tensors(x) for x in case.inputs], **case.attrs))
    want = _flat(case.ref(*case.inputs, **case.attrs))
    assert len(out) == len(want) == len(OPS[case.op].outputs)
    out, want = _each(out), _each(want)
    for got, expected, x in zip(out, want, _each([case.inputs[0], *case.inputs[2:]])):
        assert got.shape == list(np.shape(expected)) == list(np.shape(x))
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got.numpy(), expected, rtol=case.rtol, atol=case.atol)


def test_update_ops_have_no_gradient_rule_and_leave_inputs_alone():
    p = d2s.to_tensor(np.ones(3, "float32"), stop_gradient=False)
    g = d2s.to_tensor(np.full(3, 2.0, "float32"))
    out = apply("sgd", p, g, d2s.to_tensor([0.5]))
    assert out.stop_gradient and OPS["sgd"].grad is None
    np.testing.assert_array_equal(out.numpy(), np.zeros(3))
    np.testing.assert_array_equal(p.numpy(), np.ones(3))


def test_float16_parameter_with_float32_state():
    p = np.linspace(-1, 1, 6).astype("float16")
    g = np.linspace(1, 2, 6).astype("float16")
    m = np.zeros(6, "float32")
    pows = np.array([0.9], "float32"), np.array([0.999], "float32")
    outs = apply("adam", *[d2s.Tensor(a) for a in (p, g, m, m, *pows)],
                 d2s.Tensor(np.array([0.01], "float32")))
    assert [o.dtype for o in outs] == [np.float16] + [np.float32] * 4
    want = reference.adam(p.astype("float64"), g.astype("float64"), m, m, *pows, 0.01)
    np.testing.assert_allclose(outs[0].numpy(), want[0], rtol=2e-3)


def _meta(shape, dtype="float32"):
    return Meta(tuple(shape), np.dtype(dtype))


def test_inference_is_like_the_inputs_and_accepts_unknown_dims():
    op = OPS["adam"]
    p, one = _meta([-1, 4]), _meta([1])
    out = op.infer(p, _meta([8, 4]), p, p, one, one, one, **op.attrs)
    assert out == (p, p, p, one, one)
    assert OPS["momentum"].infer(p, p, _meta([-1, 4], "float64"), one) == (
        p, _meta([-1, 4], "float64"))


@pytest.mark.parametrize("inputs, error, match", [
    ([[3, 4], [4, 3], [1]], ValueError, "Grad has shape"),
    ([[3, 4], [3, 4], [2]], ValueError, "LearningRate must hold one value"),
])
def test_inference_errors_name_the_slot(inputs, error, match):
    with pytest.raises(error, match=match):
        OPS["sgd"].infer(*[_meta(s) for s in inputs])


def test_integer_learning_rate_is_rejected():
    with pytest.raises(TypeError, match="LearningRate must be a float"):
        OPS["sgd"].infer(_meta([2]), _meta([2]), _meta([1], "int64"))


def test_static_update_writes_back_into_persistable_variables():
    """An update op whose outputs name persistable variables trains across runs."""
    program = Program()
    block = program.global_block()
    p = block.create_var([3], "float32", name="p", persistable=True)
    v = block.create_var([3], "float32", name="v", persistable=True)
    lr = block.create_var([1], "float32", name="lr", persistable=True)
    g = block.create_var([3], "float32", name="g", is_data=True)
    build.append(block, "momentum", [p, g, v, lr], {"mu": 0.5})
    op = block.ops[-1]
    op.outputs = {"ParamOut": ["p"], "VelocityOut": ["v"]}
    scope = Scope()
    scope["p"], scope["v"] = np.ones(3, "float32"), np.zeros(3, "float32")
    scope["lr"] = np.array([0.1], "float32")
    exe = static.Executor()
    want_p, want_v = np.ones(3), np.zeros(3)
    grad = np.array([1.0, 2.0, 3.0], "float32")
    for _ in range(3):
        exe.run(program, feed={"g": grad}, fetch_list=[], scope=scope)
        want_p, want_v = reference.momentum(want_p, grad, want_v, 0.1, mu=0.5)
    np.testing.assert_allclose(np.asarray(scope["p"]), want_p, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(scope["v"]), want_v, rtol=1e-6)


def _adam_as_written(p, g, m1, m2, b1p, b2p, lr, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """Paddle's adam as plain NumPy expressions in the state's dtype."""
    acc = m1.dtype
    g = g.astype(acc, copy=False)
    b1, b2, lr = (a.reshape(()).astype(acc) for a in (b1p, b2p, lr))
    m1 = beta1 * m1 + (1 - beta1) * g
    m2 = beta2 * m2 + (1 - beta2) * (g * g)
    correction = np.sqrt(1 - b2)
    lr_t = lr * correction / (1 - b1)
    out = p - lr_t * (m1 / (np.sqrt(m2) + epsilon * correction))
    return out.astype(p.dtype, copy=False), m1, m2


@pytest.mark.parametrize("dtype,state", [("float32", "float32"), ("float64", "float64"),
                                         ("float16", "float32")])
@pytest.mark.parametrize("shape", [(), (7,), (33, 5)])
def test_adam_gives_the_bits_of_its_expressions(dtype, state, shape):
    """The kernel computes through one temporary; every value keeps the bits of the
    expressions (zeros, a NaN, magnitudes far apart)."""
    rng = np.random.default_rng(len(shape))
    p = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
    g = np.asarray(rng.standard_normal(shape) * 1e-3).astype(dtype)
    if g.size > 3:
        g.flat[:3] = [0.0, -0.0, np.nan]
    m1 = np.asarray(rng.standard_normal(shape)).astype(state)
    m2 = np.asarray(np.abs(rng.standard_normal(shape)) * 1e-7).astype(state)
    pows = np.array([0.9 ** 7], state), np.array([0.999 ** 70], state)
    lr = np.array([0.003], "float32")
    got = apply("adam", *[d2s.Tensor(a) for a in (p, g, m1, m2, *pows, lr)], epsilon=1e-6)
    want = _adam_as_written(p, g, m1, m2, *pows, lr, epsilon=1e-6)
    for a, b in zip(got[:3], want):
        assert a.numpy().dtype == np.asarray(b).dtype
        assert a.numpy().tobytes() == np.asarray(b).tobytes()
