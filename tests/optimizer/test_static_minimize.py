"""``minimize`` on a static loss: backward and update ops in the program."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import optimizer, static
from dy2stat.runtime.executor import Scope
from dy2stat.static.variable import Variable

RNG = np.random.default_rng(3)
X = RNG.standard_normal((8, 3)).astype("float32")
Y = RNG.standard_normal((8, 2)).astype("float32")
W0 = RNG.standard_normal((3, 2)).astype("float32")


def _build(make_optimizer):
    """A least-squares program whose weight starts at W0."""
    main, startup = static.Program(), static.Program()
    d2s.enable_static()
    try:
        with static.program_guard(main, startup):
            x = static.data("x", [-1, 3])
            y = static.data("y", [-1, 2])
            w = static.create_parameter([3, 2], "float32", name="w",
                                        initializer=("full", {"value": 0.0}))
            w = Variable(main.global_block(), w.name)
            loss = ((x @ w - y) ** 2).mean()
            opt = make_optimizer()
            update_ops, pairs = opt.minimize(loss)
    finally:
        d2s.disable_static()
    return main, startup, loss, opt, update_ops, pairs


def _run_static(main, startup, loss, steps, between=None):
    scope = Scope()
    exe = static.Executor()
    exe.run(startup, scope=scope)
    scope["w"] = W0.copy()  # after the startup program: both runs start from W0
    losses = []
    for _ in range(steps):
        (value,) = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
        losses.append(float(value))
        if between is not None:
            between()
    return losses, np.asarray(scope["w"])


def _run_eager(make_optimizer, steps, between=None):
    w = d2s.to_tensor(W0, stop_gradient=False)
    opt = make_optimizer([w])
    x, y = d2s.to_tensor(X), d2s.to_tensor(Y)
    losses = []
    for _ in range(steps):
        loss = ((x @ w - y) ** 2).mean()
        opt.minimize(loss)
        opt.clear_grad()
        losses.append(float(loss))
        if between is not None:
            between()
    return losses, w.numpy()


MAKERS = {
    "sgd": lambda params=None: optimizer.SGD(0.1, parameters=params, weight_decay=0.01),
    "momentum": lambda params=None: optimizer.Momentum(0.1, 0.9, parameters=params,
                                                       use_nesterov=True),
    "adam": lambda params=None: optimizer.Adam(
        0.1, parameters=params, grad_clip=optimizer.ClipGradByGlobalNorm(0.5)),
    "adamw": lambda params=None: optimizer.AdamW(0.1, parameters=params, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_static_training_matches_eager(name):
    main, startup, loss, _, update_ops, pairs = _build(MAKERS[name])
    assert [op.type for op in update_ops] == [name]
    assert update_ops[0].outputs["ParamOut"] == ["w"]
    assert [p.name for p, _ in pairs] == ["w"]
    static_losses, static_w = _run_static(main, startup, loss, 6)
    eager_losses, eager_w = _run_eager(MAKERS[name], 6)
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-5)
    np.testing.assert_allclose(static_w, eager_w, rtol=1e-5, atol=1e-6)
    assert static_losses[-1] < static_losses[0]


def test_accumulators_are_persistable_and_initialized_by_startup():
    main, startup, *_ = _build(MAKERS["adam"])
    persistable = {v.name for v in main.persistables()}
    assert {"w_moment1_0", "w_moment2_0", "w_beta1_pow_acc_0", "w_beta2_pow_acc_0",
            "learning_rate"} <= persistable
    scope = Scope()
    static.Executor().run(startup, scope=scope)
    np.testing.assert_allclose(np.asarray(scope["w_beta1_pow_acc_0"]), [0.9])
    np.testing.assert_array_equal(np.asarray(scope["w_moment2_0"]), np.zeros((3, 2)))


def test_scheduler_changes_the_rate_without_rebuilding():
    holder = {}

    def make(params=None):
        holder["sched"] = optimizer.lr.StepDecay(0.2, step_size=2, gamma=0.5)
        return optimizer.SGD(holder["sched"], parameters=params)

    main, startup, loss, *_ = _build(make)
    version = main.version
    static_losses, _ = _run_static(main, startup, loss, 6, between=lambda: holder["sched"].step())
    assert main.version == version
    eager_losses, _ = _run_eager(make, 6, between=lambda: holder["sched"].step())
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-5)


def test_minimize_trains_captured_eager_parameters():
    w = d2s.to_tensor(W0, stop_gradient=False)
    main = static.Program()
    d2s.enable_static()
    try:
        with static.program_guard(main, static.Program()):
            x, y = static.data("x", [-1, 3]), static.data("y", [-1, 2])
            loss = ((x @ w - y) ** 2).mean()
            update_ops, pairs = optimizer.SGD(0.1, parameters=[w]).minimize(loss)
    finally:
        d2s.disable_static()
    assert len(update_ops) == 1 and len(pairs) == 1
    exe = static.Executor()
    for _ in range(2):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=Scope())
    _, eager_w = _run_eager(lambda params: optimizer.SGD(0.1, parameters=params), 2)
    np.testing.assert_allclose(w.numpy(), eager_w, rtol=1e-5)
