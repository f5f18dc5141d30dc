"""Subscripts whose index is computed -> `_jst.convert_getitem(value, index)`.

    scales[i]        ->  _jst.convert_getitem(scales, i)
    x[0], x[1:], x[i, j], d['key']    stay as they are

A Python list indexed by a traced tensor (the counter of a tensor loop) cannot ask the
tensor for its value; the helper reads the item in the program instead. Only loads are
rewritten: an assignment target (`a[i] = v`, `a[i][j] = v`) keeps its own subscripts.

Requires: runs after control_flow (its analyses see the subscripts as written).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import templates, transformer


class _Subscripts(transformer.Base):
    def visit_Assign(self, node):
        node.value = self.visit(node.value)  # the targets' subscripts stay as written
        return node

    def visit_AugAssign(self, node):
        node.value = self.visit(node.value)
        return node

    def visit_AnnAssign(self, node):
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_Delete(self, node):
        return node

    def visit_Subscript(self, node: gast.Subscript) -> gast.expr:
        self.generic_visit(node)
        index = node.slice
        if not isinstance(node.ctx, gast.Load) or isinstance(
                index, (gast.Constant, gast.Slice, gast.Tuple, gast.UnaryOp)):
            return node
        call = templates.replace_as_expression(
            "helpers.convert_getitem(value, index)", helpers=self.ctx.helpers,
            value=node.value, index=index)
        transformer.stamp(call, node)
        return call


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Subscripts(ctx).visit(node)
