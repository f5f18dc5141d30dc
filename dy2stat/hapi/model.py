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

import inspect
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from dy2stat import device
from dy2stat.autograd import no_grad
from dy2stat.creation import to_tensor
from dy2stat.hapi import checkpoint
from dy2stat.hapi.callbacks import config_callbacks
from dy2stat.io import DataLoader
from dy2stat.kernels.backend import to_host
from dy2stat.metric import Metric
from dy2stat.nn import Layer
from dy2stat.optimizer import Optimizer
from dy2stat.optimizer.lr import LRScheduler
from dy2stat.runtime.ir import Operator, Program
from dy2stat.static import framework as static_framework
from dy2stat.static.builder import captured_tensors
from dy2stat.static.executor import Executor, global_scope
from dy2stat.static.input_spec import InputSpec
from dy2stat.tensor import Tensor

__all__ = ["Model"]


# ---------------------------------------------------------------- helpers
def _to_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


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


def _is_static(value) -> bool:
    return getattr(value, "is_static", False)


def _wants_static(network: Layer) -> bool:
    """Static mode is on, or the network's state already lives in a static program."""
    if static_framework.in_static_mode():
        return True
    return any(_is_static(p) for p in network.parameters() + network.buffers())


def _numpy(value) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    return np.asarray(to_host(value) if hasattr(value, "__cuda_array_interface__") else value)


def _batch_size(value) -> int:
    shape = getattr(value, "shape", None)
    if shape is None:
        return len(value) if hasattr(value, "__len__") else 1
    return int(shape[0]) if len(shape) else 1


def _num_forward_inputs(network: Layer) -> int:
    """How many positional inputs ``forward`` takes without defaults (at least 1)."""
    try:
        sig = inspect.signature(type(network).forward)
    except (TypeError, ValueError):
        return 1
    params = list(sig.parameters.values())[1:]  # without self
    count = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return max(count, 1)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            count += 1
    return max(count, 1)


class _NameMap:
    """Runtime parameter names (``linear_3.weight``) <-> structured ones (``fc.0.weight``),
    applied to the prefix of optimizer-state keys (``{param}_{accumulator}_0``)."""

    def __init__(self, network: Layer):
        pairs = [(name, p.name) for name, p in network.named_parameters() if p.name]
        self._to_structured = sorted(((rt, st) for st, rt in pairs), key=lambda x: -len(x[0]))
        self._to_runtime = sorted(pairs, key=lambda x: -len(x[0]))

    @staticmethod
    def _map(key: str, table) -> str:
        for old, new in table:
            if key.startswith(old + "_"):
                return new + key[len(old):]
        return key

    def structured(self, key: str) -> str:
        return self._map(key, self._to_structured)

    def runtime(self, key: str) -> str:
        return self._map(key, self._to_runtime)


