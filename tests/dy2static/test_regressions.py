"""Regressions the equivalence property found (test_equivalence_property.py), one class of
failure per section, each reduced to the smallest programs that showed it and the
variations a user would write next to them. Every function runs eagerly and through
`to_static` on inputs that take each path; values, dtypes and gradients must agree."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn

POS = np.array([[1.0, 2.0, 0.5], [0.25, 1.5, 2.0]], np.float32)
NEG = -POS
MIX = np.array([[1.0, -2.0, 0.5], [-0.25, 1.5, -2.0]], np.float32)


def run_both(fn, *args):
    """(eager outputs, converted outputs, eager gradient, converted gradient) of fn(*args),
    the gradient of sum(outputs) with respect to the first (tensor) argument."""
    results = []
    for f in (fn, d2s.jit.to_static(fn)):
        tensors = [d2s.to_tensor(a, stop_gradient=False) if isinstance(a, np.ndarray) else a
                   for a in args]
        out = f(*tensors)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        loss = sum(o.sum() for o in outs)
        (grad,) = d2s.grad(loss, [tensors[0]], allow_unused=True)
        results.append(([o.numpy() for o in outs], None if grad is None else grad.numpy()))
    return results


def assert_converted_equals_eager(fn, *inputs):
    """fn and to_static(fn) agree on each argument tuple of `inputs`."""
    for args in inputs:
        args = args if isinstance(args, tuple) else (args,)
        (eager, eager_grad), (converted, converted_grad) = run_both(fn, *args)
        assert len(converted) == len(eager)
        for c, e in zip(converted, eager):
            assert c.dtype == e.dtype and c.shape == e.shape
            np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)
        zeros = np.zeros_like(args[0])
        np.testing.assert_allclose(zeros if converted_grad is None else converted_grad,
                                   zeros if eager_grad is None else eager_grad, rtol=1e-5)


# ----------------------------------------- names assigned only on the path that goes on
# A tensor-dependent `if` one of whose branches returns (always, or on the path a Python
# predicate inside it took): a name the other branch assigns is defined wherever the
# function goes on, so reading it after the `if` is fine (it used to raise "assigns it only
# in its false branch").


def return_in_true_branch(x):
    if x.mean() > 0:
        return x * 2
    else:
        t = x + 1
    return t * 3


def return_in_false_branch(x):
    if x.mean() > 0:
        t = x + 1
    else:
        return x * 2
    return t * 3


def return_in_nested_branch(x, y):
    if x.mean() > 0:
        if y.sum() > 0:
            return x - y
        t = x * y
    else:
        t = x + y
    return t + 1


def return_under_python_if(x, flag):
    if flag:
        if x.max() > 1:
            return x * 0.5
        t = x * 2
    else:
        t = x - 1
    return d2s.tanh(t)


def return_in_branch_of_elif(x):
    s = x.sum()
    if s > 5:
        return x
    elif s > 0:
        t = x * 2
    else:
        t = -x
    return t + s


def return_then_number_then_tensor(x):
    if x.mean() > 0:
        return x
    else:
        n = 3
        t = x * 2
    return t + n


def return_in_tensor_loop_then_loop_local(x):
    total = x * 0
    for _ in range(d2s.cast(x[0] > 0, "int64").sum()):
        if x.max() > 1.5:
            return total - 1
        count = 0
        while x.sum() > -1 and count < 2:
            count += 1
            total = total + x
    return total


def returns_on_both_paths_one_under_a_python_if(x, flag):
    if x.mean() > 0:
        if flag:
            return x * 2
        t = x
    else:
        return x - 1
    return t * 3


def returns_in_the_python_else_of_an_elif(x, flag):
    if x.mean() > 0:
        s = x.sum()
    elif flag:
        s = x.max()
    else:
        return x
    return x + s


def returns_after_a_tensor_loop_that_may_return(x, y):
    if (x * y).sum() > 2:
        for _ in range(d2s.cast(x[0] > 0, "int64").sum()):
            return x + 1
        return x
    else:
        t = y
    return t * 2


def returns_after_a_branch_that_may_return(x, y, c):
    if x.mean() > 0:
        t = y
    else:
        if y.mean() > c:
            u = x
        else:
            return y + 1
        return u * 2
    return t - 1


def helper_that_returns_on_every_path(a, b):
    if b < 0.5:
        t = a * 2
    else:
        if (a * a).sum() < 1:
            return a + 3
        return a * 0.5
    return t - t


def calls_a_helper_with_a_tensor_turned_number(x, c):
    for _ in range(2):
        x = x + helper_that_returns_on_every_path(x, c).min()
        if x.max() < 0:
            c = c * 0.5
    return x


def test_a_name_assigned_only_where_the_function_goes_on_after_a_return():
    assert_converted_equals_eager(return_in_true_branch, POS, NEG)
    assert_converted_equals_eager(return_in_false_branch, POS, NEG)
    assert_converted_equals_eager(return_in_nested_branch, (POS, POS), (POS, NEG), (NEG, POS))
    assert_converted_equals_eager(return_under_python_if, (POS, True), (MIX, True),
                                  (POS * 0.1, True), (NEG, False))
    assert_converted_equals_eager(return_in_branch_of_elif, POS * 3, POS * 0.1, NEG)
    assert_converted_equals_eager(return_then_number_then_tensor, POS, NEG)
    assert_converted_equals_eager(return_in_tensor_loop_then_loop_local, POS, MIX, NEG)
    assert_converted_equals_eager(returns_on_both_paths_one_under_a_python_if, (POS, True),
                                  (NEG, True), (POS, False))
    assert_converted_equals_eager(returns_in_the_python_else_of_an_elif, (POS, False),
                                  (NEG, False), (NEG, True))
    assert_converted_equals_eager(returns_after_a_tensor_loop_that_may_return, (POS, POS),
                                  (NEG, POS), (MIX, NEG))
    assert_converted_equals_eager(returns_after_a_branch_that_may_return, (POS, POS, 0.0),
                                  (NEG, POS, 0.0), (NEG, NEG, 0.0))
    assert_converted_equals_eager(calls_a_helper_with_a_tensor_turned_number, (POS, 1.0),
                                  (NEG, 1.0), (NEG * 0.1, 0.25))


class ReturnsEarly(nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x):
        h = self.linear(x)
        if h.mean() > 10:
            return h
        else:
            g = d2s.tanh(h)
        return g * 2


def test_a_layer_that_returns_early_trains_like_eager():
    eager = ReturnsEarly()
    converted = ReturnsEarly()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for data in (POS, NEG):
        grads = []
        for model in (eager, converted):
            loss = model(d2s.to_tensor(data)).sum()
            grads.append([g.numpy() for g in d2s.grad(loss, model.parameters())])
        for c, e in zip(*reversed(grads)):
            np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)


def assigned_in_one_branch_without_return(x):
    if x.mean() > 0:
        t = x + 1
    return t * 3


def test_a_name_one_branch_leaves_unassigned_without_returning_is_read_where_it_ran():
    assert_converted_equals_eager(assigned_in_one_branch_without_return, POS, POS * 0.5)
    with pytest.raises(UnboundLocalError, match="'t'.*assigns it only in its true branch"):
        d2s.jit.to_static(assigned_in_one_branch_without_return)(d2s.to_tensor(NEG))


# --------------------------------------------- a value some path gave is kept, not reset
# A name that some earlier path leaves unassigned was reset to "no value" right before each
# if/loop that changes it, dropping the value the path taken did give it (even with Python
# predicates only). It is now bound to "no value" once, where the function starts.


def assigned_under_flag_then_changed_under_flag(x, flag):
    if flag:
        y = x * 2
    if flag:
        y = y + 1
        x = x + y
    return x


def returned_or_assigned_then_changed(x, k):
    if k > 1:
        return x
    else:
        t = x + 1
    t *= 1.5
    return t


def tensor_return_or_assigned_then_changed(x):
    if x.mean() > 0:
        return x
    else:
        t = x + 1
    t *= 1.5
    return t


def changed_from_the_previous_iteration(x, n):
    for i in range(n):
        if i > 0:
            prev = prev * 0.5 + x  # noqa: F821 (the previous iteration assigned it)
        else:
            prev = x
    return x * 0 + prev if n > 0 else x


def set_in_both_branches_in_a_loop_body(x, c, n):
    total = x * 0
    for _ in range(n):
        if x.max() > c:
            k = 1
        else:
            k = 3
        k -= 2
        total = total + x * k
    return total


def set_in_both_branches_in_a_tensor_loop_body(x, c):
    return set_in_both_branches_in_a_loop_body(x, c, d2s.cast(x[0] > -10, "int64").sum())


def test_a_value_a_path_gave_is_not_reset_before_the_next_statement():
    assert_converted_equals_eager(assigned_under_flag_then_changed_under_flag, (POS, True),
                                  (POS, False))
    assert_converted_equals_eager(returned_or_assigned_then_changed, (POS, 0), (POS, 2))
    assert_converted_equals_eager(tensor_return_or_assigned_then_changed, POS, NEG)
    assert_converted_equals_eager(changed_from_the_previous_iteration, (POS, 0), (POS, 1),
                                  (MIX, 3))
    assert_converted_equals_eager(set_in_both_branches_in_a_loop_body, (POS, 1.0, 2),
                                  (NEG, 1.0, 2))
    assert_converted_equals_eager(set_in_both_branches_in_a_tensor_loop_body, (POS, 1.0),
                                  (NEG, 1.0))


class KeepsStep(nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x, steps):
        for i in range(steps):
            if i == 0:
                h = self.linear(x)
            else:
                h = self.linear(h) + x
        return h


def test_a_layer_keeps_a_value_from_the_previous_iteration():
    eager = KeepsStep()
    converted = KeepsStep()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for steps in (1, 3):
        e = eager(d2s.to_tensor(POS), steps).numpy()
        np.testing.assert_allclose(converted(d2s.to_tensor(POS), steps).numpy(), e, rtol=1e-5)


# ------------------------------------ a number both branches give the same stays a number
# A Python number that both branches of a tensor-dependent `if` set to the same value is
# that number after the `if`, as in eager (it became a 0-D tensor, which cannot index a
# list or stand where Python needs an int).


def same_number_in_both_branches(x):
    if x.mean() > 0:
        n, scale = 2, 0.5
        y = x * scale
    else:
        n, scale = 2, 0.5
        y = -x * scale
    return [x, x * 2, y][n] * scale


def same_flag_in_both_branches_then_python_if(x):
    done = False
    if x.sum() > 0:
        done = True
        y = x + 1
    else:
        done = True
        y = x - 1
    if done:
        y = y * 2
    return y


def test_a_number_both_branches_give_the_same_value_stays_that_number():
    assert_converted_equals_eager(same_number_in_both_branches, POS, NEG)
    assert_converted_equals_eager(same_flag_in_both_branches_then_python_if, POS, NEG)


# ------------------------------- a tensor-dependent break or return in a for over layers
# A Python `for` whose break (or return) flag becomes a tensor goes on as a while op over
# the items left, stacked into a tensor. Items that cannot be stacked -- the layers of a
# LayerList, tensors of different shapes -- failed ("stack: cannot use a Block"); each
# iteration left now runs in Python under a cond on the flag.


class BreaksOutOfLayers(nn.Layer):
    def __init__(self, depth=3):
        super().__init__()
        self.blocks = nn.LayerList([nn.Linear(3, 3) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = d2s.tanh(block(x)) + x
            if x.mean() > 0.5:
                break
        return x


class ReturnsFromLayers(BreaksOutOfLayers):
    def forward(self, x):
        for i, block in enumerate(self.blocks):
            h = block(x)
            if h.sum() > 1:
                return h * i
            x = x + h
        return x


class ContinuesOverLayers(BreaksOutOfLayers):
    def forward(self, x):
        total = x * 0
        for block in self.blocks:
            h = block(x)
            if h.mean() < 0:
                continue
            total = total + h
            if total.sum() > 4:
                break
        return total


def breaks_out_of_tensors_of_two_shapes(x):
    total = x[0] * 0
    for t in [x[0], x, x[1] * 2]:
        total = total + t.sum(axis=0)  # [3] + [] or [3] + [3]
        if total.max() > 2:
            break
    return total


@pytest.mark.parametrize("layer", [BreaksOutOfLayers, ReturnsFromLayers, ContinuesOverLayers])
def test_a_tensor_dependent_jump_in_a_for_over_layers(layer):
    d2s.seed(0)
    eager = layer()
    converted = layer()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for data in (POS, NEG, MIX, POS * 0.1):
        grads = []
        outs = []
        for model in (eager, converted):
            out = model(d2s.to_tensor(data))
            outs.append(out.numpy())
            params = model.parameters()
            grads.append([np.zeros(p.shape) if g is None else g.numpy() for p, g in
                          zip(params, d2s.grad(out.sum(), params, allow_unused=True))])
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
        for c, e in zip(grads[1], grads[0]):
            np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)


def test_a_tensor_dependent_break_in_a_for_over_tensors_of_two_shapes():
    assert_converted_equals_eager(breaks_out_of_tensors_of_two_shapes, POS, NEG, MIX)


# ------------------------------------- what a while op's trial iteration sees, and learns
# Before building a while op, one trial iteration of the body learns the values it first
# defines (a return value, say) and the lists it grows. The trial saw the carried numbers as
# Python numbers, where the loop sees tensors, so it took other paths: a return under
# `if n > 1` was missed ("a UndefinedReturnValue before this tensor-dependent loop"). And a
# list an inner tensor-dependent loop appends to became a tensor array there, which the
# outer loop did not expect ("becomes a TensorArray in the body").


def returns_under_a_test_of_the_counter(x):
    n = 0
    while x.max() < 1.5 and n < 3:
        n += 1
        if n > 1:
            return x * n
        x = x + 0.25
    return x - 1


def grows_a_list_in_an_inner_tensor_loop(x):
    out = [x]
    n = 0
    while x.max() > -1 and n < 2:
        n += 1
        for _ in range(d2s.cast(x[0] > 0, "int64").sum()):
            out.append(out[-1] * 0.5)
    return d2s.stack(out).sum(axis=0) + len(out)


def test_the_trial_iteration_of_a_while_op_sees_what_the_loop_sees():
    assert_converted_equals_eager(returns_under_a_test_of_the_counter, POS, NEG, POS * 0.1)
    assert_converted_equals_eager(grows_a_list_in_an_inner_tensor_loop, POS, MIX, NEG)


# ------------------------ a name assigned only where the iteration goes on after a jump
# The break/continue counterpart of the section on returns: after `if c: continue` (or
# break) `else: t = ...`, a read of t is fine (it raised "assigns it only in its false
# branch"). The statements after an `if` one of whose branches always jumps now go into
# its other branch.


def continue_or_assign(x):
    total = x * 0
    for i in range(d2s.cast(x[0] > -10, "int64").sum()):
        if (x * i).sum() > 1:
            continue
        else:
            t = d2s.tanh(x) * i
        total = total + t
    return total


def break_or_assign_in_an_elif(x):
    total = x * 0
    n = 0
    while n < 4:
        n += 1
        if total.sum() > 3:
            break
        elif x.mean() > 0:
            t = x * n
        else:
            t = -x
        total = total + t
    return total


class ContinueOverLayers(nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = nn.LayerList([nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x):
        total = x * 0
        for block in self.blocks:
            if x.mean() > 1:
                continue
            else:
                h = block(x)
            total = total + h
            x = x + 0.5
        return total


def break_in_an_elif_then_assigned(x):
    total = x * 0
    for s in [0.25, -1.0, 0.5]:
        if total.sum() > 2:
            k = 1.0
        elif x.mean() + s > 0.75:
            break
        else:
            k = s * 2
        total = total + x * k
    return total


def continue_in_a_nested_if_then_assigned(x, flag):
    total = x * 0
    for s in [0.5, 1.0, 1.5]:
        if flag:
            if (x * s).mean() > 0.5:
                continue
            t = x * s
        else:
            t = -x
        total = total + t
    return total


def break_in_a_nested_if_of_a_tensor_loop(x):
    total = x * 0
    for i in range(d2s.cast(x[0] > -10, "int64").sum()):
        if x.max() > 0:
            if total.sum() > 1:
                break
            t = x * i
        else:
            t = x
        total = total + t
    return total


def break_then_unreachable_code(x):
    total = x * 0
    for s in [1.0, 2.0]:
        if x.min() > 0:
            break
            total = total - 1  # never runs
        else:
            t = x * s
        total = total + t
    return total


def breaks_or_continues_in_one_branch(x):
    total = x * 0
    for s in [1.0, 2.0]:
        if x.min() > 1:
            return total
        elif x.mean() > 0:
            if x.max() > 1:
                break
            continue
        else:
            t = x * s
        total = total + t
    return total


def breaks_or_continues_in_the_else_of_an_elif(x):
    total = x * 0
    for s in [1.0, 2.0, 3.0]:
        if x.sum() > 10 * s:
            k = 1.0
        elif total.sum() < 1:
            k = 2.0
        else:
            if x.mean() > 0:
                break
            continue
        total = total + x * k
    return total


def helper_that_doubles(a):
    return a * 2


def returns_from_a_try_in_one_branch(x, flag):
    total = x * 0
    for _ in range(d2s.cast(x[0] > -10, "int64").sum()):
        if x.max() < 1:
            if flag:
                continue
            t = x - 1
        else:
            try:
                return helper_that_doubles(x)
            except ZeroDivisionError:
                return x
        total = total + t
    return total


def raises_in_one_branch(x, flag):
    if flag:
        raise ValueError("not here")
    else:
        t = x * 2
    return t + 1


def test_a_name_assigned_only_where_the_iteration_goes_on_after_a_jump():
    assert_converted_equals_eager(continue_or_assign, POS, NEG, MIX)
    assert_converted_equals_eager(break_or_assign_in_an_elif, POS, NEG, MIX)
    assert_converted_equals_eager(break_in_an_elif_then_assigned, POS, NEG, MIX)
    assert_converted_equals_eager(continue_in_a_nested_if_then_assigned, (POS, True),
                                  (POS * 0.1, True), (NEG, False))
    assert_converted_equals_eager(break_in_a_nested_if_of_a_tensor_loop, POS, NEG, MIX)
    assert_converted_equals_eager(break_then_unreachable_code, POS, NEG, MIX)
    assert_converted_equals_eager(breaks_or_continues_in_one_branch, POS * 2, POS, NEG, MIX)
    assert_converted_equals_eager(raises_in_one_branch, (POS, False))
    assert_converted_equals_eager(returns_from_a_try_in_one_branch, (POS, False), (POS * 0.1,
                                  False), (POS * 0.1, True), (NEG, False))
    assert_converted_equals_eager(breaks_or_continues_in_the_else_of_an_elif, POS * 10, POS,
                                  NEG, MIX)
    eager = ContinueOverLayers()
    converted = ContinueOverLayers()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for data in (POS * 0.1, NEG, POS * 2):
        np.testing.assert_allclose(converted(d2s.to_tensor(data)).numpy(),
                                   eager(d2s.to_tensor(data)).numpy(), rtol=1e-5, atol=1e-6)


def break_then_read_after_the_loop(x):
    for s in [1.0, 2.0]:
        if x.mean() > 0:
            if x.max() > 5 * s:
                break
            t = x * s
        else:
            t = -x
    return t


def test_a_name_a_break_may_leave_unassigned_and_read_after_the_loop_raises_where_it_did():
    assert_converted_equals_eager(break_then_read_after_the_loop, POS, NEG, MIX)
    with pytest.raises(UnboundLocalError):
        break_then_read_after_the_loop(d2s.to_tensor(POS * 10))  # eagerly too
    with pytest.raises(UnboundLocalError, match="'t'"):
        d2s.jit.to_static(break_then_read_after_the_loop)(d2s.to_tensor(POS * 10))


# ----------------------------- a layer with running statistics before and inside a loop
# The backward of a `while` whose body calls a layer that updates running statistics
# (BatchNorm in training) declared those statistics rebound after the loop's gradient,
# but never read them back from the scope; an op after it that reads them (the gradient
# of a branch that called the same layer earlier in the forward) raised
# UnboundLocalError. Values, gradients and the running statistics must equal eager's.


class _NormBeforeAndInLoop(nn.Layer):
    def __init__(self, variant):
        super().__init__()
        self.variant = variant
        self.bn = nn.BatchNorm1D(3)
        self.linear = nn.Linear(3, 3)

    def forward(self, x):
        y = self.bn(x) if x.sum() > 0 else self.bn(-x)
        if self.variant == "unused":
            while x.mean() < 2.0:
                x = x + 0.5
                unused = self.bn(y)  # noqa: F841 - only its statistics update matters
        elif self.variant == "used":
            i = 0
            while x.mean() < 2.0 and i < 4:
                x = x + d2s.sigmoid(self.bn(x)) * 0.5
                i += 1
        else:  # a branch in the body
            for _ in range(3):
                if x.mean() < 1.0:
                    x = x + self.bn(y).abs()
        return self.linear(y) + x


@pytest.mark.parametrize("variant", ["unused", "used", "branch"])
@pytest.mark.parametrize("data", [POS, NEG, MIX])
def test_running_statistics_updated_before_and_inside_a_loop(variant, data):
    d2s.seed(3)
    eager = _NormBeforeAndInLoop(variant)
    converted = _NormBeforeAndInLoop(variant)
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    results = []
    for model in (eager, converted):
        x = d2s.to_tensor(data, stop_gradient=False)
        out = model(x)
        (grad,) = d2s.grad(out.sum(), [x])
        results.append([out.numpy(), grad.numpy(), model.bn._mean.numpy(),
                        model.bn._variance.numpy()])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
