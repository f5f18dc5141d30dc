"""The executor: plans compiled once from hand-built programs, checked against NumPy.

Programs are built with ``runtime.build.append`` (ops with inferred outputs)
and, for control flow, by appending ``cond``/``while``/``while_grad``
operators with their sub-blocks directly, as the frontend and the backward
pass do.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dy2stat as d2s  # (importing it registers every op)
from dy2stat.kernels import backend
from dy2stat.runtime import build, codegen, executor
from dy2stat.runtime.codegen import worker
from dy2stat.runtime.executor import Executor, Scope
from dy2stat.runtime.ir import Operator, Program
from tests.runtime import programs

RNG = np.random.default_rng(0)


def add_op(block, type, *inputs, **attrs):
    return build.append(block, type, list(inputs), attrs)


def mlp_program(layers=3, width=8, batch=-1):
    """relu(x @ w + b) per layer; returns the program, its output and parameter values."""
    p = Program()
    g = p.global_block()
    h = g.create_var((batch, width), "float32", name="x", is_data=True)
    params = {}
    for i in range(layers):
        w = g.create_var((width, width), "float32", name=f"fc_{i}.w", persistable=True)
        b = g.create_var((width,), "float32", name=f"fc_{i}.b", persistable=True)
        params[w.name] = RNG.standard_normal((width, width)).astype("float32")
        params[b.name] = RNG.standard_normal(width).astype("float32")
        h = add_op(g, "relu", add_op(g, "add", add_op(g, "matmul", h, w), b))
    return p, h, params


def numpy_mlp(x, params, layers=3):
    for i in range(layers):
        x = np.maximum(x @ params[f"fc_{i}.w"] + params[f"fc_{i}.b"], 0)
    return x


def code_lines(plan):
    """The generated source without comments."""
    return [line for line in plan.source.splitlines() if not line.strip().startswith("#")]


# ------------------------------------------------------------ straight line


def test_mlp_matches_numpy_and_runs_in_place():
    p, out, params = mlp_program()
    x = RNG.standard_normal((5, 8)).astype("float32")
    x_before = x.copy()
    plan = executor.compile(p, ["x"], [out.name])
    (y,) = plan.run({"x": x}, Scope(params))
    np.testing.assert_allclose(y, numpy_mlp(x, params), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(x, x_before)  # feeds are never written
    # add and relu write into the matmul's fresh buffer; matmul never writes its input
    assert [p.global_block().ops[i].type for i in plan.in_place] == ["add", "relu"] * 3
    products = [line for line in code_lines(plan) if "dot(" in line or "matmul(" in line]
    assert len(products) == 3 and not any("out=" in line for line in products)


@pytest.mark.parametrize("pred", [True, False])
def test_shared_corpus_programs_match_the_reference_interpreter(pred):
    p, params = programs.mlp()
    x = RNG.standard_normal((3, 4)).astype("float32")
    got = executor.compile(p, ["x"], ["y", "dead"]).run({"x": x}, Scope(params))
    expected = programs.run(p, {"x": x}, params, ["y", "dead"])
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6)
    p = programs.with_cond()
    feed = {"x": np.array([-1.0, 2.0], "float32"), "pred": np.array(pred)}
    names = ["y", "z", "w"]
    got = executor.compile(p, ["x", "pred"], names).run(feed, Scope())
    for g, e in zip(got, programs.run(p, feed, {}, names)):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_slots_are_released_after_their_last_use():
    p = Program()
    g = p.global_block()
    x = g.create_var((3,), "float32", name="x", is_data=True)
    a = add_op(g, "exp", x)  # op 0
    b = add_op(g, "add", a, x)  # op 1
    c = add_op(g, "multiply", b, a)  # op 2: last use of a and b
    d = add_op(g, "neg", c)  # op 3
    plan = executor.compile(p, ["x"], [d.name])
    assert plan.last_uses[a.name] == 2
    assert plan.last_uses[b.name] == 2
    assert plan.last_uses[x.name] == 1
    assert plan.last_uses[d.name] == 4  # fetched: held to the end
    assert set(plan.releases[2]) == {a.name, b.name}
    assert plan.releases[3] == [c.name]
    xv = np.array([0.5, -1.0, 2.0], "float32")
    (got,) = plan.run({"x": xv}, Scope())
    np.testing.assert_allclose(got, -((np.exp(xv) + xv) * np.exp(xv)), rtol=1e-6)


def test_unused_outputs_are_released_at_once_and_all_ops_run():
    p = Program()
    g = p.global_block()
    x = g.create_var((2,), "float32", name="x", is_data=True)
    dead = add_op(g, "exp", x)
    y = add_op(g, "neg", x)
    plan = executor.compile(p, ["x"], [y.name], optimize=False)  # dead code kept
    assert dead.name in plan.releases[0]
    assert "del " in plan.source
    (got,) = plan.run({"x": np.ones(2, "float32")}, Scope())
    np.testing.assert_array_equal(got, [-1, -1])


def test_a_value_used_twice_is_not_clobbered():
    p = Program()
    g = p.global_block()
    x = g.create_var((4,), "float32", name="x", is_data=True)
    h = add_op(g, "exp", x)
    y = add_op(g, "add", h, x)  # h is still needed below: not in place
    z = add_op(g, "multiply", h, h)  # last use of h, twice: in place is fine
    plan = executor.compile(p, ["x"], [y.name, z.name])
    xv = np.linspace(-1, 1, 4).astype("float32")
    got_y, got_z = plan.run({"x": xv}, Scope())
    np.testing.assert_allclose(got_y, np.exp(xv) + xv, rtol=1e-6)
    np.testing.assert_allclose(got_z, np.exp(xv) ** 2, rtol=1e-6)
    assert plan.in_place == [2]


def test_a_live_view_blocks_in_place():
    p = Program()
    g = p.global_block()
    x = g.create_var((2, 3), "float32", name="x", is_data=True)
    h = add_op(g, "exp", x)
    view = add_op(g, "reshape", h, shape=[6])  # shares h's buffer
    y = add_op(g, "add", h, x)  # last use of h, but the view lives on
    plan = executor.compile(p, ["x"], [view.name, y.name])
    xv = np.arange(6, dtype="float32").reshape(2, 3) / 6
    got_view, got_y = plan.run({"x": xv}, Scope())
    np.testing.assert_allclose(got_view, np.exp(xv).reshape(6), rtol=1e-6)
    np.testing.assert_allclose(got_y, np.exp(xv) + xv, rtol=1e-6)
    assert plan.in_place == []


def test_in_place_needs_a_provably_unchanged_shape():
    p = Program()
    g = p.global_block()
    x = g.create_var((-1, 3), "float32", name="x", is_data=True)
    y = g.create_var((-1, 3), "float32", name="y", is_data=True)
    h = add_op(g, "exp", x)
    s = add_op(g, "add", h, y)  # h may be [1, 3] and y [5, 3]: no out=h
    plan = executor.compile(p, ["x", "y"], [s.name])
    (got,) = plan.run({"x": np.zeros((1, 3), "float32"), "y": np.ones((5, 3), "float32")},
                      Scope())
    np.testing.assert_array_equal(got, np.full((5, 3), 2, "float32"))
    assert plan.in_place == []


def test_zero_d_values_and_numpy_scalars():
    p = Program()
    g = p.global_block()
    x = g.create_var((3,), "float32", name="x", is_data=True)
    s = add_op(g, "sum", x)
    t = add_op(g, "add", s, s)
    u = add_op(g, "exp", t)
    plan = executor.compile(p, ["x"], [u.name])
    (got,) = plan.run({"x": np.array([0.1, 0.2, 0.3], "float32")}, Scope())
    np.testing.assert_allclose(got, np.exp(1.2), rtol=1e-6)
    assert plan.in_place == []


def test_attrs_are_bound_and_multi_output_ops_unpack():
    p = Program()
    g = p.global_block()
    x = g.create_var((4, 2), "float32", name="x", is_data=True)
    top, bottom = add_op(g, "split", x, num_or_sections=2, axis=0)
    c = add_op(g, "clip", add_op(g, "add", top, bottom), max=1.5)
    i = add_op(g, "cast", c, dtype="int32")
    plan = executor.compile(p, ["x"], [c.name, i.name])
    xv = np.arange(8, dtype="float32").reshape(4, 2) / 4
    got_c, got_i = plan.run({"x": xv}, Scope())
    expected = np.clip(xv[:2] + xv[2:], None, 1.5)
    np.testing.assert_allclose(got_c, expected)
    assert got_i.dtype == np.int32
    np.testing.assert_array_equal(got_i, expected.astype("int32"))


def test_generated_code_never_contains_program_names():
    p = Program()
    g = p.global_block()
    evil = "x\nimport os; os.system('echo pwned')  # "
    g.create_var((2,), "float32", name=evil, is_data=True)
    g.create_var((2,), "float32", name="w = 1\n", persistable=True)
    y = g.create_var((2,), "float32", name="y\r\n__import__('os')")
    g.append_op(Operator("add", {"X": [evil], "Y": ["w = 1\n"]}, {"Out": [y.name]}))
    plan = executor.compile(p, [evil], [y.name])
    for line in code_lines(plan):
        assert "os" not in line and "w = 1" not in line
    (got,) = plan.run({evil: np.ones(2, "float32")}, Scope({"w = 1\n": np.ones(2, "float32")}))
    np.testing.assert_array_equal(got, [2, 2])


# ------------------------------------------------------------------- feeds


def test_feed_errors_name_the_feed():
    p, out, params = mlp_program(layers=1, width=4)
    exe = Executor()
    scope = Scope(params)
    with pytest.raises(ValueError, match=r"feed 'x': expected shape \[-1, 4\], got \[2, 3\]"):
        exe.run(p, {"x": np.zeros((2, 3), "float32")}, [out], scope)
    with pytest.raises(ValueError, match=r"feed 'x': expected shape \[-1, 4\], got \[4\]"):
        exe.run(p, {"x": np.zeros(4, "float32")}, [out], scope)
    with pytest.raises(TypeError, match="feed 'x': expected float32, got float64"):
        exe.run(p, {"x": np.zeros((2, 4))}, [out], scope)
    with pytest.raises(ValueError, match="feed 'x' is missing"):
        exe.run(p, {}, [out], scope)
    with pytest.raises(ValueError, match="feed 'nope': the program has no variable"):
        exe.run(p, {"x": np.zeros((1, 4), "float32"), "nope": np.zeros(1)}, [out], scope)
    with pytest.raises(ValueError, match="fetch 'ghost'"):
        exe.run(p, {"x": np.zeros((1, 4), "float32")}, ["ghost"], scope)
    plan = exe.plan(p, ["x"], [out.name])
    with pytest.raises(ValueError, match="feed 'x' is missing"):
        plan.run({"y": 1}, scope)
    with pytest.raises(ValueError, match="feed 'y' is not an input"):
        plan.run({"x": np.zeros((1, 4), "float32"), "y": 1}, scope)


def test_a_missing_parameter_says_to_run_the_startup_program():
    p, out, params = mlp_program(layers=1, width=4)
    del params["fc_0.b"]
    with pytest.raises(RuntimeError, match="parameter 'fc_0.b' has no value: run the startup"):
        Executor().run(p, {"x": np.zeros((1, 4), "float32")}, [out], Scope(params))


def test_a_kernel_error_names_the_op():
    p = Program()
    g = p.global_block()
    x = g.create_var((-1,), "float32", name="x", is_data=True)
    y = add_op(g, "reshape", add_op(g, "exp", x), shape=[5])
    plan = executor.compile(p, ["x"], [y.name])
    with pytest.raises(ValueError) as info:
        plan.run({"x": np.zeros(4, "float32")}, Scope())
    assert any("op 1 (reshape)" in note for note in getattr(info.value, "__notes__", []))


# -------------------------------------------------------------- the scope


def test_startup_ops_and_updates_write_persistables():
    startup = Program()
    s = startup.global_block()
    w = s.create_var((3,), "float32", name="w", persistable=True)
    s.append_op(Operator("full", {}, {"Out": ["w"]}, {"shape": [3], "value": 1.5}))
    scope = Scope()
    Executor().run(startup, {}, [], scope)
    np.testing.assert_array_equal(scope["w"], [1.5, 1.5, 1.5])

    main = Program()
    g = main.global_block()
    g.create_var(w.shape, w.dtype, name="w", persistable=True)
    x = g.create_var((3,), "float32", name="x", is_data=True)
    y = add_op(g, "multiply", x, g.var("w"))  # reads the value before the update
    g.append_op(Operator("scale", {"X": ["w"]}, {"Out": ["w"]}, {"scale": 2.0}))
    exe = Executor()
    got_y, got_w = exe.run(main, {"x": np.ones(3, "float32")}, [y, "w"], scope)
    np.testing.assert_array_equal(got_y, [1.5] * 3)
    np.testing.assert_array_equal(got_w, [3.0] * 3)
    got_w[:] = 99  # a fetched persistable is a copy: the scope keeps its value
    np.testing.assert_array_equal(scope["w"], [3.0] * 3)
    exe.run(main, {"x": np.ones(3, "float32")}, [], scope)
    np.testing.assert_array_equal(scope["w"], [6.0] * 3)


def test_scope_is_a_mapping():
    scope = Scope({"a": np.ones(1)})
    scope["b"] = np.zeros(2)
    assert "a" in scope and len(scope) == 2 and sorted(scope) == ["a", "b"]
    assert scope.get("c") is None and scope.names() == ["a", "b"]
    with pytest.raises(KeyError, match="no value named 'c'"):
        scope["c"]


# ------------------------------------------------------------ plan cache


def test_plans_are_cached_per_program_version_and_signature():
    p, out, params = mlp_program(layers=2, width=4)
    exe = Executor()
    feed = {"x": np.ones((1, 4), "float32")}
    first = exe.run(p, feed, [out], Scope(params))
    plan = exe.plan(p, ["x"], [out.name])
    again = exe.run(p, feed, [out.name], Scope(params))
    assert exe.plan(p, ["x"], [out.name]) is plan
    np.testing.assert_array_equal(first[0], again[0])
    assert exe.plan(p, ["x"], []) is not plan  # another fetch list: another plan
    add_op(p.global_block(), "neg", out)  # the program changed: compile again
    assert exe.plan(p, ["x"], [out.name]) is not plan


# ------------------------------------------------------------- control flow


def cond_program():
    """y = cond(pred, relu(x) + a, x * a); both branches read captured outer values."""
    p = Program()
    g = p.global_block()
    x = g.create_var((3,), "float32", name="x", is_data=True)
    pred = g.create_var((), "bool", name="pred", is_data=True)
    a = g.create_var((3,), "float32", name="a", persistable=True)
    tb = p.create_block(0)
    t = add_op(tb, "add", add_op(tb, "relu", x), a)
    fb = p.create_block(0)
    f = add_op(fb, "multiply", x, a)
    y = g.create_var((3,), "float32", name="y")
    g.append_op(Operator("cond", {"Cond": [pred.name], "Input": [x.name, a.name]},
                         {"Out": [y.name]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t.name], "false_outs": [f.name]}))
    z = add_op(g, "add", y, x)
    return p, z


@pytest.mark.parametrize("taken", [True, False])
def test_cond_runs_the_chosen_branch(taken):
    p, z = cond_program()
    a = np.array([1.0, 2.0, 3.0], "float32")
    x = np.array([-1.0, 0.5, 2.0], "float32")
    plan = executor.compile(p, ["x", "pred"], [z.name])
    (got,) = plan.run({"x": x, "pred": np.array(taken)}, Scope({"a": a}))
    expected = (np.maximum(x, 0) + a if taken else x * a) + x
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert "    if v" in plan.source  # a 0-d predicate, read as it is


def while_program(with_carries=True):
    """i, x = 0, x0; while i < n: i, x = i + 1, x * a  (n, a captured)."""
    p = Program()
    g = p.global_block()
    n = g.create_var((), "int64", name="n", is_data=True)
    x0 = g.create_var((2,), "float32", name="x0", is_data=True)
    a = g.create_var((2,), "float32", name="a", is_data=True)
    i0 = add_op(g, "full", shape=[], value=0, dtype="int64")
    cb = p.create_block(0)
    ci = cb.create_var((), "int64", name="ci")
    cb.create_var((2,), "float32", name="cx")
    pred = add_op(cb, "less_than", ci, n)
    body = p.create_block(0)
    bi = body.create_var((), "int64", name="bi")
    bx = body.create_var((2,), "float32", name="bx")
    i1 = add_op(body, "add", bi, 1)
    x1 = add_op(body, "multiply", bx, a)
    i_out = g.create_var((), "int64", name="i_out")
    x_out = g.create_var((2,), "float32", name="x_out")
    outputs = {"Out": [i_out.name, x_out.name], "Carries": []}
    if with_carries:
        g.create_var((), "float32", name="carries")
        outputs["Carries"] = ["carries"]
    g.append_op(Operator("while", {"X": [i0.name, x0.name], "Input": [n.name, a.name]}, outputs,
                         {"cond_block": cb.idx, "body_block": body.idx,
                          "cond_args": ["ci", "cx"], "cond_out": pred.name,
                          "body_args": [bi.name, bx.name], "body_outs": [i1.name, x1.name]}))
    return p, body, (bi, bx, a)


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_while_loops_and_saves_its_carries(trips):
    p, _, _ = while_program()
    x0 = np.array([1.0, -2.0], "float32")
    a = np.array([2.0, 0.5], "float32")
    plan = executor.compile(p, ["n", "x0", "a"], ["i_out", "x_out", "carries"])
    i, x, carries = plan.run({"n": np.array(trips), "x0": x0, "a": a}, Scope())
    assert int(i) == trips
    np.testing.assert_allclose(x, x0 * a**trips)
    assert len(carries) == trips
    for k, (ck, xk) in enumerate(carries):  # the carried values before each body run
        assert int(ck) == k
        np.testing.assert_allclose(xk, x0 * a**k)


def test_while_without_carries():
    p, _, _ = while_program(with_carries=False)
    plan = executor.compile(p, ["n", "x0", "a"], ["x_out"])
    (x,) = plan.run({"n": np.array(3), "x0": np.ones(2, "float32"),
                     "a": np.full(2, 3.0, "float32")}, Scope())
    np.testing.assert_allclose(x, [27.0, 27.0])
    assert ".append(" not in plan.source


def add_while_grad(p):
    """Hand-built backward of while_program: dx_out -> (dx0, da)."""
    g = p.global_block()
    body = p.blocks[[op for op in g.ops if op.type == "while"][0].attrs["body_block"]]
    gb = p.create_block(body.idx)
    gi = gb.create_var((), "int64", name="gi")
    gx = gb.create_var((2,), "float32", name="gx")
    gx_prev = add_op(gb, "multiply", gx, g.var("a"))  # d(x * a)/dx
    ga = add_op(gb, "multiply", gx, body.var("bx"))  # d(x * a)/da
    gi_seed = add_op(g, "full", shape=[], value=0, dtype="int64")
    dx_out = g.create_var((2,), "float32", name="dx_out", is_data=True)
    for name, shape, dtype in [("di", (), "int64"), ("dx0", (2,), "float32"),
                               ("da", (2,), "float32")]:
        g.create_var(shape, dtype, name=name)
    g.append_op(Operator(
        "while_grad",
        {"Carries": ["carries"], "Input": ["n", "a"], "DOut": [gi_seed.name, dx_out.name]},
        {"DX": ["di", "dx0"], "DInput": ["da"]},
        {"body_block": body.idx, "body_args": ["bi", "bx"], "grad_block": gb.idx,
         "grad_args": [gi.name, gx.name], "grad_outs": [gi.name, gx_prev.name],
         "grad_inputs": [ga.name]}))


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_while_grad_runs_the_iterations_in_reverse(trips):
    p, _, _ = while_program()
    add_while_grad(p)
    x0 = np.array([1.5, -2.0], "float32")
    a = np.array([2.0, 0.5], "float32")
    g = np.array([1.0, 3.0], "float32")
    plan = executor.compile(p, ["n", "x0", "a", "dx_out"], ["x_out", "dx0", "da"])
    x, dx0, da = plan.run({"n": np.array(trips), "x0": x0, "a": a, "dx_out": g}, Scope())
    np.testing.assert_allclose(x, x0 * a**trips, rtol=1e-6)
    np.testing.assert_allclose(dx0, g * a**trips, rtol=1e-6)  # == DOut after 0 trips
    np.testing.assert_allclose(da, g * trips * x0 * a ** max(trips - 1, 0), rtol=1e-6)
    assert da.shape == (2,) and da.dtype == np.float32


def test_while_nested_in_cond_reads_values_from_two_levels_up():
    p = Program()
    g = p.global_block()
    x = g.create_var((2,), "float32", name="x", is_data=True)
    g.create_var((), "bool", name="pred", is_data=True)
    limit = g.create_var((), "float32", name="limit", persistable=True)
    tb = p.create_block(0)
    cb = p.create_block(tb.idx)
    cx = cb.create_var((2,), "float32", name="cx")
    c_out = add_op(cb, "less_than", add_op(cb, "sum", cx), limit)
    bb = p.create_block(tb.idx)
    bx = bb.create_var((2,), "float32", name="bx")
    b_out = add_op(bb, "add", bx, x)  # x comes from block 0, through the cond
    t_out = tb.create_var((2,), "float32", name="t_out")
    tb.append_op(Operator("while", {"X": ["x"], "Input": ["limit", "x"]},
                          {"Out": [t_out.name], "Carries": []},
                          {"cond_block": cb.idx, "body_block": bb.idx,
                           "cond_args": [cx.name], "cond_out": c_out.name,
                           "body_args": [bx.name], "body_outs": [b_out.name]}))
    fb = p.create_block(0)
    f_out = add_op(fb, "neg", x)
    y = g.create_var((2,), "float32", name="y")
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": ["x", "limit"]}, {"Out": ["y"]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t_out.name], "false_outs": [f_out.name]}))
    plan = executor.compile(p, ["x", "pred"], [y.name])
    scope = Scope({"limit": np.array(10.0, "float32")})
    xv = np.array([1.0, 2.0], "float32")
    (got,) = plan.run({"x": xv, "pred": np.array(True)}, scope)
    np.testing.assert_array_equal(got, [4.0, 8.0])  # sums 3, 6, 9, then 12 >= 10
    (got,) = plan.run({"x": xv, "pred": np.array(False)}, scope)
    np.testing.assert_array_equal(got, -xv)


def test_malformed_control_flow_is_refused_at_compile_time():
    p, z = cond_program()
    cond_op = p.global_block().ops[0]
    cond_op.attrs["false_block"] = 7
    with pytest.raises(ValueError, match="false_block 7 is not a sub-block"):
        executor.compile(p, ["x", "pred"], [z.name])
    cond_op.attrs["false_block"] = cond_op.attrs["true_block"]
    inner = p.blocks[cond_op.attrs["true_block"]]
    inner.append_op(Operator("cond", {"Cond": ["pred"], "Input": []}, {"Out": []},
                             {"true_block": inner.idx, "false_block": inner.idx}))
    with pytest.raises(ValueError, match="a cycle of blocks"):
        executor.compile(p, ["x", "pred"], [z.name])
    cond_op.attrs["true_outs"] = []
    with pytest.raises(ValueError, match="true_outs names 0 values for 1 outputs"):
        executor.compile(p, ["x", "pred"], [z.name])


def test_a_predicate_with_many_elements_is_an_error():
    p, z = cond_program()
    p.global_block().vars["pred"].shape = (2,)
    plan = executor.compile(p, ["x", "pred"], [z.name])
    with pytest.raises(ValueError, match="predicate must hold exactly one element"):
        plan.run({"x": np.zeros(3, "float32"), "pred": np.array([True, False])},
                 Scope({"a": np.zeros(3, "float32")}))


# --------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy and a GPU")
def test_mlp_and_while_on_cupy():
    cp = backend.cupy
    p, out, params = mlp_program()
    x = RNG.standard_normal((2, 8)).astype("float32")
    scope = Scope({k: cp.asarray(v) for k, v in params.items()})
    (y,) = Executor(xp=cp).run(p, {"x": x}, [out], scope)
    assert isinstance(y, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(y), numpy_mlp(x, params), rtol=1e-4, atol=1e-5)
    wp, _, _ = while_program()
    add_while_grad(wp)
    feeds = {"n": cp.asarray(3), "x0": cp.ones(2, "float32"),
             "a": cp.full(2, 2.0, "float32"), "dx_out": cp.ones(2, "float32")}
    x_out, da = Executor(xp=cp).run(wp, feeds, ["x_out", "da"], Scope())
    np.testing.assert_allclose(cp.asnumpy(x_out), [8.0, 8.0])
    np.testing.assert_allclose(cp.asnumpy(da), [12.0, 12.0])


def test_a_negative_zero_attr_is_not_taken_for_the_default():
    p = Program()
    g = p.global_block()
    out = build.append(g, "full", [], {"shape": [2], "value": -0.0, "dtype": "float32"})
    (value,) = executor.compile(p, [], [out.name]).run({}, Scope())
    assert np.signbit(value).all()


# ----------------------------------------------------------------- overlap


def _side_branch_program():
    """A weight-gradient-like side branch (conv2d_grad_filter of ``a``, read only at
    the end) next to a chain with a heavy op; ``a`` dies in an elementwise op that
    would write in place while the worker still reads it."""
    p = Program()
    g = p.global_block()
    g.create_var((-1, 2, 8, 8), "float64", name="x", is_data=True)
    g.create_var((-1, 3, -1, -1), "float64", name="dy", is_data=True)
    g.create_var((3, 2, 3, 3), "float64", name="w", persistable=True)
    a = programs.op(g, "exp", {"X": "x"})
    dw = programs.op(g, "conv2d_grad_filter", {"X": a, "DOut": "dy", "Filter": "w"})
    pooled = programs.op(g, "max_pool2d", {"X": a}, {"kernel_size": 2})
    b = programs.op(g, "tanh", {"X": a})  # a's last use: in place, unless the worker reads a
    return p, [dw, pooled, b]


@pytest.fixture
def blas_threads(request):
    """BLAS on ``request.param`` threads (default 1: overlapped ops use the worker)."""
    with threadpool_limits(limits=getattr(request, "param", 1), user_api="blas"):
        yield


def _run_with_overlap(enabled, program, fetch, feed, params):
    old = codegen.overlap.enabled
    codegen.overlap.enabled = enabled
    try:
        plan = executor.compile(program, list(feed), fetch)
    finally:
        codegen.overlap.enabled = old
    return plan, plan.run(feed, Scope(dict(params)))


def test_a_side_branch_runs_on_the_worker_with_the_same_results(blas_threads):
    program, fetch = _side_branch_program()
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((4, 2, 8, 8)), "dy": rng.standard_normal((4, 3, 6, 6))}
    params = {"w": rng.standard_normal((3, 2, 3, 3))}
    serial, want = _run_with_overlap(False, program, fetch, feed, params)
    overlapped, got = _run_with_overlap(True, program, fetch, feed, params)
    assert "_submit(" not in serial.source
    assert overlapped.source.count("_submit(") == 1 and ".result()" in overlapped.source
    assert "out=" not in overlapped.source  # a stays intact while the worker reads it
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()
    np.testing.assert_allclose(got[1], np.exp(feed["x"]).reshape(4, 2, 4, 2, 4, 2).max((3, 5)))


def test_a_weight_gradient_starts_before_the_input_gradient_it_follows(blas_threads):
    """A conv filter gradient listed after the input gradient (as backward emits
    them) is moved up to where its inputs are ready, so the worker computes it
    while the input gradient runs; comments and results keep the program's order."""
    p = Program()
    g = p.global_block()
    g.create_var((-1, 2, 8, 8), "float64", name="x", is_data=True)
    g.create_var((-1, 3, 6, 6), "float64", name="dy", is_data=True)
    g.create_var((3, 2, 3, 3), "float64", name="w", persistable=True)
    dy2 = programs.op(g, "tanh", {"X": "dy"})
    dx = programs.op(g, "conv2d_grad_input", {"X": "x", "Filter": "w", "DOut": dy2})
    pooled = programs.op(g, "max_pool2d", {"X": programs.op(g, "exp", {"X": dx})},
                         {"kernel_size": 2})
    dw = programs.op(g, "conv2d_grad_filter", {"X": "x", "DOut": dy2, "Filter": "w"})
    rng = np.random.default_rng(4)
    feed = {"x": rng.standard_normal((4, 2, 8, 8)), "dy": rng.standard_normal((4, 3, 6, 6))}
    params = {"w": rng.standard_normal((3, 2, 3, 3))}
    _, want = _run_with_overlap(False, p, [pooled, dw], feed, params)
    plan, got = _run_with_overlap(True, p, [pooled, dw], feed, params)
    src = plan.source
    assert src.index("# 4: ") < src.index("_submit(") < src.index("# 1: ")
    assert src.count("_submit(") == 1
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


