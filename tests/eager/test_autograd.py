"""Eager autograd: backward, grad, double grad, no_grad and their errors."""

import numpy as np
import pytest

import dy2stat as d2s


def leaf(values, dtype="float64"):
    return d2s.to_tensor(np.asarray(values, dtype=dtype), stop_gradient=False)


def test_seed_double_grad_example():
    x = d2s.ones([1])
    x.stop_gradient = False
    y = x * x
    dx = d2s.grad([y], [x], create_graph=True)[0]
    z = y + dx
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0])


def test_third_derivative():
    x = leaf([0.7])
    y = x * x * x * x  # x^4
    (g1,) = d2s.grad([y], [x], create_graph=True)
    (g2,) = d2s.grad([g1], [x], create_graph=True)
    (g3,) = d2s.grad([g2], [x])
    np.testing.assert_allclose(g3.numpy(), [24 * 0.7])


def test_broadcast_gradients_are_reduced_to_the_input_shape():
    x, b = leaf(np.ones((2, 3))), leaf(np.ones(3))
    s = leaf(np.ones((2, 1)))
    ((x + b) * s).sum().backward()
    assert b.grad.shape == [3] and s.grad.shape == [2, 1]
    np.testing.assert_allclose(b.grad.numpy(), [2, 2, 2])
    np.testing.assert_allclose(s.grad.numpy(), [[6], [6]])


def test_gradients_accumulate_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 + 4])
    x.clear_grad()
    assert x.grad is None


def test_integer_and_bool_tensors_never_get_gradients():
    i = d2s.to_tensor([1, 2], stop_gradient=False)
    flag = d2s.to_tensor([True, False], stop_gradient=False)
    x = leaf([1.0, 2.0])
    (x * i.astype("float64") + d2s.where(flag, x, 0.0)).sum().backward()
    assert i.grad is None and flag.grad is None
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])


def test_second_backward_through_a_freed_graph_mentions_retain_graph():
    x = leaf([1.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.5])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])


def test_grad_leaves_dot_grad_alone_and_reports_unused_inputs():
    x, unused = leaf([2.0]), leaf([1.0])
    y = (x * x).sum()
    with pytest.raises(ValueError, match="allow_unused"):
        d2s.grad([y], [x, unused], retain_graph=True)
    gx, gu = d2s.grad([y], [x, unused], allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), [4.0])
    assert gu is None and x.grad is None


def test_grad_outputs_weight_the_outputs():
    x = leaf([1.0, 2.0])
    y = x * x
    (g,) = d2s.grad([y], [x], grad_outputs=[d2s.to_tensor(np.array([1.0, 10.0]))])
    np.testing.assert_allclose(g.numpy(), [2.0, 40.0])


def test_grad_with_respect_to_an_intermediate():
    x = leaf([3.0])
    h = x * 2
    y = (h * h).sum()
    (gh,) = d2s.grad([y], [h])
    np.testing.assert_allclose(gh.numpy(), [12.0])


def test_no_grad_as_context_manager_and_decorator():
    x = leaf([1.0])
    with d2s.no_grad():
        y = x * 2
    assert y.stop_gradient

    @d2s.no_grad()
    def double(t):
        return t * 2

    assert double(x).stop_gradient
    assert not (x * 2).stop_gradient


def test_backward_needs_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match="stop_gradient"):
        d2s.ones([1]).sum().backward()


def test_index_assignment_is_differentiable():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    y[1] = x[0] * 5
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 0.0, 1.0])


def test_assigning_into_a_used_tensor_is_caught_by_backward():
    x = leaf([1.0, 2.0])
    y = x * 1
    z = y * y
    y[0] = 5.0
    with pytest.raises(RuntimeError, match="clone"):
        z.sum().backward()


def test_assigning_into_a_leaf_that_requires_grad_is_an_error():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="clone"):
        x[0] = 3.0
