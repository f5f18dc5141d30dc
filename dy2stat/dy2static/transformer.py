"""The base of every pass: keeps origins on new nodes, honours SKIP, hands out fresh names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import gast

from dy2stat.dy2static import anno
from dy2stat.dy2static.naming import Namer
from dy2stat.dy2static.parser import SourceInfo

_LOCATIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")
_LOCATED = (gast.stmt, gast.expr, gast.excepthandler, gast.keyword, gast.arguments)


@dataclasses.dataclass
class Context:
    """What every pass is given: the namer, and the user's function and its source."""

    namer: Namer
    source_info: SourceInfo | None = None
    fn: Callable | None = None

    @classmethod
    def for_function(
        cls, node: gast.AST, fn: Callable | None = None, source_info: SourceInfo | None = None
    ) -> Context:
        return cls(Namer.for_function(node, fn), source_info, fn)


def stamp(tree: gast.AST | list, source: gast.AST) -> None:
    """Give every node of `tree` lacking an ORIGIN the origin and location of `source`."""
    info = anno.getanno(source, anno.Basic.ORIGIN, None)
    nodes = tree if isinstance(tree, list) else [tree]
    for root in nodes:
        for node in gast.walk(root):
            if not isinstance(node, _LOCATED) or anno.hasanno(node, anno.Basic.ORIGIN):
                continue
            if info is not None:
                anno.setanno(node, anno.Basic.ORIGIN, info)
            for attr in _LOCATIONS:
                if getattr(node, attr, None) is None and getattr(source, attr, None) is not None:
                    setattr(node, attr, getattr(source, attr))


class Base(gast.NodeTransformer):
    """A NodeTransformer whose new nodes inherit the origin of the node being visited."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def visit(self, node: gast.AST):
        if anno.hasanno(node, anno.Basic.SKIP):
            return node
        result = super().visit(node)
        if result is not None and anno.hasanno(node, anno.Basic.ORIGIN):
            stamp(result, node)
        return result

    def visit_block(self, stmts: list[gast.stmt]) -> list[gast.stmt]:
        """Visit a list of statements; a visit may return one node, a list, or None."""
        out: list[gast.stmt] = []
        for stmt in stmts:
            result = self.visit(stmt)
            if isinstance(result, list):
                out.extend(result)
            elif result is not None:
                out.append(result)
        return out

    def new_name(self, base: str) -> str:
        """A fresh readable name (`if_body_0`) from the context's namer."""
        return self.ctx.namer.new(base)
