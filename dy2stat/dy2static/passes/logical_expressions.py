"""`and`/`or`/`not` and chained comparisons -> lazy helper calls.

    a and b        ->  _jst.convert_logical_and(lambda: a, lambda: b)
    not a          ->  _jst.convert_logical_not(a)
    a < b <= c     ->  _jst.convert_compare(a, '<', lambda: b, '<=', lambda: c)

Operands stay unevaluated until the helper needs them, so Python values short-circuit as
before. A `for` loop's EXTRA_TEST is converted too. Requires: nothing.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno, templates, transformer

_OPERATORS = {
    gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">", gast.GtE: ">=", gast.Eq: "==",
    gast.NotEq: "!=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
    gast.NotIn: "not in",
}


def _lazy(value: gast.expr) -> gast.expr:
    """`lambda: value`, which the helper calls (or skips) before it returns."""
    lazy = templates.replace_as_expression("lambda: value", value=value)
    anno.setanno(lazy, anno.Transform.CALLED_AT_ONCE, True)
    return lazy


def _mark_condition(test: gast.expr) -> None:
    """Mark the and/or expressions of `test` whose truth alone is used."""
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        _mark_condition(test.operand)
    elif isinstance(test, gast.BoolOp):
        anno.setanno(test, anno.Transform.CONDITION, True)
        for value in test.values:
            _mark_condition(value)


class _Logical(transformer.Base):
    def visit_BoolOp(self, node: gast.BoolOp) -> gast.expr:
        self.generic_visit(node)
        helper = "convert_logical_and" if isinstance(node.op, gast.And) else "convert_logical_or"
        call = templates.replace_as_expression(
            "helpers.helper(operands)", helpers=self.ctx.helpers, helper=helper,
            operands=[_lazy(v) for v in node.values])
        if anno.getanno(node, anno.Transform.CONDITION, False):
            call.keywords.append(gast.keyword("condition", gast.Constant(True, None)))
        return call

    def _visit_test(self, node):
        _mark_condition(node.test)
        self.generic_visit(node)
        return node

    visit_If = visit_While = visit_Assert = _visit_test

    def visit_IfExp(self, node: gast.IfExp) -> gast.expr:
        _mark_condition(node.test)
        self.generic_visit(node)
        return node

    def visit_UnaryOp(self, node: gast.UnaryOp) -> gast.expr:
        self.generic_visit(node)
        if not isinstance(node.op, gast.Not):
            return node
        return templates.replace_as_expression(
            "helpers.convert_logical_not(operand)", helpers=self.ctx.helpers,
            operand=node.operand)

    def visit_Compare(self, node: gast.Compare) -> gast.expr:
        self.generic_visit(node)
        if len(node.ops) < 2:
            return node
        rest = []
        for op, right in zip(node.ops, node.comparators):
            rest += [gast.Constant(_OPERATORS[type(op)], None), _lazy(right)]
        return templates.replace_as_expression(
            "helpers.convert_compare(left, rest)", helpers=self.ctx.helpers, left=node.left,
            rest=rest)

    def visit_For(self, node: gast.For) -> gast.For:
        self.generic_visit(node)
        extra = anno.getanno(node, anno.Transform.EXTRA_TEST, None)
        if extra is not None:
            anno.setanno(node, anno.Transform.EXTRA_TEST, self.visit(extra))
        return node


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Logical(ctx).visit(node)
