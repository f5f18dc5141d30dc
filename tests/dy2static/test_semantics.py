"""Converted code keeps the eager code's semantics.

Each test runs a function eagerly and converted (``d2s.jit.to_static``) on the same inputs
and compares what comes out: values, dtypes, ``stop_gradient``, and the gradients of the
float inputs that need one.
"""

import contextlib
import functools
import sys

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dy2static.ifelse import UncatchableBranchError
from dy2stat.static import nest


def _leaf_copies(args):
    """Fresh leaves for each run, so that each run's gradients are its own."""
    out = []
    for a in args:
        if isinstance(a, d2s.Tensor):
            c = d2s.to_tensor(a.numpy(), dtype=str(a.dtype), stop_gradient=a.stop_gradient)
            out.append(c)
        else:
            out.append(a)
    return out


def _describe(value):
    if isinstance(value, d2s.Tensor):
        return ("tensor", str(value.dtype), value.stop_gradient)
    return (type(value).__name__,)


def check(fn, *args, converted=None):
    """The converted `fn` gives what `fn` gives: values, dtypes, stop_gradient, gradients
    (or raises what it raises)."""
    converted = converted if converted is not None else d2s.jit.to_static(fn)
    eager_args, static_args = _leaf_copies(args), _leaf_copies(args)
    try:
        expected = fn(*eager_args)
    except Exception as e:
        with pytest.raises(type(e)):
            converted(*static_args)
        return None
    actual = converted(*static_args)
    flat_e, flat_a = nest.flatten(expected), nest.flatten(actual)
    assert [_describe(v) for v in flat_a] == [_describe(v) for v in flat_e]
    for e, a in zip(flat_e, flat_a):
        if isinstance(e, d2s.Tensor):
            np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6)
        else:
            assert a == e
    _check_gradients(flat_e, flat_a, eager_args, static_args)
    return actual


def _check_gradients(flat_e, flat_a, eager_args, static_args):
    pairs = [(e, a) for e, a in zip(flat_e, flat_a)
             if isinstance(e, d2s.Tensor) and not e.stop_gradient]
    if not pairs:
        return
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(e.shape).astype(str(e.dtype)) for e, _ in pairs]
    sum(((e * d2s.to_tensor(w)).sum() for (e, _), w in zip(pairs, weights))).backward()
    sum(((a * d2s.to_tensor(w)).sum() for (_, a), w in zip(pairs, weights))).backward()
    for e, a in zip(eager_args, static_args):
        if isinstance(e, d2s.Tensor) and not e.stop_gradient:
            assert (a.grad is None) == (e.grad is None)
            if e.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-5,
                                           atol=1e-6)


def tensor(values, dtype="float32", stop_gradient=False):
    return d2s.to_tensor(np.asarray(values, dtype=dtype), stop_gradient=stop_gradient)


# ------------------------------------------------------ return counts after its value


def boom(x):
    raise ValueError("boom")


def checked_positive(x, shift):
    if shift > 1:
        raise ValueError("too far")
    return x - shift


def return_of_a_call_that_raises(x):
    try:
        return boom(x)
    except ValueError:
        pass
    return x + 100


def return_in_a_with_that_suppresses(x):
    with contextlib.suppress(ValueError):
        return boom(x)
    return x * 3


def return_in_a_loop_that_retries(x):
    for shift in [3, 2, 1]:
        try:
            return checked_positive(x, shift)
        except ValueError:
            continue
    return x


def return_in_nested_try_finally(x):
    cleanups = []
    try:
        try:
            return boom(x)
        finally:
            cleanups.append("inner")
    except ValueError:
        cleanups.append("outer")
    return x + len(cleanups)


def return_in_a_tensor_branch_of_a_try(x):
    try:
        if x.sum() > 0:
            return boom(x)
        return x - 1
    except ValueError:
        pass
    return x * 2