# ------------------------------------------------------------------ Model
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
        self._adapter = self._make_adapter()

    def _make_adapter(self):
        return _StaticAdapter(self) if _wants_static(self.network) else _DynamicAdapter(self)

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

    # -------------------------------------------------------------- loops
    def _loader(self, data, batch_size, shuffle, drop_last, num_workers, what):
        if data is None:
            raise ValueError(f"Model.{what}: no data")
        if isinstance(data, DataLoader):
            return data
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"Model.{what}: batch_size must be a positive int, "
                             f"got {batch_size!r}")
        if hasattr(data, "__getitem__") or hasattr(data, "__iter__"):
            return DataLoader(data, batch_size=batch_size, shuffle=shuffle,
                              drop_last=drop_last, num_workers=num_workers)
        raise TypeError(f"Model.{what}: expected a Dataset or a DataLoader, "
                        f"got {type(data).__name__}")

    @staticmethod
    def _steps(loader):
        try:
            return len(loader)
        except TypeError:
            return None

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
        if mode == "train" and accumulate > 1 and (step + 1) % accumulate != 0:
            self._adapter.flush_gradients()
        result = dict(logs)
        if loss_sums and samples:
            result["loss"] = [s / samples for s in loss_sums]
        result["samples"] = samples
        return (result, outputs) if mode == "predict" else result

    def _evaluate_with(self, loader, cbks) -> dict:
        cbks.on_begin("eval", {"steps": self._steps(loader), "metrics": self._metrics_name()})
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
        train_loader = self._loader(train_data, batch_size, shuffle, drop_last, num_workers,
                                    "fit")
        eval_loader = None if eval_data is None else self._loader(
            eval_data, batch_size, False, False, num_workers, "fit")
        names = self._metrics_name()
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size, epochs=epochs,
                                steps=self._steps(train_loader), log_freq=log_freq,
                                verbose=verbose, save_freq=save_freq, save_dir=save_dir,
                                metrics=names, mode="train")
        history: dict = {name: [] for name in names}
        self.history = history
        self.stop_training = False
        cbks.on_begin("train")
        logs: dict = {}
        for epoch in range(epochs):
            cbks.on_epoch_begin(epoch)
            logs = self._run_one_epoch(train_loader, cbks, "train", accumulate_grad_batches)
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
            if self.stop_training:
                break
        cbks.on_end("train", logs)
        return history

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
        loader = self._loader(eval_data, batch_size, False, False, num_workers, "evaluate")
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size,
                                steps=self._steps(loader), log_freq=log_freq, verbose=verbose,
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
        loader = self._loader(test_data, batch_size, False, False, num_workers, "predict")
        cbks = config_callbacks(callbacks, model=self, batch_size=batch_size,
                                steps=self._steps(loader), log_freq=10, verbose=verbose,
                                metrics=[], mode="predict")
        cbks.on_begin("predict", {"steps": self._steps(loader)})
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
        structured names (see ``dy2stat.hapi.checkpoint``). ``training=False``:
        the inference program and parameters (``{path}.json`` and
        ``{path}.safetensors``, as ``jit.save``), built from the ``inputs`` specs;
        ``d2s.jit.load(path)`` runs it without the model's source."""
        if not isinstance(path, str) or not os.path.basename(path):
            raise ValueError(f"Model.save: path must be a file prefix like 'out/model', "
                             f"got {path!r}")
        if not training:
            self._adapter.save_inference(path)
            return
        checkpoint.write(f"{path}.pdparams", self._adapter.state_arrays())
        if self._optimizer is not None:
            arrays, scheduler = self._adapter.optimizer_state()
            checkpoint.write(f"{path}.pdopt", arrays, scheduler)

    def load(self, path: str, skip_mismatch: bool = False, reset_optimizer: bool = False) -> None:
        """Load what ``save(path)`` wrote: the network's state from ``{path}.pdparams``
        and, unless ``reset_optimizer`` (or there is no optimizer or no file), the
        optimizer's from ``{path}.pdopt``. A key missing from the file or of the wrong
        shape is an error naming it, or with ``skip_mismatch`` a warning and that
        entry keeps its value."""
        if path.endswith(".pdparams"):
            path = path[: -len(".pdparams")]
        arrays, _ = checkpoint.read(f"{path}.pdparams")
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
        opt_path = f"{path}.pdopt"
        if reset_optimizer or self._optimizer is None or not os.path.isfile(opt_path):
            return
        opt_arrays, scheduler = checkpoint.read(opt_path)
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


