"""The static execution of ``Model`` (mode 3, after ``d2s.enable_static()``): train,
eval and predict programs built from the ``inputs``/``labels`` specs, the
initializers of their state run once, batches fed to a ``static.Executor`` and
the outputs and losses fetched, and the state in the global scope as arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dy2stat import device, static
from dy2stat.hapi.checkpoint import _NameMap
from dy2stat.hapi.data import _to_list
from dy2stat.kernels.backend import to_host
from dy2stat.nn import Layer
from dy2stat.optimizer.lr import LRScheduler
from dy2stat.runtime.ir import Operator, Program
from dy2stat.static import framework as static_framework
from dy2stat.static import save_inference_model
from dy2stat.static.builder import captured_tensors
from dy2stat.static.executor import Executor, global_scope
from dy2stat.static.input_spec import InputSpec
from dy2stat.tensor import Tensor


def _is_static(value) -> bool:
    return getattr(value, "is_static", False)


def _wants_static(network: Layer) -> bool:
    """Static mode is on, or the network's state already lives in a static program."""
    if static_framework.in_static_mode():
        return True
    return any(_is_static(p) for p in network.parameters() + network.buffers())


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

    def __init__(self, model):
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
            array = y if isinstance(y, Tensor) else to_host(y)
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
    array = value if hasattr(value, "__cuda_array_interface__") else np.asarray(value)
    if array.dtype != spec.dtype and np.can_cast(array.dtype, spec.dtype, "same_kind"):
        array = array.astype(spec.dtype)
    return array