@pytest.mark.parametrize("fn", [
    return_of_a_call_that_raises, return_in_a_with_that_suppresses,
    return_in_a_loop_that_retries, return_in_nested_try_finally,
])
def test_a_return_whose_value_raises_has_not_returned(fn):
    check(fn, tensor([1.0, 2.0]))


def test_a_tensor_branch_that_raises_inside_a_try_is_refused():
    # Eagerly the handler runs on the calls that take the branch only; the program takes
    # it when it runs, where the handler cannot catch: converting it caught the error
    # while tracing and returned x * 2 on every call.
    with pytest.raises(UncatchableBranchError, match="raises ValueError.*inside the `try`"):
        d2s.jit.to_static(return_in_a_tensor_branch_of_a_try)(tensor([-1.0, -2.0]))


# ------------------------------------------- and/or short-circuit after a static operand


def or_in_an_if(x, a=None):
    if x.mean() > 1 or a is None or a > 1:
        return x + 1
    return x - 1


def and_in_an_if(x, a=None):
    if x.mean() > 1 and a is not None and a > 1:
        return x + 1
    return x - 1


def not_of_an_and(x, a=None):
    if not (x.mean() > 1 and a is not None and a.sum() > 1):
        return x * 2
    return x


def chained_comparison_stops_at_a_false_python_result(x, a=None):
    limit = 5
    if x.mean() < 3 > limit < a:
        return x + 1
    return x - 1


def or_in_a_conditional_expression(x, a=None):
    return x + 1 if x.mean() > 1 or a is None or a > 1 else x - 1


def or_as_a_plain_value(x, a=None):
    keep = x.mean() > 1 or a is None or a > 1
    return x * keep


def and_in_a_while_test(x, a=None):
    i = d2s.to_tensor(0.0)
    while i < x.sum() and a is not None and a.sum() > i:
        i = i + 1
    return x + i


def python_operand_that_decides_first(x, a=None):
    if a is None or x.mean() > 1 or a > 1:
        return x + 1
    return x - 1


SHORT_CIRCUITS = [or_in_an_if, and_in_an_if, not_of_an_and,
                  chained_comparison_stops_at_a_false_python_result,
                  or_in_a_conditional_expression, or_as_a_plain_value, and_in_a_while_test,
                  python_operand_that_decides_first]


@pytest.mark.parametrize("fn", SHORT_CIRCUITS)
@pytest.mark.parametrize("values", [[0.5, 1.0], [2.0, 3.0]])
def test_python_operands_after_a_tensor_short_circuit_as_in_python(fn, values):
    check(fn, tensor(values))


def test_static_operands_still_combine_into_a_bool_tensor():
    def both_tensors(x):
        if x.mean() > 1 or x.max() > 2.5:
            return x + 1
        return x - 1

    for values in ([0.5, 1.0], [2.0, 3.0], [0.0, 2.9]):
        check(both_tensors, tensor(values))


# ------------------------------------------------------------------------ no_grad


def no_grad_block(x):
    with d2s.no_grad():
        y = x * 2
    return y


def no_grad_for_part_of_the_forward(x):
    with d2s.no_grad():
        scale = x * 2 + 1
    return scale * x + x


def no_grad_then_enable_grad(x):
    with d2s.no_grad():
        frozen = x * 2
        with d2s.enable_grad():
            live = x * 3
    return frozen, live, frozen * live


def no_grad_around_a_tensor_if(x):
    with d2s.no_grad():
        if x.sum() > 0:
            y = x * 2
        else:
            y = x * 3
    return y, y * x


def no_grad_inside_a_tensor_if(x):
    if x.sum() > 0:
        with d2s.no_grad():
            y = x * 2
    else:
        y = x * 3
    return y * x


def no_grad_around_a_tensor_loop(x):
    i = d2s.to_tensor(0)
    s = x
    with d2s.no_grad():
        while i < 3:
            s = s * 2
            i += 1
    return s, s + x