def test_threads_switch_often_and_blas_uses_one_thread_only_while_a_plan_uses_the_worker(
        blas_threads):
    program, fetch = _side_branch_program()
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((4, 2, 8, 8)), "dy": rng.standard_normal((4, 3, 6, 6))}
    seen = []
    old = worker.run_on_worker

    def spy(function, *args):
        seen.append(sys.getswitchinterval())
        return old(function, *args)

    before = sys.getswitchinterval()
    worker.run_on_worker = spy
    try:
        _run_with_overlap(True, program, fetch, feed, {"w": rng.standard_normal((3, 2, 3, 3))})
    finally:
        worker.run_on_worker = old
    assert seen == [pytest.approx(codegen.sharing_cores.SWITCH_INTERVAL)]
    assert sys.getswitchinterval() == before
    blas = worker.blas_libraries()  # threadpoolctl's controls (a dependency)
    threads = [lib.get_num_threads() for lib in blas]
    with codegen.sharing_cores:
        with codegen.sharing_cores:  # nested users: the outer one restores
            pass
        assert sys.getswitchinterval() == pytest.approx(codegen.sharing_cores.SWITCH_INTERVAL)
        assert [lib.get_num_threads() for lib in blas] == [1] * len(blas)
    assert sys.getswitchinterval() == before
    assert [lib.get_num_threads() for lib in blas] == threads


