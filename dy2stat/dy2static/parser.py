"""Parse user functions into gast trees whose line numbers are the real file lines; unparse."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import textwrap
from collections.abc import Callable

import gast

from dy2stat.dy2static import markers, origin
from dy2stat.dy2static.errors import ConversionError

_ADVICE = (
    "Define it with `def` in a .py file, or leave it unconverted with `dy2stat.jit.not_to_static`"
)


@dataclasses.dataclass
class SourceInfo:
    """Where a parsed function lives; node.lineno in its tree is already the file line."""

    filename: str
    lineno: int
    source: str
    file_lines: list[str]
    function_name: str


def unwrap(fn: Callable) -> Callable:
    """The plain function behind bound methods, static/class methods and converted functions.

    A `functools.wraps` wrapper is not looked through: it is converted as it is (its call of
    the wrapped function is converted in turn), so the decorator keeps its effect.
    """
    while True:
        if isinstance(fn, (staticmethod, classmethod)) or inspect.ismethod(fn):
            fn = fn.__func__
        elif getattr(fn, markers.CONVERTED, False):
            fn = fn.__wrapped__
        else:
            return fn


def _source_error(fn, why: str) -> ConversionError:
    name = getattr(fn, "__qualname__", repr(fn))
    code = getattr(fn, "__code__", None)
    return ConversionError(
        f"cannot convert {name}: {why}",
        filename=getattr(code, "co_filename", None),
        lineno=getattr(code, "co_firstlineno", None),
        advice=_ADVICE,
    )


def _shift_lines(node: gast.AST, offset: int) -> None:
    for child in gast.walk(node):
        for attr in ("lineno", "end_lineno"):
            value = getattr(child, attr, None)
            if value is not None:
                setattr(child, attr, value + offset)


def _parse_block(lines: list[str], first_lineno: int) -> gast.Module:
    """Parse source lines starting at file line `first_lineno`, keeping columns as in the file.

    Indented code is parsed under an `if True:` header instead of being dedented, so that
    multi-line strings keep their text and col_offset stays the file's column.
    """
    source = "".join(lines)
    if lines and lines[0][:1] in (" ", "\t"):
        module = gast.parse("if True:\n" + source)
        module.body = module.body[0].body
        _shift_lines(module, first_lineno - 2)
    else:
        module = gast.parse(source)
        _shift_lines(module, first_lineno - 1)
    return module


def source_lines(fn) -> tuple[list[str], list[str], int]:
    """(the lines of ``fn``'s file, the lines of its definition, its first line number).

    As ``inspect.findsource`` and ``getsourcelines`` of its code object, without their
    search of every imported module for the function's own (tens of ms on a first call):
    the function's globals give the loader that ``linecache`` may need.
    """
    code = fn.__code__  # not ``__wrapped__``: the code that runs
    filename = code.co_filename
    linecache.checkcache(filename)  # a file edited since it was read is read again
    file_lines = linecache.getlines(filename, fn.__globals__)
    if not file_lines:
        raise OSError("could not get source code")
    start = code.co_firstlineno - 1  # the first decorator's line, or the def's
    if not 0 <= start < len(file_lines):
        raise OSError("lineno is out of bounds")
    return file_lines, inspect.getblock(file_lines[start:]), start + 1


def parse_function(fn: Callable) -> tuple[gast.FunctionDef | gast.Lambda, SourceInfo]:
    """Parse `fn` (function, method, closure, decorated function or lambda) with origins set."""
    fn = unwrap(fn)
    if not inspect.isfunction(fn):
        raise _source_error(fn, "it is not a Python function (a builtin or C extension?)")
    try:
        file_lines, lines, first_lineno = source_lines(fn)
    except (OSError, TypeError) as e:
        raise _source_error(fn, f"its source code is not available ({e})") from None
    filename = fn.__code__.co_filename
    name = fn.__code__.co_name  # the def's own name (a wrapper's __name__ is the wrapped one's)
    if name == "<lambda>":
        node = _find_lambda(fn, file_lines)
    else:
        try:
            module = _parse_block(lines, first_lineno)
        except SyntaxError as e:
            raise _source_error(fn, f"its source does not parse ({e.msg})") from None
        node = module.body[0]
        if not isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
            raise _source_error(fn, "its source is not a `def` statement")
        node.decorator_list = []
    origin.resolve(node, filename, 0, file_lines, name)
    info = SourceInfo(filename, node.lineno, "".join(lines), file_lines, name)
    return node, info


def _find_lambda(fn, file_lines: list[str]) -> gast.Lambda:
    """The Lambda node of `fn`: among the lambdas on its first line, the one whose code it is."""
    code = fn.__code__
    try:
        module = gast.parse("".join(file_lines))
    except SyntaxError as e:
        raise _source_error(fn, f"its file does not parse ({e.msg})") from None
    params = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    found = [
        n
        for n in gast.walk(module)
        if isinstance(n, gast.Lambda)
        and n.lineno == code.co_firstlineno
        and [a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == params
    ]
    if len(found) > 1 and hasattr(code, "co_positions"):
        cols = {c for _, _, c, _ in code.co_positions() if c}
        found = [n for n in found if any(n.col_offset <= c < n.end_col_offset for c in cols)]
    if len({unparse(n) for n in found}) > 1:
        raise _source_error(fn, "several lambdas on its line could be it")
    if not found:
        raise _source_error(fn, "its lambda was not found in the source")
    return found[0]


def parse_str(code: str, *, single: bool = False) -> gast.AST:
    """Parse (dedented) code into a gast Module, or its only statement if `single`."""
    module = gast.parse(textwrap.dedent(code))
    if single:
        if len(module.body) != 1:
            raise ValueError(f"expected one statement, got {len(module.body)}")
        return module.body[0]
    return module


def parse_expression(code: str) -> gast.expr:
    """Parse one expression."""
    return gast.parse(code.strip(), mode="eval").body


def unparse(node: gast.AST | list) -> str:
    """Source text of a gast node or a list of statements (statements end with a newline).

    Uses the standard library's `ast.unparse`: it knows all the syntax of the running Python
    (astor 0.8 cannot print `match`) and prints no redundant parentheses.
    """
    if isinstance(node, list):
        return "".join(unparse(n) for n in node)
    # ast.unparse reads `lineno` of statements; generated ones may have none.
    text = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(node)))
    return text + "\n" if text and isinstance(node, (gast.stmt, gast.Module)) else text


def unparse_with_source_map(node: gast.AST | list) -> tuple[str, origin.SourceMap]:
    """Source text of `node` and the map from its lines back to the user's origins."""
    code = unparse(node)
    return code, origin.SourceMap.build(node, code)


__all__ = [
    "SourceInfo",
    "parse_expression",
    "parse_function",
    "parse_str",
    "unparse",
    "unparse_with_source_map",
    "unwrap",
]
