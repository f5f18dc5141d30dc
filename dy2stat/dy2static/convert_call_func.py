"""`convert_call`: what a call in converted code calls.

User functions, methods, callable objects and Layers are converted (recursively, cached);
the framework's own functions, builtins, classes and third-party or standard-library code
are called as they are; anything marked with `not_to_static` runs as written.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import sysconfig
import types
import weakref

from dy2stat.dy2static import error_map, markers, parser
from dy2stat.dy2static.errors import ConversionError, Dy2StaticError
from dy2stat.dy2static.tensor_array import LIST_FUNCTIONS, TensorArray
from dy2stat.mode import state
from dy2stat.static.variable import VariableBoolError

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


class NotConvertedError(Dy2StaticError, TypeError):
    """Code that conversion left as it is used a static Variable as a Python bool."""


def not_to_static(fn):
    """Leave `fn` unconverted: calls of it from converted code run it as written, and
    `to_static` of it runs it eagerly. Works on functions, methods and static/class methods."""
    setattr(getattr(fn, "__func__", fn), NOT_TO_STATIC, True)
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
    recorder = state.recorder
    if recorder is not None and hasattr(fn, "_sub_layers"):  # a Layer: its state is read
        recorder.touch(fn)
    dygraph = getattr(fn, "dygraph_function", None)  # a StaticFunction: inline its function
    if isinstance(dygraph, types.FunctionType):
        converted = convert_call(dygraph)
        owner = getattr(fn, "_instance", None)
        return types.MethodType(converted, owner) if owner is not None else converted
    if is_library(type(fn)):
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
    called = _called.get(fn)
    if called is None:
        called = _decide(fn)
        _called[fn] = called
    return called


def _decide(fn: types.FunctionType):
    """What a call of `fn` calls: its converted twin, or `fn` (or `fn` run unconverted,
    `_unconverted`) when it stays as it is."""
    if getattr(fn, NOT_TO_STATIC, False):
        return _unconverted(fn, "it is marked with @d2s.jit.not_to_static",
                            f"Remove @d2s.jit.not_to_static from {fn.__qualname__} so that "
                            "its tensor-dependent `if`/`while` become cond/while ops")
    if fn.__code__ in error_map.converted_codes:  # defined inside converted code
        return fn
    decorator = getattr(fn, markers.REAPPLY, None)
    if decorator is not None:  # a framework decorator's wrapper: keep the decorator
        inner = convert_call(fn.__wrapped__)
        return fn if inner is fn.__wrapped__ else decorator(inner)
    if is_library(fn) or inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
        return fn
    try:
        return convert_function(fn)
    except ConversionError as e:
        log(1, f"calling {fn.__qualname__} unconverted: {e}")
        return _unconverted(fn, f"it cannot be converted ({e.problem})",
                            "Make it convertible, or compute the condition outside it")


def _unconverted(fn: types.FunctionType, why: str, advice: str):
    """`fn` run as written from converted code: a static Variable it uses as a Python bool
    is an error at that line saying that `fn` is not converted, and why."""

    @functools.wraps(fn)
    def unconverted(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except VariableBoolError as e:
            filename, lineno, source = _bool_site(e)
            code = fn.__code__
            raise NotConvertedError(
                f"{fn.__qualname__} ({os.path.basename(code.co_filename)}:"
                f"{code.co_firstlineno}) is not converted because {why}, so it runs as "
                "plain Python while the program is traced; here it uses a static Variable "
                f"({e.name}) as a Python bool, but its value is known only when the program "
                "runs", filename, lineno, source,
                f"{advice}, or write the condition with tensor ops (d2s.where, "
                "d2s.static.nn.cond).") from None

    return unconverted


def _bool_site(error: BaseException) -> tuple:
    """(file, line, source) of the innermost frame outside the framework in `error`'s
    traceback: the line that used the Variable as a bool."""
    site = (None, None, None)
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(_FRAMEWORK + os.sep):
            site = (code.co_filename, tb.tb_lineno,
                    linecache.getline(code.co_filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    return site


def is_library(obj) -> bool:
    """Whether `obj` is the framework's or a library's (not the user's) code (cached for
    classes and modules)."""
    if isinstance(obj, (type, types.ModuleType)):
        known = _library_types.get(obj)
        if known is None:
            known = _library_types[obj] = _is_library_code(obj)
        return known
    return _is_library_code(obj)


_library_types: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_library_code(obj) -> bool:
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