def no_grad_inside_a_tensor_loop(x, n):
    i = d2s.to_tensor(0)
    s = x
    while i < n:
        with d2s.no_grad():
            s = s * 2
        s = s + x
        i += 1
    return s


def stop_gradient_is_seen_inside(x):
    with d2s.no_grad():
        y = x * 2
    z = x * 2
    return y + z, y.stop_gradient, z.stop_gradient


@d2s.no_grad()
def frozen_helper(x):
    return x * 4


def calls_a_no_grad_decorated_helper(x):
    return frozen_helper(x) * x + x


@pytest.mark.parametrize("fn", [
    no_grad_block, no_grad_for_part_of_the_forward, no_grad_then_enable_grad,
    no_grad_around_a_tensor_if, no_grad_inside_a_tensor_if, no_grad_around_a_tensor_loop,
    stop_gradient_is_seen_inside, calls_a_no_grad_decorated_helper,
])
@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, -3.0]])
def test_no_grad_inside_converted_code_stops_gradients(fn, values):
    check(fn, tensor(values))


@pytest.mark.parametrize("n", [0, 1, 3])
def test_no_grad_inside_a_loop_body_stops_the_gradient_of_that_part(n):
    check(no_grad_inside_a_tensor_loop, tensor([1.0, 2.0]), tensor(n, "int64", True))


def replaced_under_no_grad_in_a_loop(x, y, n):
    """`y` needs a gradient only if the loop runs zero times: each iteration replaces it
    with a value computed without one (the last iteration's is what comes out)."""
    i = d2s.to_tensor(0)
    while i < n:
        i += 1
        with d2s.no_grad():
            t = x * 1.5
        y = t - t.abs() + y.detach()
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_value_a_loop_that_ran_replaced_under_no_grad_needs_no_gradient(n):
    check(replaced_under_no_grad_in_a_loop, tensor([1.0, -2.0]), tensor([0.5, 3.0]),
          tensor(n, "int64", True))


def test_no_grad_around_the_call_does_not_change_the_traced_program():
    converted = d2s.jit.to_static(no_grad_for_part_of_the_forward)
    x = tensor([1.0, 2.0])
    with d2s.no_grad():
        assert converted(x).stop_gradient  # the first call traces
    check(no_grad_for_part_of_the_forward, x, converted=converted)


class _PartlyFrozen(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.encoder = d2s.nn.Linear(3, 4)
        self.head = d2s.nn.Linear(4, 1)

    def forward(self, x):
        with d2s.no_grad():
            h = self.encoder(x)
        if h.sum() > 0:
            h = h * 2
        return self.head(h)


def test_a_layer_with_a_no_grad_part_trains_only_the_rest():
    d2s.seed(0)
    eager = _PartlyFrozen()
    converted = _PartlyFrozen()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    x = d2s.to_tensor(np.random.default_rng(1).standard_normal((5, 3)).astype("float32"))
    for layer in (eager, converted):
        layer(x).sum().backward()
    for (name, p), (_, q) in zip(eager.named_parameters(), converted.named_parameters()):
        if name.startswith("encoder"):
            assert p.grad is None and q.grad is None
        else:
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5)


def test_no_grad_in_a_static_program_stops_static_gradients():
    program = d2s.static.Program()
    with d2s.static.program_guard(program):
        d2s.enable_static()
        try:
            x = d2s.static.data("x", [2], "float32")
            x.stop_gradient = False
            with d2s.no_grad():
                frozen = x * 2
            out = frozen * x
            (grad,) = d2s.static.gradients(out, x)
            assert d2s.static.gradients(frozen, x) == [None]
        finally:
            d2s.disable_static()
    (value,) = d2s.static.Executor().run(program, feed={"x": np.array([1.0, 2.0], "float32")},
                                         fetch_list=[grad])
    np.testing.assert_allclose(value, [2.0, 4.0])  # d(2x' * x)/dx with x' constant


# ------------------------------------------------------- decorators keep their effect