@pytest.mark.parametrize("blas_threads", [2], indirect=True)
def test_with_blas_on_several_threads_overlapped_ops_run_here_as_eagerly(blas_threads):
    """A product's last bits depend on BLAS's thread count, which the worker would
    change: with BLAS on two threads the plan runs its overlapped ops on the
    calling thread, BLAS left as it is, and gives the serial plan's bits."""
    program, fetch = _side_branch_program()
    rng = np.random.default_rng(6)
    feed = {"x": rng.standard_normal((4, 2, 8, 8)), "dy": rng.standard_normal((4, 3, 6, 6))}
    params = {"w": rng.standard_normal((3, 2, 3, 3))}
    assert not codegen.blas_on_one_thread()
    calls, threads = [], []
    old_worker, old_here = worker.run_on_worker, worker.run_here

    def here(function, *args):
        threads.append([lib.get_num_threads() for lib in worker.blas_libraries()])
        return old_here(function, *args)

    worker.run_on_worker = lambda *a: calls.append(a)
    worker.run_here = here
    try:
        _, want = _run_with_overlap(False, program, fetch, feed, params)
        plan, got = _run_with_overlap(True, program, fetch, feed, params)
    finally:
        worker.run_on_worker, worker.run_here = old_worker, old_here
    assert "_submit(" in plan.source and not calls
    assert threads == [[2] * len(worker.blas_libraries())]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_blas_on_one_thread_reads_every_library():
    with threadpool_limits(limits=1, user_api="blas"):
        assert codegen.blas_on_one_thread()
    with threadpool_limits(limits=2, user_api="blas"):
        assert not codegen.blas_on_one_thread()


