"""Callbacks of ``Model.fit`` / ``evaluate`` / ``predict`` (Paddle's ``paddle.callbacks``).

A callback overrides any of the ``on_*`` hooks. ``Model`` calls them with
``logs``: a dict with ``"loss"`` (a list, one value per loss), one entry per
metric name (``"acc_top1"``...), ``"step"`` and ``"batch_size"`` after each
batch; after an epoch or an evaluation, the loss is the mean over the pass
and the metrics are their accumulated values. ``self.model`` is the Model and
``self.params`` holds ``epochs``, ``steps``, ``batch_size``, ``verbose``,
``metrics`` (the log names), ``save_dir`` and ``save_freq``.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings

import numpy as np

from dy2stat.hapi.progressbar import ProgressBar
from dy2stat.kernels.backend import to_host

__all__ = [
    "Callback", "CallbackList", "EarlyStopping", "LRScheduler", "ModelCheckpoint",
    "ProgBarLogger", "config_callbacks",
]

MODES = ("train", "eval", "predict")


class Callback:
    """Base class: every hook does nothing."""

    def __init__(self):
        self.model = None
        self.params: dict = {}

    def set_params(self, params: dict) -> None:
        """Receive the run's settings (epochs, steps, verbose, metrics) from ``Model``."""
        self.params = params

    def set_model(self, model) -> None:
        """Receive the ``Model`` the callback serves."""
        self.model = model

    def on_train_begin(self, logs=None):
        """Before the first epoch of ``Model.fit``."""

    def on_train_end(self, logs=None):
        """After the last epoch of ``Model.fit``."""

    def on_train_interrupt(self, logs=None):
        """Ctrl-C stopped ``Model.fit`` (called instead of ``on_train_end``); ``logs``
        holds "epoch" and "step"."""

    def on_eval_begin(self, logs=None):
        """Before an evaluation (``Model.evaluate``, or the one ``fit`` runs)."""

    def on_eval_end(self, logs=None):
        """After an evaluation; ``logs`` holds its loss and metrics."""

    def on_predict_begin(self, logs=None):
        """Before ``Model.predict``."""

    def on_predict_end(self, logs=None):
        """After ``Model.predict``."""

    def on_epoch_begin(self, epoch, logs=None):
        """Before each training epoch."""

    def on_epoch_end(self, epoch, logs=None):
        """After each training epoch; ``logs`` holds its last loss and metrics."""

    def on_train_batch_begin(self, step, logs=None):
        """Before each training step."""

    def on_train_batch_end(self, step, logs=None):
        """After each training step; ``logs`` holds its loss and metrics."""

    def on_eval_batch_begin(self, step, logs=None):
        """Before each evaluation step."""

    def on_eval_batch_end(self, step, logs=None):
        """After each evaluation step."""

    def on_predict_batch_begin(self, step, logs=None):
        """Before each prediction step."""

    def on_predict_batch_end(self, step, logs=None):
        """After each prediction step."""


