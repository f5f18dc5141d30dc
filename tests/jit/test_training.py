"""Training through converted code: one tape node per call, the program's backward."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.vision.models import LeNet
from tests.jit.helpers import MLP, LanguageModel, copy_weights, op_types, tensor

STEPS, BATCH = 200, 8


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 1, 28, 28)).astype("float32")
    y = rng.integers(0, 10, (32, 1)).astype("int64")
    return x, y


def train_lenet(images, convert: bool) -> np.ndarray:
    x_all, y_all = images
    d2s.seed(1)
    net = LeNet()
    if convert:
        jit.to_static(net)
    opt = d2s.optimizer.Adam(parameters=net.parameters(), learning_rate=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for step in range(STEPS):
        i = (step % (len(x_all) // BATCH)) * BATCH
        loss = loss_fn(net(d2s.to_tensor(x_all[i:i + BATCH])),
                       d2s.to_tensor(y_all[i:i + BATCH]))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    if convert:
        assert len(net.forward.program_cache) == 1
    return np.array(losses)


def test_lenet_trains_converted_with_the_same_losses_as_eager(images):
    eager = train_lenet(images, convert=False)
    converted = train_lenet(images, convert=True)
    np.testing.assert_allclose(converted, eager, rtol=1e-4, atol=1e-6)
    first, last = converted[:4].mean(), converted[-4:].mean()
    assert last < 0.1 * first


def test_gradients_reach_parameters_and_inputs():
    d2s.seed(2)
    eager, converted = LeNet(), LeNet()
    copy_weights(eager, converted)
    jit.to_static(converted)
    grads = {}
    for label, net in (("eager", eager), ("converted", converted)):
        x = tensor([4, 1, 28, 28], seed=3, stop_gradient=False)
        (net(x) ** 2).mean().backward()
        assert x.grad is not None
        grads[label] = [x.grad.numpy()] + [p.grad.numpy() for p in net.parameters()]
    assert len(grads["converted"]) == 1 + len(converted.parameters())
    for e, c in zip(grads["eager"], grads["converted"]):
        np.testing.assert_allclose(c, e, rtol=1e-4, atol=1e-6)


def test_the_converted_call_is_one_tape_node_mixed_with_eager_ops():
    d2s.seed(0)
    net, eager = MLP(), MLP()
    copy_weights(net, eager)
    jit.to_static(net)
    x = tensor([6, 4], stop_gradient=False)
    x_ref = tensor([6, 4], stop_gradient=False)
    out = (net(x * 3).tanh() * 2).sum()  # eager ops before and after the program
    ref = (eager(x_ref * 3).tanh() * 2).sum()
    out.backward()
    ref.backward()
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(net.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_parameters_stay_the_layers_own_tensors():
    d2s.seed(0)
    net, eager = MLP(), MLP()
    jit.to_static(net)
    x = tensor([5, 4])
    first = net(x)
    captured = net.forward.concrete_program.parameters
    assert {id(p) for p in captured} == {id(p) for p in net.parameters()}
    opt = d2s.optimizer.SGD(parameters=net.parameters(), learning_rate=0.5)
    (first ** 2).mean().backward()
    opt.step()  # an eager update between two converted calls ...
    opt.clear_grad()
    second = net(x)  # ... is seen by the second
    copy_weights(net, eager)
    np.testing.assert_allclose(second.numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(second.numpy(), first.numpy())
    net.fc2.bias.set_value(np.full([3], 7.0, "float32"))  # so is a direct assignment
    copy_weights(net, eager)
    np.testing.assert_allclose(net(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6)
    assert len(net.forward.program_cache) == 1


def test_no_grad_runs_the_forward_only():
    net = jit.to_static(MLP())
    x = tensor([2, 4], stop_gradient=False)
    with d2s.no_grad():
        out = net(x)
    assert out.stop_gradient and out._node is None


# ------------------------------------------------------------------ the LSTM LM

@pytest.fixture
def lm_data():
    rng = np.random.default_rng(0)
    ids = d2s.to_tensor(rng.integers(0, 20, (4, 9)).astype("int64"))
    return ids, d2s.to_tensor(np.array(8, "int64")), d2s.to_tensor(np.array(5, "int64"))


def lm_pair():
    d2s.seed(3)
    eager = LanguageModel()
    converted = LanguageModel()
    copy_weights(eager, converted)
    return eager, jit.to_static(converted)


def test_lstm_lm_program_has_a_while_loop_and_matches_eager_at_any_length(lm_data):
    ids, long, short = lm_data
    eager, converted = lm_pair()
    for length in (long, short, long):
        np.testing.assert_allclose(float(converted(ids, length)), float(eager(ids, length)),
                                   rtol=1e-5)
    assert len(converted.forward.program_cache) == 1  # the length is data, not part of the key
    assert op_types(converted.forward.main_program).count("while") == 1


def test_lstm_lm_gradients_equal_eager(lm_data):
    ids, long, short = lm_data
    eager, converted = lm_pair()
    for length in (long, short):
        for net in (eager, converted):
            net.clear_gradients()
            net(ids, length).backward()
        for (name, p), q in zip(eager.named_parameters(), converted.parameters()):
            assert q.grad is not None, name
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=name)


def test_lstm_lm_trains_converted(lm_data):
    ids, long, _ = lm_data
    _, converted = lm_pair()
    opt = d2s.optimizer.Adam(parameters=converted.parameters(), learning_rate=0.05)
    losses = []
    for _ in range(8):
        loss = converted(ids, long)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0]
    assert all(b < a for a, b in zip(losses, losses[1:]))


def test_freezing_and_unfreezing_parameters_between_calls():
    d2s.seed(0)
    net = jit.to_static(MLP())
    x = tensor([3, 4])
    net.fc1.weight.stop_gradient = True  # frozen at the first (traced) call
    net(x).sum().backward()
    assert net.fc1.weight.grad is None and net.fc2.weight.grad is not None
    net.clear_gradients()
    net.fc1.weight.stop_gradient = False  # trainable again: the same program trains it
    net(x).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.clear_gradients()
    net.fc2.bias.stop_gradient = True
    net(x).sum().backward()
    assert net.fc2.bias.grad is None and net.fc1.weight.grad is not None
    assert len(net.forward.program_cache) == 1


def test_no_gradient_is_computed_for_inputs_that_do_not_need_one():
    net = jit.to_static(MLP())
    frozen, wanted = tensor([3, 4]), tensor([3, 4], stop_gradient=False)
    net(frozen).sum().backward()
    assert frozen.grad is None
    net(wanted).sum().backward()
    assert wanted.grad is not None
    runner = net.forward.concrete_program.runner
    wrt_lists = sorted(len(plans.wrt) for plans in runner._backward.values())
    assert wrt_lists == [4, 5]  # the 4 parameters; the parameters and the input
