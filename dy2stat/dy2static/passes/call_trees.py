"""Calls -> calls of what `convert_call` makes of the callee.

    f(x, k=1)  ->  _jst.convert_call(f)(x, k=1)

At run time `convert_call` converts user functions, methods and Layers (cached) and leaves
the framework's own API, builtins and third-party modules alone. Calls of the runtime
helpers that earlier passes generated are not wrapped (their arguments are visited).
Requires: nothing; runs after the passes that generate helper calls.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import templates, transformer
from dy2stat.dy2static.analysis.qual_names import QN


class _Calls(transformer.Base):
    def visit_Call(self, node: gast.Call) -> gast.expr:
        self.generic_visit(node)
        qn = QN.from_ast(node.func)
        if qn is not None and qn.root == self.ctx.helpers:
            return node
        node.func = templates.replace_as_expression(
            "helpers.convert_call(func)", helpers=self.ctx.helpers, func=node.func)
        transformer.stamp(node.func, node)
        return node


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Calls(ctx).visit(node)
