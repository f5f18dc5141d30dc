"""Which parameters and inputs get a gradient when a tensor-dependent branch chose
among them: eagerly, only what the branch that ran used (the others' ``grad`` stays
None, and an optimizer leaves them alone); a converted Layer must do the same, not
hand zeros to the others (Adam moves a parameter whose gradient is zero)."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit.step_record import TrainingStepError


class TwoExperts(nn.Layer):
    """One of two Linear layers, chosen by the batch's mean."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        if x.mean() > 0:
            return self.a(x)
        return self.b(x)


class ThreeWays(nn.Layer):
    """Nested branches over three layers, one shared by two of them."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.c = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            out = self.b(h) if h.max() > 1.0 else h * 2.0
        else:
            out = self.c(x)
        return d2s.tanh(out)


class RoutedInALoop(nn.Layer):
    """Each iteration of a tensor-dependent loop picks one of two layers: a layer no
    iteration picked gets no gradient."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        h, i = x, d2s.to_tensor(0)
        while i < (x.abs().sum() > 0).astype("int64") * 2:
            if h.mean() > 0:
                h = d2s.tanh(self.a(h))
            else:
                h = d2s.tanh(self.b(h))
            i += 1
        return h


def _pair(cls):
    d2s.seed(1)
    eager, converted = cls(), cls()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    return eager, converted


def _batches(steps):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((4, 3)) * 2 + (1.5 if k % 2 == 0 else -1.5)).astype("float32")
            for k in range(steps)]


@pytest.mark.parametrize("cls", [TwoExperts, ThreeWays, RoutedInALoop])
def test_parameters_of_a_branch_that_did_not_run_get_no_gradient(cls):
    eager, converted = _pair(cls)
    for x in _batches(4):
        grads = []
        for model in (eager, converted):
            model(d2s.to_tensor(x)).sum().backward()
            grads.append({n: p.grad for n, p in model.named_parameters()})
            model.clear_gradients()
        for name, g in grads[0].items():
            c = grads[1][name]
            assert (g is None) == (c is None), name
            if g is not None:
                np.testing.assert_allclose(c.numpy(), g.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["Adam", "Momentum", "AdamW"])
@pytest.mark.parametrize("cls", [TwoExperts, ThreeWays, RoutedInALoop])
def test_training_through_a_branch_equals_eager(cls, optimizer):
    """Adam and momentum move a parameter handed a zero gradient: the two models drift
    apart unless the converted one hands none, as eager mode does."""
    eager, converted = _pair(cls)
    opts = [getattr(d2s.optimizer, optimizer)(parameters=m.parameters(), learning_rate=0.1)
            for m in (eager, converted)]
    for x in _batches(6):
        for model, opt in zip((eager, converted), opts):
            model(d2s.to_tensor(x)).sum().backward()
            opt.step()
            opt.clear_grad()
    for (name, p), (_, q) in zip(eager.named_parameters(), converted.named_parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_an_input_only_the_other_branch_reads_gets_no_gradient(sign):
    def pick(x, y, z):
        if x.sum() > 0:
            out = y * 2.0
        else:
            out = d2s.sin(z)
        return out + x

    values = [np.array([1.0, 2.0], np.float32) * sign, np.array([0.5, -1.0], np.float32),
              np.array([0.25, 3.0], np.float32)]
    results = []
    for f in (pick, d2s.jit.to_static(pick)):
        args = [d2s.to_tensor(v, stop_gradient=False) for v in values]
        grads = d2s.grad(f(*args).sum(), args, allow_unused=True)
        results.append([None if g is None else g.numpy() for g in grads])
    for got, want in zip(results[1], results[0]):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------- the update inside a converted step


def _whole_step(model, opt):
    def step(x):
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return step


class SharedBranches(nn.Layer):
    """Both branches read the same layer: every call reaches its parameters."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:
            return d2s.tanh(h)
        return h * 0.5


@pytest.mark.parametrize("cls", [TwoExperts, ThreeWays])
@pytest.mark.parametrize("optimizer", ["Adam", "Momentum"])
def test_an_update_inside_the_step_of_a_parameter_some_branches_skip_is_an_error(cls,
                                                                                 optimizer):
    """Eagerly, the update skips a parameter without a gradient; the program would move it
    with zeros. So the trace refuses, at the user's `opt.step()` line."""
    model = cls()
    opt = getattr(d2s.optimizer, optimizer)(parameters=model.parameters(), learning_rate=0.1)
    step = d2s.jit.to_static(_whole_step(model, opt))
    with pytest.raises(TrainingStepError, match=r"(?s)only some branches.*opt\.step\(\)"):
        step(d2s.to_tensor(_batches(1)[0]))


@pytest.mark.parametrize("cls,optimizer", [(TwoExperts, "SGD"), (ThreeWays, "SGD"),
                                           (SharedBranches, "Adam")])
def test_an_update_inside_the_step_that_zeros_cannot_move_equals_eager(cls, optimizer):
    """Plain SGD leaves a parameter as it is on a zero gradient, and a branch that every
    call's parameters pass through decides nothing: both train as eagerly."""
    eager, converted = _pair(cls)
    steps = []
    for model, convert in ((eager, False), (converted, True)):
        opt = getattr(d2s.optimizer, optimizer)(parameters=model.parameters(),
                                                 learning_rate=0.1)
        step = _whole_step(model, opt)
        steps.append(d2s.jit.to_static(step) if convert else step)
    for x in _batches(6):
        losses = [float(step(d2s.to_tensor(x))) for step in steps]
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    for (name, p), (_, q) in zip(eager.named_parameters(), converted.named_parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