class CallbackList:
    """Calls a hook on every callback in order; ``on_begin("train")`` means
    ``on_train_begin`` and so on."""

    def __init__(self, callbacks=None):
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {type(cb).__name__}")

    def append(self, callback: Callback) -> None:
        """Add a callback at the end."""
        self.callbacks.append(callback)

    def set_params(self, params: dict) -> None:
        """Give the run's settings to every callback."""
        for cb in self.callbacks:
            cb.set_params(params)

    def set_model(self, model) -> None:
        """Give the model to every callback."""
        for cb in self.callbacks:
            cb.set_model(model)

    def _call(self, name: str, *args) -> None:
        for cb in self.callbacks:
            getattr(cb, name)(*args)

    @staticmethod
    def _check(mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def on_begin(self, mode: str, logs=None) -> None:
        """Call ``on_{mode}_begin`` of every callback (mode: 'train', 'eval' or 'predict')."""
        self._check(mode)
        self._call(f"on_{mode}_begin", logs)

    def on_end(self, mode: str, logs=None) -> None:
        """Call ``on_{mode}_end`` of every callback."""
        self._check(mode)
        self._call(f"on_{mode}_end", logs)

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        """Call ``on_epoch_begin`` of every callback."""
        self._call("on_epoch_begin", epoch, logs)

    def on_train_interrupt(self, logs=None) -> None:
        """Call ``on_train_interrupt`` of every callback."""
        self._call("on_train_interrupt", logs)

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        """Call ``on_epoch_end`` of every callback."""
        self._call("on_epoch_end", epoch, logs)

    def on_batch_begin(self, mode: str, step: int, logs=None) -> None:
        """Call ``on_{mode}_batch_begin`` of every callback."""
        self._check(mode)
        self._call(f"on_{mode}_batch_begin", step, logs)

    def on_batch_end(self, mode: str, step: int, logs=None) -> None:
        """Call ``on_{mode}_batch_end`` of every callback."""
        self._check(mode)
        self._call(f"on_{mode}_batch_end", step, logs)


class ProgBarLogger(Callback):
    """Shows progress: ``verbose=0`` nothing, ``1`` a tqdm bar per epoch, ``2`` a line
    every ``log_freq`` steps (and one at the end of each epoch and evaluation)."""

    def __init__(self, log_freq: int = 1, verbose: int = 2, file=None):
        super().__init__()
        if verbose not in (0, 1, 2):
            raise ValueError(f"ProgBarLogger: verbose must be 0, 1 or 2, got {verbose!r}")
        self.log_freq, self.verbose, self.file = max(int(log_freq), 1), verbose, file
        self._bar: ProgressBar | None = None
        self._samples = 0

    def _print(self, text: str) -> None:
        if self.verbose:
            print(text, file=self.file or sys.stdout, flush=True)

    def _values(self, logs) -> list:
        logs = logs or {}
        return [(k, logs[k]) for k in self.params.get("metrics", []) if k in logs]

    def _open(self, steps, desc: str) -> None:
        self._close()
        self._samples = 0
        if self.verbose:
            self._bar = ProgressBar(steps, self.verbose, self.log_freq, desc=desc,
                                    file=self.file)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _batch_end(self, step, logs) -> None:
        self._samples += int((logs or {}).get("batch_size", 0))
        if self._bar is not None:
            self._bar.update(step + 1, self._values(logs))

    def _finish(self, logs) -> None:
        if self._bar is not None:
            self._bar.finish(self._values(logs))
            self._bar = None

    # train
    def on_epoch_begin(self, epoch, logs=None):
        epochs = self.params.get("epochs")
        desc = f"Epoch {epoch + 1}/{epochs}"
        if self.verbose == 2:
            self._print(desc)
        self._open(self.params.get("steps"), desc)

    def on_train_batch_end(self, step, logs=None):
        self._batch_end(step, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._finish(logs)

    def on_train_end(self, logs=None):
        self._close()

    def on_train_interrupt(self, logs=None):
        self._close()

    # eval
    def on_eval_begin(self, logs=None):
        steps = (logs or {}).get("steps", self.params.get("eval_steps"))
        if self.verbose == 2:
            self._print("Eval begin...")
        self._open(steps, "Eval")

    def on_eval_batch_end(self, step, logs=None):
        self._batch_end(step, logs)

    def on_eval_end(self, logs=None):
        self._finish(logs)
        if self.verbose == 2:
            self._print(f"Eval samples: {self._samples}")

    # predict
    def on_predict_begin(self, logs=None):
        if self.verbose == 2:
            self._print("Predict begin...")
        self._open((logs or {}).get("steps"), "Predict")

    def on_predict_batch_end(self, step, logs=None):
        self._batch_end(step, logs)

    def on_predict_end(self, logs=None):
        self._finish(logs)
        if self.verbose == 2:
            self._print(f"Predict samples: {self._samples}")


class ModelCheckpoint(Callback):
    """Saves the model (``Model.save(..., training=True)``) to ``{save_dir}/{epoch}``
    every ``save_freq`` epochs, to ``{save_dir}/final`` at the end and to
    ``{save_dir}/interrupted`` when Ctrl-C stops training."""

    def __init__(self, save_freq: int = 1, save_dir: str | None = None):
        super().__init__()
        if int(save_freq) < 1:
            raise ValueError(f"ModelCheckpoint: save_freq must be >= 1, got {save_freq}")
        self.save_freq, self.save_dir = int(save_freq), save_dir

    def on_epoch_end(self, epoch, logs=None):
        if self.save_dir and (epoch + 1) % self.save_freq == 0:
            self.model.save(os.path.join(self.save_dir, str(epoch)))

    def on_train_end(self, logs=None):
        if self.save_dir:
            self.model.save(os.path.join(self.save_dir, "final"))

    def on_train_interrupt(self, logs=None):
        if self.save_dir and not (logs or {}).get("mid_step"):
            self.model.save(os.path.join(self.save_dir, "interrupted"))


class LRScheduler(Callback):
    """Steps the optimizer's learning-rate scheduler after every batch (``by_step``)
    or every epoch (``by_epoch``); does nothing for a constant learning rate."""

    def __init__(self, by_step: bool = True, by_epoch: bool = False):
        super().__init__()
        if by_step == by_epoch:
            raise ValueError("LRScheduler: exactly one of by_step and by_epoch must be True")
        self.by_step, self.by_epoch = by_step, by_epoch

    def _step(self) -> None:
        from dy2stat.optimizer.lr import LRScheduler as Scheduler

        opt = getattr(self.model, "_optimizer", None)
        scheduler = getattr(opt, "_learning_rate", None)
        if isinstance(scheduler, Scheduler):
            scheduler.step()

    def on_train_batch_end(self, step, logs=None):
        if self.by_step:
            self._step()

    def on_epoch_end(self, epoch, logs=None):
        if self.by_epoch:
            self._step()


class EarlyStopping(Callback):
    """Stops ``fit`` when the evaluated ``monitor`` (``"loss"``, ``"acc"``...) has not
    improved by ``min_delta`` for ``patience`` evaluations. ``mode`` is ``"min"``,
    ``"max"`` or ``"auto"`` (max for names containing "acc", else min). With
    ``save_best_model`` the best model is saved to ``{save_dir}/best_model``."""

    def __init__(self, monitor: str = "loss", mode: str = "auto", patience: int = 0,
                 verbose: int = 1, min_delta: float = 0.0, baseline: float | None = None,
                 save_best_model: bool = True):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'auto', 'min' or 'max', got {mode!r}")
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        self.monitor, self.mode = monitor, mode
        self.patience, self.verbose = int(patience), verbose
        self.min_delta, self.baseline = abs(float(min_delta)), baseline
        self.save_best_model = save_best_model
        self.wait = 0
        self.stopped_epoch = 0
        self.best_value = None

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        if self.baseline is not None:
            self.best_value = float(self.baseline)
        else:
            self.best_value = np.inf if self.mode == "min" else -np.inf

    def _better(self, current: float) -> bool:
        if self.mode == "min":
            return current < self.best_value - self.min_delta
        return current > self.best_value + self.min_delta

    def on_eval_end(self, logs=None):
        logs = logs or {}
        if self.monitor not in logs:
            warnings.warn(f"EarlyStopping: monitor {self.monitor!r} is not in the evaluation "
                          f"logs ({sorted(logs)}); nothing is checked", stacklevel=2)
            return
        current = logs[self.monitor]
        if isinstance(current, (list, tuple)) or hasattr(current, "shape"):
            current = to_host(current).reshape(-1)[0]  # a device array: read on the host
        if not isinstance(current, numbers.Number) and not isinstance(current, np.generic):
            return
        current = float(current)
        if self._better(current):
            self.best_value = current
            self.wait = 0
            save_dir = self.params.get("save_dir")
            if self.save_best_model and save_dir:
                self.model.save(os.path.join(save_dir, "best_model"))
            return
        self.wait += 1
        if self.wait > self.patience:
            self.model.stop_training = True
            if self.verbose:
                print(f"Early stopping: {self.monitor} did not improve for {self.wait} "
                      f"evaluation(s) (best {self.best_value:.4f})", flush=True)


def config_callbacks(callbacks=None, model=None, batch_size=None, epochs=None, steps=None,
                     log_freq: int = 2, verbose: int = 2, save_freq: int = 1,
                     save_dir: str | None = None, metrics=None, mode: str = "train"):
    """The CallbackList ``Model`` uses: the user's callbacks plus a ProgBarLogger, a
    ModelCheckpoint (training) and an LRScheduler (training) unless given."""
    cbks = [callbacks] if isinstance(callbacks, Callback) else list(callbacks or [])
    if not any(isinstance(k, ProgBarLogger) for k in cbks) and verbose:
        cbks = [ProgBarLogger(log_freq, verbose=verbose)] + cbks
    if mode == "train":
        if not any(isinstance(k, ModelCheckpoint) for k in cbks):
            cbks = cbks + [ModelCheckpoint(save_freq, save_dir)]
        if not any(isinstance(k, LRScheduler) for k in cbks):
            cbks = cbks + [LRScheduler()]
    cbk_list = CallbackList(cbks)
    cbk_list.set_model(model)
    cbk_list.set_params({
        "batch_size": batch_size, "epochs": epochs, "steps": steps, "verbose": verbose,
        "metrics": list(metrics or []), "save_dir": save_dir, "save_freq": save_freq,
    })
    return cbk_list