# ---------------------------------------------------------------- dynamic
class _DynamicAdapter:
    """Modes 1 and 2: the eager loop (on the network converted by to_static in mode 2)."""

    def __init__(self, model: Model):
        self.model = model
        self._converted = False

    def prepare(self) -> None:
        self._convert()

    def _convert(self) -> None:
        """Mode 2: convert the network's forward once, when ``inputs`` specs are given."""
        if self._converted or self.model._inputs is None:
            return
        self._converted = True
        network = self.model.network
        forward = network.__dict__.get("forward")
        if forward is not None and type(forward).__name__ == "StaticFunction":
            return  # converted already (by the user)
        try:
            from dy2stat import jit
        except ImportError as exc:
            warnings.warn(f"Model: inputs specs were given but dy2stat.jit cannot be imported "
                          f"({exc}); the network is trained eagerly", RuntimeWarning,
                          stacklevel=4)
            return
        jit.to_static(network, input_spec=self.model._inputs)

    @property
    def converted(self) -> bool:
        forward = self.model.network.__dict__.get("forward")
        return forward is not None and type(forward).__name__ == "StaticFunction"

    @staticmethod
    def _tensor(value):
        if isinstance(value, Tensor):
            return value
        return to_tensor(np.asarray(value))

    def _forward(self, inputs):
        self._convert()
        return _to_list(self.model.network(*[self._tensor(x) for x in inputs]))

    def _losses(self, outputs, labels):
        return _to_list(self.model._loss(*(outputs + [self._tensor(y) for y in labels])))

    def train_batch(self, inputs, labels, update: bool):
        model = self.model
        model.network.train()
        outputs = self._forward(inputs)
        losses = self._losses(outputs, labels)
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        if total.size != 1:
            total = total.sum()
        total.backward()
        if update:
            model._optimizer.step()
            model._optimizer.clear_grad()
        return outputs, [loss.detach() for loss in losses]

    def flush_gradients(self) -> None:
        """Apply gradients accumulated by ``update=False`` steps."""
        self.model._optimizer.step()
        self.model._optimizer.clear_grad()

    def eval_batch(self, inputs, labels):
        self.model.network.eval()
        with no_grad():
            outputs = self._forward(inputs)
            losses = self._losses(outputs, labels) if self.model._loss is not None else []
        return outputs, losses

    def predict_batch(self, inputs):
        self.model.network.eval()
        with no_grad():
            return self._forward(inputs)

    # state
    def state_arrays(self) -> dict:
        return {key: value.numpy() for key, value in self.model.network.state_dict().items()}

    def load_state(self, arrays: dict) -> None:
        self.model.network.set_state_dict(arrays, strict=False)

    def optimizer_state(self):
        state = dict(self.model._optimizer.state_dict())
        scheduler = state.pop("LR_Scheduler", None)
        names = _NameMap(self.model.network)
        return {names.structured(k): _numpy(v) for k, v in state.items()}, scheduler

    def load_optimizer_state(self, arrays: dict, scheduler) -> None:
        names = _NameMap(self.model.network)
        state = {names.runtime(k): v for k, v in arrays.items()}
        if scheduler is not None:
            state["LR_Scheduler"] = scheduler
        self.model._optimizer.set_state_dict(state)

    def save_inference(self, path: str) -> None:
        if self.model._inputs is None:
            raise ValueError("Model.save(training=False) needs the inputs InputSpecs: "
                             "Model(network, inputs=[InputSpec(...)], ...)")
        try:
            from dy2stat import jit
        except ImportError as exc:
            raise RuntimeError(f"Model.save(training=False) needs dy2stat.jit, which cannot "
                               f"be imported: {exc}") from exc
        jit.save(self.model.network, path, input_spec=self.model._inputs)


# ----------------------------------------------------------------- static
@dataclass
class _Built:
    """One static program of a mode and how to feed and fetch it."""

    program: Program
    input_names: list[str]
    input_specs: list[InputSpec]
    label_names: list[str] = field(default_factory=list)
    label_specs: list[InputSpec] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)


