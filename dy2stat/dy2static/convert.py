"""`convert_to_static(fn)`: the user's function rewritten so its control flow can be traced.

    parse (gast, the user's lines) -> the passes in order (dy2static/passes) -> readable
    source and a source map (`.code`) -> compiled from the tree itself, with the user's file
    name and line numbers, inside a factory whose parameters are the function's free
    variables (so the converted function shares the original's closure cells and globals).

Translations are cached by code object, converted functions by function. `set_code_level`
prints the code after each pass; `set_verbosity` logs what the converter does.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import threading
import types
import weakref
from dataclasses import dataclass

import gast

from dy2stat.dy2static import (
    convert_call_func,
    convert_operators,
    error_map,
    markers,
    origin,
    parser,
    reads,
    templates,
    transformer,
)
from dy2stat.dy2static.errors import ConversionError
from dy2stat.dy2static.passes import PASSES
from dy2stat.dy2static.undefined import (
    MaybeUndefined,
    Undefined,
    UndefinedReturnValue,
    has_maybe_undefined,
)
from dy2stat.static import nest

_settings = {
    "code_level": int(os.environ.get("DY2STAT_CODE_LEVEL", "0") or 0),
    "verbosity": int(os.environ.get("DY2STAT_VERBOSITY", "0") or 0),
}


def set_code_level(level: int = 100) -> None:
    """Print the converted code after each of the first `level` passes (0: never).

    `len(PASSES)` or more prints the code after every pass; also `DY2STAT_CODE_LEVEL`.
    """
    _settings["code_level"] = int(level)


def set_verbosity(level: int = 0) -> None:
    """Log what the converter does (1: conversions and fallbacks; also DY2STAT_VERBOSITY).

    At 3 and more, tracebacks keep the frames of the runtime helpers.
    """
    _settings["verbosity"] = int(level)


def get_code_level() -> int:
    return _settings["code_level"]


def get_verbosity() -> int:
    return _settings["verbosity"]


def log(level: int, text: str) -> None:
    """Print `text` to stderr when the verbosity is at least `level`."""
    if _settings["verbosity"] >= level:
        print(f"dy2stat: {text}", file=sys.stderr)


@dataclass
class Translation:
    """What converting one code object gives."""

    code: types.CodeType  # the converted function's code
    source: str  # its readable source (what `.code` shows)
    source_map: origin.SourceMap  # lines of `source` -> the user's origins
    helpers: str  # the name of the free variable holding the helpers
    free_names: reads.FreeNames  # what the function reads and assigns outside its scope


# Keyed by (code, file): code objects that differ only in their file compare equal.
_translations: dict[tuple, Translation] = {}


def _code_key(fn):
    code = getattr(fn, "__code__", None)
    return None if code is None else (code, code.co_filename)
_converted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HELPERS = types.CellType(convert_operators)


def convert_to_static(fn):
    """The converted twin of `fn` (a function, method or lambda); the same object each time.

    It takes the Python path for Python values and eager tensors (behaving as `fn`) and
    builds cond/while ops for static Variables. Its `.code` is the converted source.
    """
    if isinstance(fn, types.MethodType):
        return types.MethodType(convert_to_static(fn.__func__), fn.__self__)
    fn = parser.unwrap(fn)
    call = _call_method(fn)
    if call is not None:  # a callable object, say a decorator written as a class
        return types.MethodType(convert_to_static(call), fn)
    converted = _converted.get(fn) if isinstance(fn, types.FunctionType) else None
    if converted is None:
        decorator = getattr(fn, markers.REAPPLY, None)
        if decorator is not None:  # a framework decorator's wrapper: keep the decorator
            converted = decorator(convert_to_static(fn.__wrapped__))
        else:
            translation = _translations.get(_code_key(fn)) or translate(fn)
            converted = instantiate(translation, fn)
        _converted[fn] = converted
    return converted


def _call_method(obj):
    """The Python `__call__` of a callable object that is not a function (else None)."""
    if isinstance(obj, (types.FunctionType, type)) or not callable(obj):
        return None
    call = inspect.getattr_static(type(obj), "__call__", None)
    return call if isinstance(call, types.FunctionType) else None


def run_passes(node, ctx, qualname: str, info, passes=PASSES):
    """Run ``passes`` in order on a parsed def (the one pass loop: the CLI uses it too)."""
    for index, step in enumerate(passes, 1):
        name = step.__name__.rpartition(".")[2]
        try:
            node = step.transform(node, ctx)
        except ConversionError:
            raise
        except Exception as e:  # a bug of ours: say where it struck
            _add_note(e, f"dy2stat: in pass {name}, converting {qualname} "
                         f"({info.filename}:{info.lineno})")
            raise
        if _settings["code_level"] >= index:
            print(f"# dy2stat: {qualname} after pass {index} ({name}):\n"
                  f"{parser.unparse(node)}", file=sys.stderr)
    return node


class _DeepSyntax:
    """Room for expressions hundreds of terms deep (a long sum), which parsing, the passes
    and unparsing walk recursively: the recursion limit is raised while any thread
    converts, and put back after the last."""

    DEPTH = 20000

    def __init__(self) -> None:
        self.lock, self.active, self.saved = threading.Lock(), 0, None

    def __enter__(self) -> None:
        with self.lock:
            if self.active == 0:
                self.saved = sys.getrecursionlimit()
                sys.setrecursionlimit(max(self.saved, self.DEPTH))
            self.active += 1

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.active -= 1
            if self.active == 0:
                sys.setrecursionlimit(self.saved)


_deep_syntax = _DeepSyntax()


def translate(fn, passes=PASSES) -> Translation:
    """Convert the source of `fn` with `passes` (cached by code object for the full list)."""
    with _deep_syntax:
        return _translate(fn, passes)


def _translate(fn, passes) -> Translation:
    node, info = parser.parse_function(fn)
    free_names = reads.FreeNames(parser.unwrap(fn), node)
    ctx = transformer.Context.for_function(node, fn, info)
    if isinstance(node, gast.Lambda):
        node = _as_def(node, ctx.namer.new("lambda"))
    node = run_passes(node, ctx, fn.__qualname__, info, passes)
    source, source_map = parser.unparse_with_source_map(node)
    code = _compile(node, fn, info.filename, ctx.helpers)
    error_map.register(code)
    log(1, f"converted {fn.__qualname__} ({info.filename}:{info.lineno})")
    translation = Translation(code, source, source_map, ctx.helpers, free_names)
    if passes is PASSES:
        _translations[_code_key(fn)] = translation
    return translation


def _add_note(error: BaseException, text: str) -> None:
    if hasattr(error, "add_note"):
        error.add_note(text)


def _as_def(node: gast.Lambda, name: str) -> gast.FunctionDef:
    """`lambda args: body` as `def lambda_0(args): return body`, at the lambda's origin."""
    (new,) = templates.replace("def name():\n    return body", name=name, body=node.body)
    new.args = node.args
    transformer.stamp(new, node)
    return new


