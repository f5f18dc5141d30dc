"""Fence: reject, before anything changes, the syntax the transpiler cannot convert.

Requires: nothing. Raises: ConversionError at the construct, with advice. Marks nested
generator and async functions SKIP: they are left as written (and run as Python).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno
from dy2stat.dy2static.errors import ConversionError

_ADVICE = "Leave this function unconverted with @d2s.jit.not_to_static"
_DEFS = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)


def transform(node: gast.AST, ctx) -> gast.AST:
    if isinstance(node, gast.AsyncFunctionDef):
        raise _error(node, "async functions cannot be converted")
    for child in _own_nodes(node):
        if isinstance(child, (gast.Yield, gast.YieldFrom)):
            raise _error(child, "generator functions (`yield`) cannot be converted")
        if isinstance(child, (gast.Await, gast.AsyncFor, gast.AsyncWith)):
            raise _error(child, f"`{_keyword(child)}` cannot be converted")
    for child in gast.walk(node):
        if child is not node and isinstance(child, (gast.FunctionDef, gast.AsyncFunctionDef)):
            if isinstance(child, gast.AsyncFunctionDef) or _is_generator(child):
                anno.setanno(child, anno.Basic.SKIP, True)
        elif isinstance(child, gast.Try):
            _check_finally(child)
        elif isinstance(child, gast.While):
            _check_loop_test(child)
    return node


def _own_nodes(node: gast.AST):
    """The nodes of a function's body, not entering nested functions, lambdas or classes."""
    todo = list(gast.iter_child_nodes(node))
    while todo:
        child = todo.pop()
        yield child
        if not isinstance(child, (*_DEFS, gast.ClassDef)):
            todo.extend(gast.iter_child_nodes(child))


def _is_generator(node: gast.AST) -> bool:
    return any(isinstance(n, (gast.Yield, gast.YieldFrom, gast.Await)) for n in _own_nodes(node))


def _check_finally(node: gast.Try) -> None:
    for stmt in node.finalbody:
        for child in [stmt, *_own_nodes(stmt)]:
            if isinstance(child, (gast.Return, gast.Break, gast.Continue)):
                raise _error(child, f"`{_keyword(child)}` inside `finally` cannot be converted")


def _check_loop_test(node: gast.While) -> None:
    for child in gast.walk(node.test):
        if isinstance(child, gast.NamedExpr):
            raise _error(child, "an assignment expression (`:=`) in a `while` test cannot be "
                         "converted; assign before the loop and at the end of its body")


def _keyword(node: gast.AST) -> str:
    return {
        gast.Await: "await", gast.AsyncFor: "async for", gast.AsyncWith: "async with",
        gast.Return: "return", gast.Break: "break", gast.Continue: "continue",
    }.get(type(node), type(node).__name__)


def _error(node: gast.AST, problem: str) -> ConversionError:
    origin = anno.getanno(node, anno.Basic.ORIGIN, None)
    return ConversionError.at(origin, problem, _ADVICE)
