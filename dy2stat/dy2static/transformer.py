"""The base of every pass: keeps origins on new nodes, honours SKIP, hands out fresh names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import gast

from dy2stat.dy2static import anno
from dy2stat.dy2static.naming import Namer
from dy2stat.dy2static.parser import SourceInfo

_LOCATED = (gast.stmt, gast.expr, gast.excepthandler, gast.keyword, gast.arguments)


@dataclasses.dataclass
class Context:
    """What every pass is given: the namer, the user's function and its source, and the name
    under which generated code reaches the runtime helpers (`_jst.convert_ifelse(...)`)."""

    namer: Namer
    source_info: SourceInfo | None = None
    fn: Callable | None = None
    helpers: str = "_jst"

    @classmethod
    def for_function(
        cls, node: gast.AST, fn: Callable | None = None, source_info: SourceInfo | None = None
    ) -> Context:
        namer = Namer.for_function(node, fn)
        helpers = "_jst" if "_jst" not in namer.reserved else namer.new("_jst")
        namer.reserve([helpers])
        return cls(namer, source_info, fn, helpers)


def stamp(tree: gast.AST | list, source: gast.AST) -> None:
    """Give every node of `tree` lacking an ORIGIN the origin and location of `source`.

    A node that has an ORIGIN is the user's, or was stamped when it was made: so are the
    nodes under it, which are not visited (stamping stays linear in the new nodes).
    """
    info = anno.getanno(source, anno.Basic.ORIGIN, None)
    todo = list(tree) if isinstance(tree, list) else [tree]
    while todo:
        node = todo.pop()
        if anno.hasanno(node, anno.Basic.ORIGIN):
            continue
        todo.extend(gast.iter_child_nodes(node))
        if not isinstance(node, _LOCATED):
            continue
        if info is not None:
            anno.setanno(node, anno.Basic.ORIGIN, info)
        if getattr(node, "lineno", None) is None and getattr(source, "lineno", None) is not None:
            # One line: the source's first. (A generated call spanning a whole `if` would
            # be reported at the `if`'s last line: Python puts a method call at the line
            # where its attribute ends.)
            node.lineno, node.col_offset = source.lineno, source.col_offset
            node.end_lineno = source.lineno
            single = getattr(source, "end_lineno", None) == source.lineno
            node.end_col_offset = source.end_col_offset if single else source.col_offset


class Base(gast.NodeTransformer):
    """A NodeTransformer whose new nodes inherit the origin of the node being visited."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def visit_Constant(self, node: gast.Constant) -> gast.Constant:
        # A leaf: skip ast's slow compatibility lookup of visit_Num/visit_Str (a literal
        # of thousands of numbers passes through every pass).
        return node

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
