"""Learning-rate schedulers (Paddle's ``paddle.optimizer.lr``).

A scheduler is plain Python: ``step()`` advances ``last_epoch`` and
recomputes ``last_lr``; calling the scheduler returns ``last_lr``. An
optimizer given a scheduler reads it before every update (eagerly) or is told
of each ``step()`` (a static program reads the rate from a tensor), so no
program is rebuilt when the rate changes.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Callable, Sequence

__all__ = [
    "CosineAnnealingDecay", "ExponentialDecay", "LambdaDecay", "LinearWarmup", "LRScheduler",
    "MultiStepDecay", "PiecewiseDecay", "StepDecay",
]


class LRScheduler:
    """Base class: subclasses define ``get_lr()``, the rate at ``last_epoch``."""

    def __init__(self, learning_rate: float = 0.1, last_epoch: int = -1, verbose: bool = False):
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
        self.step()

    def __call__(self) -> float:
        return self.last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``) and recompute ``last_lr``."""
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
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The changing state: ``last_epoch`` and ``last_lr``."""
        return {"last_epoch": self.last_epoch, "last_lr": self.last_lr}

    def set_state_dict(self, state: dict) -> None:
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
