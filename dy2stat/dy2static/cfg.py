"""Control-flow graphs of functions, and a generic dataflow solver over them.

A CFG node is a simple statement, the test of an if/while, the header of a for/with/match/
except, the target of a for (bound on the way into the body), a nested def or class (one
node that binds its name), or a function's `arguments` (the entry, which binds the
parameters). `Graph.exit` is a node without an AST node.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import gast

from dy2stat.dy2static import parser

_DEFS = (gast.FunctionDef, gast.AsyncFunctionDef)


class Node:
    """One CFG node; `ast_node` is None for a graph's synthetic entry/exit."""

    def __init__(self, ast_node: gast.AST | None, label: Callable[[], str] | str) -> None:
        self.ast_node = ast_node
        self.next: list[Node] = []
        self.prev: list[Node] = []
        self._label = label

    @property
    def label(self) -> str:
        """One line of source naming this node, e.g. "while i < n" or "x = 1"."""
        if callable(self._label):
            self._label = self._label()
        return self._label

    def __repr__(self) -> str:
        return f"<{self.label}>"


@dataclasses.dataclass
class Graph:
    """The CFG of one function (or module): `index` maps AST nodes to their CFG nodes."""

    owner: gast.AST
    entry: Node
    exit: Node
    nodes: list[Node]
    index: dict[gast.AST, Node]

    def __getitem__(self, ast_node: gast.AST) -> Node:
        return self.index[ast_node]

    def find(self, label: str) -> Node:
        """The one node with this label (for tests and debugging)."""
        found = [n for n in self.nodes if n.label == label]
        if len(found) != 1:
            raise KeyError(f"{len(found)} nodes labelled {label!r}")
        return found[0]

    def inside(self, stmt: gast.stmt) -> set[Node]:
        """The nodes of this graph that belong to `stmt` (its header and its bodies)."""
        return {self.index[n] for n in gast.walk(stmt) if n in self.index}

    def edges(self) -> set[tuple[str, str]]:
        """All edges as (from label, to label)."""
        return {(a.label, b.label) for a in self.nodes for b in a.next}


def _first_line(node: gast.AST, prefix: str = "") -> Callable[[], str]:
    def label() -> str:
        try:
            text = parser.unparse(node).strip().splitlines()[0]
        except Exception:  # the unparser may not know newer syntax (match)
            text = type(node).__name__
        return prefix + text.rstrip(":")

    return label


@dataclasses.dataclass
class _Frame:
    """An enclosing loop (jump targets) or try-with-finally (collects jumps through it)."""

    loop_test: Node | None = None
    breaks: list[Node] = dataclasses.field(default_factory=list)
    finally_jumps: set[str] | None = None
    finally_sources: list[Node] = dataclasses.field(default_factory=list)


