"""``Model``: Paddle's high-level training API (``paddle.Model``).

```python
model = d2s.Model(LeNet(), inputs=InputSpec([-1, 1, 28, 28], "float32", "x"),
                  labels=InputSpec([-1, 1], "int64", "y"))
model.prepare(d2s.optimizer.Adam(parameters=model.parameters()),
              d2s.nn.CrossEntropyLoss(), d2s.metric.Accuracy(topk=(1, 2)))
model.fit(train_dataset, epochs=2, batch_size=32, verbose=1)
model.evaluate(test_dataset, batch_size=64)     # {"loss": [..], "acc_top1": .., "acc_top2": ..}
```

The same script runs in three ways:

1. **Dynamic** (the default, no ``inputs``): eager forward, ``backward()``,
   ``optimizer.step()``, ``optimizer.clear_grad()``.
2. **Dynamic with ``inputs`` specs**: the network is converted in place with
   ``d2s.jit.to_static(network, input_spec=inputs)`` (on ``prepare`` or the
   first batch) and trained by the same eager loop: the converted forward is
   one node on the eager tape whose backward runs the program's backward.
3. **Static**: when ``d2s.enable_static()`` was called before the Model was
   made (or its network's parameters are static Variables), ``Model`` builds
   static programs: a train program (data variables from the ``inputs`` and
   ``labels`` specs, the forward, the loss and ``optimizer.minimize``), an
   eval and a predict program (the forward in eval mode), and runs the
   initializers of the parameters and optimizer accumulators once. Batches
   are fed to a ``static.Executor``; metrics are computed from the fetched
   outputs. ``inputs`` specs are required; missing ``labels`` specs are taken
   from the first batch (batch dim -1).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from dy2stat.hapi import checkpoint
from dy2stat.hapi.callbacks import config_callbacks
from dy2stat.hapi.data import _batch_size, _loader, _num_forward_inputs, _numpy, _steps, _to_list
from dy2stat.hapi.dynamic_adapter import _DynamicAdapter
from dy2stat.hapi.interrupt import CtrlC
from dy2stat.hapi.static_adapter import _StaticAdapter, _wants_static
from dy2stat.hapi.summary import _summary
from dy2stat.metric import Metric
from dy2stat.nn import Layer
from dy2stat.optimizer import Optimizer
from dy2stat.static.input_spec import InputSpec
from dy2stat.tensor import Tensor

__all__ = ["Model"]


def _specs(value, what: str) -> list[InputSpec] | None:
    """``inputs``/``labels`` as a list of InputSpecs (None when not given)."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = list(value.values())
    items = _to_list(value)
    specs = []
    for i, item in enumerate(items):
        if isinstance(item, InputSpec):
            specs.append(item)
        elif isinstance(item, Tensor):
            specs.append(InputSpec.from_tensor(item, name=f"{what[:-1]}_{i}"))
        else:
            raise TypeError(f"Model: {what} must be InputSpecs (or a list of them), "
                            f"got {type(item).__name__} at position {i}")
    return specs


