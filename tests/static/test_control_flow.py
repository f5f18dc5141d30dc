"""``static.nn.cond`` and ``static.nn.while_loop``: structures, nesting, captured
values, errors, eager behaviour, and gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.verify import verify
from dy2stat.static import Variable
from dy2stat.static.nn import cond, while_loop
from tests.static.helpers import building, central_differences, run

X = np.array([0.5, -1.25, 2.0])


def _ops(program, type_):
    return [op for op in program.all_ops() if op.type == type_]


# ------------------------------------------------------------------- cond


def _nested_cond_program():
    with building() as (main, _):
        x = d2s.static.data("x", [3], "float64")
        k = d2s.static.data("k", [], "float64")
        out = cond(
            x.sum() > 0,
            lambda: {"pair": (x * k, [x + 1.0]), "total": x.sum()},
            lambda: {"pair": (x - k, [x * x]), "total": x.max()},
        )
    return main, out


def test_cond_with_nested_structures_and_captured_values():
    main, out = _nested_cond_program()
    assert set(out) == {"pair", "total"}
    assert isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
    assert all(isinstance(v, Variable) for v in (out["pair"][0], out["pair"][1][0], out["total"]))
    (op,) = _ops(main, "cond")
    assert {"x", "k"} <= set(op.inputs["Input"])  # captured outer values are explicit inputs
    verify(main, feed_names=["x", "k"])
    fetch = [out["pair"][0], out["pair"][1][0], out["total"]]
    for x in (X, -X):
        got = run(main, {"x": x, "k": np.array(3.0)}, fetch)
        if x.sum() > 0:
            want = [x * 3.0, x + 1.0, x.sum()]
        else:
            want = [x - 3.0, x * x, x.max()]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w)


def test_cond_output_shapes_join_and_pass_through_outer_values():
    with building() as (main, _):
        x = d2s.static.data("x", [3], "float32")
        y = d2s.static.data("y", [5], "float32")
        same, joined = cond(x.sum() > 0, lambda: (x, x), lambda: (x * 2.0, y))
    assert same.shape == [3]
    assert joined.shape == [-1]  # [3] in one branch, [5] in the other
    got = run(main, {"x": np.ones(3, np.float32), "y": np.zeros(5, np.float32)}, [joined])[0]
    assert got.shape == (3,)
    got = run(main, {"x": -np.ones(3, np.float32), "y": np.zeros(5, np.float32)}, [joined])[0]
    assert got.shape == (5,)


def test_cond_with_python_scalars_and_none():
    with building() as (main, _):
        x = d2s.static.data("x", [], "float32")
        a, nothing = cond(x > 0, lambda: (1.0, None), lambda: (x, None))
    assert nothing is None and a.dtype == np.float32
    assert run(main, {"x": np.float32(5)}, [a])[0] == 1.0
    assert run(main, {"x": np.float32(-5)}, [a])[0] == -5.0


def test_cond_nested_in_cond():
    with building() as (main, _):
        x = d2s.static.data("x", [], "float64")

        def positive():
            return cond(x > 10.0, lambda: x * 100.0, lambda: x * 10.0)

        out = cond(x > 0, positive, lambda: -x)
    assert len(_ops(main, "cond")) == 2
    verify(main, feed_names=["x"])
    for value, want in ((20.0, 2000.0), (2.0, 20.0), (-3.0, 3.0)):
        assert run(main, {"x": np.array(value)}, [out])[0] == want


# ------------------------------------------------------------------- while


def test_while_loop_with_nested_loop_vars_and_captured_values():
    with building() as (main, _):
        n = d2s.static.data("n", [], "int64")
        step = d2s.static.data("step", [2], "float64")

        def body(i, state):
            acc, hist = state["acc"], state["hist"]
            return [i + 1, {"acc": acc + step, "hist": (hist[0] * 2.0, [hist[1][0] - 1.0])}]

        i, state = while_loop(
            lambda i, state: i < n, body,
            [d2s.zeros([], "int64"), {"acc": d2s.zeros([2], "float64"),
                                      "hist": (d2s.ones([], "float64"), [d2s.zeros([3])])}])
    assert isinstance(state, dict) and isinstance(state["hist"], tuple)
    (op,) = _ops(main, "while")
    assert "step" in op.inputs["Input"] and "n" in op.inputs["Input"]
    verify(main, feed_names=["n", "step"])
    fetch = [i, state["acc"], state["hist"][0], state["hist"][1][0]]
    for steps in (0, 1, 5):
        got = run(main, {"n": np.array(steps), "step": np.array([0.5, 2.0])}, fetch)
        assert got[0] == steps
        np.testing.assert_allclose(got[1], steps * np.array([0.5, 2.0]))
        assert got[2] == 2.0 ** steps
        np.testing.assert_allclose(got[3], np.full(3, -steps, np.float32))


def test_a_dim_that_changes_across_iterations_becomes_unknown():
    with building() as (main, _):
        n = d2s.static.data("n", [], "int64")
        x = d2s.static.data("x", [2, 3], "float32")
        i, grown, fixed = while_loop(
            lambda i, g, f: i < n,
            lambda i, g, f: (i + 1, d2s.concat([g, g[:1]], axis=0), f + 1.0),
            [d2s.zeros([], "int64"), x, x])
    assert grown.shape == [-1, 3]
    assert fixed.shape == [2, 3]
    verify(main, feed_names=["n", "x"])
    got = run(main, {"n": np.array(3), "x": np.ones((2, 3), np.float32)}, [grown, fixed])
    assert got[0].shape == (5, 3) and got[1].shape == (2, 3)


def test_while_nested_in_while_and_cond_in_while():
    with building() as (main, _):
        n = d2s.static.data("n", [], "int64")

        def outer(i, total):
            def inner(j, t):
                t = cond(j % 2 == 0, lambda: t + j.astype("float32"), lambda: t)
                return j + 1, t

            _, total = while_loop(lambda j, t: j < i, inner, [d2s.zeros([], "int64"), total])
            return i + 1, total

        _, total = while_loop(lambda i, t: i < n, outer,
                              [d2s.zeros([], "int64"), d2s.zeros([], "float32")])
    assert len(_ops(main, "while")) == 2 and len(_ops(main, "cond")) == 1
    verify(main, feed_names=["n"])
    for steps in (0, 1, 6):
        want = sum(j for i in range(steps) for j in range(i) if j % 2 == 0)
        assert run(main, {"n": np.array(steps)}, [total])[0] == want


def test_while_nested_in_cond():
    with building() as (main, _):
        x = d2s.static.data("x", [], "float64")

        def doubling():
            return while_loop(lambda v: v < 100.0, lambda v: [v * 2.0], [x])[0]

        out = cond(x > 0, doubling, lambda: x)
    verify(main, feed_names=["x"])
    assert run(main, {"x": np.array(3.0)}, [out])[0] == 192.0
    assert run(main, {"x": np.array(-3.0)}, [out])[0] == -3.0


# ---------------------------------------------------------------- eager


def test_eager_tensors_just_run_python():
    calls = []

    def branch(tag, value):
        def fn():
            calls.append(tag)
            return value
        return fn

    t = d2s.to_tensor([1.0, -3.0])
    assert cond(t.sum() > 0, branch("t", "yes"), branch("f", "no")) == "no"
    assert calls == ["f"]  # only the branch taken runs
    assert cond(True, branch("t", 1), branch("f", 2)) == 1
    out = cond(t.sum() < 0, lambda: {"a": (t * 2,)}, lambda: None)
    assert isinstance(out["a"][0], d2s.Tensor)
    np.testing.assert_allclose(out["a"][0].numpy(), [2.0, -6.0])

    seen = []

    def body(i, acc):
        seen.append(int(i.item()))
        return i + 1, acc * 2

    i, acc = while_loop(lambda i, acc: i < 4, body, [d2s.to_tensor(0), d2s.to_tensor(1.0)])
    assert seen == [0, 1, 2, 3]
    assert isinstance(acc, d2s.Tensor) and acc.item() == 16.0
    assert while_loop(lambda v: v < 0, lambda v: [v + 1], [5]) == [5]  # zero iterations
    assert not d2s.in_static_mode()


# ---------------------------------------------------------------- errors


def test_branch_dtype_mismatch_names_the_output_and_both_dtypes():
    with building():
        x = d2s.static.data("x", [3])
        with pytest.raises(TypeError) as info:
            cond(x.sum() > 0, lambda: {"a": x, "b": (x, x)},
                 lambda: {"a": x, "b": (x, x.astype("int64"))})
    message = str(info.value)
    assert "output 2" in message and "['b'][1]" in message
    assert "float32 in true_fn" in message and "int64 in false_fn" in message


def test_branch_structure_mismatch():
    with building():
        x = d2s.static.data("x", [3])
        with pytest.raises(ValueError, match="true_fn returns a tuple of 2 but false_fn "
                                             "returns a list of 1"):
            cond(x.sum() > 0, lambda: (x, x), lambda: [x])
        with pytest.raises(ValueError, match="same structure"):
            cond(x.sum() > 0, lambda: {"a": x}, lambda: {"b": x})
        with pytest.raises(ValueError, match="None in one branch only"):
            cond(x.sum() > 0, lambda: (x, None), lambda: (x, x))
        with pytest.raises(ValueError, match="different ranks"):
            cond(x.sum() > 0, lambda: x, lambda: x.sum())


def test_predicate_must_be_a_bool_scalar():
    with building():
        x = d2s.static.data("x", [3])
        with pytest.raises(TypeError, match="must be a bool tensor, got float32"):
            cond(x.sum(), lambda: x, lambda: x)
        with pytest.raises(ValueError, match="must hold one element"):
            cond(x > 0, lambda: x, lambda: x)


def test_loop_var_dtype_change_names_it():
    with building():
        n = d2s.static.data("n", [], "int64")
        x = d2s.static.data("x", [3], "int64")
        with pytest.raises(TypeError) as info:
            while_loop(lambda i, s: i < n, lambda i, s: (i + 1, {"v": s["v"] * 0.5}),
                       [d2s.zeros([], "int64"), {"v": x}])
    message = str(info.value)
    assert "loop variable 1 ([1]['v'])" in message
    assert "from int64 to float32" in message


def test_loop_body_must_return_every_loop_var():
    with building():
        n = d2s.static.data("n", [], "int64")
        with pytest.raises(ValueError, match="body returns 1 values but there are 2"):
            while_loop(lambda i, s: i < n, lambda i, s: [i + 1],
                       [d2s.zeros([], "int64"), d2s.zeros([2])])


# ---------------------------------------------------- gradients vs differences


def _gradient_check(build, feeds: dict, params: dict, rtol=1e-6, atol=1e-8):
    """``build()`` makes the loss (inside ``building()``); check d loss / d (feed or
    parameter) from ``gradients``/``append_backward`` against central differences."""
    with building() as (main, _):
        loss = build()
        wanted = [main.global_block().vars[n] for n in feeds if feeds[n].dtype.kind == "f"]
        data_grads = d2s.static.gradients(loss, [Variable(main.global_block(), v.name)
                                                 for v in wanted])
        pairs = d2s.static.append_backward(loss) if params else []
    verify(main, feed_names=list(feeds))
    scope = Scope({k: v.copy() for k, v in params.items()})
    grads = {v.name: g for v, g in zip(wanted, data_grads)}
    grads.update({p.name: g for p, g in pairs})
    assert set(params) <= set(grads), f"no gradient for {set(params) - set(grads)}"
    names = list(grads)
    analytic = run(main, feeds, [grads[n] for n in names], scope=scope)

    exe = d2s.static.Executor()

    def f():
        return float(exe.run(main, feed=feeds, fetch_list=[loss], scope=scope)[0])

    for name, got in zip(names, analytic):
        value = feeds[name] if name in feeds else scope[name]
        expected = central_differences(f, value)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)
    return main, analytic


@pytest.mark.parametrize("x", [X, -X], ids=["true-branch", "false-branch"])
def test_cond_gradients(x):
    def build():
        xv = d2s.static.data("x", [3], "float64")
        w = d2s.static.create_parameter([3], "float64", name="w")
        out = cond(
            xv.sum() > 0,
            lambda: {"a": (xv * w).exp(), "b": [xv.sum() * w]},
            lambda: {"a": xv * xv * w, "b": [w.tanh()]},
        )
        return (out["a"] * out["b"][0]).sum()

    _gradient_check(build, {"x": x.copy()}, {"w": np.array([0.3, -0.7, 1.1])})


def _loop_program(extra_cond=None):
    xv = d2s.static.data("x", [3], "float64")
    n = d2s.static.data("n", [], "int64")
    w = d2s.static.create_parameter([3], "float64", name="w")

    def body(i, state):
        v = state["v"]
        return i + 1, {"v": (v * w + xv).tanh(), "s": state["s"] + v.sum()}

    _, state = while_loop(lambda i, s: i < n, body,
                          [d2s.zeros([], "int64"), {"v": xv * 0.5, "s": xv.sum() * 0.0}])
    return (state["v"] * xv).sum() + state["s"] ** 2


@pytest.mark.parametrize("iterations", [0, 1, 5])
def test_while_gradients(iterations):
    main, analytic = _gradient_check(
        _loop_program, {"x": X.copy(), "n": np.array(iterations)},
        {"w": np.array([0.3, -0.7, 1.1])})
    assert _ops(main, "while_grad")
    if iterations == 0:  # no iteration: w has no influence
        np.testing.assert_array_equal(analytic[-1], 0.0)


def test_gradients_through_a_data_dependent_while():
    """The trip count depends on x itself (JAX's while_loop cannot differentiate this)."""

    def build():
        xv = d2s.static.data("x", [3], "float64")
        w = d2s.static.create_parameter([3], "float64", name="w")
        v, k = while_loop(lambda v, k: v.sum() < 20.0,
                          lambda v, k: [v * 1.5 + w, k + 1],
                          [xv, d2s.zeros([], "int64")])
        return (v * v).sum() + k.astype("float64")

    for start in (np.array([1.0, 2.0, 0.5]), np.array([30.0, 1.0, 2.0])):
        _gradient_check(build, {"x": start.copy()}, {"w": np.array([0.1, 0.2, 0.3])})


@pytest.mark.parametrize("x", [X, -X], ids=["loop-branch", "plain-branch"])
def test_gradients_of_while_nested_in_cond(x):
    def build():
        xv = d2s.static.data("x", [3], "float64")
        w = d2s.static.create_parameter([3], "float64", name="w")

        def looping():
            i, v = while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, (v * w).sin() + xv),
                              [d2s.zeros([], "int64"), xv])
            return v

        return cond(xv.sum() > 0, looping, lambda: xv * w * 2.0).sum()

    _gradient_check(build, {"x": x.copy()}, {"w": np.array([0.4, -0.2, 0.9])})


