"""Attribute reads -> `_jst.read_attr(obj, 'name')`, so that a trace records what it read.

    if self.threshold > 0:      ->   if _jst.read_attr(self, 'threshold') > 0:
    self.count += 1             ->   _jst.read_attr(self, 'count')
                                     self.count += 1

A cached program is reused only while the values its trace read stay the same (see
dy2stat/jit/guards.py). Callees written as a chain of names (`self.fc(x)`,
`d2s.nn.functional.relu(x)`, `self.cfg.scale_of(x)`) stay as they are: a Layer called is
recorded whole by `convert_call` (its attributes included), a global at the function's
start, and the framework's functions do not change.

Private names (`self.__helper`) are mangled here as Python's compiler mangles them in the
class body (converted code is compiled outside the class): the original code object says
what they became.

Requires: runs after control_flow (its analyses must see `self.h` as a name of its own)
and before call_trees (which wraps the callees this pass leaves alone).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import templates, transformer
from dy2stat.dy2static.reads import code_names


class _Reads(transformer.Base):
    def __init__(self, ctx, mangled: dict[str, str]) -> None:
        super().__init__(ctx)
        self.mangled = mangled  # '__x' -> '_Cls__x'

    def _is_helper(self, node: gast.expr) -> bool:
        while isinstance(node, gast.Attribute):
            node = node.value
        return isinstance(node, gast.Name) and node.id == self.ctx.helpers

    def visit_Call(self, node: gast.Call) -> gast.Call:
        func = node.func
        if isinstance(func, gast.Attribute) and _is_chain(func):
            self._mangle_chain(func)  # a method or module function: left as written
        else:
            node.func = self.visit(func)
        node.args = [self.visit(a) for a in node.args]
        for kw in node.keywords:
            kw.value = self.visit(kw.value)
        return node

    def _mangle_chain(self, node: gast.expr) -> None:
        while isinstance(node, gast.Attribute):
            node.attr = self.mangled.get(node.attr, node.attr)
            node = node.value

    def visit_Attribute(self, node: gast.Attribute) -> gast.expr:
        node.attr = self.mangled.get(node.attr, node.attr)
        self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load) or self._is_helper(node):
            return node
        return templates.replace_as_expression(
            "helpers.read_attr(value, name)", helpers=self.ctx.helpers, value=node.value,
            name=gast.Constant(node.attr, None))

    def visit_AugAssign(self, node: gast.AugAssign) -> list[gast.stmt]:
        target = node.target
        self.generic_visit(node)
        if not isinstance(target, gast.Attribute) or not _is_chain(target.value):
            return node
        read = templates.replace(
            "helpers.read_attr(value, name)", helpers=self.ctx.helpers, value=target.value,
            name=gast.Constant(target.attr, None))
        return read + [node]


def _is_chain(node: gast.expr) -> bool:
    """A name or an attribute chain (`self`, `self.block`): reading it twice is harmless."""
    while isinstance(node, gast.Attribute):
        node = node.value
    return isinstance(node, gast.Name)


def _mangled_names(fn) -> dict[str, str]:
    """'__x' -> '_Cls__x' for the private names the compiler mangled in `fn`'s code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    names, found = code_names(code), {}
    for name in names:
        head, sep, tail = name[1:].partition("__")
        private = f"__{tail}"
        if (name.startswith("_") and sep and head and not head.startswith("_") and tail
                and not tail.endswith("__") and private not in names):
            found[private] = name
    return found


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Reads(ctx, _mangled_names(ctx.fn)).visit(node)
