"""Errors raised inside a branch of a tensor-dependent `if`.

Eagerly, a branch raises only on the calls that take it. Converted, both branches are
traced: an error one of them raises while the program is built (a `raise` that validates
the input, a shape that does not fit there, a name no path assigned) becomes an `assert`
op that raises the same error, with its message and the user's line, when the program
runs that branch. A `try` of the same function around the `if` cannot catch such an error
at run time, so there it is refused while converting.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dy2static.ifelse import UncatchableBranchError
from dy2stat.static import InputSpec
from tests.dy2static.test_semantics import check

POS = np.array([[1.0, 2.0, 0.5], [0.25, 1.5, 2.0]], np.float32)
NEG = -POS


def tensor(a) -> d2s.Tensor:
    return d2s.to_tensor(a, stop_gradient=False)


def validates(x):
    if x.mean() > 0:
        y = x * 2
    else:
        raise ValueError("expected a positive mean")
    return y


def validates_in_a_loop(x):
    for _ in range(3):
        if (x > 10).any():
            raise OverflowError("too large")
        x = x * 3
    return x


class ScoreError(KeyError):
    """A user's exception class: raised as the builtin it derives from."""


def raises_a_users_error(x):
    if x.sum() < 0:
        raise ScoreError("negative score")
    return x


def indexes_past_the_end(x, rows):
    if x.mean() > 0:
        return x
    return x + x[rows]  # eagerly an IndexError, on the calls that get here


def paddle_nested_if_else(x):
    """From Paddle's test_ifelse: the inner test is a row of the tensor, which only the
    branch this input never takes would look at (eagerly: a ValueError there)."""
    y = x
    if d2s.mean(x).numpy() < 0:
        y = x + 1
        if y.numpy()[0] < 10:
            y = d2s.nn.functional.relu(y * 10)
    else:
        y = x - 1
    return y


@pytest.mark.parametrize("fn, x", [
    (validates, POS), (validates, NEG),
    (validates_in_a_loop, POS), (validates_in_a_loop, POS * 2),
    (raises_a_users_error, POS),
    (paddle_nested_if_else, POS),
])
def test_a_branch_raises_only_where_it_runs(fn, x):
    check(fn, tensor(x))  # the same values and gradients, or the same error


@pytest.mark.parametrize("x, rows", [(POS, 1), (NEG, 1), (NEG, 5)])
def test_an_index_error_in_a_branch(x, rows):
    check(indexes_past_the_end, tensor(x), rows)


def test_the_error_keeps_its_message_and_the_users_line():
    converted = d2s.jit.to_static(validates)
    converted(tensor(POS))
    with pytest.raises(ValueError) as info:
        converted(tensor(NEG))
    assert str(info.value) == "expected a positive mean"
    notes = "\n".join(info.value.__notes__)
    assert notes.startswith("The error happened in code converted by dy2stat, at")
    line = validates.__code__.co_firstlineno + 4
    assert f'File "{os.path.abspath(__file__)}", line {line}, in validates' in notes
    assert f'> {line:4d} |         raise ValueError("expected a positive mean")' in notes


def test_a_users_exception_is_raised_as_its_builtin_base():
    with pytest.raises(KeyError) as info:
        d2s.jit.to_static(raises_a_users_error)(tensor(NEG))
    assert info.value.args == ("negative score",)


def test_a_saved_program_raises_in_the_branch_when_loaded(tmp_path):
    converted = d2s.jit.to_static(validates, input_spec=[InputSpec([-1, 3], "float32")])
    d2s.jit.save(converted, str(tmp_path / "validates"))
    loaded = d2s.jit.load(str(tmp_path / "validates"))
    np.testing.assert_allclose(loaded(d2s.to_tensor(POS)).numpy(), POS * 2)
    with pytest.raises(ValueError, match="expected a positive mean"):
        loaded(d2s.to_tensor(NEG))


def test_a_layer_trains_through_a_branch_that_validates():
    layer = d2s.nn.Linear(3, 3)

    def forward(x):
        h = layer(x)
        if h.abs().max() > 1e6:
            raise FloatingPointError("diverged")
        return h

    converted = d2s.jit.to_static(forward)
    loss = converted(d2s.to_tensor(POS)).sum()
    loss.backward()
    grad = layer.weight.grad.numpy()
    layer.clear_gradients()
    forward(d2s.to_tensor(POS)).sum().backward()
    np.testing.assert_allclose(grad, layer.weight.grad.numpy(), rtol=1e-6)


# ------------------------------------------------------------ a `try` around the `if`


def caught_in_the_same_function(x):
    try:
        if x.sum() > 0:
            raise ValueError("positive")
        y = x - 1
    except ValueError:
        y = x * 2
    return y


def test_a_branch_error_a_try_of_the_same_function_would_catch_is_refused():
    with pytest.raises(UncatchableBranchError) as info:
        d2s.jit.to_static(caught_in_the_same_function)(tensor(NEG))
    message = str(info.value)
    assert "raises ValueError (positive) inside the `try` at line" in message
    assert "put the `try` outside the converted code" in message


def test_a_try_around_the_converted_call_catches_the_error_when_it_runs():
    converted = d2s.jit.to_static(validates)
    for x, expected in ((POS, POS * 2), (NEG, NEG)):
        try:
            out = converted(tensor(x)).numpy()
        except ValueError:
            out = x
        np.testing.assert_allclose(out, expected)
