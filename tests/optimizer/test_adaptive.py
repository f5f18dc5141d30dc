"""RMSProp, Adagrad, Adamax and Lamb against NumPy reference updates (Paddle's formulas),
regularizers (the optimizer's and a parameter's own), and static programs against
eager training."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn, optimizer, regularizer
from tests.optimizer.test_static_minimize import _build, _run_eager, _run_static

C = np.linspace(-1.0, 2.0, 6).reshape(2, 3)
LR = 0.125  # exact in float32 (the learning-rate tensor's dtype)


def _loss(w):
    """sum(C * w) + sum(w**3) / 3: gradient C + w**2."""
    return (w * d2s.to_tensor(C)).sum() + (w * w * w).sum() / 3.0


def _grad(w):
    return C + w ** 2


def rmsprop_ref(rho=0.95, epsilon=1e-6, momentum=0.0, centered=False):
    state = {}

    def step(p, g, lr):
        ms = state.get("ms", np.zeros_like(p))
        mg = state.get("mg", np.zeros_like(p))
        mom = state.get("mom", np.zeros_like(p))
        ms = rho * ms + (1 - rho) * g * g
        if centered:
            mg = rho * mg + (1 - rho) * g
            denom = np.sqrt(ms - mg * mg + epsilon)
        else:
            denom = np.sqrt(ms + epsilon)
        mom = momentum * mom + lr * g / denom
        state.update(ms=ms, mg=mg, mom=mom)
        return p - mom

    return step


def adagrad_ref(epsilon=1e-6, initial_accumulator_value=0.0):
    state = {}

    def step(p, g, lr):
        m = state.get("m", np.full_like(p, initial_accumulator_value)) + g * g
        state["m"] = m
        return p - lr * g / (np.sqrt(m) + epsilon)

    return step


def adamax_ref(beta1=0.9, beta2=0.999, epsilon=1e-8):
    state = {"t": 0}

    def step(p, g, lr):
        state["t"] += 1
        m = beta1 * state.get("m", np.zeros_like(p)) + (1 - beta1) * g
        u = np.maximum(beta2 * state.get("u", np.zeros_like(p)) + epsilon, np.abs(g))
        state.update(m=m, u=u)
        return p - lr / (1 - beta1 ** state["t"]) * m / u

    return step


def lamb_ref(lamb_weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-6, exclude=False):
    state = {"t": 0}

    def step(p, g, lr):
        state["t"] += 1
        t = state["t"]
        m = beta1 * state.get("m", np.zeros_like(p)) + (1 - beta1) * g
        v = beta2 * state.get("v", np.zeros_like(p)) + (1 - beta2) * g * g
        state.update(m=m, v=v)
        r = (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + epsilon)
        if not exclude:
            r = r + lamb_weight_decay * p
        w_norm, r_norm = np.linalg.norm(p), np.linalg.norm(r)
        trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
        return p - lr * trust * r

    return step


CONFIGS = [
    (optimizer.RMSProp, {}, rmsprop_ref()),
    (optimizer.RMSProp, {"rho": 0.8, "momentum": 0.5, "epsilon": 1e-4},
     rmsprop_ref(0.8, 1e-4, 0.5)),
    (optimizer.RMSProp, {"centered": True, "momentum": 0.9}, rmsprop_ref(centered=True,
                                                                        momentum=0.9)),
    (optimizer.Adagrad, {}, adagrad_ref()),
    (optimizer.Adagrad, {"epsilon": 1e-3, "initial_accumulator_value": 0.1},
     adagrad_ref(1e-3, 0.1)),
    (optimizer.Adamax, {}, adamax_ref()),
    (optimizer.Adamax, {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3}, adamax_ref(0.5, 0.9, 1e-3)),
    (optimizer.Lamb, {}, lamb_ref()),
    (optimizer.Lamb, {"lamb_weight_decay": 0.3, "beta1": 0.7}, lamb_ref(0.3, 0.7)),
    (optimizer.Lamb, {"exclude_from_weight_decay_fn": lambda p: True}, lamb_ref(exclude=True)),
]


@pytest.mark.parametrize("cls, kwargs, ref", CONFIGS,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONFIGS)])
def test_steps_match_numpy_reference(cls, kwargs, ref):
    w0 = np.linspace(0.5, -0.5, 6).reshape(2, 3)
    w = d2s.to_tensor(w0, stop_gradient=False)
    opt = cls(learning_rate=LR, parameters=[w], **kwargs)
    expected = w0.copy()
    for _ in range(5):
        _loss(w).backward()
        expected = ref(expected, _grad(expected), LR)
        opt.step()
        opt.clear_grad()
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-10, atol=1e-12)
    assert w.dtype == np.float64 and not w.stop_gradient


def test_lamb_trust_ratio_is_one_for_a_zero_parameter():
    w = d2s.to_tensor(np.zeros(3), stop_gradient=False)
    opt = optimizer.Lamb(LR, parameters=[w])
    (w * d2s.to_tensor(np.array([1.0, -2.0, 0.5]))).sum().backward()
    opt.step()
    expected = lamb_ref()(np.zeros(3), np.array([1.0, -2.0, 0.5]), LR)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("cls", [optimizer.RMSProp, optimizer.Adagrad, optimizer.Adamax,
                                 optimizer.Lamb])
def test_float32_parameters_and_state(cls):
    d2s.seed(0)
    model = nn.Linear(3, 2)
    opt = cls(learning_rate=0.05, parameters=model.parameters())
    x = d2s.to_tensor(np.random.default_rng(0).standard_normal((16, 3)).astype("float32"))
    losses = []
    for _ in range(20):
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert model.weight.dtype == np.float32 and losses[-1] < losses[0]
    state = opt.state_dict()
    assert state and all(v.dtype == np.float32 for v in state.values())


MAKERS = {
    "rmsprop": lambda params=None: optimizer.RMSProp(0.05, momentum=0.5, centered=True,
                                                     parameters=params, weight_decay=0.01),
    "adagrad": lambda params=None: optimizer.Adagrad(0.1, parameters=params),
    "adamax": lambda params=None: optimizer.Adamax(
        0.1, parameters=params, grad_clip=optimizer.ClipGradByGlobalNorm(0.5)),
    "lamb": lambda params=None: optimizer.Lamb(0.1, parameters=params),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_static_training_matches_eager(name):
    main, startup, loss, _, update_ops, pairs = _build(MAKERS[name])
    assert update_ops[0].type == "assign" and update_ops[0].outputs["Out"] == ["w"]
    static_losses, static_w = _run_static(main, startup, loss, 6)
    eager_losses, eager_w = _run_eager(MAKERS[name], 6)
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-5)
    np.testing.assert_allclose(static_w, eager_w, rtol=1e-5, atol=1e-6)
    assert static_losses[-1] < static_losses[0]


# ---------------------------------------------------------------- regularizers
@pytest.mark.parametrize("decay, term", [
    (regularizer.L2Decay(0.1), lambda w: 0.1 * w),
    (regularizer.L1Decay(0.1), lambda w: 0.1 * np.sign(w)),
    (0.1, lambda w: 0.1 * w),
])
def test_optimizer_weight_decay(decay, term):
    w0 = np.linspace(0.5, -0.5, 6).reshape(2, 3)
    w = d2s.to_tensor(w0, stop_gradient=False)
    opt = optimizer.Momentum(LR, 0.9, parameters=[w], weight_decay=decay)
    expected, velocity = w0.copy(), np.zeros_like(w0)
    for _ in range(3):
        _loss(w).backward()
        velocity = 0.9 * velocity + _grad(expected) + term(expected)
        expected = expected - LR * velocity
        opt.step()
        opt.clear_grad()
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_a_parameters_own_regularizer_replaces_the_optimizers():
    d2s.seed(2)
    own = nn.Linear(2, 2, weight_attr=d2s.ParamAttr(regularizer=regularizer.L1Decay(0.5)))
    w0, b0 = own.weight.numpy().astype("float64"), own.bias.numpy().astype("float64")
    opt = optimizer.SGD(LR, parameters=own.parameters(), weight_decay=regularizer.L2Decay(0.25))
    x = np.array([[1.0, -2.0]], dtype="float32")
    own(d2s.to_tensor(x)).sum().backward()
    gw, gb = own.weight.grad.numpy(), own.bias.grad.numpy()
    opt.step()
    np.testing.assert_allclose(own.weight.numpy(), w0 - LR * (gw + 0.5 * np.sign(w0)), rtol=1e-6)
    np.testing.assert_allclose(own.bias.numpy(), b0 - LR * (gb + 0.25 * b0), rtol=1e-6,
                               atol=1e-7)


def test_a_static_program_reads_each_parameters_regularizer_and_clip_flag():
    """minimize on a static loss over captured eager parameters applies each one's own
    regularizer and need_clip, as the eager step does."""
    def make():
        d2s.seed(4)
        return nn.Linear(3, 1, weight_attr=d2s.ParamAttr(regularizer=regularizer.L1Decay(0.3),
                                                         need_clip=False))

    def make_optimizer(model):
        return optimizer.SGD(LR, parameters=model.parameters(), weight_decay=0.1,
                             grad_clip=optimizer.ClipGradByValue(0.01))

    x = np.random.default_rng(1).standard_normal((5, 3)).astype("float32")
    eager = make()
    opt = make_optimizer(eager)
    for _ in range(3):
        (eager(d2s.to_tensor(x)) ** 2).mean().backward()
        opt.step()
        opt.clear_grad()
    model = make()
    main = d2s.static.Program()
    d2s.enable_static()
    try:
        with d2s.static.program_guard(main, d2s.static.Program()):
            data = d2s.static.data("x", [-1, 3])
            loss = (model(data) ** 2).mean()
            make_optimizer(model).minimize(loss)
    finally:
        d2s.disable_static()
    exe = d2s.static.Executor()
    for _ in range(3):
        exe.run(main, feed={"x": x}, fetch_list=[loss])
    np.testing.assert_allclose(model.weight.numpy(), eager.weight.numpy(), rtol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), eager.bias.numpy(), rtol=1e-6)


def test_need_clip_false_leaves_a_gradient_unclipped():
    a = d2s.create_parameter([2], "float64", attr=d2s.ParamAttr(need_clip=False))
    b = d2s.create_parameter([2], "float64")
    a0, b0 = a.numpy().copy(), b.numpy().copy()
    opt = optimizer.SGD(LR, parameters=[a, b], grad_clip=optimizer.ClipGradByValue(0.5))
    ((a + b) * d2s.to_tensor(np.array([3.0, -4.0]))).sum().backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), a0 - LR * np.array([3.0, -4.0]), rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), b0 - LR * np.array([0.5, -0.5]), rtol=1e-12)


def test_regularizer_errors():
    with pytest.raises(TypeError, match="coeff"):
        regularizer.L2Decay("0.1")
    with pytest.raises(TypeError, match="weight_decay"):
        optimizer.SGD(0.1, parameters=[], weight_decay="big")
    with pytest.raises(TypeError, match="decoupled"):
        optimizer.AdamW(0.1, parameters=[], weight_decay=regularizer.L1Decay(0.1))
