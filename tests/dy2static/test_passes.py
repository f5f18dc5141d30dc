"""Each pass on its own terms: the ordered list, what each one writes, and equivalence of
every prefix of the pipeline (completed with the passes that control flow needs)."""

from __future__ import annotations

import pytest

from dy2stat.dy2static import convert
from dy2stat.dy2static.passes import (
    PASSES,
    break_continue,
    control_flow,
    nonlocal_bindings,
    return_statements,
)
from tests.dy2static.corpus import CASES
from tests.dy2static.test_corpus import as_numpy, assert_same, eager

# Without these the converted code does not run: control flow needs breaks, continues and
# early returns gone, and its nonlocals bound.
REQUIRED = (break_continue, return_statements, control_flow, nonlocal_bindings)


def pipeline(k: int) -> tuple:
    prefix = PASSES[:k]
    return (*prefix, *(p for p in PASSES if p in REQUIRED and p not in prefix))


def code_after(fn, passes) -> str:
    return convert.translate(fn, passes).source


def test_every_pass_is_a_module_with_transform():
    assert len(set(PASSES)) == len(PASSES)
    for module in PASSES:
        assert callable(module.transform), module.__name__
    names = [m.__name__.rpartition(".")[2] for m in PASSES]
    assert names[0] == "fence"
    assert names.index("break_continue") < names.index("return_statements") \
        < names.index("control_flow") < names.index("call_trees")


def distinct_prefixes() -> list[int]:
    """The prefix lengths whose completed pipelines differ (the full one is test_corpus's)."""
    seen, out = {pipeline(len(PASSES))}, []
    for k in range(len(PASSES)):
        if pipeline(k) not in seen:
            seen.add(pipeline(k))
            out.append(k)
    return out


@pytest.mark.parametrize("k", distinct_prefixes())
def test_every_prefix_of_the_pipeline_keeps_behaviour(k):
    passes = pipeline(k)
    for case in CASES:
        converted = convert.instantiate(convert.translate(case.fn, passes), case.fn)
        for args in case.inputs:
            expected = as_numpy(case.fn(*eager(args)))
            assert_same(as_numpy(converted(*eager(args))), expected, case.rtol)


def loop_with_jumps(xs):
    total = 0
    for x in xs:
        if x < 0:
            continue
        if x > 10:
            break
        total += x
    else:
        total = -1
    return total


def test_break_and_continue_become_flags():
    code = code_after(loop_with_jumps, (break_continue,))
    assert "break" not in code.replace("break_0", "") and "continue" not in \
        code.replace("continue_0", "")
    assert "continue_0 = True" in code and "break_0 = True" in code
    assert "if not break_0:\n        total = -1" in code  # the else clause moved after the loop
    assert convert.instantiate(convert.translate(loop_with_jumps, pipeline(2)),
                               loop_with_jumps)([1, -2, 3, 20, 5]) == 4


def while_with_break(n):
    i = 0
    while i < n:
        if i == 3:
            break
        i += 1
    return i


def test_break_is_folded_into_the_while_test():
    code = code_after(while_with_break, (break_continue,))
    assert "while not break_0 and i < n:" in code


def early_returns(x):
    if x > 0:
        return 1
    for i in range(x, 0):
        if i == -2:
            return i
    return 0


def test_early_returns_become_one_exit():
    code = code_after(early_returns, (break_continue, return_statements))
    assert code.count("return ") == 1 and code.rstrip().endswith("return retval_0")
    assert "do_return_0 = False" in code and "retval_0 = _jst.UndefinedReturnValue()" in code
    converted = convert.instantiate(convert.translate(early_returns, pipeline(3)), early_returns)
    assert [converted(v) for v in (5, -5, -1)] == [early_returns(v) for v in (5, -5, -1)]


def falls_off(x):
    if x > 0:
        return x


def test_a_function_that_may_fall_off_its_end_returns_none():
    code = code_after(falls_off, (break_continue, return_statements))
    assert "retval_0 = None" in code
    converted = convert.convert_to_static(falls_off)
    assert converted(3) == 3 and converted(-3) is None


def single_final_return(x):
    y = x + 1
    return y


def test_a_function_with_one_final_return_is_left_alone():
    assert "retval" not in code_after(single_final_return, PASSES)


def logic(a, b, c):
    return (a and b) or not c, a < b <= c


def test_logical_expressions_become_lazy_calls():
    code = code_after(logic, PASSES)
    assert "_jst.convert_logical_or(lambda: _jst.convert_logical_and(lambda: a, lambda: b)" \
        in code
    assert "_jst.convert_logical_not(c)" in code
    assert "_jst.convert_compare(a, '<', lambda: b, '<=', lambda: c)" in code


def ternary(x):
    return x if x > 0 else -x


def test_conditional_expressions_become_cond_calls():
    assert "_jst.convert_ifelse(x > 0, lambda: x, lambda: -x)" in code_after(ternary, PASSES)


def builtins_user(x, xs):
    print(len(xs), int(x), float(x), bool(x))
    assert x > 0, "positive"
    for _i, _v in enumerate(zip(range(3), xs)):
        pass
    return x.shape


def test_builtins_become_helpers():
    code = code_after(builtins_user, PASSES)
    for text in ("_jst.convert_print(", "_jst.convert_len(xs)", "_jst.convert_cast(x, 'int')",
                 "_jst.convert_cast(x, 'float')", "_jst.convert_cast(x, 'bool')",
                 "_jst.convert_assert(x > 0, lambda: 'positive')",
                 "_jst.convert_enumerate(_jst.convert_zip(_jst.convert_range(3), xs))",
                 "_jst.convert_shape(x)"):
        assert text in code, text


def shadows_len(xs):
    len = 3  # noqa: F841  (a local named like a builtin stays the user's)
    return len


def test_builtins_shadowed_by_the_user_are_left_alone():
    assert "convert_len" not in code_after(shadows_len, PASSES)


def calls(f, xs):
    return f(xs.append(1), key=sorted(xs))


def test_calls_go_through_convert_call_but_helpers_do_not():
    code = code_after(calls, PASSES)
    assert "_jst.convert_call(f)(_jst.convert_call(xs.append)(1), key=" \
        "_jst.convert_call(sorted)(xs))" in code
    assert "convert_call(_jst" not in code_after(builtins_user, PASSES)


def branchy(x):
    if x > 0:
        y = x
        tmp = 1  # noqa: F841  (a branch-local temporary)
    else:
        y = -x
    return y


def test_if_statements_become_closures_with_state_functions():
    code = code_after(branchy, PASSES)
    assert "def if_true_0():\n        nonlocal y" in code
    assert "def get_state_0():\n        return (y,)" in code
    assert "_jst.convert_ifelse(x > 0, if_true_0, if_false_0, get_state_0, set_state_0, " \
        "('y',))" in code
    assert "nonlocal tmp" not in code and "nonlocal y, tmp" not in code  # a branch local


def one_branch(x):
    if x > 0:
        y = x
    return y


def test_maybe_undefined_state_is_bound_to_undefined():
    assert "y = _jst.Undefined('y')" in code_after(one_branch, PASSES)


def reassigned(x):
    if x > 0:
        h = 1
    else:
        h = 2
    if x > 5:
        h = 3
    else:
        h = 4
    return h


def test_nonlocal_bindings_bind_names_an_earlier_conversion_moved():
    converted = convert.convert_to_static(reassigned)
    assert "h = _jst.Undefined('h')" in converted.code
    assert [converted(v) for v in (0, 3, 9)] == [4, 4, 3]
