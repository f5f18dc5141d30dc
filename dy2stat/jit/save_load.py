"""``jit.save`` and ``jit.load``: deploy a converted model without its source."""

from __future__ import annotations

import functools
import os

from dy2stat import device
from dy2stat.creation import to_tensor
from dy2stat.jit.program_runner import ProgramRunner
from dy2stat.jit.static_function import StaticFunction
from dy2stat.kernels.backend import to_host
from dy2stat.nn import Layer, Parameter
from dy2stat.runtime import dtypes, prune, serialize
from dy2stat.tensor import Tensor


def static_function_of(obj, input_spec=None) -> StaticFunction:
    """The StaticFunction behind a converted Layer, function or method."""
    if isinstance(obj, StaticFunction):
        return obj
    if isinstance(obj, Layer):
        forward = obj.forward
        if isinstance(forward, StaticFunction):
            return forward
        return StaticFunction(type(obj).forward, input_spec, instance=obj)
    if callable(obj):
        return StaticFunction(obj, input_spec)
    raise TypeError(f"jit.save: cannot save a {type(obj).__name__}")


def with_layer_hooks(function: StaticFunction, layer: Layer) -> StaticFunction:
    """``function`` (a layer's converted forward) traced together with the layer's own
    forward pre-/post-hooks, as ``layer(*inputs)`` runs them.

    Calling a converted layer runs its own hooks eagerly around the program; a
    saved program has to contain them.
    """
    if not (layer._forward_pre_hooks or layer._forward_post_hooks):
        return function

    @functools.wraps(function.dygraph_function)
    def call_with_hooks(self, *inputs):
        saved = self.__dict__.get("forward", _MISSING)
        self.__dict__["forward"] = function  # traced inline (converted) while tracing
        try:
            return Layer.__call__(self, *inputs)
        finally:
            if saved is _MISSING:
                del self.__dict__["forward"]
            else:
                self.__dict__["forward"] = saved

    return StaticFunction(call_with_hooks, function._input_spec, instance=layer,
                          convert_source=False)


_MISSING = object()


def save(layer_or_function, path: str, input_spec=None, output_spec=None) -> None:
    """Write ``{path}.json`` (the inference program) and ``{path}.safetensors``.

    ``output_spec`` keeps only some outputs (the program is pruned to them): each item
    is an output's position in the flattened outputs, its variable name, or a Variable
    of ``concrete_program.outputs``.
    """
    write_program(path, *inference_program(layer_or_function, input_spec, output_spec))


def inference_program(layer_or_function, input_spec=None, output_spec=None):
    """``(program, feed_names, fetch_names, params)``: what ``save`` writes (the program
    traced in eval mode for ``input_spec``, a Layer's forward hooks included, pruned to
    the outputs; ``params``: name -> array). ONNX export writes the same program."""
    function = static_function_of(layer_or_function, input_spec)
    layer = layer_or_function if isinstance(layer_or_function, Layer) else None
    if layer is not None:
        function = with_layer_hooks(function, layer)
    was_training = layer.training if layer is not None else None
    if layer is not None:
        layer.eval()
    try:
        concrete = function.concrete_program_for_specs(input_spec)
    finally:
        if layer is not None and was_training:
            layer.train()
    if concrete.runner.prologue is not None:
        raise TypeError(
            f"jit.save: {getattr(function, '__name__', 'the function')} makes a training step "
            "(backward(), an optimizer's step or gradients): its program updates parameters "
            "and cannot be saved for inference; save the model (its Layer) instead")
    fetches = _chosen_outputs(concrete.fetch_names, output_spec)
    program = prune.prune(concrete.main_program, concrete.feed_names, fetches)
    params = {var.name: to_host(concrete.runner.captured[var.name]._data)
              for var in program.persistables()}
    return program, list(concrete.feed_names), fetches, params


def _chosen_outputs(fetch_names: list, output_spec) -> list:
    if output_spec is None:
        return fetch_names
    if not isinstance(output_spec, (list, tuple)) or not output_spec:
        raise TypeError("jit.save: output_spec must be a non-empty list of outputs "
                        "(positions, names or Variables)")
    chosen = []
    for item in output_spec:
        name = getattr(item, "name", item)
        if isinstance(item, int) and not isinstance(item, bool):
            if not -len(fetch_names) <= item < len(fetch_names):
                raise IndexError(f"jit.save: output_spec position {item} is out of range "
                                 f"(the function has {len(fetch_names)} tensor outputs)")
            name = fetch_names[item]
        elif name not in fetch_names:
            raise ValueError(f"jit.save: output_spec names {name!r}, which is not an output "
                             f"(the outputs are {fetch_names})")
        chosen.append(name)
    return chosen


def write(path: str, program, feed_names, fetch_names, captured: dict) -> None:
    """Prune ``program`` to the fetches and save it with its captured values
    (all or nothing: see ``serialize.save_model``)."""
    pruned = prune.prune(program, feed_names, fetch_names)
    params = {var.name: to_host(captured[var.name]._data) for var in pruned.persistables()}
    write_program(path, pruned, feed_names, fetch_names, params)


def write_program(path: str, program, feed_names, fetch_names, params: dict) -> None:
    """Save a pruned ``program`` and its ``params`` (name -> array) at the prefix ``path``,
    making its folder."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    serialize.save_model(path, program, feed_names, fetch_names, params)


class TranslatedLayer(Layer):
    """A saved program loaded as a Layer: callable, trainable, no source needed."""

    def __init__(self, program, feed_names, fetch_names, params: dict):
        super().__init__()
        captured = {}
        for i, (name, value) in enumerate(params.items()):
            # the loaded arrays are views of one buffer: kept as they are, not copied
            tensor = Tensor(device.current.xp.asarray(value))
            if tensor.dtype in dtypes.FLOATS:
                param = Parameter(tensor._data, name=name)
                self.add_parameter(f"param_{i}", param)
                captured[name] = param
            else:
                self.register_buffer(f"buffer_{i}", tensor)
                captured[name] = tensor
        self._runner = ProgramRunner(program, feed_names, fetch_names, captured)
        self.program = program
        self.feed_names, self.fetch_names = list(feed_names), list(fetch_names)

    def forward(self, *inputs):
        if len(inputs) != len(self.feed_names):
            raise TypeError(
                f"the loaded program takes {len(self.feed_names)} inputs "
                f"({', '.join(self.feed_names)}), got {len(inputs)}")
        tensors = [x if isinstance(x, Tensor) else to_tensor(x) for x in inputs]
        outs = self._runner(tensors)
        return outs[0] if len(outs) == 1 else outs


def load(path: str) -> TranslatedLayer:
    """A callable Layer from ``{path}.json`` and ``{path}.safetensors``.

    ``path`` is the prefix given to ``jit.save``; ``{path}.json``,
    ``{path}.safetensors`` or a folder holding one saved model work too
    (``serialize.model_prefix``)."""
    prefix = serialize.model_prefix(path, "jit.load")
    program, feed_names, fetch_names, params = serialize.load_model(prefix)
    return TranslatedLayer(program, feed_names, fetch_names, params)