class _StaticAdapter:
    """Mode 3: static programs run by an Executor; parameters live in the global scope."""

    def __init__(self, model: Model):
        if model._inputs is None:
            raise ValueError(
                "Model: static mode needs the inputs InputSpecs: "
                "Model(network, inputs=[InputSpec([-1, ...], 'float32', 'x')], labels=[...])")
        self.model = model
        # The parameters' initializers are in the startup program that was the default
        # when the network was built; the optimizer's accumulators go into our own.
        self._source_startup = static_framework.default_startup_program()
        self._startup = Program()
        self._built: dict[str, _Built] = {}
        self._executor = Executor()
        self._label_specs = model._labels
        self._pending_optimizer_state: dict | None = None

    def prepare(self) -> None:
        self._built.clear()
        self._startup = Program()

    # building
    def _state_vars(self) -> list:
        network = self.model.network
        return [v for v in network.parameters() + network.buffers() if _is_static(v)]

    def _label_specs_for(self, labels) -> list[InputSpec]:
        if self._label_specs is not None:
            return self._label_specs
        if not labels:
            raise ValueError("Model: static mode needs labels to build the loss: pass "
                             "labels=[InputSpec(...)] or batches with label fields")
        specs = []
        for i, y in enumerate(labels):
            array = y if isinstance(y, Tensor) else np.asarray(y)
            specs.append(InputSpec([-1, *list(array.shape)[1:]], array.dtype, f"label_{i}"))
        self._label_specs = specs
        return specs

    def _build(self, mode: str, labels) -> _Built:
        model = self.model
        program = Program()
        block = program.global_block()
        for var in self._state_vars():
            desc = var.desc
            block.create_var(desc.shape, desc.dtype, name=desc.name, persistable=True,
                             stop_gradient=desc.stop_gradient)
        needs_labels = mode != "predict" and model._loss is not None
        label_specs = self._label_specs_for(labels) if needs_labels else []
        input_names = _feed_names(model._inputs, "input", block)
        label_names = _feed_names(label_specs, "label", block, taken=set(input_names))
        from dy2stat import static

        with static_framework.static_guard(True), \
                static_framework.program_guard(program, self._startup):
            xs = [static.data(n, s.shape, s.dtype) for n, s in zip(input_names, model._inputs)]
            ys = [static.data(n, s.shape, s.dtype) for n, s in zip(label_names, label_specs)]
            was_training = model.network.training
            model.network.train(mode == "train")
            try:
                outputs = _to_list(model.network(*xs))
            finally:
                model.network.train(was_training)
            for i, out in enumerate(outputs):
                if not _is_static(out):
                    raise TypeError(f"Model: in static mode the network's output {i} must be "
                                    f"a static Variable, got {type(out).__name__}")
            losses = _to_list(model._loss(*(outputs + ys))) if needs_labels else []
            if mode == "train":
                total = losses[0]
                for loss in losses[1:]:
                    total = total + loss
                if list(total.shape) not in ([], [1]):
                    total = total.sum()
                model._optimizer.minimize(total, startup_program=self._startup)
        return _Built(program, input_names, list(model._inputs), label_names, label_specs,
                      [o.name for o in outputs], [loss.name for loss in losses])

    def _program(self, mode: str, labels=None) -> _Built:
        built = self._built.get(mode)
        if built is None:
            built = self._built[mode] = self._build(mode, labels)
            if mode == "train" and self._pending_optimizer_state is not None:
                self._write_optimizer_state(built, self._pending_optimizer_state)
                self._pending_optimizer_state = None
            self._initialize(built.program)
        return built

    # initialization
    def _initialize(self, program: Program) -> None:
        """Run the initializers of ``program``'s persistables that have no value yet."""
        scope, captured = global_scope(), captured_tensors(program)
        missing = [v.name for v in program.persistables()
                   if v.name not in scope and v.name not in captured]
        if missing:
            self._run_initializers(missing)

    def _initialize_state(self) -> None:
        scope = global_scope()
        missing = [v.name for v in self._state_vars() if v.name not in scope]
        if missing:
            self._run_initializers(missing)

    def _run_initializers(self, names) -> None:
        wanted = set(names)
        init = Program()
        block = init.global_block()
        for source in (self._source_startup, self._startup):
            sblock = source.global_block()
            needed, kept = set(wanted), []
            for op in reversed(sblock.ops):
                if needed & set(op.output_names()):
                    kept.append(op)
                    needed |= set(op.input_names())
            for op in reversed(kept):
                for name in op.input_names() + op.output_names():
                    if name not in block.vars:
                        var = sblock.var(name)
                        block.create_var(var.shape, var.dtype, name=name,
                                         persistable=var.persistable)
                block.append_op(Operator(op.type, {k: list(v) for k, v in op.inputs.items()},
                                         {k: list(v) for k, v in op.outputs.items()},
                                         dict(op.attrs)))
                wanted -= set(op.output_names())
        if wanted:
            raise RuntimeError(
                f"Model: no initializer for {sorted(wanted)} in the startup program; build "
                "the network after d2s.enable_static() in the default programs (or load "
                "its parameters with Model.load before training)")
        if block.ops:
            self._executor.run(init)

    # running
    def _run(self, mode: str, inputs, labels):
        built = self._program(mode, labels)
        if len(inputs) != len(built.input_names):
            raise ValueError(f"Model: the network takes {len(built.input_names)} inputs "
                             f"({', '.join(built.input_names)}), got {len(inputs)}")
        if len(labels) < len(built.label_names):
            raise ValueError(f"Model: the loss takes {len(built.label_names)} labels "
                             f"({', '.join(built.label_names)}), got {len(labels)}")
        feed = {}
        for name, spec, value in zip(built.input_names + built.label_names,
                                     built.input_specs + built.label_specs,
                                     list(inputs) + list(labels)):
            feed[name] = _feed_value(value, spec)
        fetched = self._executor.run(built.program, feed=feed,
                                     fetch_list=built.outputs + built.losses)
        n = len(built.outputs)
        return fetched[:n], fetched[n:]

    def train_batch(self, inputs, labels, update: bool):
        if not update:
            raise ValueError("Model.train_batch: update=False (gradient accumulation) needs "
                             "dynamic mode")
        return self._run("train", inputs, labels)

    def flush_gradients(self) -> None:  # pragma: no cover - fit refuses accumulation here
        pass

    def eval_batch(self, inputs, labels):
        return self._run("eval", inputs, labels)

    def predict_batch(self, inputs):
        return self._run("predict", inputs, [])[0]

    # state
    def state_arrays(self) -> dict:
        self._initialize_state()
        scope = global_scope()
        return {key: to_host(scope[var.name])
                for key, var in self.model.network.state_dict().items()}

    def load_state(self, arrays: dict) -> None:
        self.model.network.set_state_dict(arrays, strict=False)

    def _optimizer_vars(self, built: _Built) -> list:
        own = {v.name for v in self._state_vars()}
        captured = captured_tensors(built.program)
        return [v for v in built.program.persistables()
                if v.name not in own and v.name not in captured]

    def optimizer_state(self):
        opt = self.model._optimizer
        scheduler = opt._learning_rate.state_dict() if isinstance(
            opt._learning_rate, LRScheduler) else None
        built = self._built.get("train")
        if built is None:
            return {}, scheduler
        scope, names = global_scope(), _NameMap(self.model.network)
        arrays = {names.structured(v.name): to_host(scope[v.name])
                  for v in self._optimizer_vars(built) if v.name in scope}
        return arrays, scheduler

    def load_optimizer_state(self, arrays: dict, scheduler) -> None:
        opt = self.model._optimizer
        if scheduler is not None and isinstance(opt._learning_rate, LRScheduler):
            opt._learning_rate.set_state_dict(scheduler)
        names = _NameMap(self.model.network)
        state = {names.runtime(k): v for k, v in arrays.items()}
        built = self._built.get("train")
        if built is None:
            self._pending_optimizer_state = state  # written when the program is built
        else:
            self._write_optimizer_state(built, state)

    def _write_optimizer_state(self, built: _Built, state: dict) -> None:
        scope, xp = global_scope(), device.current.xp
        for var in self._optimizer_vars(built):
            value = state.get(var.name)
            if value is None:
                continue
            if tuple(np.shape(value)) != tuple(var.shape):
                raise ValueError(f"Model.load: optimizer state {var.name} has shape "
                                 f"{list(np.shape(value))}, expected {list(var.shape)}")
            scope[var.name] = xp.asarray(value, dtype=var.dtype)

    def save_inference(self, path: str) -> None:
        from dy2stat.static import save_inference_model

        built = self._program("predict")
        save_inference_model(path, built.input_names, built.outputs, self._executor,
                             program=built.program)


