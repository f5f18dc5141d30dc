"""``ProgramTranslator``: the Paddle 1.8 facade over ``to_static``."""

from __future__ import annotations

import os

from dy2stat.jit import save_load, settings
from dy2stat.jit.static_function import StaticFunction
from dy2stat.jit.traced_layer import _pick


class ProgramTranslator:
    """One shared translator; every method delegates to the to_static machinery."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @classmethod
    def get_instance(cls) -> ProgramTranslator:
        """The one ProgramTranslator (as ``ProgramTranslator()``)."""
        return cls()

    def enable(self, flag: bool) -> None:
        """False: converted functions run eagerly (like ``enable_to_static``)."""
        settings.enable_to_static(flag)

    def get_code(self, function) -> str:
        """The converted source of ``function``."""
        return _static(function).code

    def get_program(self, function, *args, **kwargs):
        """``(main_program, startup_program, inputs, outputs)`` traced for ``args``."""
        static = _static(function)
        static(*args, **kwargs)
        concrete = static.concrete_program
        return concrete.main_program, None, concrete.inputs, concrete.outputs

    def get_output(self, function, *args, **kwargs):
        """Run the converted ``function`` (eagerly when the translator is disabled)."""
        return _static(function)(*args, **kwargs)

    def save_inference_model(self, dirname: str, feed=None, fetch=None) -> None:
        """Save the most recently run converted function to ``{dirname}/model.*``.

        ``feed``/``fetch`` pick inputs and outputs by index (default: all).
        """
        function = settings.state.last_function
        if function is None:
            raise RuntimeError(
                "save_inference_model: no converted function has run yet; call it once first")
        concrete = function.concrete_program
        save_load.write(os.path.join(dirname, "model"), concrete.main_program,
                        _pick(concrete.feed_names, feed), _pick(concrete.fetch_names, fetch),
                        concrete.runner.captured)


def _static(function) -> StaticFunction:
    if isinstance(function, StaticFunction):
        return function
    forward = getattr(function, "forward", None)
    if isinstance(forward, StaticFunction):
        return forward
    return StaticFunction(function)
