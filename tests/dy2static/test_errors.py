"""Errors name the variable and the user's file:line, keep their type, and hide helpers."""

from __future__ import annotations

import inspect
import os
import traceback

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dy2static import convert_operators as jst
from dy2stat.dy2static.convert import convert_to_static
from dy2stat.dy2static.convert_call_func import not_to_static
from dy2stat.dy2static.errors import ConversionError
from dy2stat.static import framework

HERE = os.path.abspath(__file__)


def line_of(fn, text: str) -> int:
    """The file line of the first line of `fn` containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def trace(fn, *args):
    """Trace the converted `fn` with float32 data inputs of these shapes (ints pass through)."""
    program = d2s.static.Program()
    with framework.program_guard(program, d2s.static.Program()), framework.static_guard(True):
        static = [d2s.static.data(f"a{i}", a, "float32") if isinstance(a, list) else a
                  for i, a in enumerate(args)]
        return convert_to_static(fn)(*static)


def where(fn, text: str) -> str:
    return f"{HERE}:{line_of(fn, text)}"


# --------------------------------------------------------------------- undefined values


def defined_in_one_branch(x):
    if x.sum() > 0:
        y = x * 2
    return y + 1


def string_in_one_branch(x):
    if x.sum() > 0:
        y = "fast"
    return x if y == "fast" else -x


def test_undefined_on_the_static_path_names_variable_branch_and_lines():
    with pytest.raises(jst.UndefinedVariableError) as info:
        trace(string_in_one_branch, [3])
    message = str(info.value)
    assert "'y'" in message and "true branch" in message
    assert where(string_in_one_branch, "if x.sum() > 0") in message
    assert isinstance(info.value, UnboundLocalError)  # what Python would raise
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert f'line {line_of(string_in_one_branch, "return x if y")}' in notes  # where it is used


def test_a_tensor_one_branch_assigns_is_read_where_that_branch_ran():
    converted = d2s.jit.to_static(defined_in_one_branch)
    assert converted(d2s.to_tensor([1.0, 2.0])).numpy().tolist() == [3.0, 5.0]
    with pytest.raises(UnboundLocalError) as info:
        converted(d2s.to_tensor([-1.0, -2.0]))
    message = str(info.value)
    assert message.startswith("cannot access local variable 'y' where it is not associated")
    assert message.endswith(f"the tensor-dependent `if` at {where(defined_in_one_branch, 'if x')} "
                            "(`if x.sum() > 0:`) assigns it only in its true branch, which did "
                            "not run")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert f'line {line_of(defined_in_one_branch, "return y + 1")}' in notes  # where it is read


def test_undefined_on_the_python_path_raises_what_python_raises():
    converted = convert_to_static(defined_in_one_branch)
    with pytest.raises(UnboundLocalError, match="'y'"):
        converted(d2s.to_tensor([-1.0, -2.0]))
    with pytest.raises(UnboundLocalError, match="'y'"):
        defined_in_one_branch(d2s.to_tensor([-1.0, -2.0]))
    assert converted(d2s.to_tensor([1.0])).numpy().tolist() == [3.0]


def unused_in_other_branch(x):
    if x.sum() > 0:
        y = x * 2  # noqa: F841  (defined in one branch, never read)
    return x


def test_a_variable_defined_in_one_branch_but_not_used_is_fine():
    assert trace(unused_in_other_branch, [3]) is not None


# ------------------------------------------------------------------- branch mismatches


def dtype_mismatch(x):
    if x.sum() > 0:
        y = x
    else:
        y = x.astype("int64")
    return y


def none_vs_tensor(x):
    y = None
    if x.sum() > 0:
        y = x
    return y


def structure_mismatch(x):
    if x.sum() > 0:
        y = (x, x)
    else:
        y = (x, x, x)
    return y


def rank_mismatch(x):
    if x.sum() > 0:
        y = x
    else:
        y = x.sum()
    return y


def strings_differ(x):
    mode = "a"
    if x.sum() > 0:
        mode = "b"
    return mode


@pytest.mark.parametrize("fn, words", [
    (dtype_mismatch, ["float32[3]", "int64[3]"]),
    (none_vs_tensor, ["None"]),
    (structure_mismatch, ["tuple of 2", "tuple of 3"]),
    (rank_mismatch, ["float32[3]", "float32[]"]),
    (strings_differ, ["str"]),
])
def test_branches_that_disagree_name_the_variable_and_the_if(fn, words):
    with pytest.raises(jst.BranchMismatchError) as info:
        trace(fn, [3])
    message = str(info.value)
    assert ("'y'" in message or "'mode'" in message) and where(fn, "if x.sum() > 0") in \
        f"{info.value.filename}:{info.value.lineno}"
    assert f'File "{HERE}", line {line_of(fn, "if x.sum() > 0")}' in message
    for word in words:
        assert word in message
    assert isinstance(info.value, TypeError)


def ifexp_mismatch(x):
    return x if x.sum() > 0 else None


def test_conditional_expression_mismatch_is_reported():
    with pytest.raises(jst.BranchMismatchError, match="conditional expression"):
        trace(ifexp_mismatch, [3])


# ---------------------------------------------------------------------- loop variables


def loop_dtype_change(x, n):
    i = 0
    y = x.astype("int64")
    while i < n:
        y = y * 1.5
        i += 1
    return y


def loop_becomes_none(x, n):
    i = 0
    y = x
    while i < n:
        y = None
        i += 1
    return y


def loop_rank_change(x, n):
    i = 0
    y = x
    while i < n:
        y = y.sum()
        i += 1
    return y


@pytest.mark.parametrize("fn, words", [
    (loop_dtype_change, ["'y'", "int64", "float32"]),
    (loop_becomes_none, ["'y'", "None"]),
    (loop_rank_change, ["'y'", "rank"]),
])
def test_loop_variables_that_change_kind_name_the_variable_and_the_loop(fn, words):
    program = d2s.static.Program()
    with pytest.raises(jst.LoopVariableError) as info, \
            framework.program_guard(program, d2s.static.Program()), \
            framework.static_guard(True):
        x = d2s.static.data("x", [3], "float32")
        n = d2s.static.data("n", [], "int64")
        convert_to_static(fn)(x, n)
    message = str(info.value)
    assert f'File "{HERE}", line {line_of(fn, "while i < n")}' in message
    for word in words:
        assert word in message


def loop_python_number_becomes_float(x, n):
    i = 0
    total = 0
    while i < n:
        total = total + x.sum()
        i += 1
    return total


def test_a_python_number_carried_by_a_loop_takes_the_bodys_dtype():
    program = d2s.static.Program()
    with framework.program_guard(program, d2s.static.Program()), framework.static_guard(True):
        out = convert_to_static(loop_python_number_becomes_float)(
            d2s.static.data("x", [3], "float32"), d2s.static.data("n", [], "int64"))
    assert str(out.dtype) == "float32"
    result = d2s.static.Executor().run(program, feed={"x": np.ones(3, np.float32),
                                                      "n": np.array(2)}, fetch_list=[out])
    assert result[0] == 6.0


# ------------------------------------------------------------------ unsupported syntax


def generator(x):
    for i in range(3):
        yield x * i


async def coroutine(x):
    return x


def return_in_finally(x):
    try:
        y = x + 1  # noqa: F841
    finally:
        return x  # noqa: B012  (the construct under test)


def walrus_in_while(x):
    while (n := x.sum()) > 10:
        x = x / 2
    return x, n


@pytest.mark.parametrize("fn, text, construct", [
    (generator, "yield x * i", "yield"),
    (coroutine, "async def coroutine", "async"),
    (return_in_finally, "return x", "finally"),
    (walrus_in_while, "while (n := x.sum())", ":="),
])
def test_unsupported_syntax_is_fenced_with_file_line_source_and_advice(fn, text, construct):
    with pytest.raises(ConversionError) as info:
        convert_to_static(fn)
    error = info.value
    assert error.filename == HERE and error.lineno == line_of(fn, text)
    message = str(error)
    assert construct in message and text in message and "not_to_static" in message


def test_source_that_cannot_be_found_is_a_conversion_error():
    fn = eval("lambda x: x + 1")  # no source file
    with pytest.raises(ConversionError, match="source"):
        convert_to_static(fn)


def calls_a_generator(x):
    return sum(generator(x))


def test_calls_of_unconvertible_functions_run_them_as_they_are():
    assert convert_to_static(calls_a_generator)(2) == calls_a_generator(2)


# ------------------------------------------------------- errors while running the code


def shape_error_in_branch(x):
    if x.sum() > 0:
        y = x @ d2s.ones([5, 5])
    else:
        y = x
    return y


def shape_error(x):
    y = x * 2
    y = x @ d2s.ones([5, 5])
    return y


def test_errors_in_converted_code_keep_their_type_and_point_at_the_user_line():
    with pytest.raises(ValueError, match="matmul") as info:
        trace(shape_error, [2, 3])
    notes = "\n".join(info.value.__notes__)
    line = line_of(shape_error, "y = x @ d2s.ones")
    assert f'File "{HERE}", line {line}' in notes
    assert f"> {line:4d} |     y = x @ d2s.ones([5, 5])" in notes
    frames = traceback.extract_tb(info.value.__traceback__)
    helpers = [f for f in frames if f"dy2stat{os.sep}dy2static{os.sep}" in f.filename
               and not f.filename.endswith("convert.py")]
    assert not helpers, helpers  # the helpers' frames are hidden
    user = [f for f in frames if f.filename == HERE]
    assert any(f.lineno == line for f in user)


def test_an_error_in_a_tensor_branch_is_raised_by_the_calls_that_take_it():
    converted = d2s.jit.to_static(shape_error_in_branch)
    np.testing.assert_array_equal(converted(-d2s.ones([2, 3])).numpy(), -np.ones([2, 3]))
    with pytest.raises(ValueError, match="matmul") as eager:
        shape_error_in_branch(d2s.ones([2, 3]))
    with pytest.raises(ValueError, match="matmul") as info:
        converted(d2s.ones([2, 3]))
    assert str(info.value) == str(eager.value)
    notes = "\n".join(info.value.__notes__)
    line = line_of(shape_error_in_branch, "y = x @ d2s.ones")
    assert f'File "{HERE}", line {line}' in notes  # the excerpt, as when raised at once
    assert f"> {line:4d} |         y = x @ d2s.ones([5, 5])" in notes


def eager_error(x):
    if x.sum() > 0:
        return x / undefined_name  # noqa: F821
    return x


def test_errors_on_the_python_path_are_the_originals():
    converted = convert_to_static(eager_error)
    with pytest.raises(NameError, match="undefined_name") as info:
        converted(d2s.to_tensor([1.0]))
    assert f"line {line_of(eager_error, 'undefined_name')}" in "\n".join(info.value.__notes__)


@not_to_static
def python_only(x):
    if x.sum() > 0:
        return x
    return -x


def calls_python_only(x):
    return python_only(x)


def test_a_tensor_used_as_a_bool_where_conversion_cannot_reach_is_a_clear_error():
    with pytest.raises(TypeError, match="to_static"):
        trace(calls_python_only, [3])


def returns_none_on_one_path(x):
    if x.sum() > 100:
        return
    return x + 1


def test_returning_none_on_one_tensor_path_names_the_return_value():
    with pytest.raises(jst.BranchMismatchError) as info:
        trace(returns_none_on_one_path, [3])
    message = str(info.value)
    assert "the return value" in message and "None" in message
    assert "must return one on every path" in message
    assert info.value.filename == HERE


def returns_maybe_undefined(x):
    if x.sum() > 0:
        y = x * 2
    return y


def test_returning_a_variable_defined_in_one_branch_raises_where_that_branch_did_not_run():
    converted = d2s.jit.to_static(returns_maybe_undefined)
    assert converted(d2s.to_tensor([1.0])).numpy().tolist() == [2.0]
    with pytest.raises(UnboundLocalError, match="'y'.*only in its true branch"):
        converted(d2s.to_tensor([-1.0]))
    with pytest.raises(UnboundLocalError, match="'y'"):
        convert_to_static(returns_maybe_undefined)(d2s.to_tensor([-1.0]))
