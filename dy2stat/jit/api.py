"""``to_static`` / ``declarative`` and ``not_to_static``."""

from __future__ import annotations

import functools
import inspect
import types

from dy2stat.dy2static.convert_call_func import NOT_TO_STATIC, not_to_static
from dy2stat.jit.static_function import StaticFunction

__all__ = ["NotConverted", "declarative", "not_to_static", "to_static"]


def to_static(function=None, input_spec=None, full_graph: bool = True, **_ignored):
    """Convert a function, a method, or a Layer (its forward) to a static program.

    Usable as ``@to_static``, ``@to_static(input_spec=[...])`` or
    ``to_static(layer_or_function, input_spec=[...])``. A Layer is converted in
    place and returned. Conversion is always whole-function (``full_graph``).

    A function marked ``not_to_static`` (a Layer whose forward is) is not converted:
    the user said so. ``to_static`` then gives a ``NotConverted``, which runs it
    eagerly, as written, and keeps the surface of a StaticFunction (``.code`` is the
    function's own source; ``.rollback()`` gives the function back; asking for a
    program is an error saying why there is none).
    """
    def convert(target):
        if isinstance(target, (StaticFunction, NotConverted)):
            return target
        forward = getattr(type(target), "forward", None)
        if forward is not None and hasattr(target, "_sub_layers"):
            if isinstance(forward, (StaticFunction, NotConverted)):
                return target
            wrapper = NotConverted if _marked(forward) else functools.partial(
                StaticFunction, input_spec=input_spec)
            target.__dict__["forward"] = wrapper(forward, instance=target)
            return target
        if not callable(target):
            raise TypeError(f"to_static: cannot convert a {type(target).__name__}")
        if _marked(target):
            return NotConverted(target)
        return StaticFunction(target, input_spec)

    if function is None:
        return convert
    return convert(function)


declarative = to_static


def _marked(function) -> bool:
    return getattr(getattr(function, "__func__", function), NOT_TO_STATIC, False)


class NotConverted:
    """What ``to_static`` gives for a function marked ``not_to_static``: the function,
    run eagerly as written (no program is traced)."""

    def __init__(self, function, instance=None):
        self._function = getattr(function, "__func__", function)
        self._instance = instance
        functools.update_wrapper(self, self._function)

    def __get__(self, instance, owner=None):
        return self if instance is None else NotConverted(self._function, instance)

    def __call__(self, *args, **kwargs):
        if self._instance is not None:
            return self._function(self._instance, *args, **kwargs)
        return self._function(*args, **kwargs)

    @property
    def dygraph_function(self):
        """The function (it is what runs)."""
        return self._function

    @property
    def code(self) -> str:
        """The function's own source: nothing was converted."""
        return inspect.getsource(self._function.__code__)

    def _no_program(self, *_args, **_kwargs):
        raise RuntimeError(
            f"{self.__name__} is marked with @d2s.jit.not_to_static, so to_static runs it "
            "eagerly and it has no static program; remove @d2s.jit.not_to_static to "
            "convert it")

    main_program = concrete_program = property(_no_program)
    concrete_program_for_specs = _no_program

    def rollback(self):
        """The function (a method: bound to its instance again)."""
        if self._instance is None:
            return self._function
        original = types.MethodType(self._function, self._instance)
        self._instance.__dict__[self._function.__name__] = original
        return original

    def __repr__(self) -> str:
        return f"<NotConverted {self.__name__}>"
