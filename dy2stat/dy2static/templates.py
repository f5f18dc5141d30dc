"""Generated code comes from templates: Python source whose placeholder names are replaced.

    templates.replace("target = helper(pred, body_fn)", target="x", pred=test_node, ...)

A placeholder is any identifier passed as a keyword. A replacement may be a str (an
identifier, or source text such as "self.h"), a gast node (copied at every use), or a list
(spliced into bodies, argument lists and nonlocal/global declarations; a tuple elsewhere,
so `names = value` with a list unpacks). Names like "self.h" are left out of nonlocal/global
lists, which need no declaration for them. An emptied body gets `pass`, an emptied
nonlocal/global is dropped. Contexts (Load/Store/Del/Param) follow the placeholder's position.
"""

from __future__ import annotations

import keyword
import textwrap
from typing import Any

import gast

from dy2stat.dy2static import anno, parser

_NEEDS_BODY = {
    gast.FunctionDef,
    gast.AsyncFunctionDef,
    gast.ClassDef,
    gast.If,
    gast.While,
    gast.For,
    gast.AsyncFor,
    gast.With,
    gast.AsyncWith,
    gast.Try,
    gast.ExceptHandler,
}


def replace(template: str, **replacements: Any) -> list[gast.stmt]:
    """The statements of `template` with placeholders replaced."""
    module = gast.parse(textwrap.dedent(template))
    for node in gast.walk(module):
        for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if getattr(node, attr, None) is not None:
                delattr(node, attr)
    _Replacer(replacements).visit(module)
    return module.body


def replace_as_expression(template: str, **replacements: Any) -> gast.expr:
    """The single expression of `template` with placeholders replaced."""
    body = replace(template, **replacements)
    if len(body) != 1 or not isinstance(body[0], gast.Expr):
        raise ValueError(f"template is not a single expression: {template!r}")
    return body[0].value


def set_context(node: gast.expr, ctx: gast.AST) -> gast.expr:
    """Give `node` the context `ctx`, recursing into tuple/list/starred targets."""
    if isinstance(
        node, (gast.Name, gast.Attribute, gast.Subscript, gast.Starred, gast.Tuple, gast.List)
    ):
        node.ctx = type(ctx)()
    if isinstance(node, (gast.Tuple, gast.List)):
        for elt in node.elts:
            set_context(elt, ctx)
    elif isinstance(node, gast.Starred):
        set_context(node.value, ctx)
    return node


def _as_expr(value: Any, ctx: gast.AST) -> gast.expr:
    if isinstance(value, str):
        if value.isidentifier() and not keyword.iskeyword(value):
            node = gast.Name(id=value, ctx=None, annotation=None, type_comment=None)
        else:
            node = parser.parse_expression(value)
    elif isinstance(value, gast.expr):
        node = anno.deepcopy(value)
    elif isinstance(value, (list, tuple)):
        node = gast.Tuple(elts=[_as_expr(v, ctx) for v in value], ctx=None)
    else:
        raise TypeError(f"cannot use {type(value).__name__} as an expression in a template")
    return set_context(node, ctx)


def _as_stmts(value: Any) -> list[gast.stmt]:
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _as_stmts(v)]
    if isinstance(value, gast.stmt):
        return [anno.deepcopy(value)]
    return [gast.Expr(value=_as_expr(value, gast.Load()))]


def _identifier(value: Any) -> str:
    if isinstance(value, gast.Name):
        return value.id
    if isinstance(value, str) and value.isidentifier():
        return value
    raise TypeError(f"expected an identifier, got {value!r}")


def _is_composite(value: Any) -> bool:
    return isinstance(value, str) and not value.isidentifier()


class _Replacer(gast.NodeTransformer):
    def __init__(self, replacements: dict[str, Any]) -> None:
        self.replacements = replacements

    def _placeholder(self, node: gast.AST) -> bool:
        return isinstance(node, gast.Name) and node.id in self.replacements

    def _visit_item(self, item: gast.AST, splice: bool = True) -> list:
        if isinstance(item, gast.Expr) and self._placeholder(item.value):
            return _as_stmts(self.replacements[item.value.id])
        if (
            splice
            and self._placeholder(item)
            and isinstance(self.replacements[item.id], (list, tuple))
        ):
            return [_as_expr(v, item.ctx) for v in self.replacements[item.id]]
        result = self.visit(item)
        if result is None:
            return []
        return result if isinstance(result, list) else [result]

    def generic_visit(self, node: gast.AST) -> gast.AST:
        for field, old in gast.iter_fields(node):
            if isinstance(old, list):
                # `names = value` with a list of names assigns a tuple, not a chain.
                splice = not (isinstance(node, gast.Assign) and field == "targets")
                new = []
                for item in old:
                    is_node = isinstance(item, gast.AST)
                    new.extend(self._visit_item(item, splice) if is_node else [item])
                if not new and field == "body" and type(node) in _NEEDS_BODY:
                    new = [gast.Pass()]
                setattr(node, field, new)
            elif isinstance(old, gast.AST):
                setattr(node, field, self.visit(old))
        return node

    def visit_Name(self, node: gast.Name) -> gast.expr:
        if node.id not in self.replacements:
            return node
        return _as_expr(self.replacements[node.id], node.ctx)

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        if node.name in self.replacements:
            node.name = _identifier(self.replacements[node.name])
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Attribute(self, node: gast.Attribute) -> gast.Attribute:
        if isinstance(self.replacements.get(node.attr), str):
            node.attr = _identifier(self.replacements[node.attr])
        return self.generic_visit(node)

    def visit_keyword(self, node: gast.keyword) -> gast.keyword:
        if node.arg is not None and isinstance(self.replacements.get(node.arg), str):
            node.arg = _identifier(self.replacements[node.arg])
        return self.generic_visit(node)

    def visit_Nonlocal(self, node: gast.Nonlocal) -> gast.Nonlocal | None:
        names = []
        for name in node.names:
            value = self.replacements.get(name, name)
            values = value if isinstance(value, (list, tuple)) else [value]
            # Attributes and subscripts ("self.h") need no declaration: drop them.
            names.extend(_identifier(v) for v in values if not _is_composite(v))
        node.names = list(dict.fromkeys(names))
        return node if node.names else None

    visit_Global = visit_Nonlocal
