"""convert_to_static and convert_call: caching, closures, methods, readable code, logging,
and what is converted and what is left alone."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.dy2static import convert, convert_operators
from dy2stat.dy2static.convert import convert_to_static
from dy2stat.dy2static.convert_call_func import convert_call, not_to_static
from dy2stat.dy2static.passes import PASSES


def branchy(x, k=2, *, shift=0.0):
    """Doc."""
    if x > 0:
        y = x * k
    else:
        y = -x
    return y + shift


def test_the_converted_function_is_cached_and_looks_like_the_original():
    converted = convert_to_static(branchy)
    assert convert_to_static(branchy) is converted
    assert converted.__name__ == "branchy" and converted.__doc__ == "Doc."
    assert converted.__wrapped__ is branchy
    assert converted(3) == 6 and converted(3, 3, shift=1.0) == 10.0 and converted(-2) == 2


def test_code_is_readable_python():
    code = convert_to_static(branchy).code
    assert code.startswith("def branchy(x, k=2, *, shift=0.0):")
    assert "def if_true_0():" in code and "def if_false_0():" in code
    assert "_jst.convert_ifelse(x > 0, if_true_0, if_false_0" in code
    compile(code, "<converted>", "exec")  # what `.code` shows is valid source
    assert convert_to_static(branchy).__code_text__ == code


def test_the_source_map_leads_back_to_the_user_lines():
    converted = convert_to_static(branchy)
    lines = converted.code.splitlines()
    (call,) = [i for i, line in enumerate(lines, 1) if "convert_ifelse" in line]
    origin = converted.source_map.lookup(call)
    assert origin.source_line.strip() == "if x > 0:"


def make_closure(scale):
    def scaled(x):
        if x > 0:
            return x * scale
        return x

    return scaled


def test_closures_share_the_original_cells():
    first, second = make_closure(2), make_closure(10)
    assert convert_to_static(first)(3) == 6 and convert_to_static(second)(3) == 30
    assert convert.translate(first).code is not None


def test_closure_variables_changed_later_are_seen():
    scale = 1

    def scaled(x):
        return x * scale if x > 0 else x

    converted = convert_to_static(scaled)
    scale = 5
    assert converted(2) == 10 and scale == 5


class Model:
    def __init__(self):
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if x > 0:
            return self.double(x)
        return x

    def double(self, x):
        return 2 * x


def test_bound_methods_are_converted_and_stay_bound():
    model = Model()
    converted = convert_to_static(model.forward)
    assert converted(4) == 8 and model.calls == 1
    assert "if_true" in converted.__func__.code


def test_lambdas_are_converted():
    f = lambda x: x * 2 if x > 0 else -x  # noqa: E731
    converted = convert_to_static(f)
    assert converted(3) == 6 and converted(-3) == 3
    assert "convert_ifelse" in converted.code


def test_globals_are_read_live():
    global FACTOR
    FACTOR = 2
    converted = convert_to_static(uses_global)
    assert converted(1) == 2
    FACTOR = 7
    assert converted(1) == 7


def uses_global(x):
    return x * FACTOR


FACTOR = 2


def test_set_code_level_prints_the_code_after_each_pass(capsys):
    def tiny(x):
        if x:
            return 1
        return 2

    convert.set_code_level(100)
    try:
        convert_to_static(tiny)
    finally:
        convert.set_code_level(0)
    err = capsys.readouterr().err
    for index, module in enumerate(PASSES, 1):
        assert f"after pass {index} ({module.__name__.rpartition('.')[2]})" in err
    assert "retval_0" in err and "convert_ifelse" in err


def test_code_level_one_prints_only_the_first_pass(capsys):
    def tiny2(x):
        return x

    convert.set_code_level(1)
    try:
        convert_to_static(tiny2)
    finally:
        convert.set_code_level(0)
    err = capsys.readouterr().err
    assert "after pass 1 (fence)" in err and "after pass 2" not in err


def test_set_verbosity_logs_conversions(capsys):
    def tiny3(x):
        return x

    convert.set_verbosity(1)
    try:
        convert_to_static(tiny3)
    finally:
        convert.set_verbosity(0)
    assert "converted" in capsys.readouterr().err and convert.get_verbosity() == 0


# ------------------------------------------------------------------------ convert_call


def user_helper(x):
    return x + 1


def test_convert_call_converts_user_functions_and_leaves_the_rest_alone():
    assert getattr(convert_call(user_helper), "__dy2static_converted__", False)
    for fn in (len, print, math.sqrt, np.sum, d2s.matmul, d2s.nn.functional.relu, dict,
               d2s.nn.Linear, functools.reduce):
        assert convert_call(fn) is fn, fn
    layer = d2s.nn.Linear(2, 2)
    assert convert_call(layer) is layer and convert_call(layer.forward) == layer.forward


def test_convert_call_honours_not_to_static():
    @not_to_static
    def mine(x):
        return x

    @jit.not_to_static
    def theirs(x):
        return x

    for fn in (mine, theirs):  # called as written (wrapped only to explain a tensor bool)
        called = convert_call(fn)
        assert called.__wrapped__ is fn and not hasattr(called, "code") and called(3) == 3


def test_convert_call_leaves_generators_and_converted_code_alone():
    def gen():
        yield 1

    assert convert_call(gen) is gen
    converted = convert_to_static(user_helper)
    assert convert_call(converted) is converted or convert_call(converted)(1) == 2


def test_convert_call_of_partials_and_callable_objects():
    part = functools.partial(user_helper)
    assert convert_call(part).func is convert_to_static(user_helper)

    class Callable:
        def __call__(self, x):
            return x if x > 0 else -x

    obj = Callable()
    assert convert_call(obj)(-3) == 3 and convert_call(obj).__self__ is obj


class Gated(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = d2s.nn.Linear(2, 2)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        return h


def test_layers_are_called_with_their_forward_converted_and_their_hooks_run():
    d2s.seed(1)
    layer = Gated()
    seen = []
    layer.register_forward_pre_hook(lambda lay, inputs: seen.append("pre"))
    layer.register_forward_post_hook(lambda lay, inputs, out: seen.append("post"))
    x = d2s.to_tensor([[1.0, 2.0]])
    expected = layer(x).numpy()
    call = convert_call(layer)
    np.testing.assert_allclose(call(x).numpy(), expected)
    assert seen == ["pre", "post", "pre", "post"]
    assert "forward" not in layer.__dict__  # the converted forward was only borrowed


def test_to_static_functions_called_from_converted_code_are_inlined():
    inner = jit.to_static(user_helper)

    def outer(x):
        return inner(x) * 2

    assert convert_call(inner) is convert_to_static(user_helper)
    assert convert_to_static(outer)(1) == 4


def test_the_helpers_namespace_is_the_convert_operators_module():
    code = convert.translate(branchy).code
    assert code.co_freevars == ("_jst",)
    assert convert_operators.convert_ifelse.__module__.endswith("ifelse")


def test_the_helpers_name_avoids_the_users_names():
    _jst = 1  # noqa: F841

    def uses_jst_name(x):
        return _jst + (x if x > 0 else -x)

    converted = convert_to_static(uses_jst_name)
    assert "_jst_0.convert_ifelse" in converted.code and converted(-2) == 3


def recursive(n):
    if n <= 0:
        return 0
    return n + recursive(n - 1)


def test_recursion_goes_through_the_converted_function():
    assert convert_to_static(recursive)(4) == 10


class Parent:
    def value(self, x):
        return x + 1


class Child(Parent):
    def value(self, x):
        v = super().value(x)
        return v * 2 if v > 0 else v


def test_zero_argument_super_works_in_converted_methods():
    assert convert_to_static(Child().value)(1) == 4


@pytest.mark.parametrize("value", [0, 5])
def test_enable_to_static_false_runs_the_original(value):
    from tests.dy2static.corpus import if_python_number_compare

    jit.enable_to_static(False)
    try:
        static_fn = jit.to_static(if_python_number_compare)
        x = d2s.to_tensor([1.0, 2.0])
        np.testing.assert_allclose(static_fn(x, value).numpy(),
                                   if_python_number_compare(x, value).numpy())
    finally:
        jit.enable_to_static(True)


def test_globals_assigned_in_branches_and_loops_are_assigned_as_in_python():
    from tests.dy2static import corpus

    converted = convert_to_static(corpus.global_assigned_in_branch)
    x = d2s.to_tensor([1.0])
    before = corpus.CALLS
    corpus.global_assigned_in_branch(x, True)
    converted(x, True)
    converted(x, False)
    assert corpus.CALLS == before + 3 + 3 + 2
