"""`convert_call`: what a call in converted code calls.

User functions, methods, callable objects and Layers are converted (recursively, cached);
the framework's own functions, builtins, classes and third-party or standard-library code
are called as they are, and so is anything marked with `not_to_static`.
"""

from __future__ import annotations

import functools
import inspect
import os
import sysconfig
import types
import weakref

from dy2stat.dy2static import error_map, markers, parser
from dy2stat.dy2static.errors import ConversionError
from dy2stat.dy2static.tensor_array import LIST_FUNCTIONS, TensorArray

NOT_TO_STATIC = markers.NOT_TO_STATIC

_FRAMEWORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARIES = tuple(
    os.path.abspath(p) + os.sep
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
)
# Filled in by dy2static.convert (which needs these helpers itself): fn -> converted fn,
# and a logger `log(level, text)`.
convert_function = None
log = None

# function -> what calls of it call (its converted twin, or itself)
_called: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def not_to_static(fn):
    """Leave `fn` unconverted when converted code calls it (it runs as plain Python)."""
    target = fn.__func__ if inspect.ismethod(fn) else fn
    setattr(target, NOT_TO_STATIC, True)
    return fn


def convert_call(fn):
    """The converted version of `fn`, or `fn` itself when it is not to be converted."""
    if _is_list_function(fn):
        return _list_function(fn)
    if isinstance(fn, types.FunctionType):
        return _function(fn)
    if isinstance(fn, types.MethodType):
        func = fn.__func__
        converted = _function(func) if isinstance(func, types.FunctionType) else func
        return fn if converted is func else types.MethodType(converted, fn.__self__)
    if isinstance(fn, functools.partial):
        converted = convert_call(fn.func)
        if converted is fn.func:
            return fn
        return functools.partial(converted, *fn.args, **fn.keywords)
    if isinstance(fn, type) or not callable(fn):  # noqa: B004
        return fn
    dygraph = getattr(fn, "dygraph_function", None)  # a StaticFunction: inline its function
    if isinstance(dygraph, types.FunctionType):
        converted = convert_call(dygraph)
        owner = getattr(fn, "_instance", None)
        return types.MethodType(converted, owner) if owner is not None else converted
    if _is_library(type(fn)):
        return fn
    forward = getattr(type(fn), "forward", None)
    if forward is not None:  # a Layer: call it with its forward converted
        return _layer_call(fn)
    call = inspect.getattr_static(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        converted = _function(call)
        return fn if converted is call else types.MethodType(converted, fn)
    return fn


def _function(fn: types.FunctionType):
    if getattr(fn, NOT_TO_STATIC, False):
        return fn
    called = _called.get(fn)
    if called is None:
        called = _decide(fn)
        _called[fn] = called
    return called


def _decide(fn: types.FunctionType):
    """What a call of `fn` calls: its converted twin, or `fn` when it stays as it is."""
    if fn.__code__ in error_map.converted_codes:  # defined inside converted code
        return fn
    decorator = getattr(fn, markers.REAPPLY, None)
    if decorator is not None:  # a framework decorator's wrapper: keep the decorator
        inner = convert_call(fn.__wrapped__)
        return fn if inner is fn.__wrapped__ else decorator(inner)
    if _is_library(fn) or inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
        return fn
    try:
        return convert_function(fn)
    except ConversionError as e:
        log(1, f"calling {fn.__qualname__} unconverted: {e}")
        return fn


def _is_library(obj) -> bool:
    """Whether `obj` is the framework's or a library's (not the user's) code."""
    module = getattr(obj, "__module__", None) or ""
    if module in ("dy2stat", "builtins") or module.startswith("dy2stat."):
        return True
    try:
        filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
    except (TypeError, OSError):
        return True
    filename = os.path.abspath(filename)
    return filename.startswith(_LIBRARIES) or filename.startswith(_FRAMEWORK + os.sep)


def _layer_call(layer):
    forward = parser.unwrap(getattr(type(layer).forward, "dygraph_function",
                                    type(layer).forward))
    if not isinstance(forward, types.FunctionType):
        return layer
    converted = _function(forward)
    if converted is forward:
        return layer

    def call(*args, **kwargs):
        # Layer.__call__ runs the hooks and `self.forward`: let that be the converted one.
        saved = layer.__dict__.get("forward", _MISSING)
        layer.__dict__["forward"] = types.MethodType(converted, layer)
        try:
            return layer(*args, **kwargs)
        finally:
            if saved is _MISSING:
                del layer.__dict__["forward"]
            else:
                layer.__dict__["forward"] = saved

    return call


_MISSING = object()


def _is_list_function(fn) -> bool:
    try:
        return fn in LIST_FUNCTIONS
    except TypeError:  # unhashable
        return False


def _list_function(fn):
    def call(x, *args, **kwargs):
        if isinstance(x, TensorArray):
            return LIST_FUNCTIONS[fn](x, *args, **kwargs)
        return fn(x, *args, **kwargs)

    return call
