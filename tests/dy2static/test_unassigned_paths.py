"""Names that some path through tensor-dependent control flow leaves unassigned.

Eagerly, such a name has its value on the calls that assigned it, and reading it on the
others raises UnboundLocalError. A converted function must do both on the same inputs:

- a tensor only one branch of a tensor `if` assigns is carried by the `cond` op with a flag,
  checked where it is read when the program runs (as for a name a loop may not assign);
- a tensor branch that reads a name no path assigned (code that runs only where another
  branch always jumped) raises when the program runs that branch, not while converting.

`check` compares values, dtypes, stop_gradient and gradients with eager, or that both raise
the same error.
"""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.dy2static.undefined import UndefinedVariableError
from tests.dy2static.test_semantics import check

POS = np.array([[1.0, 2.0, 0.5], [0.25, 1.5, 2.0]], np.float32)
NEG = -POS
MIX = np.array([[3.0, -1.0, 0.5], [-0.25, 1.5, -2.0]], np.float32)


def tensor(a) -> d2s.Tensor:
    return d2s.to_tensor(a, stop_gradient=False)


# ------------------------------------------------ a tensor only one branch assigns


def paddle_if_else3(x):
    """Paddle's test_ifelse `dyfunc_with_if_else3`: `q` is assigned in the true branch only."""
    y = x + 1
    if d2s.mean(x) < 5:
        x = x + 1
        z = x + 2
        q = x + 3
    else:
        y = y + 1
        z = x - 2  # noqa: F841
        m = x + 2  # noqa: F841
        n = x + 3
    q = q + 1
    n = q + 2
    x = n
    return x


def elif_chain(x):
    if x.mean() > 1:
        y = x * 2
    elif x.mean() > 0:
        y = x + 1
    else:
        z = x  # noqa: F841
    return y


def tuple_in_one_branch(x):
    if x.sum() > 0:
        a, b = x, x * 2
    return a + b


def list_in_one_branch(x):
    if x.mean() > 0:
        ys = [x, x.exp()]
    return ys[0] * ys[1]


def read_under_the_same_test(x):
    if x.mean() > 0:
        y = x * 2
    if x.mean() > 0:
        return y + 1
    return x


def nested_branches_assign(x):
    if x.mean() > 0:
        if x.max() > 1.5:
            y = x * 2
        else:
            y = x * 3
    return y


def conditional_expression_reads_it(x):
    if x.mean() > 0:
        z = x * 3
    return z if x.mean() > 0 else x


def carried_into_a_loop(x):
    if x.mean() > 0:
        h = x
    i = d2s.to_tensor(0)
    while i < 3:
        h = h * 2
        i += 1
    return h


def assigned_by_a_branch_or_a_loop(x, n):
    if x.mean() > 0:
        h = x
    i = d2s.to_tensor(0)
    while i < n:
        h = x * 3
        i += 1
    return h


@pytest.mark.parametrize("fn, inputs", [
    (paddle_if_else3, [POS, POS * 10]),
    (elif_chain, [POS, POS * 0.1, NEG]),
    (tuple_in_one_branch, [POS, NEG]),
    (list_in_one_branch, [POS, NEG]),
    (read_under_the_same_test, [POS, NEG, MIX]),
    (nested_branches_assign, [POS, POS * 0.5, NEG]),
    (conditional_expression_reads_it, [POS, NEG]),
    (carried_into_a_loop, [POS, NEG]),
])
def test_a_tensor_one_branch_assigns_has_its_value_where_that_branch_ran(fn, inputs):
    converted = d2s.jit.to_static(fn)
    for x in inputs:  # one program (same shapes): the flag decides when it runs
        check(fn, tensor(x), converted=converted)


@pytest.mark.parametrize("x, n", [(POS, 0), (POS, 2), (NEG, 2), (NEG, 0)])
def test_a_tensor_a_branch_or_a_loop_assigns(x, n):
    check(assigned_by_a_branch_or_a_loop, tensor(x), d2s.to_tensor(n))


def test_the_error_names_the_if_and_the_branch_that_did_not_run():
    converted = d2s.jit.to_static(elif_chain)
    converted(tensor(POS))
    with pytest.raises(UnboundLocalError) as info:
        converted(tensor(NEG))
    message = str(info.value)
    assert message.startswith("cannot access local variable 'y' where it is not associated "
                              "with a value: the tensor-dependent `if` at ")
    assert "(`elif x.mean() > 0:`) assigns it only in its true branch, which did not run" in \
        message


