"""The inference program ``jit.save`` saves, kept in memory: traced in eval mode for an
input spec and pruned to the outputs, its ops still holding the lines of the user's
code that built them (a saved program drops them). Needs no onnx package."""

from __future__ import annotations

from dy2stat.jit.save_load import static_function_of, with_layer_hooks
from dy2stat.kernels.backend import to_host
from dy2stat.nn import Layer
from dy2stat.runtime import prune


def inference_program(layer_or_function, input_spec=None):
    """``(program, feed_names, fetch_names, params)`` as ``jit.save`` saves them (a
    Layer's forward hooks included; ``params``: name -> array)."""
    function = static_function_of(layer_or_function, input_spec)
    layer = layer_or_function if isinstance(layer_or_function, Layer) else None
    was_training = False
    if layer is not None:
        function = with_layer_hooks(function, layer)
        was_training = layer.training
        layer.eval()
    try:
        concrete = function.concrete_program_for_specs(input_spec)
    finally:
        if was_training:
            layer.train()
    program = prune.prune(concrete.main_program, concrete.feed_names, concrete.fetch_names)
    params = {var.name: to_host(concrete.runner.captured[var.name]._data)
              for var in program.persistables()}
    return program, list(concrete.feed_names), list(concrete.fetch_names), params
