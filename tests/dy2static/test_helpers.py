"""The runtime helpers on their own: the Python path is Python; static values build ops."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dy2static import convert_operators as jst
from dy2stat.dy2static.convert import convert_to_static
from dy2stat.dy2static.sequences import StaticEnumerate, StaticRange, StaticZip
from dy2stat.static import framework


@pytest.fixture
def program():
    """Build into a fresh program in static mode."""
    main = d2s.static.Program()
    with framework.program_guard(main, d2s.static.Program()), framework.static_guard(True):
        yield main


def op_types(program) -> list[str]:
    return [op.type for op in program.all_ops()]


def run(program, fetch, **feed):
    return d2s.static.Executor().run(program, feed=feed, fetch_list=fetch)


# ------------------------------------------------------------------------ if / else


def test_ifelse_python_path_runs_one_branch():
    ran = []
    jst.convert_ifelse(True, lambda: ran.append("t"), lambda: ran.append("f"), None, None, ())
    jst.convert_ifelse(0, lambda: ran.append("t"), lambda: ran.append("f"), None, None, ())
    assert ran == ["t", "f"]
    assert jst.convert_ifelse(d2s.to_tensor(1.0) > 0, lambda: "yes", lambda: "no") == "yes"


def test_ifelse_static_path_builds_a_cond_and_binds_the_state(program):
    x = d2s.static.data("x", [2], "float32")
    state = {"y": x}

    def true_fn():
        state["y"] = state["y"] * 2

    def false_fn():
        state["y"] = state["y"] - 1

    jst.convert_ifelse(x.sum() > 0, true_fn, false_fn, lambda: (state["y"],),
                       lambda v: state.update(y=v[0]), ("y",))
    assert "cond" in op_types(program)
    (out,) = run(program, [state["y"]], x=np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(out, [2.0, 4.0])
    (out,) = run(program, [state["y"]], x=np.array([-1.0, -2.0], np.float32))
    np.testing.assert_allclose(out, [-2.0, -3.0])


def test_ifelse_of_numbers_promotes_to_the_tensor_dtype(program):
    x = d2s.static.data("x", [], "float32")
    value = jst.convert_ifelse(x > 0, lambda: 1, lambda: x * 2.5)
    assert str(value.dtype) == "float32"
    assert run(program, [value], x=np.array(-2.0, np.float32))[0] == -5.0


def test_ifelse_with_a_number_predicate_tensor_tests_nonzero(program):
    x = d2s.static.data("x", [], "float32")
    value = jst.convert_ifelse(x, lambda: x + 1, lambda: x - 1)
    assert run(program, [value], x=np.array(0.0, np.float32))[0] == -1.0
    assert run(program, [value], x=np.array(3.0, np.float32))[0] == 4.0


# -------------------------------------------------------------------------- loops


def test_while_python_path_is_a_python_loop():
    state = {"i": 0}

    def body():
        state["i"] += 1

    jst.convert_while_loop(lambda: state["i"] < 4, body, None, None, ())
    assert state["i"] == 4


def test_while_turns_static_when_its_test_does(program):
    n = d2s.static.data("n", [], "int64")
    state = {"i": 0, "s": 0.0}

    def body():
        state["s"] = state["s"] + 1.5
        state["i"] = state["i"] + 1

    jst.convert_while_loop(lambda: state["i"] < n, body, lambda: (state["i"], state["s"]),
                           lambda v: state.update(i=v[0], s=v[1]), ("i", "s"))
    assert op_types(program).count("while") == 1
    i, s = run(program, [state["i"], state["s"]], n=np.array(3))
    assert i == 3 and s == 4.5


def test_for_over_a_python_list_is_a_python_loop():
    seen = []
    jst.convert_for_loop([1, 2, 3], None, seen.append, None, None, ())
    assert seen == [1, 2, 3]


def test_for_stops_on_its_extra_test():
    seen = []
    jst.convert_for_loop(range(10), lambda: len(seen) < 3, seen.append, None, None, ())
    assert seen == [0, 1, 2]


def test_for_continues_as_a_while_op_when_a_break_turns_static(program):
    x = d2s.static.data("x", [], "float32")
    state = {"s": x * 0, "stop": False}

    def body(i):
        state["s"] = state["s"] + x
        state["stop"] = state["s"] > 10  # a tensor: the rest of range(100) is a while op

    jst.convert_for_loop(range(100), lambda: jst.convert_logical_not(state["stop"]), body,
                         lambda: (state["s"], state["stop"]),
                         lambda v: state.update(s=v[0], stop=v[1]), ("s", "stop"))
    assert op_types(program).count("while") == 1
    assert run(program, [state["s"]], x=np.array(3.0, np.float32))[0] == 12.0
    assert run(program, [state["s"]], x=np.array(20.0, np.float32))[0] == 20.0


def test_range_enumerate_zip_are_builtins_for_python_values(program):
    assert isinstance(jst.convert_range(3), builtins.range)
    assert list(jst.convert_enumerate([5, 6])) == [(0, 5), (1, 6)]
    assert list(jst.convert_zip([1], [2])) == [(1, 2)]
    n = d2s.static.data("n", [], "int64")
    assert isinstance(jst.convert_range(n), StaticRange)
    assert isinstance(jst.convert_enumerate(n), StaticEnumerate)
    assert isinstance(jst.convert_zip([1, 2], n), StaticZip)


# ------------------------------------------------------------------------- logical


def test_logical_helpers_short_circuit_python_values():
    calls = []

    def probe(v):
        calls.append(v)
        return v

    assert jst.convert_logical_and(lambda: probe(0), lambda: probe(1)) == 0
    assert jst.convert_logical_or(lambda: probe(2), lambda: probe(3)) == 2
    assert jst.convert_logical_and(lambda: probe(4), lambda: probe(5), lambda: probe(6)) == 6
    assert calls == [0, 2, 4, 5, 6]
    assert jst.convert_logical_not([]) is True
    assert jst.convert_compare(1, "<", lambda: 2, "<", lambda: probe(0)) is False
    assert jst.convert_compare(3, "<", lambda: 2, "<", lambda: probe("never")) is False
    assert "never" not in calls


def test_logical_helpers_build_bool_ops_for_static_values(program):
    x = d2s.static.data("x", [], "float32")
    both = jst.convert_logical_and(lambda: x > 0, lambda: x < 10)
    either = jst.convert_logical_or(lambda: x < 0, lambda: x > 2)
    neither = jst.convert_logical_not(x)
    chained = jst.convert_compare(0, "<", lambda: x, "<", lambda: 5)
    out = run(program, [both, either, neither, chained], x=np.array(3.0, np.float32))
    assert [bool(v) for v in out] == [True, True, False, True]
    # A Python operand after a static one that decides the result is the result.
    assert jst.convert_logical_or(lambda: x < 0, lambda: True) is True
    assert jst.convert_logical_and(lambda: x < 0, lambda: 0) == 0


# ----------------------------------------------------------------- len, shape, casts


def test_len_and_shape_of_static_tensors(program):
    x = d2s.static.data("x", [-1, 3], "float32")
    assert jst.convert_len([1, 2]) == 2 and jst.convert_shape(np.zeros((2, 5))) == (2, 5)
    batch, width = jst.convert_shape(x)
    assert width == 3 and isinstance(batch, d2s.static.Variable) and batch.shape == []
    n = jst.convert_len(x)
    assert isinstance(n, d2s.static.Variable)
    out = run(program, [batch, n], x=np.zeros((4, 3), np.float32))
    assert list(out) == [4, 4]
    known = d2s.static.data("k", [2, 3], "float32")
    assert jst.convert_len(known) == 2 and jst.convert_shape(known) == [2, 3]


def test_casts(program):
    assert jst.convert_cast(2.7, "int") == 2 and jst.convert_cast(0, "bool") is False
    x = d2s.static.data("x", [], "float32")
    i, f, b = (jst.convert_cast(x, k) for k in ("int", "float", "bool"))
    assert [str(v.dtype) for v in (i, f, b)] == ["int64", "float32", "bool"]


# ------------------------------------------------------------------ print and assert


def test_print_and_assert_on_python_values(capsys):
    jst.convert_print("a", 1, sep="-")
    assert capsys.readouterr().out == "a-1\n"
    jst.convert_assert(True, lambda: "never")
    with pytest.raises(AssertionError, match="boom"):
        jst.convert_assert(0, lambda: "boom")
    with pytest.raises(AssertionError):
        jst.convert_assert(False)


# ----------------------------------------------------------------------- undefined


def test_undefined_raises_what_python_raises_on_use():
    y = jst.Undefined("y")
    for use in (lambda: y + 1, lambda: bool(y), lambda: y.shape, lambda: y[0], lambda: len(y),
                lambda: y(), lambda: -y, lambda: y == 1, lambda: list(y)):
        with pytest.raises(UnboundLocalError, match="'y'"):
            use()
    assert repr(y) == "<undefined 'y'>" and not hasattr(y, "__array_interface__")
    assert jst.is_undefined(y) and jst.is_undefined(jst.UndefinedReturnValue())
    assert not jst.is_undefined(None)


def test_undefined_with_a_reason_is_a_dy2static_error():
    y = jst.Undefined("y", "the `if` at f.py:3 assigns it only in its true branch",
                      ("f.py", 3, "if x:"))
    with pytest.raises(jst.UndefinedVariableError) as info:
        y * 2
    assert info.value.filename == "f.py" and info.value.lineno == 3
    assert "'y'" in str(info.value) and "true branch" in str(info.value)


# --------------------------------------------------------------------- tensor arrays


def test_tensor_array_methods(program):
    x = d2s.static.data("x", [2], "float32")
    array = jst.TensorArray.empty([2], "float32")
    array.append(x)
    array.append(x * 2)
    last = array.pop()
    assert array.length() == 1 or isinstance(array.length(), d2s.static.Variable)
    stacked = array.stack()
    (out, popped) = run(program, [stacked, last], x=np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(out, [[1.0, 2.0]])
    np.testing.assert_allclose(popped, [2.0, 4.0])
    with pytest.raises(TypeError, match="tensor array"):
        list(array)


def collect(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return d2s.stack(out), len(out)


def test_lists_appended_in_tensor_loops_become_tensor_arrays(program):
    x = d2s.static.data("x", [2], "float32")
    n = d2s.static.data("n", [], "int64")
    stacked, length = convert_to_static(collect)(x, n)
    assert "while" in op_types(program)
    out, k = run(program, [stacked, length], x=np.array([1.0, 2.0], np.float32),
                 n=np.array(3))
    np.testing.assert_allclose(out, [[0, 0], [1, 2], [2, 4]])
    assert k == 3


def side_effects_only(x):
    for row in x:
        print(row)
    if x.sum() > 0:
        print("positive")
    return x


@pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")
def test_statements_without_state_still_build_ops(program):
    x = d2s.static.data("x", [2, 3], "float32")
    convert_to_static(side_effects_only)(x)
    assert {"while", "cond"} <= set(op_types(program))