@pytest.mark.parametrize("iterations", [0, 1, 4])
def test_gradients_of_cond_nested_in_while(iterations):
    def build():
        xv = d2s.static.data("x", [3], "float64")
        n = d2s.static.data("n", [], "int64")
        w = d2s.static.create_parameter([3], "float64", name="w")

        def body(i, v):
            v = cond(i % 2 == 0, lambda: v * w + xv, lambda: (v - w).tanh() * 0.5)
            return i + 1, v

        _, v = while_loop(lambda i, v: i < n, body, [d2s.zeros([], "int64"), xv * 1.0])
        return (v * v).sum()

    _gradient_check(build, {"x": X.copy(), "n": np.array(iterations)},
                    {"w": np.array([0.4, -0.2, 0.9])})


@pytest.mark.parametrize("x", [X, -X], ids=["true-branch", "false-branch"])
def test_gradients_when_branches_and_bodies_pass_values_through(x):
    """A branch that returns a captured value as is, a loop body that returns a
    carried value unchanged, and an integer loop variable beside float ones."""

    def build():
        xv = d2s.static.data("x", [3], "float64")
        w = d2s.static.create_parameter([3], "float64", name="w")
        a, b = cond(xv.sum() > 0, lambda: (xv, w * 3.0), lambda: (w, xv))
        _, kept, changed = while_loop(lambda i, k, c: i < 2,
                                      lambda i, k, c: (i + 1, k, c * a),
                                      [d2s.zeros([], "int64"), b, a])
        return (kept * changed).sum()

    _gradient_check(build, {"x": x.copy()}, {"w": np.array([0.4, -0.2, 0.9])})
