"""Optimizers: updates against the NumPy reference, training, state, clipping, static."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn, optimizer
from tests.optimizer.reference import Trainer

C = np.linspace(-1.0, 2.0, 6).reshape(2, 3)


def _param(value):
    return d2s.to_tensor(np.array(value, dtype="float64"), stop_gradient=False)


def _loss(w):
    """sum(C * w) + sum(w**3) / 3: gradient C + w**2."""
    return (w * d2s.to_tensor(C)).sum() + (w * w * w).sum() / 3.0


def _grad(w):
    return C + w ** 2


CONFIGS = [
    ("sgd", optimizer.SGD, {}, {}),
    ("sgd", optimizer.SGD, {"weight_decay": 0.1}, {}),
    ("momentum", optimizer.Momentum, {"momentum": 0.8}, {"mu": 0.8}),
    ("momentum", optimizer.Momentum, {"momentum": 0.9, "use_nesterov": True},
     {"mu": 0.9, "use_nesterov": True}),
    ("momentum", optimizer.Momentum, {"weight_decay": 0.05}, {"mu": 0.9}),
    ("adam", optimizer.Adam, {}, {}),
    ("adam", optimizer.Adam, {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3, "weight_decay": 0.1},
     {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3}),
    ("adamw", optimizer.AdamW, {}, {}),
    ("adamw", optimizer.AdamW, {"weight_decay": 0.3, "beta1": 0.7}, {"beta1": 0.7}),
]


@pytest.mark.parametrize("kind, cls, kwargs, attrs", CONFIGS,
                         ids=[f"{c[1].__name__}-{i}" for i, c in enumerate(CONFIGS)])
def test_steps_match_numpy_reference(kind, cls, kwargs, attrs):
    w0 = np.linspace(0.5, -0.5, 6).reshape(2, 3)
    w = _param(w0)
    lr = 0.125  # exact in float32: the learning-rate tensor is float32
    opt = cls(learning_rate=lr, parameters=[w], **kwargs)
    weight_decay = kwargs.get("weight_decay", 0.01 if kind == "adamw" else 0.0)
    ref = Trainer(kind, w0, lr, weight_decay, **attrs)
    for _ in range(5):
        _loss(w).backward()
        expected = ref.step(_grad(ref.p))
        opt.step()
        opt.clear_grad()
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-10, atol=1e-12)
    assert w.dtype == np.float64 and not w.stop_gradient


@pytest.mark.parametrize("cls", [optimizer.SGD, optimizer.Momentum, optimizer.Adam,
                                 optimizer.AdamW])
def test_regression_loss_falls(cls):
    d2s.seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25
    model = nn.Linear(4, 1)
    weight = model.weight
    opt = cls(learning_rate=0.05, parameters=model.parameters())
    xs, ys = d2s.to_tensor(x), d2s.to_tensor(y)
    losses = []
    for _ in range(60):
        loss = ((model(xs) - ys) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert model.weight is weight  # updated in place: the layer keeps its Parameter
    assert losses[-1] < 0.2 * losses[0]


def test_minimize_runs_backward_once():
    w = _param(np.zeros((2, 3)))
    opt = optimizer.SGD(learning_rate=0.5, parameters=[w])
    opt.minimize(_loss(w))  # backward inside
    np.testing.assert_allclose(w.numpy(), -0.5 * C)
    opt.clear_grad()
    loss = _loss(w)
    loss.backward()  # Paddle style: backward, then minimize
    _, pairs = opt.minimize(loss)
    np.testing.assert_allclose(w.numpy(), -0.5 * C - 0.5 * _grad(-0.5 * C))
    assert pairs[0][0] is w


def test_parameters_without_gradient_or_frozen_are_skipped():
    used, unused, frozen = _param(np.ones(3)), _param(np.ones(3)), _param(np.ones(3))
    frozen.stop_gradient = True
    opt = optimizer.Adam(learning_rate=0.1, parameters=[used, unused, frozen])
    ((used + frozen) * 2.0).sum().backward()
    opt.step()
    assert (used.numpy() < 1).all()
    np.testing.assert_array_equal(unused.numpy(), np.ones(3))
    np.testing.assert_array_equal(frozen.numpy(), np.ones(3))
    assert list(opt.state_dict()) == [f"param_0_{n}_0" for n in
                                      ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")]


def test_clear_grad_and_alias():
    w = _param(np.ones(2))
    opt = optimizer.SGD(parameters=[w])
    (w * 3.0).sum().backward()
    assert w.grad is not None
    opt.clear_gradients()
    assert w.grad is None
    (w * 3.0).sum().backward()
    opt.clear_grad(set_to_zero=True)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])


def test_scheduler_drives_the_learning_rate():
    w = _param(np.zeros(1))
    sched = optimizer.lr.StepDecay(learning_rate=1.0, step_size=2, gamma=0.5)
    opt = optimizer.SGD(learning_rate=sched, parameters=[w])
    steps = []
    for _ in range(5):
        before = w.numpy()[0]
        (w * 1.0).sum().backward()
        opt.step()
        opt.clear_grad()
        steps.append(before - w.numpy()[0])
        assert opt.get_lr() == sched()
        sched.step()
    np.testing.assert_allclose(steps, [1.0, 1.0, 0.5, 0.5, 0.25])
    with pytest.raises(RuntimeError, match="driven by StepDecay"):
        opt.set_lr(0.1)


def test_set_lr_and_get_lr():
    w = _param(np.zeros(1))
    opt = optimizer.SGD(learning_rate=0.5, parameters=[w])
    assert opt.get_lr() == 0.5
    opt.set_lr(0.25)
    (w * 1.0).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), [-0.25])


def test_parameter_learning_rate_multiplier():
    layer = nn.Linear(2, 1, weight_attr=nn.ParamAttr(learning_rate=0.5),
                          bias_attr=nn.initializer.Constant(0.0))
    w0 = layer.weight.numpy().copy()
    opt = optimizer.SGD(learning_rate=1.0, parameters=layer.parameters())
    layer(d2s.ones([1, 2])).sum().backward()
    opt.step()
    np.testing.assert_allclose(layer.weight.numpy(), w0 - 0.5, rtol=1e-6)
    np.testing.assert_allclose(layer.bias.numpy(), [-1.0])


@pytest.mark.parametrize("cls", [optimizer.Momentum, optimizer.Adam])
def test_state_dict_round_trip_continues_identically(cls):
    a, b = _param(np.full((2, 3), 0.3)), _param(np.full((2, 3), 0.3))
    sched = optimizer.lr.ExponentialDecay(0.1, gamma=0.9)
    opt_a = cls(learning_rate=sched, parameters=[a])
    for _ in range(3):
        _loss(a).backward()
        opt_a.step()
        opt_a.clear_grad()
        sched.step()
    state = opt_a.state_dict()
    assert state["LR_Scheduler"]["last_epoch"] == 3
    b.set_value(a)
    sched_b = optimizer.lr.ExponentialDecay(0.1, gamma=0.9)
    opt_b = cls(learning_rate=sched_b, parameters=[b])
    opt_b.set_state_dict({k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in state.items()})
    assert sched_b.last_epoch == 3 and opt_b.get_lr() == opt_a.get_lr()
    for opt, w in ((opt_a, a), (opt_b, b)):
        _loss(w).backward()
        opt.step()
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_set_state_dict_rejects_wrong_shapes():
    w = _param(np.zeros((2, 3)))
    opt = optimizer.Momentum(parameters=[w])
    with pytest.raises(ValueError, match="param_0_velocity_0 has shape"):
        opt.set_state_dict({"param_0_velocity_0": np.zeros((3, 2))})


def test_global_norm_clip():
    a, b = _param(np.zeros(2)), _param(np.zeros(3))
    ga, gb = np.array([3.0, 0.0]), np.array([0.0, 4.0, 0.0])  # global norm 5
    clip = optimizer.ClipGradByGlobalNorm(clip_norm=1.0)
    opt = optimizer.SGD(learning_rate=1.0, parameters=[a, b], grad_clip=clip)
    ((a * d2s.to_tensor(ga)).sum() + (b * d2s.to_tensor(gb)).sum()).backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), -ga / 5)
    np.testing.assert_allclose(b.numpy(), -gb / 5)
    small = optimizer.ClipGradByGlobalNorm(clip_norm=10.0)
    pairs = small([(a, d2s.to_tensor(ga))])
    np.testing.assert_allclose(pairs[0][1].numpy(), ga)


def test_norm_and_value_clips():
    g = d2s.to_tensor(np.array([3.0, -4.0]))
    (_, by_norm), = optimizer.ClipGradByNorm(1.0)([(None, g)])
    np.testing.assert_allclose(by_norm.numpy(), [0.6, -0.8])
    (_, by_value), = optimizer.ClipGradByValue(2.0)([(None, g)])
    np.testing.assert_allclose(by_value.numpy(), [2.0, -2.0])


@pytest.mark.parametrize("make, error, match", [
    (lambda: optimizer.SGD(learning_rate="0.1", parameters=[]), TypeError, "learning_rate"),
    (lambda: optimizer.SGD(parameters=_param(np.ones(2))), TypeError, "list of tensors"),
    (lambda: optimizer.Adam(beta1=1.5, parameters=[]), ValueError, "beta1"),
    (lambda: optimizer.SGD(weight_decay="l2", parameters=[]), TypeError, "weight_decay"),
    (lambda: optimizer.SGD().step(), ValueError, "parameters=model.parameters"),
])
def test_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()
