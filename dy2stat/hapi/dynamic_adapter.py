"""The eager execution of ``Model`` (modes 1 and 2): one batch of training,
evaluation or prediction on the network, converted by ``jit.to_static`` when
``inputs`` specs are given, and the network's and optimizer's state as arrays."""

from __future__ import annotations

import warnings

import numpy as np

from dy2stat.autograd import no_grad
from dy2stat.creation import to_tensor
from dy2stat.hapi.checkpoint import _NameMap
from dy2stat.hapi.data import _numpy, _to_list
from dy2stat.tensor import Tensor


class _DynamicAdapter:
    """Modes 1 and 2: the eager loop (on the network converted by to_static in mode 2)."""

    def __init__(self, model):
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
        return to_tensor(value if hasattr(value, "__cuda_array_interface__") else np.asarray(value))

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