class Model:
    """A network with its training setup: ``prepare``, then ``fit`` / ``evaluate`` /
    ``predict`` (or the ``*_batch`` methods), ``save`` and ``load``.

    ``network``: an ``nn.Layer``. ``inputs`` / ``labels``: ``static.InputSpec``s
    (one, or a list) describing the network's inputs and the labels the loss
    takes; required for static mode and for ``save(training=False)``; in
    dynamic mode ``inputs`` makes ``Model`` train the network converted with
    ``jit.to_static``. Without ``inputs`` a batch's first ``k`` fields are the
    inputs, where ``k`` is the number of ``forward``'s positional parameters,
    and the rest are labels.
    """

    def __init__(self, network: Layer, inputs=None, labels=None):
        if not isinstance(network, Layer):
            raise TypeError(f"Model: network must be an nn.Layer, not {type(network).__name__}")
        self.network = network
        self._inputs = _specs(inputs, "inputs")
        self._labels = _specs(labels, "labels")
        self._optimizer: Optimizer | None = None
        self._loss = None
        self._metrics: list[Metric] = []
        self.stop_training = False
        self.history: dict | None = None
        self._ctrl_c: CtrlC | None = None  # while fit runs
        self._adapter = self._make_adapter()

    def _make_adapter(self):
        return _StaticAdapter(self) if _wants_static(self.network) else _DynamicAdapter(self)

    @property
    def input_spec(self) -> list | None:
        """The ``inputs`` specs as a list (None when not given): what ``save`` and
        ``dy2stat export`` trace the network for."""
        return None if self._inputs is None else list(self._inputs)

    @property
    def static(self) -> bool:
        """Whether this Model runs static programs (mode 3)."""
        return isinstance(self._adapter, _StaticAdapter)

    # ---------------------------------------------------------- prepare
    def prepare(self, optimizer=None, loss=None, metrics=None, amp_configs=None) -> None:
        """Set the optimizer (needed by ``fit``/``train_batch``), the loss (a Layer or
        callable taking ``*outputs, *labels``; needed to train) and the metrics (a
        ``Metric`` or a list)."""
        if amp_configs is not None:
            raise NotImplementedError("Model.prepare: amp_configs (mixed precision) is not "
                                      "supported")
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"Model.prepare: optimizer must be a d2s.optimizer.Optimizer, "
                            f"not {type(optimizer).__name__}")
        if loss is not None and not callable(loss):
            raise TypeError(f"Model.prepare: loss must be a Layer or a callable, "
                            f"not {type(loss).__name__}")
        metrics = _to_list(metrics)
        for m in metrics:
            if not isinstance(m, Metric):
                raise TypeError(f"Model.prepare: metrics must be d2s.metric.Metric instances, "
                                f"got {type(m).__name__}")
        self._optimizer, self._loss, self._metrics = optimizer, loss, metrics
        if _wants_static(self.network) != self.static:
            self._adapter = self._make_adapter()
        self._adapter.prepare()

    def parameters(self, *args, **kwargs) -> list:
        """The network's parameters (static Variables in static mode)."""
        return self.network.parameters(*args, **kwargs)

    def _metrics_name(self) -> list[str]:
        names = ["loss"] if self._loss is not None else []
        for m in self._metrics:
            names.extend(_to_list(m.name()))
        return names

    def _need(self, where: str, optimizer: bool = False, loss: bool = False) -> None:
        if optimizer and self._optimizer is None:
            raise RuntimeError(f"Model.{where}: no optimizer; call "
                               "model.prepare(optimizer, loss, metrics) first")
        if loss and self._loss is None:
            raise RuntimeError(f"Model.{where}: no loss; call "
                               "model.prepare(optimizer, loss, metrics) first")

    def _num_inputs(self) -> int:
        if self._inputs is not None:
            return len(self._inputs)
        return _num_forward_inputs(self.network)

    def _update_metrics(self, outputs: list, labels: list) -> list:
        results = []
        for metric in self._metrics:
            computed = _to_list(metric.compute(*(outputs + labels)))
            results.append(metric.update(*[_numpy(c) for c in computed]))
        return results

    # ------------------------------------------------------------ batches
    def _train_step(self, inputs, labels, update: bool = True):
        self._need("train_batch", optimizer=True, loss=True)
        outputs, losses = self._adapter.train_batch(_to_list(inputs), _to_list(labels), update)
        metrics = self._update_metrics(outputs, _to_list(labels))
        return [_numpy(loss) for loss in losses], metrics

    def _eval_step(self, inputs, labels):
        outputs, losses = self._adapter.eval_batch(_to_list(inputs), _to_list(labels))
        metrics = self._update_metrics(outputs, _to_list(labels))
        return [_numpy(loss) for loss in losses], metrics

    def train_batch(self, inputs, labels=None, update: bool = True):
        """One training step on one batch. Returns ``losses`` (a list of arrays) or,
        with metrics, ``(losses, metrics)`` (one batch value per metric).

        ``update=False`` only accumulates gradients (dynamic mode)."""
        losses, metrics = self._train_step(inputs, labels, update)
        return (losses, metrics) if self._metrics else losses

    def eval_batch(self, inputs, labels=None):
        """The loss and metrics of one batch in eval mode, without gradients: ``losses``,
        ``(losses, metrics)`` or, without a loss, ``metrics``."""
        losses, metrics = self._eval_step(inputs, labels)
        if self._loss is not None:
            return (losses, metrics) if self._metrics else losses
        return metrics

    def predict_batch(self, inputs) -> list[np.ndarray]:
        """The network's outputs for one batch, as NumPy arrays (eval mode)."""
        return [_numpy(o) for o in self._adapter.predict_batch(_to_list(inputs))]

    def _run_one_epoch(self, loader, cbks, mode: str, accumulate: int = 1):
        """One pass; returns ``logs`` (mean loss, accumulated metrics) and, for
        ``predict``, the outputs of every batch."""
        for metric in self._metrics:
            metric.reset()
        n_in = self._num_inputs()
        logs: dict = {}
        loss_sums: list[float] = []
        samples = 0
        outputs = []
        step = -1
        for step, data in enumerate(loader):
            data = _to_list(data)
            if len(data) < n_in:
                raise ValueError(f"Model.{'fit' if mode == 'train' else mode}: a batch has "
                                 f"{len(data)} fields but the network takes {n_in} inputs")
            inputs, labels = data[:n_in], data[n_in:]
            batch_size = _batch_size(inputs[0])
            cbks.on_batch_begin(mode, step, logs)
            if mode == "predict":
                outputs.append(self.predict_batch(inputs))
            else:
                if mode == "train":
                    update = (step + 1) % accumulate == 0
                    losses, _ = self._train_step(inputs, labels, update)
                else:
                    losses, _ = self._eval_step(inputs, labels)
                values = [float(np.mean(v)) for v in losses]
                if values:
                    loss_sums = [s + v * batch_size for s, v in
                                 zip(loss_sums or [0.0] * len(values), values)]
                    logs["loss"] = values
                for metric in self._metrics:
                    for name, value in zip(_to_list(metric.name()),
                                           _to_list(metric.accumulate())):
                        logs[name] = value
            samples += batch_size
            logs["step"], logs["batch_size"] = step, batch_size
            cbks.on_batch_end(mode, step, logs)
            if self._ctrl_c is not None and self._ctrl_c.requested:
                break
        if mode == "train" and accumulate > 1 and (step + 1) % accumulate != 0:
            self._adapter.flush_gradients()
        result = dict(logs)
        if loss_sums and samples:
            result["loss"] = [s / samples for s in loss_sums]
        result["samples"] = samples
        return (result, outputs) if mode == "predict" else result

    def _evaluate_with(self, loader, cbks) -> dict:
        cbks.on_begin("eval", {"steps": _steps(loader), "metrics": self._metrics_name()})
        logs = self._run_one_epoch(loader, cbks, "eval")
        cbks.on_end("eval", logs)
        return logs

    def fit(self, train_data=None, eval_data=None, batch_size: int = 1, epochs: int = 1,
            eval_freq: int = 1, log_freq: int = 10, save_dir: str | None = None,
            save_freq: int = 1, verbose: int = 2, drop_last: bool = False, shuffle: bool = True,
            num_workers: int = 0, callbacks=None, accumulate_grad_batches: int = 1) -> dict:
        """Train for ``epochs`` over ``train_data`` (a Dataset, wrapped in a DataLoader
        with ``batch_size``/``shuffle``/``drop_last``/``num_workers``, or a DataLoader).

        After every ``eval_freq`` epochs (and after the last) ``eval_data`` is
        evaluated. ``save_dir``: checkpoints ``{save_dir}/{epoch}`` every
        ``save_freq`` epochs and ``{save_dir}/final``. ``verbose``: 0 silent, 1 a
        progress bar per epoch, 2 a line every ``log_freq`` steps.
        ``accumulate_grad_batches``: update every that many batches (dynamic mode).

        Ctrl-C stops training after the batch in progress, with one line on
        stderr and a checkpoint ``{save_dir}/interrupted`` (a second Ctrl-C
        stops at once, without one); ``fit`` then returns the history so far.

        Returns the history (also kept as ``model.history``): for every epoch
        the mean training loss (``"loss"``, one list per epoch, one value per
        loss) and the metrics accumulated over the epoch (``"acc_top1"``...),
        and for every evaluation the same under ``"eval_loss"``, ``"eval_acc_top1"``...
        (Paddle's ``fit`` returns None; the history is an addition.)
        """
        self._need("fit", optimizer=True, loss=True)
        for label, value in (("epochs", epochs), ("eval_freq", eval_freq),
                             ("save_freq", save_freq), ("log_freq", log_freq),
                             ("accumulate_grad_batches", accumulate_grad_batches)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Model.fit: {label} must be a positive int, got {value!r}")
        if verbose not in (0, 1, 2):
            raise ValueError(f"Model.fit: verbose must be 0, 1 or 2, got {verbose!r}")
        if accumulate_grad_batches > 1 and self.static:
            raise ValueError("Model.fit: accumulate_grad_batches > 1 needs dynamic mode")
        train_loader = _loader(train_data, batch_size, shuffle, drop_last, num_workers,
                                    "fit")
        eval_loader = None if eval_data is None else _loader(
            eval_data, batch_size, False, False, num_workers, "fit")
        names = self._metrics_name()
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size, epochs=epochs,
                                steps=_steps(train_loader), log_freq=log_freq,
                                verbose=verbose, save_freq=save_freq, save_dir=save_dir,
                                metrics=names, mode="train")
        history: dict = {name: [] for name in names}
        self.history = history
        self.stop_training = False
        cbks.on_begin("train")
        logs: dict = {}
        epoch = 0
        with CtrlC() as ctrl_c:
            self._ctrl_c = ctrl_c
            try:
                for epoch in range(epochs):
                    cbks.on_epoch_begin(epoch)
                    logs = self._run_one_epoch(train_loader, cbks, "train",
                                               accumulate_grad_batches)
                    if ctrl_c.requested:
                        break
                    cbks.on_epoch_end(epoch, logs)
                    for name in names:
                        if name in logs:
                            history[name].append(logs[name])
                    if eval_loader is not None and ((epoch + 1) % eval_freq == 0
                                                    or epoch == epochs - 1):
                        eval_logs = self._evaluate_with(eval_loader, cbks)
                        for name in names:
                            if name in eval_logs:
                                history.setdefault(f"eval_{name}", []).append(eval_logs[name])
                    if self.stop_training or ctrl_c.requested:
                        break
            except KeyboardInterrupt:  # a second Ctrl-C, or one fit could not defer
                self._interrupted(cbks, save_dir, epoch, epochs, {}, mid_step=True)
                return history
            finally:
                self._ctrl_c = None
            if ctrl_c.requested:
                with ctrl_c.held():
                    self._interrupted(cbks, save_dir, epoch, epochs, logs, mid_step=False,
                                      steps=logs.get("step", -1) + 1)
                return history
        cbks.on_end("train", logs)
        return history

    def _interrupted(self, cbks, save_dir, epoch, epochs, logs, mid_step: bool,
                     steps: int = 0) -> None:
        """Ctrl-C stopped fit: the callbacks' interrupt hook (a checkpoint when there is a
        save_dir, unless a step was cut) and one line on stderr."""
        cbks.on_train_interrupt({**logs, "epoch": epoch, "mid_step": mid_step})
        where = f"in epoch {epoch + 1}/{epochs}" + ("" if mid_step else f" after {steps} steps")
        if mid_step:
            saved = "in the middle of a step, so no checkpoint was saved"
        elif save_dir:
            saved = f"saved a checkpoint to {os.path.join(save_dir, 'interrupted')}"
        else:
            saved = "no save_dir, so no checkpoint"
        print(f"Model.fit: stopped by Ctrl-C {where}; {saved}", file=sys.stderr, flush=True)

    def evaluate(self, eval_data, batch_size: int = 1, log_freq: int = 10, verbose: int = 2,
                 num_workers: int = 0, callbacks=None) -> dict:
        """Evaluate on ``eval_data`` (a Dataset or a DataLoader).

        Returns ``{"loss": [mean loss over the data], "acc_top1": .., ...}``: the
        keys are ``"loss"`` (when there is a loss) and each metric's ``name()``;
        metric values are ``accumulate()``'s. (Paddle reports the last batch's
        loss; this is the sample-weighted mean over all batches.)
        """
        if verbose not in (0, 1, 2):
            raise ValueError(f"Model.evaluate: verbose must be 0, 1 or 2, got {verbose!r}")
        loader = _loader(eval_data, batch_size, False, False, num_workers, "evaluate")
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size,
                                steps=_steps(loader), log_freq=log_freq, verbose=verbose,
                                metrics=self._metrics_name(), mode="eval")
        logs = self._evaluate_with(loader, cbks)
        return {name: logs[name] for name in self._metrics_name() if name in logs}

    def predict(self, test_data, batch_size: int = 1, num_workers: int = 0,
                stack_outputs: bool = False, verbose: int = 1, callbacks=None) -> list:
        """The network's outputs on ``test_data`` (labels in its samples are ignored).

        Returns one entry per network output: a list of per-batch NumPy arrays,
        or with ``stack_outputs`` one array concatenated over the batches.
        """
        if verbose not in (0, 1, 2):
            raise ValueError(f"Model.predict: verbose must be 0, 1 or 2, got {verbose!r}")
        loader = _loader(test_data, batch_size, False, False, num_workers, "predict")
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size,
                                steps=_steps(loader), log_freq=10, verbose=verbose,
                                metrics=[], mode="predict")
        cbks.on_begin("predict", {"steps": _steps(loader)})
        logs, batches = self._run_one_epoch(loader, cbks, "predict")
        outputs = [list(per_output) for per_output in zip(*batches)]
        if stack_outputs:
            outputs = [np.concatenate(per_output, axis=0) for per_output in outputs]
        cbks.on_end("predict", logs)
        return outputs

    # --------------------------------------------------------- save/load
    def save(self, path: str, training: bool = True) -> None:
        """``training=True``: ``{path}.pdparams`` (the network's state) and, with an
        optimizer, ``{path}.pdopt`` (its state): safetensors files keyed by
        structured names, written all or nothing (see ``dy2stat.hapi.checkpoint``).
        ``training=False``:
        the inference program and parameters (``{path}.json`` and
        ``{path}.safetensors``, as ``jit.save``), built from the ``inputs`` specs;
        ``d2s.jit.load(path)`` runs it without the model's source."""
        if not isinstance(path, str) or not os.path.basename(path):
            raise ValueError(f"Model.save: path must be a file prefix like 'out/model', "
                             f"got {path!r}")
        if not training:
            self._adapter.save_inference(path)
            return
        optimizer_state = None if self._optimizer is None else self._adapter.optimizer_state()
        checkpoint.write(path, self._adapter.state_arrays(), optimizer_state)

    def load(self, path: str, skip_mismatch: bool = False, reset_optimizer: bool = False) -> None:
        """Load what ``save(path)`` wrote: the network's state from ``{path}.pdparams``
        and, unless ``reset_optimizer`` (or there is no optimizer or no file), the
        optimizer's from ``{path}.pdopt``. A key missing from the file or of the wrong
        shape is an error naming it, or with ``skip_mismatch`` a warning and that
        entry keeps its value."""
        if path.endswith(".pdparams"):
            path = path[: -len(".pdparams")]
        arrays, opt_state = checkpoint.read(
            path, optimizer=not reset_optimizer and self._optimizer is not None)
        matched, skipped = {}, []
        for key, target in self.network.state_dict().items():
            value = arrays.get(key)
            if value is None:
                problem = f"{key} is not found in {path}.pdparams"
            elif list(value.shape) != list(target.shape):
                problem = (f"{key} has shape {list(value.shape)} in {path}.pdparams, but the "
                           f"network expects {list(target.shape)}")
            elif value.dtype != target.dtype and not np.can_cast(value.dtype, target.dtype,
                                                                  "same_kind"):
                problem = (f"{key} has dtype {value.dtype} in {path}.pdparams, but the "
                           f"network expects {target.dtype}")
            else:
                matched[key] = value.astype(target.dtype, copy=False)
                continue
            if not skip_mismatch:
                raise ValueError(f"Model.load: {problem}")
            warnings.warn(f"Model.load: skip loading {key}: {problem}", stacklevel=2)
            skipped.append(key)
        self._adapter.load_state(matched)
        if opt_state is None:
            return
        opt_arrays, scheduler = opt_state
        opt_arrays = {k: v for k, v in opt_arrays.items()
                      if not any(k.startswith(name + "_") for name in skipped)}
        self._adapter.load_optimizer_state(opt_arrays, scheduler)

    # ------------------------------------------------------------ summary
    def summary(self, input_size=None, dtype=None, file=None) -> dict:
        """Print the network's layers, output shapes (dynamic mode, when the input
        shape is known from ``input_size`` or the ``inputs`` specs; a -1/None dim
        becomes 1) and parameter counts; return
        ``{"total_params": n, "trainable_params": m}``."""
        return _summary(self, input_size, dtype, file)
