"""Learning-rate schedulers (Paddle's ``paddle.optimizer.lr``).

A scheduler is plain Python: ``step()`` advances ``last_epoch`` and
recomputes ``last_lr``; calling the scheduler returns ``last_lr``. An
optimizer given a scheduler reads it before every update (eagerly) or is told
of each ``step()`` (a static program reads the rate from a tensor), so no
program is rebuilt when the rate changes. A ``step()`` written in converted
code is made before every run of the program, in its place among the rate
reads (``dy2stat.jit.step_record``), not once while tracing.
"""

from __future__ import annotations

import bisect
import functools
import math
import weakref
from collections.abc import Callable, Sequence

from dy2stat.mode import state

__all__ = [
    "CosineAnnealingDecay", "CosineAnnealingWarmRestarts", "CyclicLR", "ExponentialDecay",
    "InverseTimeDecay", "LambdaDecay", "LinearLR", "LinearWarmup", "LRScheduler",
    "MultiStepDecay", "MultiplicativeDecay", "NaturalExpDecay", "NoamDecay", "OneCycleLR",
    "PiecewiseDecay", "PolynomialDecay", "ReduceOnPlateau", "StepDecay",
]


class LRScheduler:
    """Base class: subclasses define ``get_lr()``, the rate at ``last_epoch``."""

    def __init__(self, learning_rate: float = 0.1, last_epoch: int = -1, verbose: bool = False):
        _check_not_traced(self)
        if not isinstance(learning_rate, (int, float)):
            raise TypeError(
                f"{type(self).__name__}: learning_rate must be a float, "
                f"not {type(learning_rate).__name__}"
            )
        self.base_lr = float(learning_rate)
        self.last_lr = float(learning_rate)
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._listeners: list[weakref.WeakMethod] = []
        self._advance()

    def __call__(self) -> float:
        return self.last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``) and recompute ``last_lr``."""
        if not _replayed(self, self._advance, epoch):
            self._advance(epoch)

    def _advance(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
        else:
            self.last_epoch = int(epoch)
        self.last_lr = float(self.get_lr())
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to "
                  f"{self.last_lr}.")
        self._notify()

    def get_lr(self) -> float:
        """The learning rate for ``last_epoch`` (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The changing state: ``last_epoch`` and ``last_lr``."""
        return {"last_epoch": self.last_epoch, "last_lr": self.last_lr}

    def set_state_dict(self, state: dict) -> None:
        """Restore the state ``state_dict`` gave (``set_dict`` is the same)."""
        for key in ("last_epoch", "last_lr"):
            if key not in state:
                raise KeyError(f"{type(self).__name__}.set_state_dict: missing {key!r}")
        self.last_epoch = int(state["last_epoch"])
        self.last_lr = float(state["last_lr"])
        self._notify()

    set_dict = set_state_dict

    # ------------------------------------------------------- listeners
    def _subscribe(self, method) -> None:
        """Call ``method(last_lr)`` after every change (held weakly)."""
        self._listeners.append(weakref.WeakMethod(method))

    def _notify(self) -> None:
        live = []
        for ref in getattr(self, "_listeners", ()):
            method = ref()
            if method is not None:
                method(self.last_lr)
                live.append(ref)
        self._listeners = live

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self.last_lr})"


def _check_not_traced(scheduler: LRScheduler) -> None:
    if state.recorder is not None:
        raise RuntimeError(
            f"{type(scheduler).__name__} is created inside converted code: the program would "
            "keep the one made while tracing, where eager code starts a new one at every "
            "call. Create the scheduler outside the converted function")


def _replayed(scheduler: LRScheduler, advance, *args) -> bool:
    """In a trace: record ``advance(*args)`` to be made before every run (True)."""
    recorder = state.recorder
    if recorder is None:
        return False
    recorder.steps.host_call(functools.partial(advance, *args),
                             f"{type(scheduler).__name__}.step()")
    return True


class StepDecay(LRScheduler):
    """``lr * gamma ** (epoch // step_size)``."""

    def __init__(self, learning_rate: float, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1, verbose: bool = False):
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepDecay: step_size must be a positive int, got {step_size!r}")
        if gamma >= 1.0:
            raise ValueError(f"StepDecay: gamma must be less than 1.0, got {gamma}")
        self.step_size, self.gamma = step_size, float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepDecay(LRScheduler):
    """``lr * gamma ** (number of milestones <= epoch)``."""

    def __init__(self, learning_rate: float, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1, verbose: bool = False):
        milestones = list(milestones)
        if any(b <= a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"MultiStepDecay: milestones must increase, got {milestones}")
        if gamma >= 1.0:
            raise ValueError(f"MultiStepDecay: gamma must be less than 1.0, got {gamma}")
        self.milestones, self.gamma = milestones, float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch)


class ExponentialDecay(LRScheduler):
    """``lr * gamma ** epoch``."""

    def __init__(self, learning_rate: float, gamma: float, last_epoch: int = -1,
                 verbose: bool = False):
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"ExponentialDecay: gamma must be in (0, 1), got {gamma}")
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma ** self.last_epoch


