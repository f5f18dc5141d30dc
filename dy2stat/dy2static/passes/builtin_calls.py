"""Builtins whose meaning depends on static values -> helpers.

    print(x)          ->  _jst.convert_print(x)
    assert t, m       ->  _jst.convert_assert(t, lambda: m)
    len(x)            ->  _jst.convert_len(x)              (isinstance, max, min alike)
    int(x)            ->  _jst.convert_cast(x, 'int')        (float, bool alike)
    x.shape           ->  _jst.convert_shape(x)
    range(n)          ->  _jst.convert_range(n)              (enumerate, zip alike)
    super()           ->  super(__class__, self)

Only names that are the builtins are converted: a function that binds `len` or `print`
itself, or whose module does, keeps its own. Requires: nothing.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import templates, transformer

_CALLS = {"print": "convert_print", "len": "convert_len", "range": "convert_range",
          "enumerate": "convert_enumerate", "zip": "convert_zip",
          "isinstance": "convert_isinstance", "max": "convert_max", "min": "convert_min"}
_CASTS = ("int", "float", "bool")


def _bound_names(node: gast.AST, fn) -> set[str]:
    """Names the function binds (anywhere in it) or finds in its module or closure."""
    bound = set()
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load):
            bound.add(n.id)
        elif isinstance(n, (gast.FunctionDef, gast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, gast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    if fn is not None:
        bound.update(getattr(fn, "__globals__", {}))
        code = getattr(fn, "__code__", None)
        if code is not None:
            bound.update(code.co_freevars)
    return bound


class _Builtins(transformer.Base):
    def __init__(self, ctx, bound: set[str]) -> None:
        super().__init__(ctx)
        self.bound = bound
        self.functions: list[gast.FunctionDef] = []

    def _builtin(self, func: gast.expr) -> str | None:
        if isinstance(func, gast.Name) and func.id not in self.bound:
            return func.id
        return None

    def visit_Call(self, node: gast.Call) -> gast.expr:
        self.generic_visit(node)
        name = self._builtin(node.func)
        if name in _CALLS:
            node.func = templates.replace_as_expression(
                "helpers.helper", helpers=self.ctx.helpers, helper=_CALLS[name])
            transformer.stamp(node.func, node)
        elif name in _CASTS and len(node.args) == 1 and not node.keywords:
            return templates.replace_as_expression(
                "helpers.convert_cast(value, kind)", helpers=self.ctx.helpers,
                value=node.args[0], kind=gast.Constant(name, None))
        elif name == "super" and not node.args and self.functions:
            # The converted method is not compiled inside its class: name the class.
            params = self.functions[-1].args.posonlyargs + self.functions[-1].args.args
            if params:
                node.args = [gast.Name("__class__", gast.Load(), None, None),
                             gast.Name(params[0].id, gast.Load(), None, None)]
        return node

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()
        return node

    def visit_Attribute(self, node: gast.Attribute) -> gast.expr:
        self.generic_visit(node)
        if node.attr != "shape" or not isinstance(node.ctx, gast.Load):
            return node
        return templates.replace_as_expression(
            "helpers.convert_shape(value)", helpers=self.ctx.helpers, value=node.value)

    def visit_Assert(self, node: gast.Assert) -> list:
        self.generic_visit(node)
        if node.msg is None:
            return templates.replace("helpers.convert_assert(test)", helpers=self.ctx.helpers,
                                     test=node.test)
        return templates.replace("helpers.convert_assert(test, lambda: msg)",
                                 helpers=self.ctx.helpers, test=node.test, msg=node.msg)


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Builtins(ctx, _bound_names(node, ctx.fn)).visit(node)
