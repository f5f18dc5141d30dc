"""Qualified names: `x`, `self.h`, `a.b.c`, `x[0]`, `d['k']` are all names to the analyses."""

from __future__ import annotations

import gast


class QN(str):
    """A qualified name; equal to (and hashed as) its source text, so it mixes with plain str."""

    parent: QN | None
    attr: str | None
    key: int | str | None
    _ancestors: tuple[QN, ...]

    def __new__(cls, text: str, parent: QN | None = None, attr: str | None = None, key=None):
        qn = super().__new__(cls, text)
        qn.parent, qn.attr, qn.key = parent, attr, key
        qn._ancestors = () if parent is None else (*parent.ancestors, parent)
        return qn

    @classmethod
    def name(cls, ident: str) -> QN:
        return cls(ident)

    @classmethod
    def attribute(cls, parent: QN, attr: str) -> QN:
        return cls(f"{parent}.{attr}", parent, attr=attr)

    @classmethod
    def subscript(cls, parent: QN, key: int | str) -> QN:
        return cls(f"{parent}[{key!r}]", parent, key=key)

    @classmethod
    def from_ast(cls, node: gast.AST) -> QN | None:
        """The QN of a Name/Attribute/Subscript chain with constant keys, else None."""
        if isinstance(node, gast.Name):
            return cls.name(node.id)
        if isinstance(node, gast.Attribute):
            parent = cls.from_ast(node.value)
            return None if parent is None else cls.attribute(parent, node.attr)
        if isinstance(node, gast.Subscript):
            parent = cls.from_ast(node.value)
            key = constant_key(node.slice)
            return None if parent is None or key is None else cls.subscript(parent, key)
        return None

    @classmethod
    def parse(cls, text: str) -> QN:
        """The QN of source text like "self.h" or "x[0]" (ValueError if it is not one)."""
        qn = cls.from_ast(gast.parse(text, mode="eval").body)
        if qn is None:
            raise ValueError(f"not a qualified name: {text!r}")
        return qn

    @property
    def is_composite(self) -> bool:
        """True for attributes and subscripts."""
        return self.parent is not None

    @property
    def root(self) -> QN:
        return self if self.parent is None else self.parent.root

    @property
    def ancestors(self) -> tuple[QN, ...]:
        """The proper prefixes, root first: `a.b.c` → (a, a.b)."""
        return self._ancestors

    def is_descendant_of(self, other: str) -> bool:
        """True if `other` is a proper prefix of this name."""
        return other in self.ancestors


def constant_key(node: gast.AST) -> int | str | None:
    """The value of a constant int/str subscript (negative ints included), else None."""
    if isinstance(node, gast.Constant) and type(node.value) in (int, str):
        return node.value
    if (
        isinstance(node, gast.UnaryOp)
        and isinstance(node.op, gast.USub)
        and isinstance(node.operand, gast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None
