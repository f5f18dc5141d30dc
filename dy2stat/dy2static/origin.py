"""Source maps: every node knows the user's file:line it came from; generated lines map back."""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Iterator, Sequence
from typing import Any

import gast

from dy2stat.dy2static import anno


@dataclasses.dataclass(frozen=True)
class OriginInfo:
    """Where a node came from in the user's source."""

    filename: str
    lineno: int
    col: int
    source_line: str
    function_name: str

    def __str__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, in {self.function_name}'

    def excerpt(self, context: int = 2) -> str:
        """A few lines of the user's file around this line, the line itself marked with '>'."""
        lines = []
        for n in range(max(1, self.lineno - context), self.lineno + context + 1):
            text = linecache.getline(self.filename, n).rstrip("\n")
            if not text and n != self.lineno:
                continue
            if n == self.lineno and not text:
                text = self.source_line
            lines.append(f"{'>' if n == self.lineno else ' '} {n:4d} | {text}")
        return "\n".join(lines)


def resolve(
    node: gast.AST,
    filename: str,
    line_offset: int,
    source_lines: Sequence[str],
    function_name: str | None = None,
) -> None:
    """Attach an ORIGIN to every located node of a freshly parsed tree.

    A node's file line is `node.lineno + line_offset`; `source_lines` are the file's lines.
    """
    if function_name is None:
        function_name = getattr(node, "name", "<lambda>")
    lines: dict[int, str] = {}  # one copy of each line, however many nodes it holds
    for child in gast.walk(node):
        lineno = getattr(child, "lineno", None)
        if lineno is None:
            continue
        lineno += line_offset
        index = lineno - 1
        line = lines.get(index)
        if line is None:
            line = source_lines[index].rstrip("\r\n") if 0 <= index < len(source_lines) else ""
            lines[index] = line
        col = getattr(child, "col_offset", 0) or 0
        info = OriginInfo(filename, lineno, col, line, function_name)
        anno.setanno(child, anno.Basic.ORIGIN, info)


def _statements(node, inherited: OriginInfo | None) -> Iterator[tuple[gast.stmt, Any]]:
    """Statements in pre-order, each with its origin (or the nearest enclosing one)."""
    if isinstance(node, list):
        for n in node:
            yield from _statements(n, inherited)
        return
    if isinstance(node, gast.stmt):
        inherited = anno.getanno(node, anno.Basic.ORIGIN, inherited)
        yield node, inherited
    for child in gast.iter_child_nodes(node):
        yield from _statements(child, inherited)


class SourceMap:
    """Maps line numbers of generated code to the OriginInfo of the user's code."""

    def __init__(self, lines: dict[int, OriginInfo]) -> None:
        self.lines = lines

    @classmethod
    def build(cls, node: gast.AST | list, code: str) -> SourceMap:
        """Map the lines of `code` (the unparsed `node`) to the origins of `node`'s statements.

        `code` is parsed again and its statements are paired, in order, with `node`'s; each
        generated statement's lines take the origin of its counterpart (inner statements win).
        """
        generated = [s for s, _ in _statements(gast.parse(code).body, None)]
        lines: dict[int, OriginInfo] = {}
        for (stmt, info), gen in zip(_statements(node, None), generated):
            if type(stmt) is not type(gen):
                break
            if info is None:
                continue
            end = getattr(gen, "end_lineno", None) or gen.lineno
            for lineno in range(gen.lineno, end + 1):
                lines[lineno] = info
        return cls(lines)

    def lookup(self, generated_lineno: int) -> OriginInfo | None:
        """The user's origin of a line of generated code, or None."""
        return self.lines.get(generated_lineno)
