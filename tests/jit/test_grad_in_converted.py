"""``d2s.grad`` called inside converted code: the gradient ops become part of the
program, and the program's backward differentiates through them."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.static import InputSpec
from tests.jit.helpers import tensor


class PenalizedNet(nn.Layer):
    """A loss with a gradient penalty: mean(out) + mean(d sum(out) / dx ** 2)."""

    def __init__(self, create_graph=True):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 5), nn.Linear(5, 2)
        self.create_graph = create_graph

    def forward(self, x):
        out = self.fc2(d2s.tanh(self.fc1(x))) ** 2
        (dx,) = d2s.grad(out.sum(), x, create_graph=self.create_graph, retain_graph=True)
        return out.mean() + (dx ** 2).mean()


def _steps(model, x, steps=3):
    opt = d2s.optimizer.SGD(parameters=model.parameters(), learning_rate=0.1)
    losses, grads = [], []
    for _ in range(steps):
        x = d2s.to_tensor(x.numpy(), stop_gradient=False)
        loss = model(x)
        loss.backward()
        losses.append(float(loss))
        grads.append([p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy()])
        opt.step()
        opt.clear_grad()
    return losses, grads


@pytest.mark.parametrize("create_graph", [True, False])
def test_a_gradient_penalty_in_converted_code_trains_as_eager(create_graph):
    d2s.seed(1)
    eager_model = PenalizedNet(create_graph)
    converted_model = PenalizedNet(create_graph)
    converted_model.set_state_dict(eager_model.state_dict())
    jit.to_static(converted_model, input_spec=[InputSpec([-1, 3])])
    x = tensor([4, 3])
    eager_losses, eager_grads = _steps(eager_model, x)
    losses, grads = _steps(converted_model, x)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    for got, want in zip(grads, eager_grads):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_without_create_graph_the_gradient_is_a_constant():
    """The penalty's own gradient does not flow back (as eager, where it is detached)."""
    d2s.seed(2)
    model = PenalizedNet(create_graph=False)
    jit.to_static(model)
    x = tensor([4, 3], stop_gradient=False)
    model(x).backward()
    with_penalty = [p.grad.numpy() for p in model.parameters()]
    model.clear_gradients()
    out = model.fc2(d2s.tanh(model.fc1(x))) ** 2
    out.mean().backward()
    for g, w in zip(with_penalty, [p.grad.numpy() for p in model.parameters()]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def grad_of_a_parameter(x, layer):
    loss = (layer(x) ** 2).sum()
    (gw,) = d2s.grad(loss, layer.weight, create_graph=True)
    return loss + (gw * gw).sum()


def test_the_gradient_of_a_parameter_read_by_converted_code():
    d2s.seed(4)
    layer = nn.Linear(3, 2)
    x = tensor([2, 3])
    eager = grad_of_a_parameter(x, layer)
    eager.backward()
    expected = layer.weight.grad.numpy()
    layer.clear_gradients()
    converted = jit.to_static(grad_of_a_parameter)(x, layer)
    converted.backward()
    np.testing.assert_allclose(float(converted), float(eager), rtol=1e-6)
    np.testing.assert_allclose(layer.weight.grad.numpy(), expected, rtol=1e-5)


def grad_in_a_branch(x):
    y = (x * x).sum()
    if y > 1.0:
        (g,) = d2s.grad(y, x)
        y = y + g.sum()
    return y


def test_grad_inside_a_tensor_dependent_branch_is_a_clear_error():
    x = tensor([3], stop_gradient=False)
    with pytest.raises(NotImplementedError, match="inside a tensor-dependent branch or loop"):
        jit.to_static(grad_in_a_branch)(x)


def unused_input(x, y):
    return d2s.grad((x * 2.0).sum(), [x, y])


def test_an_unused_input_is_an_error_unless_allowed():
    x, y = tensor([2], stop_gradient=False), tensor([2], stop_gradient=False)
    with pytest.raises(ValueError, match=r"inputs\[1\] is not used"):
        jit.to_static(unused_input)(x, y)



WEIGHTS = tensor([3], seed=5)


def weighted_gradient(x, weights):
    (g,) = d2s.grad(x * x, x, grad_outputs=weights)
    return g


def weighted_by_a_captured_tensor(x):
    (g,) = d2s.grad(x * x, x, grad_outputs=WEIGHTS)
    return g


def test_output_gradients_may_be_inputs_or_captured_tensors():
    x = tensor([3], stop_gradient=False)
    expected = 2 * x.numpy() * WEIGHTS.numpy()
    np.testing.assert_allclose(jit.to_static(weighted_gradient)(x, WEIGHTS).numpy(), expected,
                               rtol=1e-6)
    np.testing.assert_allclose(jit.to_static(weighted_by_a_captured_tensor)(x).numpy(),
                               expected, rtol=1e-6)
