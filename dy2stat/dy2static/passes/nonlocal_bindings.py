"""Every `nonlocal` the generated bodies declare finds a binding in an enclosing function.

The control-flow pass declares a state name `nonlocal` in the bodies it makes. Usually an
enclosing function binds it (the user's assignment, or `_jst.Undefined(name)`), but an
assignment the analysis saw may itself have moved into a body, say when `y` is assigned in
both branches of one `if` and again in both branches of the next. Then the nearest
enclosing function that does not declare it `nonlocal` gets `y = _jst.Undefined('y')` first.

Requires: activity (run here).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno, templates, transformer
from dy2stat.dy2static.analysis import activity
from dy2stat.dy2static.analysis.qual_names import QN


def transform(node: gast.AST, ctx) -> gast.AST:
    activity.resolve(node)
    _bind(node, [], ctx.helpers)
    return node


def _bind(function: gast.FunctionDef, enclosing: list, helpers: str) -> None:
    scope = anno.getanno(function, anno.Static.BODY_SCOPE)
    for name in sorted(scope.nonlocals):
        if any(name in anno.getanno(f, anno.Static.BODY_SCOPE).local_names for f in enclosing):
            continue
        for outer in reversed(enclosing):
            if name not in anno.getanno(outer, anno.Static.BODY_SCOPE).nonlocals:
                init = templates.replace("name = helpers.Undefined(text)", name=name,
                                         helpers=helpers, text=gast.Constant(name, None))
                transformer.stamp(init, outer.body[0])
                outer.body[:0] = init
                anno.getanno(outer, anno.Static.BODY_SCOPE).written.add(QN.name(name))
                break
    for child in _own_functions(function.body):
        _bind(child, [*enclosing, function], helpers)


def _own_functions(stmts: list):
    """The functions defined in a body (at any depth of its blocks, not inside them)."""
    for stmt in stmts:
        if isinstance(stmt, gast.FunctionDef):
            yield stmt
            continue
        if isinstance(stmt, gast.ClassDef):
            yield from _own_functions(stmt.body)
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _own_functions(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _own_functions(handler.body)