class _Builder:
    def __init__(self, owner: gast.AST) -> None:
        self.nodes: list[Node] = []
        self.index: dict[gast.AST, Node] = {}
        self.frames: list[_Frame] = []
        self.exit = Node(None, "exit")
        if isinstance(owner, (*_DEFS, gast.Lambda)):
            self.entry = self._add(owner.args, "args")
        else:
            self.entry = self._add(None, "entry")
        self.frontier = [self.entry]

    def _add(self, ast_node: gast.AST | None, label) -> Node:
        node = Node(ast_node, label)
        self.nodes.append(node)
        if ast_node is not None:
            self.index[ast_node] = node
        return node

    @staticmethod
    def _connect(sources: Iterable[Node], target: Node) -> None:
        for source in sources:
            if target not in source.next:
                source.next.append(target)
                target.prev.append(source)

    def _step(self, ast_node: gast.AST, label) -> Node:
        """Add a node reached from the frontier; it becomes the frontier."""
        node = self._add(ast_node, label)
        self._connect(self.frontier, node)
        self.frontier = [node]
        return node

    def _jump(self, source: Node, kind: str, frames: Sequence[_Frame] | None = None) -> None:
        """Route a return/raise/break/continue to its target, through enclosing finally blocks."""
        for frame in reversed(self.frames if frames is None else frames):
            if frame.finally_jumps is not None:
                frame.finally_jumps.add(kind)
                frame.finally_sources.append(source)
                return
            if frame.loop_test is not None and kind == "break":
                frame.breaks.append(source)
                return
            if frame.loop_test is not None and kind == "continue":
                self._connect([source], frame.loop_test)
                return
        self._connect([source], self.exit)

    def block(self, stmts: list[gast.stmt]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: gast.stmt) -> None:
        method = getattr(self, "_" + type(stmt).__name__, None)
        if method is not None:
            method(stmt)
            return
        node = self._step(stmt, _first_line(stmt))
        if isinstance(stmt, (gast.Return, gast.Raise, gast.Break, gast.Continue)):
            self._jump(node, type(stmt).__name__.lower())
            self.frontier = []

    def _If(self, stmt: gast.If) -> None:
        test = self._step(stmt.test, _first_line(stmt.test, "if "))
        self.block(stmt.body)
        after_body, self.frontier = self.frontier, [test]
        self.block(stmt.orelse)
        self.frontier = after_body + self.frontier

    def _loop(self, head: Node, body: list[gast.stmt], orelse: list[gast.stmt]) -> None:
        frame = _Frame(loop_test=head)
        self.frames.append(frame)
        self.block(body)
        self._connect(self.frontier, head)
        self.frames.pop()
        self.frontier = [head]
        self.block(orelse)
        self.frontier = self.frontier + frame.breaks

    def _While(self, stmt: gast.While) -> None:
        self._loop(self._step(stmt.test, _first_line(stmt.test, "while ")), stmt.body, stmt.orelse)

    def _For(self, stmt: gast.For) -> None:
        head = self._step(stmt, _first_line(stmt))
        # The target is bound only on the way into the body, not when the iterator is done.
        target = _first_line(stmt.target)
        self._step(stmt.target, lambda: f"{target()} = next({parser.unparse(stmt.iter)})")
        self._loop(head, stmt.body, stmt.orelse)

    _AsyncFor = _For

    def _With(self, stmt: gast.With) -> None:
        self._step(stmt, _first_line(stmt))
        self.block(stmt.body)

    _AsyncWith = _With

    def _Match(self, stmt: gast.Match) -> None:
        head = self._step(stmt, _first_line(stmt))
        ends = [head]
        for case in stmt.cases:
            self.frontier = [head]
            self.block(case.body)
            ends += self.frontier
        self.frontier = ends

    def _Try(self, stmt: gast.Try) -> None:
        outer = list(self.frames)
        frame = _Frame(finally_jumps=set()) if stmt.finalbody else None
        if frame is not None:
            self.frames.append(frame)
        before, first = list(self.frontier), len(self.nodes)
        self.block(stmt.body)
        in_body = self.nodes[first:]
        self.block(stmt.orelse)
        ends = self.frontier
        for handler in stmt.handlers:
            # Any statement of the body may raise: each one (and the entry) reaches handlers.
            self.frontier = before + in_body
            self._step(handler, _first_line(handler))
            self.block(handler.body)
            ends = ends + self.frontier
        self.frontier = ends
        if frame is None:
            return
        self.frames.pop()
        self.frontier = ends + frame.finally_sources + ([] if stmt.handlers else in_body)
        self.block(stmt.finalbody)
        for kind in sorted(frame.finally_jumps):
            for source in self.frontier:
                self._jump(source, kind, outer)

    _TryStar = _Try

    def finish(self, owner: gast.AST) -> Graph:
        self._connect(self.frontier, self.exit)
        self.nodes.append(self.exit)
        return Graph(owner, self.entry, self.exit, self.nodes, self.index)


def statements(stmts: list[gast.stmt]) -> Iterator[gast.stmt]:
    """Statements of a body and of its nested blocks, not entering nested defs or classes."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (*_DEFS, gast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from statements(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from statements(handler.body)
        for case in getattr(stmt, "cases", []):
            yield from statements(case.body)


def build(node: gast.AST) -> Graph:
    """The CFG of a function (or module); nested defs are single nodes there."""
    builder = _Builder(node)
    builder.block(node.body)
    return builder.finish(node)


def build_all(node: gast.AST) -> dict[gast.AST, Graph]:
    """CFGs of `node` and of every function defined anywhere inside it."""
    graphs = {node: build(node)} if isinstance(node, (*_DEFS, gast.Module)) else {}
    for child in gast.walk(node):
        if child is not node and isinstance(child, _DEFS):
            graphs[child] = build(child)
    return graphs


def solve(
    graph: Graph,
    transfer: Callable[[Node, Any], Any],
    meet: Callable[[list[Any]], Any],
    *,
    forward: bool,
    boundary: Any,
    empty: Any,
) -> tuple[dict[Node, Any], dict[Node, Any]]:
    """Iterate a dataflow problem to its fixpoint; returns (value before, value after) per node.

    Forward: before[n] = meet(after[p] for p in n.prev), before[entry] = boundary. Backward:
    before[n] is the value flowing out of n, meet over n.next, before[exit] = boundary.
    Predecessors not yet computed are left out of the meet (optimistic start, so a must-
    analysis with an intersection meet finds its greatest fixpoint); none computed → `empty`.
    """
    start = graph.entry if forward else graph.exit
    order = graph.nodes if forward else list(reversed(graph.nodes))
    before: dict[Node, Any] = {}
    after: dict[Node, Any] = {}
    work = collections.deque(order)
    queued = set(order)
    while work:
        node = work.popleft()
        queued.discard(node)
        if node is start:
            value = boundary
        else:
            known = [after[s] for s in (node.prev if forward else node.next) if s in after]
            value = meet(known) if known else empty
        before[node] = value
        result = transfer(node, value)
        if node in after and after[node] == result:
            continue
        after[node] = result
        for succ in node.next if forward else node.prev:
            if succ not in queued:
                queued.add(succ)
                work.append(succ)
    return before, after