def times_ten(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 10

    return wrapper


def scale_by(factor):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args) * factor

        return wrapper

    return decorate


def plus(amount):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args) + amount

        return wrapper

    return decorate


def flip_if_negative(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        y = fn(*args)
        if y.sum() < 0:  # the decorator itself branches on a tensor
            return -y
        return y

    return wrapper


class Tripled:
    """A decorator written as a class."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __call__(self, x):
        return self.fn(x) * 3


@times_ten
def decorated(x):
    if x.mean() > 0:
        return x + 1
    return x - 1


@scale_by(0.5)
def decorated_with_arguments(x):
    return x * x


@plus(1)
@scale_by(10)
def stacked(x):
    if x.sum() > 0:
        return x
    return x * 2


@flip_if_negative
def branchy_decorator(x):
    return x * 3


@Tripled
def class_decorated(x):
    return x + 2 if x.mean() > 0 else x - 2


@d2s.no_grad()
def frozen_branchy(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def calls_decorated_helpers(x):
    return (decorated(x) + decorated_with_arguments(x) + stacked(x) + branchy_decorator(x)
            + class_decorated(x) + frozen_branchy(x) * x)


@pytest.mark.parametrize("fn", [
    decorated, decorated_with_arguments, stacked, branchy_decorator, class_decorated,
    frozen_branchy, calls_decorated_helpers,
])
@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, -3.0]])
def test_a_decorator_keeps_its_effect(fn, values):
    check(fn, tensor(values))


class _DecoratedLayer(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = d2s.nn.Linear(2, 2)

    @scale_by(2.0)
    def forward(self, x):
        return self.double_if_positive(self.linear(x))

    @flip_if_negative
    def double_if_positive(self, h):
        if h.sum() > 0:
            return h * 2
        return h


@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, -3.0]])
def test_decorators_on_methods_of_a_layer_keep_their_effect(values):
    d2s.seed(0)
    layer = _DecoratedLayer()
    x = tensor([values])
    expected = layer(x)
    expected.sum().backward()
    expected_grads = [p.grad.numpy() for p in layer.parameters()]
    layer.clear_gradients()
    d2s.jit.to_static(layer)
    actual = layer(x)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)
    actual.sum().backward()
    for p, g in zip(layer.parameters(), expected_grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5)



def test_a_sublayer_with_a_decorated_forward_keeps_its_decorator():
    d2s.seed(0)
    inner = _DecoratedLayer()

    def outer(x):
        return inner(x) + 1

    for values in ([[1.0, 2.0]], [[-1.0, -3.0]]):
        check(outer, tensor(values))


def test_the_code_of_a_decorated_function_is_its_wrapper():
    code = d2s.jit.to_static(decorated).code
    assert code.startswith("def wrapper(*args, **kwargs):")
    assert "_jst.convert_call(fn)(*args, **kwargs) * 10" in code

# --------------------------------------------------------------------- not_to_static

_RAN = []  # the code objects of the not_to_static helpers that ran


def _record():
    _RAN.append(sys._getframe(1).f_code)


@d2s.jit.not_to_static
def eager_only(x):
    _record()
    if x.sum() > 0:  # marker: eager_only-if
        return x * 2
    return x * 3


class Helpers:
    factor = 2

    @d2s.jit.not_to_static
    def method(self, x):
        _record()
        if x.sum() > 0:  # marker: method-if
            return x
        return -x

    @staticmethod
    @d2s.jit.not_to_static
    def static_inner(x):
        _record()
        if x.sum() > 0:  # marker: static_inner-if
            return x
        return -x

    @d2s.jit.not_to_static
    @staticmethod
    def static_outer(x):
        _record()
        if x.sum() > 0:  # marker: static_outer-if
            return x
        return -x

    @classmethod
    @d2s.jit.not_to_static
    def klass(cls, x):
        _record()
        if x.sum() > cls.factor:  # marker: klass-if
            return x
        return -x


class EagerLayer(d2s.nn.Layer):
    @d2s.jit.not_to_static
    def forward(self, x):
        _record()
        if x.mean() > 0:  # marker: forward-if
            return x
        return -x


def _scaled(x, k):
    _record()
    if x.sum() > k:  # marker: _scaled-if
        return x
    return -x


scaled = d2s.jit.not_to_static(_scaled)


def calls_eager_only(x):
    return eager_only(x)


def calls_a_method(x):
    return Helpers().method(x)


def calls_a_static_method(x):
    return Helpers.static_inner(x)


def calls_a_static_method_marked_outside(x):
    return Helpers.static_outer(x)


def calls_a_class_method(x):
    return Helpers.klass(x)


def calls_a_layer(x):
    return EagerLayer()(x)


def calls_a_partial(x):
    return functools.partial(scaled, k=0)(x)


def calls_through_a_variable(x):
    helper = eager_only
    return helper(x)


def _line_of(marker):
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if f"# marker: {marker}" in line:
                return n
    raise AssertionError(marker)


NOT_CONVERTED = [
    (calls_eager_only, "eager_only", eager_only),
    (calls_a_method, "method", Helpers.method),
    (calls_a_static_method, "static_inner", Helpers.static_inner),
    (calls_a_static_method_marked_outside, "static_outer", Helpers.static_outer),
    (calls_a_class_method, "klass", Helpers.klass.__func__),
    (calls_a_layer, "forward", EagerLayer.forward),
    (calls_a_partial, "_scaled", _scaled),
    (calls_through_a_variable, "eager_only", eager_only),
]


@pytest.mark.parametrize("caller, name, helper", NOT_CONVERTED,
                         ids=[c.__name__ for c, _, _ in NOT_CONVERTED])
def test_a_not_to_static_helper_runs_unconverted_and_says_so_at_a_tensor_bool(caller, name,
                                                                               helper):
    x = tensor([1.0, 2.0])
    caller(x)  # eagerly it simply works
    del _RAN[:]
    with pytest.raises(TypeError) as info:
        d2s.jit.to_static(caller)(x)
    assert _RAN == [helper.__code__]  # the helper itself ran, as written
    error = info.value
    assert type(error).__name__ == "NotConvertedError"
    assert error.filename == __file__ and error.lineno == _line_of(f"{name}-if")
    assert error.source_line.startswith("if x.") and f"marker: {name}-if" in error.source_line
    message = str(error)
    assert f"{helper.__qualname__} (test_semantics.py:{helper.__code__.co_firstlineno})" in message
    assert "is not converted because it is marked with @d2s.jit.not_to_static" in message
    assert f"Remove @d2s.jit.not_to_static from {helper.__qualname__}" in message


def test_a_not_to_static_helper_without_tensor_bools_runs_as_written():
    @d2s.jit.not_to_static
    def sees(x, log):
        log.append(type(x).__name__)
        return x * 2

    def caller(x, log):
        return sees(x, log) + 1

    log = []
    check(lambda x: caller(x, log), tensor([1.0, 2.0]),
          converted=d2s.jit.to_static(lambda x: caller(x, log)))
    assert log == ["Tensor", "Variable"]


def test_to_static_of_a_not_to_static_function_runs_it_eagerly():
    seen = []

    @d2s.jit.not_to_static
    def python_only(x):
        seen.append(type(x).__name__)
        if x.sum() > 0:  # an eager tensor: fine
            return x * 2
        return x

    converted = d2s.jit.to_static(python_only)
    check(python_only, tensor([1.0, 2.0]), converted=converted)
    assert seen == ["Tensor", "Tensor"]
    assert converted.dygraph_function is python_only and converted.rollback() is python_only
    assert converted.code.lstrip().startswith("@d2s.jit.not_to_static")
    assert d2s.jit.to_static(converted) is converted
    with pytest.raises(RuntimeError, match="python_only is marked with @d2s.jit.not_to_static"):
        _ = converted.main_program


def test_to_static_of_a_layer_whose_forward_is_not_to_static_runs_it_eagerly():
    del _RAN[:]
    layer = d2s.jit.to_static(EagerLayer())
    x = tensor([[1.0, -2.0]])
    check(EagerLayer(), x, converted=layer)
    assert _RAN == [EagerLayer.forward.__code__] * 2
    assert layer.forward.rollback()(x).numpy().tolist() == [[-1.0, 2.0]]


def test_a_helper_that_cannot_be_converted_says_why_at_a_tensor_bool():
    namespace = {}
    exec("def no_source(x):\n    if x.sum() > 0:\n        return x\n    return -x\n", namespace)
    no_source = namespace["no_source"]

    def caller(x):
        return no_source(x)

    with pytest.raises(TypeError) as info:
        d2s.jit.to_static(caller)(tensor([1.0]))
    message = str(info.value)
    assert type(info.value).__name__ == "NotConvertedError" and info.value.lineno == 2
    assert "no_source (<string>:1) is not converted because it cannot be converted (" in message
    assert "its source code is not available" in message


# ---------------------------------------------- dtypes: a Python number meets a tensor

DTYPES = ["int32", "int64", "float32", "float64", "bool"]
NUMBERS = [0, 2, 0.5, True]


def _fits(number, dtype):
    """DESIGN.md "Dtypes": a tensor with a Python number keeps its dtype, except a float
    with an int/bool tensor (float32) and an int with a bool tensor (int64)."""
    if isinstance(number, bool):
        return True
    if isinstance(number, int):
        return dtype != "bool"
    return dtype.startswith("float")


def _tensor_of(dtype):
    return d2s.to_tensor(np.array(3).astype(dtype))


def the_int32_example(x):
    s = 0
    i = d2s.to_tensor(np.int32(0))
    while i < 3:
        s = s + i
        i += 1
    return s


def test_a_python_int_carried_through_a_loop_over_int32_stays_int32():
    out = check(the_int32_example, tensor([1.0]))
    assert str(out.dtype) == "int32"


def number_plus_tensor_in_a_loop(t, number, n):
    s = number
    i = d2s.to_tensor(0)
    while i < n:
        s = s + t
        i += 1
    return s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("number", NUMBERS)
def test_a_number_combined_with_a_tensor_in_a_loop_has_eagers_dtype(dtype, number):
    t = _tensor_of(dtype)
    for n in (1, 3):
        if check(number_plus_tensor_in_a_loop, t, number, d2s.to_tensor(n)) is None:
            return  # eager raises (True + a bool tensor), and so does the converted code
    out = d2s.jit.to_static(number_plus_tensor_in_a_loop)(t, number, d2s.to_tensor(0))
    assert out.numpy().tolist() == number  # zero iterations: the number, in that dtype


def number_replaced_by_a_tensor_in_a_loop(t, number, n):
    s = number
    i = d2s.to_tensor(0)
    while i < n:
        s = t
        i += 1
    return s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("number", NUMBERS)
def test_a_number_replaced_by_a_tensor_in_a_loop_takes_its_dtype_when_it_fits(dtype, number):
    t, converted = _tensor_of(dtype), d2s.jit.to_static(number_replaced_by_a_tensor_in_a_loop)
    if not _fits(number, dtype):
        with pytest.raises(TypeError, match="takes the dtype of the tensor it becomes only "
                                            "when it fits it") as info:
            converted(t, number, d2s.to_tensor(1))
        assert type(info.value).__name__ == "LoopVariableError"
        return
    check(number_replaced_by_a_tensor_in_a_loop, t, number, d2s.to_tensor(2))
    out = converted(t, number, d2s.to_tensor(0))
    assert str(out.dtype) == dtype and out.numpy().tolist() == number


def number_or_tensor(x, t, number):
    if x.sum() > 0:
        s = number
    else:
        s = t
    return s


def tensor_or_number(x, t, number):
    if x.sum() > 0:
        s = t
    else:
        s = number
    return s


def number_or_tensor_expression(x, t, number):
    return number if x.sum() > 0 else t


@pytest.mark.parametrize("fn", [number_or_tensor, tensor_or_number, number_or_tensor_expression])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("number", NUMBERS)
def test_a_number_in_one_branch_takes_the_other_branchs_dtype_when_it_fits(fn, dtype, number):
    t, converted = _tensor_of(dtype), d2s.jit.to_static(fn)
    positive, negative = tensor([1.0]), tensor([-1.0])
    if not _fits(number, dtype):
        with pytest.raises(TypeError, match="takes the dtype of the tensor in the other "
                                            "branch only when it fits it") as info:
            converted(positive, t, number)
        assert type(info.value).__name__ == "BranchMismatchError"
        return
    for x in (positive, negative):
        expected, actual = fn(x, t, number), converted(x, t, number)
        assert str(actual.dtype) == dtype
        expected = expected.numpy().tolist() if isinstance(expected, d2s.Tensor) else expected
        assert actual.numpy().tolist() == expected


def numbers_and_tensors_in_both_branches(x, t, number):
    if x.sum() > 0:
        s = t + number
    else:
        s = t * number
    return s


@pytest.mark.parametrize("dtype", DTYPES[:-1])  # (a bool tensor has no `+`)
@pytest.mark.parametrize("number", NUMBERS)
def test_arithmetic_of_numbers_and_tensors_in_branches_has_eagers_dtype(dtype, number):
    for x in (tensor([1.0]), tensor([-1.0])):
        check(numbers_and_tensors_in_both_branches, x, _tensor_of(dtype), number)


@pytest.mark.parametrize("a, b, dtype", [(1, 0.5, "float32"), (True, 2, "int64"),
                                          (False, 0.5, "float32"), (3, 4, "int64")])
def test_python_numbers_of_two_kinds_in_the_branches_share_one_dtype(a, b, dtype):
    def pick(x):
        return a if x.sum() > 0 else b

    converted = d2s.jit.to_static(pick)
    for x, expected in ((tensor([1.0]), a), (tensor([-1.0]), b)):
        out = converted(x)
        assert str(out.dtype) == dtype and out.numpy().tolist() == expected


# ------------------------------------- a name first assigned in a loop that may not run


def first_assigned_in_a_while(x):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:  # marker: while-assigns-z
        z = x + i
        i += 1
    return z


def first_assigned_in_a_for(x):
    for i in range(d2s.cast(x.sum(), "int64") - 10):  # marker: for-assigns-z
        z = x * i
    return z


def a_tuple_first_assigned_in_a_loop(x):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:  # marker: while-assigns-pair
        pair = (x + i, i)
        i += 1
    return pair[0] * 2


def a_flag_first_assigned_in_a_loop(x):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:  # marker: while-assigns-big
        big = x.max() > i
        i += 1
    if big:
        return x + 1
    return x - 1


def read_only_when_the_loop_ran(x):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:
        z = x + i
        i += 1
    if i > 0:
        return z * 2
    return x


def assigned_by_a_loop_or_a_branch(x):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:  # marker: while-or-if-assigns-z
        z = x + i
        i += 1
    if x.mean() > 1:
        z = x * 3
    return z


def assigned_by_one_of_two_loops(x, n):
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:  # marker: first-of-two-loops
        z = x + i
        i += 1
    while i < n:  # marker: second-of-two-loops
        z = x * i
        i += 1
    return z


def assigned_in_a_branch_inside_a_loop(x):
    i = d2s.to_tensor(0)
    z = x
    while i < x.sum() - 10:
        if i > 1:
            w = z * 2
            z = w
        i += 1
    return z


def _big(n):  # ones whose sum is n: the loops above run n - 10 times
    return tensor(np.ones(n))


@pytest.mark.parametrize("fn, marker, name", [
    (first_assigned_in_a_while, "while-assigns-z", "z"),
    (first_assigned_in_a_for, "for-assigns-z", "z"),
    (a_tuple_first_assigned_in_a_loop, "while-assigns-pair", "pair"),
    (a_flag_first_assigned_in_a_loop, "while-assigns-big", "big"),
])
def test_a_name_first_assigned_in_a_loop_that_runs_zero_times_raises_when_read(fn, marker,
                                                                                 name):
    for n in (11, 13):  # the loop runs: as eager
        check(fn, _big(n))
    with pytest.raises(UnboundLocalError) as expected:
        fn(_big(3))
    with pytest.raises(UnboundLocalError) as info:
        d2s.jit.to_static(fn)(_big(3))
    message = str(info.value)
    assert str(expected.value) in message  # what Python says, then which loop
    assert f"the tensor-dependent loop at {__file__}:{_line_of(marker)} (`" in message
    assert message.endswith("that assigns it ran zero times") and f"'{name}'" in message


@pytest.mark.parametrize("n", [3, 11, 13])
def test_a_name_not_read_on_the_path_taken_raises_nothing(n):
    check(read_only_when_the_loop_ran, _big(n))


def _full(count, value):
    return tensor(np.full(count, value))


# (count, value): the branch assigns z, the loop does, both do
@pytest.mark.parametrize("count, value", [(3, 2.0), (24, 0.5), (12, 2.0)])
def test_a_name_assigned_by_a_loop_or_a_branch_has_a_value_if_either_ran(count, value):
    check(assigned_by_a_loop_or_a_branch, _full(count, value))


def test_a_name_assigned_by_neither_the_loop_nor_the_branch_raises():
    with pytest.raises(UnboundLocalError, match="ran zero times") as info:
        d2s.jit.to_static(assigned_by_a_loop_or_a_branch)(_full(3, 0.5))
    assert f"{__file__}:{_line_of('while-or-if-assigns-z')}" in str(info.value)


def test_a_name_assigned_by_one_of_two_loops():
    for args in ((_big(11), d2s.to_tensor(0)), (_big(3), d2s.to_tensor(2))):
        check(assigned_by_one_of_two_loops, *args)
    with pytest.raises(UnboundLocalError) as info:
        d2s.jit.to_static(assigned_by_one_of_two_loops)(_big(3), d2s.to_tensor(0))
    message = str(info.value)
    assert "the tensor-dependent loops at" in message and "that assign it ran zero times" in message
    for marker in ("first-of-two-loops", "second-of-two-loops"):
        assert f"{__file__}:{_line_of(marker)}" in message


@pytest.mark.parametrize("n", [3, 12, 14])
def test_a_name_assigned_in_a_branch_of_a_loop_body_before_use(n):
    check(assigned_in_a_branch_inside_a_loop, _big(n))


def first_assigned_in_a_loop_in_one_branch(x):
    if x.mean() > 0:
        i = d2s.to_tensor(0)
        while i < x.sum() - 10:
            z = x + i
            i += 1
    else:
        z = -x
    return z


@pytest.mark.parametrize("x", [_big(3), _big(12), -_big(3)], ids=["zero", "runs", "other"])
def test_a_name_first_assigned_in_a_loop_inside_a_branch(x):
    check(first_assigned_in_a_loop_in_one_branch, x)

def keeps_a_value_from_an_earlier_iteration(x):
    for k in range(3):
        if k == 1:
            last = x * k
    return last


def keeps_a_value_from_an_earlier_loop(x):
    for k in range(2):
        z = x + k
    i = d2s.to_tensor(0)
    while i < x.sum() - 10:
        z = x * i
        i += 1
    return z


@pytest.mark.parametrize("fn", [keeps_a_value_from_an_earlier_iteration,
                                keeps_a_value_from_an_earlier_loop])
@pytest.mark.parametrize("n", [3, 12])
def test_a_value_assigned_on_an_earlier_path_is_kept(fn, n):
    check(fn, _big(n))
