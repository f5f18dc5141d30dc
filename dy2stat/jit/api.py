"""``to_static`` / ``declarative`` and ``not_to_static``."""

from __future__ import annotations

from dy2stat.jit.static_function import StaticFunction

NOT_TO_STATIC = "__dy2stat_not_to_static__"


def to_static(function=None, input_spec=None, full_graph: bool = True, **_ignored):
    """Convert a function, a method, or a Layer (its forward) to a static program.

    Usable as ``@to_static``, ``@to_static(input_spec=[...])`` or
    ``to_static(layer_or_function, input_spec=[...])``. A Layer is converted in
    place and returned. Conversion is always whole-function (``full_graph``).
    """
    def convert(target):
        if isinstance(target, StaticFunction):
            return target
        forward = getattr(type(target), "forward", None)
        if forward is not None and hasattr(target, "_sub_layers"):
            if isinstance(forward, StaticFunction):
                return target
            target.__dict__["forward"] = StaticFunction(forward, input_spec, instance=target)
            return target
        if not callable(target):
            raise TypeError(f"to_static: cannot convert a {type(target).__name__}")
        return StaticFunction(target, input_spec)

    if function is None:
        return convert
    return convert(function)


declarative = to_static


def not_to_static(function):
    """Leave ``function`` as it is: conversion calls it unchanged."""
    setattr(getattr(function, "__func__", function), NOT_TO_STATIC, True)  # methods too
    return function
