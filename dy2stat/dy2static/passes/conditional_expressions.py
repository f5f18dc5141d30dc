"""Conditional expressions -> the cond helper, with each branch a lambda.

    a if p else b  ->  _jst.convert_ifelse(p, lambda: a, lambda: b)

Requires: nothing.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno, templates, transformer


class _IfExp(transformer.Base):
    def visit_IfExp(self, node: gast.IfExp) -> gast.expr:
        self.generic_visit(node)
        call = templates.replace_as_expression(
            "helpers.convert_ifelse(test, lambda: body, lambda: orelse)",
            helpers=self.ctx.helpers, test=node.test, body=node.body, orelse=node.orelse)
        for branch in call.args[1:]:  # called (or skipped) before convert_ifelse returns
            anno.setanno(branch, anno.Transform.CALLED_AT_ONCE, True)
        return call


def transform(node: gast.AST, ctx) -> gast.AST:
    return _IfExp(ctx).visit(node)