def test_an_op_moves_up_only_past_ops_it_does_not_depend_on():
    def op(type, ins, outs):
        return Operator(type, {"X": list(ins)}, {"Out": list(outs)}, {})

    ops = [op("exp", ["x"], ["a"]),
           op("tanh", ["d"], ["b"]),  # reads the name the heavy op writes: stays above it
           op("conv2d_grad_filter", ["a"], ["d"]),
           op("exp", ["a"], ["c"]),
           op("conv2d_grad_filter", ["a"], ["e"]),  # moves up to right after op 0
           op("print", ["c"], []),
           op("max_pool2d", ["a"], ["f"]),  # never crosses the print (no outputs)
           op("conv2d_grad_filter", ["a"], ["g"]),  # crosses op 6 (not moved), not op 5
           op("exp", ["c"], ["h"]),
           op("conv2d_grad_filter", ["a"], ["i"])]  # stops under op 7, moved before it
    assert worker.heavy_ops_early(ops) == [0, 4, 1, 2, 3, 5, 7, 9, 6, 8]


@pytest.mark.parametrize("blas_threads", [1, 2], indirect=True)  # on the worker, and here
def test_an_error_on_the_worker_names_the_op(blas_threads):
    program, fetch = _side_branch_program()
    feed = {"x": np.ones((4, 2, 8, 8)), "dy": np.ones((4, 3, 5, 5))}  # dy does not fit
    with pytest.raises(ValueError) as info:
        _run_with_overlap(True, program, fetch, feed, {"w": np.ones((3, 2, 3, 3))})
    assert any("op 1 (conv2d_grad_filter)" in note for note in info.value.__notes__)


def test_the_flag_turns_overlap_off_for_new_plans():
    old = codegen.overlap.enabled
    try:
        d2s.set_flags({"inter_op_parallelism": False})
        program, fetch = _side_branch_program()
        plan = executor.compile(program, ["x", "dy"], fetch)
        assert "_submit(" not in plan.source
        d2s.set_flags({"inter_op_parallelism": True})
        plan = executor.compile(program, ["x", "dy"], fetch)
        assert "_submit(" in plan.source
    finally:
        codegen.overlap.enabled = old
