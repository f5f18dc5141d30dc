"""Building static programs: data, the Variable surface, inference, parameters."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import methods
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.verify import verify
from dy2stat.static import InputSpec, Variable
from tests.static.helpers import building, run

rng = np.random.default_rng(0)


# ------------------------------------------------------------------ data


def test_data_with_unknown_dims():
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        y = d2s.static.data("y", [-1, None, 2], "int64")
        s = d2s.static.data("s", [], "bool")
    assert isinstance(x, Variable)
    assert x.shape == [-1, 4] and x.dtype == np.float32 and x.ndim == 2
    assert y.shape == [-1, -1, 2] and y.dtype == np.int64
    assert s.shape == [] and s.dtype == np.bool_
    desc = main.global_block().vars["x"]
    assert desc.is_data and not desc.persistable and x.stop_gradient
    assert x.block is main.global_block()
    out = run(main, {"x": np.ones((3, 4), np.float32)}, ["x"])[0]
    assert out.shape == (3, 4)


def test_data_goes_to_the_guarded_program():
    with building() as (main, _):
        d2s.static.data("x", [2])
        assert d2s.static.default_main_program() is main
    assert d2s.static.default_main_program() is not main


def test_str_program_is_readable():
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        w = d2s.static.create_parameter([4, 3], name="w")
        h = x @ w
        d2s.static.nn.cond(h.sum() > 0, lambda: h * 2.0, lambda: h - 1.0)
    text = str(main)
    lines = text.splitlines()
    assert lines[0] == "block 0:"
    assert "  var x: float32[-1, 4] data" in lines
    assert "  var w: float32[4, 3] persistable" in lines
    assert any(line.startswith(f"  Out=[{h.name}] = matmul(X=[x], Y=[w])") for line in lines)
    assert any(" = cond(Cond=[" in line for line in lines)
    assert "    true_block:" in lines and "    false_block:" in lines
    assert "      block 1 (parent 0):" in lines
    assert text == str(main)  # stable


def test_all_ops_yields_every_op_of_every_block():
    with building() as (main, _):
        x = d2s.static.data("x", [3])
        n = d2s.static.data("n", [], "int64")

        def body(i, v):
            v = d2s.static.nn.cond(v.sum() > 10.0, lambda: v - 1.0, lambda: v * 2.0)
            return i + 1, v

        d2s.static.nn.while_loop(lambda i, v: i < n, body, [d2s.zeros([], "int64"), x])
    ops = list(main.all_ops())
    assert len(ops) == sum(len(b.ops) for b in main.blocks)
    types = [op.type for op in ops]
    assert "while" in types and "cond" in types
    assert types.index("while") < types.index("cond")  # outer op before its sub-block ops
    assert [op.type for op in main.global_block().ops][-1] == "while"
    verify(main)


# ------------------------------------------------------ the Tensor surface


def test_variable_has_the_tensor_surface():
    for name in methods.SURFACE:
        assert getattr(Variable, name) is getattr(d2s.Tensor, name), name
    for prop in ("shape", "dtype", "ndim", "stop_gradient", "numpy", "detach"):
        assert hasattr(Variable, prop), prop


SURFACE_CASES = {
    "add": lambda x, i: x + 1.5,
    "radd": lambda x, i: 2 + x,
    "sub": lambda x, i: x - x[0],
    "rsub": lambda x, i: 3.0 - x,
    "mul": lambda x, i: x * x,
    "div": lambda x, i: x / 4,
    "rdiv": lambda x, i: 1.0 / (x.abs() + 1.0),
    "floordiv": lambda x, i: i // 3,
    "mod": lambda x, i: i % 3,
    "pow": lambda x, i: x ** 2,
    "rpow": lambda x, i: 2.0 ** x,
    "neg": lambda x, i: -x,
    "matmul": lambda x, i: x @ x.transpose([1, 0]),
    "lt": lambda x, i: x < 0.5,
    "le": lambda x, i: x <= 0.5,
    "gt": lambda x, i: x > 0.5,
    "ge": lambda x, i: x >= 0.5,
    "eq": lambda x, i: i == 2,
    "ne": lambda x, i: i != 2,
    "and": lambda x, i: (x > 0) & (x < 1),
    "or": lambda x, i: (x > 1) | (x < -1),
    "invert": lambda x, i: ~(x > 0),
    "bit_and": lambda x, i: i & 6,
    "int_float": lambda x, i: i + 0.5,  # int tensor with a Python float: float32
    "int_int": lambda x, i: i * 2,
    "float_int_tensor": lambda x, i: x + i,
    "sum": lambda x, i: x.sum(),
    "mean_axis": lambda x, i: x.mean(axis=1),
    "max_keepdim": lambda x, i: x.max(axis=0, keepdim=True),
    "argmax": lambda x, i: x.argmax(axis=1),
    "exp_tanh": lambda x, i: x.exp().tanh(),
    "astype": lambda x, i: x.astype("int64"),
    "reshape": lambda x, i: x.reshape([-1, 2, 2]),
    "flatten": lambda x, i: x.reshape([-1, 2, 2]).flatten(),
    "unsqueeze": lambda x, i: x.unsqueeze(0),
    "clip": lambda x, i: x.clip(-0.5, 0.5),
    "slice": lambda x, i: x[:, 1:3],
    "int_index": lambda x, i: x[1],
    "neg_step": lambda x, i: x[::-1, ::2],
    "ellipsis_none": lambda x, i: x[..., None],
    "tensor_index": lambda x, i: x[i[0] % 2],
    "bool_mask_where": lambda x, i: d2s.where(x > 0, x, x * 0.1),
    "concat": lambda x, i: d2s.concat([x, x * 2], axis=0),
    "stack": lambda x, i: d2s.stack([x, x], axis=1),
    "shape": lambda x, i: d2s.shape(x),
    "cumsum": lambda x, i: x.cumsum(axis=1),
    "numpy_scalar": lambda x, i: x + np.float32(2),  # NumPy values are tensor inputs
    "numpy_array": lambda x, i: x * np.arange(4.0),  # (float64 wins, as eagerly)
}


@pytest.mark.parametrize("name", list(SURFACE_CASES))
def test_operators_and_methods_match_eager(name):
    f = SURFACE_CASES[name]
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    iv = np.arange(12).reshape(3, 4)
    expected = f(d2s.to_tensor(xv), d2s.to_tensor(iv))
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        i = d2s.static.data("i", [None, 4], "int64")
        out = f(x, i)
    assert isinstance(out, Variable)
    assert out.dtype == expected.dtype
    assert len(out.shape) == len(expected.shape)
    for declared, actual in zip(out.shape, expected.shape):
        assert declared in (-1, actual)
    got = run(main, {"x": xv, "i": iv}, [out])[0]
    assert list(got.shape) == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6, atol=1e-7)
    verify(main, feed_names=["x", "i"])


def test_indexing_write_rebinds_the_variable():
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    eager = d2s.to_tensor(xv) * 1
    eager_alias = eager
    eager[:, 0] = 5.0
    eager[1] = eager[2] * 2
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        y = x * 1
        alias, before = y, y.name
        y[:, 0] = 5.0
        after_first = y.name
        y[1] = y[2] * 2
    assert before != after_first != y.name  # each write is a new value (setitem op)
    assert alias is y  # ... bound to the same Python object, as with a Tensor
    assert eager_alias is eager
    assert [op.type for op in main.global_block().ops].count("setitem") == 2
    got, x_out = run(main, {"x": xv}, [y, x])
    np.testing.assert_array_equal(got, eager.numpy())
    np.testing.assert_array_equal(x_out, xv)  # the input is not changed


@pytest.mark.parametrize("use", ["bool", "if", "while", "and", "not"])
def test_variable_as_python_bool_is_a_clear_error(use):
    with building():
        v = d2s.static.data("v", [1]).sum() > 0
        with pytest.raises(TypeError) as info:
            if use == "bool":
                bool(v)
            elif use == "if":
                if v:
                    pass
            elif use == "while":
                while v:
                    break
            elif use == "and":
                _ = v and 1
            else:
                _ = not v
    message = str(info.value)
    assert v.name in message
    assert "to_static" in message
    assert "static.nn.cond" in message and "while_loop" in message


def test_a_variable_has_no_value_while_building():
    with building():
        v = d2s.static.data("v", [2])
        with pytest.raises(TypeError, match="fetch it with Executor.run"):
            v.numpy()
        with pytest.raises(TypeError, match="none until the program runs"):
            float(v)


# ------------------------------------------------------------- inference


def test_shape_and_dtype_inference_with_unknown_dims():
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        col = d2s.static.data("col", [None, 1], "float64")
        w = d2s.static.create_parameter([4, 3], name="w")
        assert (x @ w).shape == [-1, 3]
        assert x.reshape([-1, 2, 2]).shape == [-1, 2, 2]
        assert d2s.concat([x, x], axis=0).shape == [-1, 4]
        assert d2s.concat([x, x], axis=1).shape == [-1, 8]
        assert x.sum(axis=1).shape == [-1]
        assert x.sum(axis=0).shape == [4]
        assert x.mean().shape == []
        b = col + w.sum(axis=0)  # [-1, 1] + [3]: broadcast, and float64 wins
        assert b.shape == [-1, 3] and b.dtype == np.float64
        assert x.transpose([1, 0]).shape == [4, -1]
        assert (x > 0).dtype == np.bool_
        assert d2s.shape(x).shape == [2]
        with pytest.raises(ValueError, match="matmul"):
            x @ d2s.static.create_parameter([5, 3], name="w_bad")
        with pytest.raises(ValueError, match="cannot reshape"):
            d2s.static.data("z", [3, 4]).reshape([5, -1])
    verify(main, feed_names=["x", "col"])
    out = run(main, {"x": np.ones((2, 4), np.float32), "col": np.ones((2, 1))}, [b],
              scope=Scope({"w": np.ones((4, 3), np.float32),
                           "w_bad": np.ones((5, 3), np.float32)}))[0]
    np.testing.assert_allclose(out, np.full((2, 3), 5.0))


def test_eager_tensors_are_captured_as_persistables():
    t = d2s.to_tensor([1.0, 2.0, 3.0, 4.0])
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        y = x + t
        z = y * t  # the same tensor: captured once
    block = main.global_block()
    captured = [v for v in block.vars.values() if v.persistable]
    assert len(captured) == 1
    assert captured[0].shape == (4,) and captured[0].dtype == np.float32
    exe = d2s.static.Executor()
    xv = np.ones((2, 4), np.float32)
    first = exe.run(main, feed={"x": xv}, fetch_list=[z])[0]
    np.testing.assert_allclose(first, (xv + t.numpy()) * t.numpy())
    t[0] = 10.0  # an eager change is seen by the next run
    second = exe.run(main, feed={"x": xv}, fetch_list=[z])[0]
    np.testing.assert_allclose(second[:, 0], (1 + 10.0) * 10.0)
    verify(main, feed_names=["x"])


# ------------------------------------------------------------ parameters


def test_fc_parameters_are_initialized_once_by_the_startup_program():
    with building() as (main, startup):
        x = d2s.static.data("x", [None, 2, 3])
        h = d2s.static.nn.fc(x, 5, activation="relu")
        y = d2s.static.nn.fc(h, 2)
    params = [v for v in main.global_block().vars.values() if v.persistable]
    assert sorted(tuple(p.shape) for p in params) == [(2,), (5,), (5, 2), (6, 5)]
    # one initializer op per parameter, in the startup program only
    init = startup.global_block().ops
    assert sorted(name for op in init for name in op.output_names()) == sorted(
        p.name for p in params)
    assert not any(n in {p.name for p in params}
                   for op in main.global_block().ops for n in op.output_names())
    scope = Scope()
    exe = d2s.static.Executor()
    exe.run(startup, scope=scope)
    values = {p.name: scope[p.name].copy() for p in params}
    biases = [p.name for p in params if len(p.shape) == 1]
    assert all(not values[b].any() for b in biases)  # biases start at zero
    xv = rng.standard_normal((4, 2, 3)).astype(np.float32)
    out1 = exe.run(main, feed={"x": xv}, fetch_list=[y, h], scope=scope)
    out2 = exe.run(main, feed={"x": xv}, fetch_list=[y, h], scope=scope)
    for a, b in zip(out1, out2):
        np.testing.assert_array_equal(a, b)  # running main does not re-initialize
    for p in params:
        np.testing.assert_array_equal(scope[p.name], values[p.name])
    (w1, b1), (w2, b2) = [(values[f"{pre}.w"], values[f"{pre}.b"])
                          for pre in sorted({p.name.rsplit(".", 1)[0] for p in params},
                                            key=lambda s: int(s.split("_")[1]))]
    expected_h = np.maximum(xv.reshape(4, 6) @ w1 + b1, 0)
    np.testing.assert_allclose(out1[1], expected_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out1[0], expected_h @ w2 + b2, rtol=1e-5, atol=1e-6)
    verify(main, feed_names=["x"])
    verify(startup)


def test_create_parameter_gives_a_variable():
    with building() as (main, startup):
        x = d2s.static.data("x", [None, 3])
        w = d2s.static.create_parameter([3, 2], "float64", name="w",
                                        initializer=("full", {"value": 0.5}))
        y = x.astype("float64") @ w
    assert isinstance(w, Variable) and w.persistable and w.shape == [3, 2]
    scope = Scope()
    run(startup, scope=scope)
    np.testing.assert_array_equal(scope["w"], np.full((3, 2), 0.5))
    out = run(main, {"x": np.ones((1, 3), np.float32)}, [y], scope=scope)[0]
    np.testing.assert_allclose(out, np.full((1, 2), 1.5))


# ------------------------------------------------------------- InputSpec


def test_input_spec():
    spec = InputSpec([None, 784], "float32", "x")
    assert spec.shape == (-1, 784) and spec.dtype == np.float32 and spec.name == "x"
    assert InputSpec(3).shape == (3,)
    assert InputSpec([2, -1], "int64").dtype == np.int64
    assert spec == InputSpec([-1, 784], np.float32, "x")
    assert hash(spec) == hash(InputSpec([-1, 784], "float32", "x"))
    assert spec != InputSpec([-1, 784], "float64", "x")
    assert repr(spec) == "InputSpec(shape=[-1, 784], dtype=float32, name='x')"
    assert spec.matches((5, 784), np.dtype("float32")) is None
    assert "rank" in spec.matches((784,), np.dtype("float32"))
    assert "shape" in spec.matches((5, 10), np.dtype("float32"))
    assert "dtype" in spec.matches((5, 784), np.dtype("float64"))
    t = d2s.to_tensor(np.zeros((2, 3), np.int64))
    assert InputSpec.from_tensor(t, "t") == InputSpec([2, 3], "int64", "t")
    with pytest.raises(ValueError, match="bad shape"):
        InputSpec([2, -3])
    with pytest.raises(ValueError, match="bad shape"):
        InputSpec(["a"])
    with pytest.raises(TypeError, match="InputSpec"):
        InputSpec([2], "complex64")
