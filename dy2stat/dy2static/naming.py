"""Fresh, readable names for generated code (`if_body_0`), never colliding with user names."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable

import gast


class Namer:
    """Hands out `base_0`, `base_1`, ... skipping every reserved or already handed out name."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self.reserved: set[str] = set(reserved)
        self._next: dict[str, int] = {}

    @classmethod
    def for_function(cls, node: gast.AST, fn: Callable | None = None) -> Namer:
        """A namer reserving the names used in `node`, and `fn`'s globals and closure names."""
        reserved = set(names_in(node))
        if fn is not None:
            reserved.update(getattr(fn, "__globals__", {}))
            code = getattr(fn, "__code__", None)
            if code is not None:
                reserved.update(code.co_freevars, code.co_varnames, code.co_names)
        reserved.update(dir(builtins))
        return cls(reserved)

    def reserve(self, names: Iterable[str]) -> None:
        """Never hand out these names."""
        self.reserved.update(names)

    def new(self, base: str) -> str:
        """A fresh name `base_N` (N counting up from 0 per base)."""
        n = self._next.get(base, 0)
        while f"{base}_{n}" in self.reserved:
            n += 1
        name = f"{base}_{n}"
        self._next[base] = n + 1
        self.reserved.add(name)
        return name


def names_in(node: gast.AST) -> set[str]:
    """Every identifier a tree binds or reads: names, parameters, defs, imports, attributes."""
    found: set[str] = set()
    for n in gast.walk(node):
        if isinstance(n, gast.Name):
            found.add(n.id)
        elif isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            found.add(n.name)
        elif isinstance(n, gast.alias):
            found.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (gast.Global, gast.Nonlocal)):
            found.update(n.names)
        elif isinstance(n, gast.Attribute):
            found.add(n.attr)
        elif isinstance(n, gast.keyword) and n.arg:
            found.add(n.arg)
    return found