class CosineAnnealingDecay(LRScheduler):
    """``eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(self, learning_rate: float, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1, verbose: bool = False):
        if not isinstance(T_max, int) or T_max <= 0:
            raise ValueError(f"CosineAnnealingDecay: T_max must be a positive int, got {T_max!r}")
        self.T_max, self.eta_min = T_max, float(eta_min)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        cos = math.cos(math.pi * self.last_epoch / self.T_max)
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + cos) / 2


class PiecewiseDecay(LRScheduler):
    """``values[i]`` while ``epoch`` is below ``boundaries[i]``; the last value after."""

    def __init__(self, boundaries: Sequence[int], values: Sequence[float], last_epoch: int = -1,
                 verbose: bool = False):
        if len(values) != len(boundaries) + 1:
            raise ValueError(
                f"PiecewiseDecay: needs one more value than boundaries, got "
                f"{len(boundaries)} boundaries and {len(values)} values"
            )
        self.boundaries, self.values = list(boundaries), [float(v) for v in values]
        super().__init__(self.values[0], last_epoch, verbose)

    def get_lr(self) -> float:
        return self.values[bisect.bisect_right(self.boundaries, self.last_epoch)]


class LambdaDecay(LRScheduler):
    """``lr * lr_lambda(epoch)``."""

    def __init__(self, learning_rate: float, lr_lambda: Callable[[int], float],
                 last_epoch: int = -1, verbose: bool = False):
        if not callable(lr_lambda):
            raise TypeError("LambdaDecay: lr_lambda must be callable")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.lr_lambda(self.last_epoch)


class LinearWarmup(LRScheduler):
    """Linear ramp from ``start_lr`` to ``end_lr`` over ``warmup_steps``, then
    ``learning_rate`` (a float, or a scheduler that is stepped from then on)."""

    def __init__(self, learning_rate: float | LRScheduler, warmup_steps: int, start_lr: float,
                 end_lr: float, last_epoch: int = -1, verbose: bool = False):
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(
                f"LinearWarmup: warmup_steps must be a positive int, got {warmup_steps!r}")
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.start_lr, self.end_lr = float(start_lr), float(end_lr)
        super().__init__(start_lr, last_epoch, verbose)

    def get_lr(self) -> float:
        if self.last_epoch < self.warmup_steps:
            fraction = self.last_epoch / self.warmup_steps
            return self.start_lr + (self.end_lr - self.start_lr) * fraction
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return float(self.learning_rate)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if isinstance(self.learning_rate, LRScheduler):
            state["LinearWarmup_LR"] = self.learning_rate.state_dict()
        return state

    def set_state_dict(self, state: dict) -> None:
        if isinstance(self.learning_rate, LRScheduler) and "LinearWarmup_LR" in state:
            self.learning_rate.set_state_dict(state["LinearWarmup_LR"])
        super().set_state_dict(state)


class NoamDecay(LRScheduler):
    """``lr * d_model^-0.5 * min(epoch^-0.5, epoch * warmup_steps^-1.5)`` (the
    Transformer's warmup then inverse-square-root decay; epoch 0 gives 0)."""

    def __init__(self, d_model: int, warmup_steps: int, learning_rate: float = 1.0,
                 last_epoch: int = -1, verbose: bool = False):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(f"NoamDecay: d_model and warmup_steps must be positive, got "
                             f"{d_model} and {warmup_steps}")
        self.d_model, self.warmup_steps = d_model, warmup_steps
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        epoch = self.last_epoch
        decay = 1.0 if epoch == 0 else epoch ** -0.5
        warmup = epoch * self.warmup_steps ** -1.5
        return self.base_lr * self.d_model ** -0.5 * min(decay, warmup)


class NaturalExpDecay(LRScheduler):
    """``lr * exp(-gamma * epoch)``."""

    def __init__(self, learning_rate: float, gamma: float, last_epoch: int = -1,
                 verbose: bool = False):
        if gamma <= 0:
            raise ValueError(f"NaturalExpDecay: gamma must be positive, got {gamma}")
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * math.exp(-self.gamma * self.last_epoch)


class InverseTimeDecay(LRScheduler):
    """``lr / (1 + gamma * epoch)``."""

    def __init__(self, learning_rate: float, gamma: float, last_epoch: int = -1,
                 verbose: bool = False):
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr / (1 + self.gamma * self.last_epoch)


class PolynomialDecay(LRScheduler):
    """``(lr - end_lr) * (1 - epoch / decay_steps) ** power + end_lr``, then ``end_lr``;
    with ``cycle`` the decay restarts, over a span grown to the next multiple of
    ``decay_steps``."""

    def __init__(self, learning_rate: float, decay_steps: int, end_lr: float = 0.0001,
                 power: float = 1.0, cycle: bool = False, last_epoch: int = -1,
                 verbose: bool = False):
        if not isinstance(decay_steps, int) or decay_steps <= 0:
            raise ValueError(f"PolynomialDecay: decay_steps must be a positive int, "
                             f"got {decay_steps!r}")
        self.decay_steps, self.end_lr = decay_steps, float(end_lr)
        self.power, self.cycle = float(power), bool(cycle)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        epoch, span = self.last_epoch, self.decay_steps
        if self.cycle:
            span *= max(math.ceil(epoch / self.decay_steps), 1)
        else:
            epoch = min(epoch, span)
        return (self.base_lr - self.end_lr) * (1 - epoch / span) ** self.power + self.end_lr


class MultiplicativeDecay(LRScheduler):
    """Each epoch multiplies the rate by ``lr_lambda(epoch)``."""

    def __init__(self, learning_rate: float, lr_lambda: Callable[[int], float],
                 last_epoch: int = -1, verbose: bool = False):
        if not callable(lr_lambda):
            raise TypeError("MultiplicativeDecay: lr_lambda must be callable")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        if self.last_epoch > 0:
            return self.last_lr * self.lr_lambda(self.last_epoch)
        return self.base_lr


class LinearLR(LRScheduler):
    """A linear ramp of the factor from ``start_factor`` to ``end_factor`` over
    ``total_steps``: ``lr * (start + (end - start) * min(epoch, total_steps) /
    total_steps)``."""

    def __init__(self, learning_rate: float, total_steps: int, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, last_epoch: int = -1, verbose: bool = False):
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"LinearLR: total_steps must be a positive int, "
                             f"got {total_steps!r}")
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.total_steps = total_steps
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        fraction = min(self.last_epoch, self.total_steps) / self.total_steps
        return self.base_lr * (self.start_factor
                               + (self.end_factor - self.start_factor) * fraction)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from ``lr`` to ``eta_min`` that restarts after ``T_0`` epochs,
    each period ``T_mult`` times longer than the one before (SGDR)."""

    def __init__(self, learning_rate: float, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1, verbose: bool = False):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int, "
                             f"got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, "
                             f"got {T_mult!r}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, float(eta_min)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        epoch = self.last_epoch
        if self.T_mult == 1:
            t_cur, t_i = epoch % self.T_0, self.T_0
        else:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            t_cur = epoch - self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
            t_i = self.T_0 * self.T_mult ** n
        cos = math.cos(math.pi * t_cur / t_i)
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + cos) / 2


class OneCycleLR(LRScheduler):
    """The one-cycle policy: from ``max_learning_rate / divide_factor`` up to
    ``max_learning_rate`` over the first ``phase_pct`` of ``total_steps``, then down to
    ``end_learning_rate`` (``three_phase``: back to the initial rate first), annealed by
    cosine or linearly. Step it once per batch."""

    def __init__(self, max_learning_rate: float, total_steps: int, divide_factor: float = 25.0,
                 end_learning_rate: float = 0.0001, phase_pct: float = 0.3,
                 anneal_strategy: str = "cos", three_phase: bool = False,
                 last_epoch: int = -1, verbose: bool = False):
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be a positive int, "
                             f"got {total_steps!r}")
        if not 0 <= phase_pct <= 1:
            raise ValueError(f"OneCycleLR: phase_pct must be in [0, 1], got {phase_pct}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                             f"got {anneal_strategy!r}")
        initial = max_learning_rate / divide_factor
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        up = phase_pct * total_steps - 1
        if three_phase:
            self._ends = [0, up, 2 * phase_pct * total_steps - 2, total_steps - 1]
            self._rates = [initial, max_learning_rate, initial, end_learning_rate]
        else:
            self._ends = [0, up, total_steps - 1]
            self._rates = [initial, max_learning_rate, end_learning_rate]
        super().__init__(initial, last_epoch, verbose)

    def _anneal(self, start: float, end: float, fraction: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2 * (math.cos(math.pi * fraction) + 1)
        return start + (end - start) * fraction

    def get_lr(self) -> float:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, past total_steps "
                             f"{self.total_steps}")
        phases = len(self._ends) - 1
        for i in range(phases):
            if step <= self._ends[i + 1] or i == phases - 1:
                fraction = (step - self._ends[i]) / (self._ends[i + 1] - self._ends[i])
                return self._anneal(self._rates[i], self._rates[i + 1], fraction)
        raise AssertionError("unreachable")


class CyclicLR(LRScheduler):
    """Cycles between ``base_learning_rate`` and ``max_learning_rate``: up over
    ``step_size_up`` steps, down over ``step_size_down`` (default: the same). The
    amplitude is scaled per cycle ('triangular': 1, 'triangular2': halved each cycle) or
    per step ('exp_range': ``exp_gamma ** step``), or by ``scale_fn``."""

    _MODES = {
        "triangular": (lambda x: 1.0, "cycle"),
        "triangular2": (lambda x: 1 / (2.0 ** (x - 1)), "cycle"),
    }

    def __init__(self, base_learning_rate: float, max_learning_rate: float, step_size_up: int,
                 step_size_down: int | None = None, mode: str = "triangular",
                 exp_gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 last_epoch: int = -1, verbose: bool = False):
        if not isinstance(step_size_up, int) or step_size_up <= 0:
            raise ValueError(f"CyclicLR: step_size_up must be a positive int, "
                             f"got {step_size_up!r}")
        down = step_size_up if step_size_down is None else step_size_down
        if not isinstance(down, int) or down <= 0:
            raise ValueError(f"CyclicLR: step_size_down must be a positive int, got {down!r}")
        if scale_fn is not None:
            if scale_mode not in ("cycle", "iterations"):
                raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', "
                                 f"got {scale_mode!r}")
            self.scale_fn, self.scale_mode = scale_fn, scale_mode
        elif mode == "exp_range":
            self.scale_fn, self.scale_mode = (lambda x: exp_gamma ** x), "iterations"
        elif mode in self._MODES:
            self.scale_fn, self.scale_mode = self._MODES[mode]
        else:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range', got {mode!r}")
        self.max_lr = float(max_learning_rate)
        self.cycle_size = step_size_up + down
        self.step_up_ratio = step_size_up / self.cycle_size
        super().__init__(base_learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        step = self.last_epoch
        cycle = 1 + step // self.cycle_size
        position = 1.0 + step / self.cycle_size - cycle
        if position <= self.step_up_ratio:
            height = position / self.step_up_ratio
        else:
            height = (1 - position) / (1 - self.step_up_ratio)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else step)
        return self.base_lr + (self.max_lr - self.base_lr) * height * scale


class ReduceOnPlateau(LRScheduler):
    """Multiplies the rate by ``factor`` when a metric stopped improving for
    ``patience`` epochs (``step(metrics)`` once per epoch); then waits ``cooldown``
    epochs, and never goes below ``min_lr``.

    ``mode`` 'min' (lower is better) or 'max'; an improvement is beyond ``threshold``,
    relative to the best ('rel') or absolute ('abs')."""

    def __init__(self, learning_rate: float, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float = 0.0, epsilon: float = 1e-8,
                 verbose: bool = False):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceOnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceOnPlateau: threshold_mode must be 'rel' or 'abs', "
                             f"got {threshold_mode!r}")
        _check_not_traced(self)
        if factor >= 1.0:
            raise ValueError(f"ReduceOnPlateau: factor must be less than 1.0, got {factor}")
        if not isinstance(learning_rate, (int, float)):
            raise TypeError(f"ReduceOnPlateau: learning_rate must be a float, "
                            f"not {type(learning_rate).__name__}")
        self.mode, self.factor, self.patience = mode, float(factor), int(patience)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.cooldown, self.min_lr, self.epsilon = int(cooldown), float(min_lr), float(epsilon)
        self.best = None
        self.num_bad_epochs = self.cooldown_counter = 0
        self.base_lr = self.last_lr = float(learning_rate)
        self.last_epoch = 0
        self.verbose = verbose
        self._listeners = []

    def step(self, metrics, epoch: int | None = None) -> None:
        """Record this epoch's ``metrics`` (a number or a one-element tensor)."""
        if getattr(metrics, "is_static", False):
            raise TypeError(
                "ReduceOnPlateau.step(metrics) in converted code: the metric's value is known "
                "only when the program runs; return it and call step() with it after the "
                "converted function returns")
        if not _replayed(self, self._advance_on, metrics, epoch):
            self._advance_on(metrics, epoch)

    def _advance_on(self, metrics, epoch: int | None = None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            return
        if self.best is None or self._better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.num_bad_epochs > self.patience:
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: ReduceOnPlateau set learning rate to "
                          f"{self.last_lr}.")
                self._notify()

    def _better(self, current: float, best: float) -> bool:
        margin = best * self.threshold if self.threshold_mode == "rel" else self.threshold
        return current < best - margin if self.mode == "min" else current > best + margin

    def state_dict(self) -> dict:
        return {**super().state_dict(), "best": self.best, "num_bad_epochs": self.num_bad_epochs,
                "cooldown_counter": self.cooldown_counter}

    def set_state_dict(self, state: dict) -> None:
        self.best = state.get("best")
        self.num_bad_epochs = int(state.get("num_bad_epochs", 0))
        self.cooldown_counter = int(state.get("cooldown_counter", 0))
        super().set_state_dict(state)