class OneBranchLayer(nn.Layer):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        if x.mean() > 0:
            h = self.a(x)
        elif x.mean() > -1:
            return self.b(x)
        return h * 2


def test_a_layer_trains_like_eager_through_a_tensor_one_branch_assigns():
    eager, converted = OneBranchLayer(), OneBranchLayer()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for data in (POS, NEG * 0.2):
        grads = []
        for model in (eager, converted):
            loss = model(d2s.to_tensor(data)).sum()
            grads.append([None if g is None else g.numpy()
                          for g in d2s.grad(loss, model.parameters(), allow_unused=True)])
        for c, e in zip(*grads):
            assert (c is None) == (e is None)
            if e is not None:
                np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)
    for model in (eager, converted):
        with pytest.raises(UnboundLocalError, match="'h'"):
            model(d2s.to_tensor(NEG * 10))


def numbers_in_one_branch(x):
    if x.sum() < 0:
        pass
    else:
        scale, shift = 2.0, (1, 3)
    return x * scale + shift[1]


@pytest.mark.parametrize("x", [POS, NEG, POS.astype("float64"), (POS * 4).astype("int64")])
def test_python_numbers_one_branch_assigns_become_tensors_with_a_flag(x):
    check(numbers_in_one_branch, d2s.to_tensor(x, stop_gradient=x.dtype.kind != "f"))


def test_a_string_one_branch_assigns_is_still_an_error_converting():
    def mode_in_one_branch(x):
        if x.sum() > 0:
            mode = "fast"
        return x if mode == "fast" else -x

    with pytest.raises(UndefinedVariableError, match="'mode' is used here"):
        d2s.jit.to_static(mode_in_one_branch)(tensor(POS))


# ------------------------------------- a branch that reads a name no path assigned


def break_on_a_python_test_inside(x, k):
    """The tensor branch always leaves (`return` or, by Python's `k`, `break`): the code
    after it, which reads `t`, runs only where the other branch assigned `t`."""
    for n in range(3):
        if x.mean() > n:
            if x.sum() > 100:
                return x * 2
            if k > 1:
                break
            t = x * 2
        else:
            t = x - 1
        x = t * t
    return x


def return_or_break_by_a_static_or(x):
    """`x.max() > 10 or -1.5 < -0.5` is Python's True: every path of the first branch
    leaves."""
    for _ in range(2):
        if x.mean() > 0:
            if x.min() > 1:
                return d2s.tanh(x)
            if x.max() > 10 or -1.5 < -0.5:
                break
            t = x
        else:
            t = x * 3
        x = t.exp() if t.min() > -0.5 else t
    return x


def reads_it_on_the_path_that_raises(x):
    if x.mean() > 0:
        y = x
    elif x.sum() < -10:
        return x
    return y * 2


@pytest.mark.parametrize("x, k", [(POS, 2), (POS, 0), (NEG, 2), (NEG, 0), (MIX, 0),
                                  (POS * 60, 2)])
def test_a_branch_after_one_that_always_left_reads_names_the_other_assigned(x, k):
    check(break_on_a_python_test_inside, tensor(x), k)


@pytest.mark.parametrize("x", [POS, POS * 0.1, NEG, MIX])
def test_a_branch_that_always_leaves_by_a_static_or(x):
    check(return_or_break_by_a_static_or, tensor(x))


@pytest.mark.parametrize("x", [POS, NEG, NEG * 10])
def test_a_read_on_a_path_that_left_it_unassigned_raises_when_run(x):
    check(reads_it_on_the_path_that_raises, tensor(x))


def test_a_branch_that_reads_a_name_never_assigned_raises_at_the_read():
    def never_assigned(x):
        for step in range(2):
            if x.mean() > step:
                break
            else:
                pass
            x = t * 2  # noqa: F821  (t is never assigned: eager raises here too)
        return x

    converted = d2s.jit.to_static(never_assigned)
    check(never_assigned, tensor(POS * 10), converted=converted)  # the break always runs
    with pytest.raises(NameError) as eager_error:
        never_assigned(tensor(NEG))
    with pytest.raises(NameError) as info:
        converted(tensor(NEG))
    assert str(eager_error.value) in str(info.value)
