"""Learning-rate schedulers: values over epochs, state, errors."""

import math

import numpy as np
import pytest

import dy2stat as d2s
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


# ------------------------------------------------------------ Paddle's other schedules
def _noam(d_model, warmup, base, epoch):
    return base * d_model ** -0.5 * min(1.0 if epoch == 0 else epoch ** -0.5,
                                        epoch * warmup ** -1.5)


def _one_cycle(step, total, max_lr, divide=25.0, end=1e-4, pct=0.3, cos=True, three=False):
    """The one-cycle schedule written as piecewise anneals between its breakpoints."""
    initial = max_lr / divide
    if three:
        points = [(0, initial), (pct * total - 1, max_lr), (2 * pct * total - 2, initial),
                  (total - 1, end)]
    else:
        points = [(0, initial), (pct * total - 1, max_lr), (total - 1, end)]
    for (s0, a), (s1, b) in zip(points, points[1:]):
        if step <= s1 or (s1, b) == points[-1]:
            f = (step - s0) / (s1 - s0)
            return b + (a - b) * (1 + math.cos(math.pi * f)) / 2 if cos else a + (b - a) * f
    raise AssertionError


def _triangle(step, base, peak, up, down, scale=lambda cycle, step: 1.0):
    cycle = step // (up + down)
    within = step - cycle * (up + down)
    height = within / up if within <= up else 1 - (within - up) / down
    return base + (peak - base) * height * scale(cycle + 1, step)


def _warm_restarts(epoch, base, t0, mult, eta_min=0.0):
    period, start = t0, 0
    while epoch >= start + period:
        start += period
        period *= mult
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * (epoch - start) / period)) / 2


N = 14


@pytest.mark.parametrize("make, reference", [
    (lambda: lr.NoamDecay(d_model=16, warmup_steps=4, learning_rate=2.0),
     lambda e: _noam(16, 4, 2.0, e)),
    (lambda: lr.NaturalExpDecay(0.5, gamma=0.3), lambda e: 0.5 * math.exp(-0.3 * e)),
    (lambda: lr.InverseTimeDecay(0.5, gamma=0.3), lambda e: 0.5 / (1 + 0.3 * e)),
    (lambda: lr.PolynomialDecay(1.0, decay_steps=5, end_lr=0.1, power=2.0),
     lambda e: 0.9 * (1 - min(e, 5) / 5) ** 2 + 0.1),
    (lambda: lr.PolynomialDecay(1.0, decay_steps=4, end_lr=0.0, cycle=True),
     lambda e: 1 - e / (4 * max(math.ceil(e / 4), 1))),
    (lambda: lr.MultiplicativeDecay(1.0, lambda e: 0.9 if e % 2 else 0.5),
     lambda e: math.prod([0.9 if k % 2 else 0.5 for k in range(1, e + 1)])),
    (lambda: lr.LinearLR(0.6, total_steps=5, start_factor=0.25, end_factor=1.0),
     lambda e: 0.6 * (0.25 + 0.75 * min(e, 5) / 5)),
    (lambda: lr.CosineAnnealingWarmRestarts(1.0, T_0=3, T_mult=1, eta_min=0.1),
     lambda e: _warm_restarts(e, 1.0, 3, 1, 0.1)),
    (lambda: lr.CosineAnnealingWarmRestarts(1.0, T_0=2, T_mult=2),
     lambda e: _warm_restarts(e, 1.0, 2, 2)),
    (lambda: lr.OneCycleLR(1.0, total_steps=N), lambda e: _one_cycle(e, N, 1.0)),
    (lambda: lr.OneCycleLR(0.5, total_steps=N, divide_factor=10, end_learning_rate=0.01,
                           phase_pct=0.4, anneal_strategy="linear", three_phase=True),
     lambda e: _one_cycle(e, N, 0.5, 10, 0.01, 0.4, cos=False, three=True)),
    (lambda: lr.CyclicLR(0.1, 1.0, step_size_up=2, step_size_down=3),
     lambda e: _triangle(e, 0.1, 1.0, 2, 3)),
    (lambda: lr.CyclicLR(0.1, 1.0, step_size_up=2, mode="triangular2"),
     lambda e: _triangle(e, 0.1, 1.0, 2, 2, lambda c, s: 0.5 ** (c - 1))),
    (lambda: lr.CyclicLR(0.1, 1.0, step_size_up=3, mode="exp_range", exp_gamma=0.9),
     lambda e: _triangle(e, 0.1, 1.0, 3, 3, lambda c, s: 0.9 ** s)),
])
def test_other_schedules_against_their_formulas(make, reference):
    np.testing.assert_allclose(_values(make(), N), [reference(e) for e in range(N)],
                               rtol=1e-10, atol=1e-14)


def test_one_cycle_refuses_steps_past_the_total():
    sched = lr.OneCycleLR(1.0, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="total_steps"):
        sched.step()


def _plateau_reference(metrics, lr0, factor, patience, cooldown, threshold, mode, rel):
    """The rate after each epoch, by the rule: reduce once the metric has not improved on
    the best by the threshold for more than ``patience`` epochs, then wait ``cooldown``."""
    rate, best, bad, wait, rates = lr0, None, 0, 0, []
    for m in metrics:
        if wait > 0:
            wait -= 1
        else:
            margin = abs(best) * threshold if (rel and best is not None) else threshold
            better = best is None or (m < best - margin if mode == "min" else m > best + margin)
            if better:
                best, bad = m, 0
            else:
                bad += 1
            if bad > patience:
                rate, bad, wait = rate * factor, 0, cooldown
        rates.append(rate)
    return rates


@pytest.mark.parametrize("mode, rel, metrics", [
    ("min", True, [5, 4, 4, 4, 4, 3.9999, 3, 3, 3, 3, 3, 3, 2]),
    ("max", False, [1, 2, 2.05, 2.1, 2.1, 2.1, 2.1, 5, 5, 5, 5]),
])
def test_reduce_on_plateau(mode, rel, metrics):
    sched = lr.ReduceOnPlateau(1.0, mode=mode, factor=0.5, patience=2, cooldown=1,
                               threshold=1e-3 if rel else 0.2,
                               threshold_mode="rel" if rel else "abs")
    rates = []
    for m in metrics:
        sched.step(np.float32(m))
        rates.append(sched())
    np.testing.assert_allclose(rates, _plateau_reference(
        metrics, 1.0, 0.5, 2, 1, 1e-3 if rel else 0.2, mode, rel), rtol=1e-12)
    assert rates[-1] < 1.0


def test_reduce_on_plateau_drives_an_optimizer_and_keeps_its_state():
    w = d2s.to_tensor(np.ones(2), stop_gradient=False)
    sched = lr.ReduceOnPlateau(0.5, patience=0, factor=0.1, min_lr=0.01)
    opt = d2s.optimizer.SGD(sched, parameters=[w])
    sched.step(1.0)
    sched.step(2.0)
    assert opt.get_lr() == pytest.approx(0.05)
    sched.step(3.0)
    sched.step(4.0)
    assert opt.get_lr() == pytest.approx(0.01)  # min_lr
    again = lr.ReduceOnPlateau(0.5, patience=0, factor=0.1, min_lr=0.01)
    again.set_state_dict(sched.state_dict())
    assert (again(), again.best, again.last_epoch) == (sched(), 1.0, 4)