def _compile(node: gast.FunctionDef, fn, filename: str, helpers: str) -> types.CodeType:
    """The code of `node`, compiled inside `def factory(helpers, *free vars)` so that the
    names the original reads from its closure stay free variables."""
    params = [helpers, *fn.__code__.co_freevars]
    # `global`: the def must not make its own name a closure variable (recursion reads the
    # global), unless the original reads it from its closure too.
    template = "def factory(params):\n    global name\n    function\n    return name"
    if node.name in params:
        template = template.replace("    global name\n", "")
    factory = templates.replace(template, params=params, function=node, name=node.name)
    tree = ast.fix_missing_locations(gast.gast_to_ast(gast.Module(factory, [])))
    module = compile(tree, filename, "exec", dont_inherit=True)
    (factory_code,) = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    return next(c for c in factory_code.co_consts
                if isinstance(c, types.CodeType) and c.co_name == node.name)


def instantiate(translation: Translation, fn) -> types.FunctionType:
    """A function running `translation` with the globals, closure and defaults of `fn`."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[translation.helpers] = _HELPERS
    closure = tuple(cells[name] for name in translation.code.co_freevars)
    inner = types.FunctionType(translation.code, fn.__globals__, fn.__name__, fn.__defaults__,
                               closure)
    inner.__kwdefaults__ = fn.__kwdefaults__
    inner.__qualname__ = fn.__qualname__

    free_names = translation.free_names

    @functools.wraps(fn)
    def converted(*args, **kwargs):
        reads.enter_function(fn, free_names)
        try:
            result = inner(*args, **kwargs)
        except Exception as e:
            # The same exception object, re-raised: its cause and context stay as they are.
            raise error_map.map_error(e, keep_frames=_settings["verbosity"] >= 3)  # noqa: B904
        if type(result) is UndefinedReturnValue:
            return None
        # Returning a name that has no value raises, as Python's `return y` would (when
        # the program runs, for a value that loops may have left unassigned).
        for value in result if type(result) in (tuple, list) else (result,):
            if type(value) is Undefined:
                raise value.error()
        if has_maybe_undefined(result):
            result = nest.pack_as(result, [v.read() if isinstance(v, MaybeUndefined) else v
                                           for v in nest.flatten(result)])
        return result

    converted.code = translation.source
    converted.__code_text__ = translation.source
    converted.source_map = translation.source_map
    setattr(converted, markers.CONVERTED, True)
    return converted


# convert_call converts the functions converted code calls; it needs us, we need it.
convert_call_func.convert_function = convert_to_static
convert_call_func.log = log