def _feed_names(specs, prefix: str, block, taken=()) -> list[str]:
    names, seen = [], set(taken)
    for i, spec in enumerate(specs):
        name = spec.name or f"{prefix}_{i}"
        if name in seen:
            raise ValueError(f"Model: two inputs/labels are named {name!r}; give the "
                             "InputSpecs distinct names")
        if name in block.vars:
            raise ValueError(f"Model: the InputSpec name {name!r} is also a parameter's name")
        seen.add(name)
        names.append(name)
    return names


def _feed_value(value, spec: InputSpec):
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    if array.dtype != spec.dtype and np.can_cast(array.dtype, spec.dtype, "same_kind"):
        array = array.astype(spec.dtype)
    return array


# ---------------------------------------------------------------- summary
def _summary(model: Model, input_size, dtype, file) -> dict:
    import sys

    network = model.network
    shapes: dict[int, list] = {}
    if input_size is None and model._inputs is not None:
        input_size = model._inputs
    if input_size is not None and not model.static:
        _trace_shapes(network, input_size, dtype, shapes)
    rows = []
    total = trainable = 0
    for name, layer in network.named_sublayers():
        own = layer.parameters(include_sublayers=False)
        if layer._sub_layers and not own:
            continue
        count = sum(int(np.prod(p.shape)) for p in own)
        rows.append((f"{name} ({type(layer).__name__})", shapes.get(id(layer), "-"), count))
    for p in network.parameters():
        n = int(np.prod(p.shape))
        total += n
        if not p.stop_gradient:
            trainable += n
    widths = [max([len(r[0]) for r in rows] + [len("Layer")]) + 2, 24, 12]
    out = file or sys.stdout
    line = "-" * sum(widths)
    print(line, file=out)
    print(f"{'Layer':<{widths[0]}}{'Output Shape':<{widths[1]}}{'Param #':>{widths[2]}}",
          file=out)
    print("=" * sum(widths), file=out)
    for label, shape, count in rows:
        print(f"{label:<{widths[0]}}{str(shape):<{widths[1]}}{count:>{widths[2]},}", file=out)
    print("=" * sum(widths), file=out)
    print(f"Total params: {total:,}", file=out)
    print(f"Trainable params: {trainable:,}", file=out)
    print(f"Non-trainable params: {total - trainable:,}", file=out)
    print(line, file=out)
    return {"total_params": total, "trainable_params": trainable}


def _trace_shapes(network: Layer, input_size, dtype, shapes: dict) -> None:
    """Run the eager forward on zeros (batch 1) and record each layer's output shape."""
    sizes = input_size if isinstance(input_size, list) and input_size and isinstance(
        input_size[0], (list, tuple, InputSpec)) else [input_size]
    xs = []
    for size in sizes:
        if isinstance(size, InputSpec):
            shape, kind = list(size.shape), size.dtype
        else:
            shape, kind = list(size), dtype or "float32"
        shape = [1 if d is None or d < 0 else int(d) for d in shape]
        xs.append(to_tensor(np.zeros(shape, dtype=kind)))

    def hook(layer, inputs, outputs):
        first = outputs[0] if isinstance(outputs, (list, tuple)) and outputs else outputs
        if hasattr(first, "shape"):
            shapes[id(layer)] = list(first.shape)

    handles = [layer.register_forward_post_hook(hook) for layer in network.sublayers()]
    was_training = network.training
    try:
        network.eval()
        with no_grad():
            type(network).forward(network, *xs)  # the eager forward, even when converted
    finally:
        network.train(was_training)
        for handle in handles:
            handle.remove()
