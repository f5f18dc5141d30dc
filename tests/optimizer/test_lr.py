"""Learning-rate schedulers: values over epochs, state, errors."""

import math

import numpy as np
import pytest

from dy2stat.optimizer import lr


def _values(scheduler, epochs):
    values = []
    for _ in range(epochs):
        values.append(scheduler())
        scheduler.step()
    return values


@pytest.mark.parametrize("make, expected", [
    (lambda: lr.StepDecay(0.5, step_size=2, gamma=0.1),
     [0.5, 0.5, 0.05, 0.05, 0.005, 0.005]),
    (lambda: lr.MultiStepDecay(1.0, milestones=[1, 4], gamma=0.5),
     [1.0, 0.5, 0.5, 0.5, 0.25, 0.25]),
    (lambda: lr.ExponentialDecay(2.0, gamma=0.5), [2.0, 1.0, 0.5, 0.25, 0.125, 0.0625]),
    (lambda: lr.CosineAnnealingDecay(1.0, T_max=4, eta_min=0.2),
     [0.2 + 0.8 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(6)]),
    (lambda: lr.PiecewiseDecay(boundaries=[2, 4], values=[1.0, 0.5, 0.1]),
     [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]),
    (lambda: lr.LambdaDecay(1.0, lambda e: 0.5 ** e), [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]),
    (lambda: lr.LinearWarmup(1.0, warmup_steps=4, start_lr=0.0, end_lr=1.0),
     [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]),
    (lambda: lr.LinearWarmup(lr.StepDecay(1.0, 1, 0.5), warmup_steps=2, start_lr=0.0, end_lr=1.0),
     [0.0, 0.5, 1.0, 0.5, 0.25, 0.125]),
])
def test_values_over_epochs(make, expected):
    np.testing.assert_allclose(_values(make(), len(expected)), expected, rtol=1e-12)


def test_cosine_reaches_eta_min_at_t_max_and_comes_back():
    sched = lr.CosineAnnealingDecay(0.1, T_max=10, eta_min=0.01)
    values = _values(sched, 21)
    assert values[10] == pytest.approx(0.01)
    assert values[20] == pytest.approx(0.1)


def test_step_to_an_epoch_and_last_epoch():
    sched = lr.StepDecay(1.0, step_size=3, gamma=0.5)
    assert sched.last_epoch == 0
    sched.step(7)
    assert sched.last_epoch == 7 and sched() == 0.25 and sched.get_lr() == 0.25


def test_state_dict_round_trip():
    a = lr.MultiStepDecay(1.0, [2, 3], 0.1)
    for _ in range(3):
        a.step()
    b = lr.MultiStepDecay(1.0, [2, 3], 0.1)
    b.set_state_dict(a.state_dict())
    assert (b.last_epoch, b()) == (3, a())
    b.step()
    a.step()
    assert b() == a()


def test_listeners_are_held_weakly():
    sched = lr.StepDecay(1.0, 1)
    seen = []

    class Listener:
        def on(self, value):
            seen.append(value)

    listener = Listener()
    sched._subscribe(listener.on)
    sched.step()
    del listener
    sched.step()
    assert seen == [0.1]


@pytest.mark.parametrize("make, match", [
    (lambda: lr.StepDecay(0.1, step_size=0), "step_size"),
    (lambda: lr.StepDecay(0.1, step_size=2, gamma=1.5), "gamma"),
    (lambda: lr.MultiStepDecay(0.1, [3, 2]), "increase"),
    (lambda: lr.CosineAnnealingDecay(0.1, T_max=0), "T_max"),
    (lambda: lr.PiecewiseDecay([1, 2], [0.1]), "one more value"),
    (lambda: lr.StepDecay("0.1", 2), "learning_rate"),
])
def test_bad_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_base_class_needs_get_lr():
    with pytest.raises(NotImplementedError, match="get_lr"):
        lr.LRScheduler(0.1)
