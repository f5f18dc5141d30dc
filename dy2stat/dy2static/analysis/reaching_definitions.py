"""Reaching definitions: which assignments may reach a statement, and which names are
defined on every path (must) or some path (may) to it.

Requires: activity.resolve. Attaches: Static.DEFINED_VARS_IN (a `Definitions`) to every
statement of every function and to if/while tests. For a loop, only the paths entering it
count (not its back edge), so a name first assigned in the body is undefined before the loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import gast

from dy2stat.dy2static import anno, cfg
from dy2stat.dy2static.analysis import activity
from dy2stat.dy2static.analysis.qual_names import QN


@dataclasses.dataclass(frozen=True)
class Definitions:
    """What is defined before a statement; `local` are the function's own plain names."""

    must: frozenset[QN]
    may: frozenset[QN]
    local: frozenset[str]
    reaching: Mapping[QN, frozenset[gast.AST]]

    def _defined(self, qn: QN, names: frozenset[QN]) -> bool:
        return qn in names or any(a in names for a in qn.ancestors)

    def maybe_undefined(self, name: str) -> bool:
        """True if `name` is a local that some path leaves undefined here."""
        qn = _qn(name)
        return qn.root in self.local and not self._defined(qn, self.must)

    def definitely_undefined(self, name: str) -> bool:
        """True if `name` is a local that no path defines before here."""
        qn = _qn(name)
        return qn.root in self.local and not self._defined(qn, self.may)


def _qn(name: str) -> QN:
    return name if isinstance(name, QN) else QN.parse(name)


def _killed(qn: QN, kill: frozenset[QN]) -> bool:
    return qn in kill or any(a in kill for a in qn.ancestors)


def _meet(values: list) -> tuple[frozenset, frozenset]:
    may = frozenset().union(*(v[0] for v in values))
    must = frozenset.intersection(*(v[1] for v in values))
    return may, must


def analyze(graph: cfg.Graph) -> tuple[dict, dict]:
    """(before, after) per CFG node of (may: {(name, defining ast node)}, must: {name})."""
    effects = {}
    for node in graph.nodes:
        if node.ast_node is not None:
            s = activity.node_scope(node.ast_node)
            effects[node] = (frozenset(s.written), frozenset(s.written | s.deleted))

    def transfer(node: cfg.Node, value: tuple) -> tuple:
        if node not in effects:
            return value
        gen, kill = effects[node]
        may, must = value
        if kill:
            may = {(q, d) for q, d in may if not _killed(q, kill)}
            must = {q for q in must if not _killed(q, kill)}
        if gen:
            may = frozenset(may).union((q, node.ast_node) for q in gen)
            must = frozenset(must) | gen
        return frozenset(may), frozenset(must)

    empty = (frozenset(), frozenset())
    return cfg.solve(graph, transfer, _meet, forward=True, boundary=empty, empty=empty)


def _definitions(value: tuple, local: frozenset[str]) -> Definitions:
    may, must = value
    reaching: dict[QN, set] = {}
    for qn, node in may:
        reaching.setdefault(qn, set()).add(node)
    frozen = {qn: frozenset(nodes) for qn, nodes in reaching.items()}
    return Definitions(must, frozenset(frozen), local, frozen)


def resolve(node: gast.AST, graphs: dict[gast.AST, cfg.Graph] | None = None) -> gast.AST:
    """Annotate every statement (and if/while test) under `node` with DEFINED_VARS_IN."""
    for graph in (graphs or cfg.build_all(node)).values():
        before, after = analyze(graph)
        local = frozenset(anno.getanno(graph.owner, anno.Static.BODY_SCOPE).local_names)
        for stmt in cfg.statements(graph.owner.body):
            if stmt in graph.index and not isinstance(stmt, (gast.For, gast.AsyncFor)):
                value = before[graph.index[stmt]]
            else:  # a loop (or try): only the paths entering it, not its back edges
                inside = graph.inside(stmt)
                entering = [p for u in inside for p in u.prev if p not in inside]
                value = _meet([after[p] for p in entering]) if entering else (frozenset(),) * 2
            defs = _definitions(value, local)
            anno.setanno(stmt, anno.Static.DEFINED_VARS_IN, defs)
            if isinstance(stmt, (gast.If, gast.While)):
                anno.setanno(stmt.test, anno.Static.DEFINED_VARS_IN, defs)
    return node


def undefined_before(node: gast.AST, name: str) -> bool:
    """True if local `name` may be undefined on some path reaching `node` (a statement)."""
    return anno.getanno(node, anno.Static.DEFINED_VARS_IN).maybe_undefined(name)
