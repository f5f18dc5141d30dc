"""``TracedLayer``: conversion by tracing alone (the seed's Paddle 1.8 API).

No source is rewritten: the layer runs once on static placeholders, so a
tensor used as a Python bool is an error that suggests ``to_static``.
"""

from __future__ import annotations

from dy2stat.jit import save_load
from dy2stat.jit.static_function import StaticFunction
from dy2stat.static.input_spec import InputSpec


class TracedLayer:
    """A layer traced into a static program; call it or save it."""

    def __init__(self, function: StaticFunction, concrete):
        self._function = function
        self._concrete = concrete

    @staticmethod
    def trace(layer, inputs):
        """``(outputs, traced)``: run ``layer`` on ``inputs`` and keep the traced program."""
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        specs = [InputSpec.from_tensor(x) for x in inputs]
        function = StaticFunction(type(layer).forward, specs, instance=layer,
                                  convert_source=False)
        function = save_load.with_layer_hooks(function, layer)  # as layer(*inputs) runs
        outputs = function(*inputs)
        return outputs, TracedLayer(function, function.concrete_program)

    @property
    def program(self):
        """The traced static program."""
        return self._concrete.main_program

    def __call__(self, *inputs):
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        return self._function(*inputs)

    def save_inference_model(self, path: str, feed=None, fetch=None) -> None:
        """Save like ``jit.save``; ``feed``/``fetch`` pick inputs/outputs by index."""
        concrete = self._concrete
        feeds = _pick(concrete.feed_names, feed)
        fetches = _pick(concrete.fetch_names, fetch)
        save_load.write(path, concrete.main_program, feeds, fetches, concrete.runner.captured)


def _pick(names, indices):
    if indices is None:
        return list(names)
    try:
        return [names[i] for i in indices]
    except IndexError:
        raise ValueError(f"index out of range: there are only {len(names)} of them") from None
