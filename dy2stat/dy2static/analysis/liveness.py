"""Liveness: the names whose current value may still be read later.

Requires: activity.resolve. Attaches: Static.LIVE_VARS_IN and Static.LIVE_VARS_OUT to every
statement of every function (a compound statement's OUT is what is live where control leaves
it). Reading `x` keeps `x.h` and `x[0]` alive; writing `x` kills them too. At a function's
exit, names that escape stay live: globals, nonlocals, names closures read, and attributes or
subscripts written (or lists mutated) on objects not created in the function.
"""

from __future__ import annotations

from collections.abc import Iterable

import gast

from dy2stat.dy2static import anno, cfg
from dy2stat.dy2static.analysis import activity
from dy2stat.dy2static.analysis.qual_names import QN

_COMPOUND = (
    gast.If,
    gast.While,
    gast.For,
    gast.AsyncFor,
    gast.With,
    gast.AsyncWith,
    gast.Try,
    gast.TryStar,
    gast.Match,
)


class _Names:
    """The names of one function, to expand `x` into `x` and all its known descendants."""

    def __init__(self, scope: activity.Scope) -> None:
        universe = scope.read | scope.modified | scope.params
        self.children: dict[str, set[QN]] = {}
        for qn in universe:
            for ancestor in qn.ancestors:
                self.children.setdefault(ancestor, set()).add(qn)

    def expand(self, names: Iterable[QN]) -> frozenset[QN]:
        out = set(names)
        for qn in list(out):
            out.update(self.children.get(qn, ()))
        return frozenset(out)


def _escaping(scope: activity.Scope) -> set[QN]:
    local = scope.local_names
    out = {QN.name(n) for n in scope.globals | scope.nonlocals}
    out.update(scope.closure_reads)
    out.update(q for q in scope.written | scope.mutated if q.is_composite and q.root not in local)
    out.update(q for q in scope.mutated if q.root not in local or q.root in scope.params)
    out.update(q for q in scope.written if q.is_composite and q.root in scope.params)
    return out


def analyze(graph: cfg.Graph) -> tuple[dict, dict]:
    """(live in, live out) per CFG node of one function's graph."""
    scope = anno.getanno(graph.owner, anno.Static.BODY_SCOPE)
    names = _Names(scope)
    effects = {}
    for node in graph.nodes:
        if node.ast_node is None:
            continue
        s = activity.node_scope(node.ast_node)
        effects[node] = (names.expand(s.read), names.expand(s.written | s.deleted))

    def transfer(node: cfg.Node, live_out: frozenset) -> frozenset:
        if node not in effects:
            return live_out
        gen, kill = effects[node]
        return gen | (live_out - kill)

    boundary = names.expand(_escaping(scope))
    live_out, live_in = cfg.solve(
        graph,
        transfer,
        lambda values: frozenset().union(*values),
        forward=False,
        boundary=boundary,
        empty=frozenset(),
    )
    return live_in, live_out


def resolve(node: gast.AST, graphs: dict[gast.AST, cfg.Graph] | None = None) -> gast.AST:
    """Annotate every statement under `node` (a function or module) with live names."""
    for graph in (graphs or cfg.build_all(node)).values():
        live_in, live_out = analyze(graph)
        for stmt in cfg.statements(graph.owner.body):
            if isinstance(stmt, _COMPOUND):
                inside = graph.inside(stmt)
                entering = {u for u in inside if any(p not in inside for p in u.prev)}
                leaving = {v for u in inside for v in u.next if v not in inside}
                anno.setanno(
                    stmt,
                    anno.Static.LIVE_VARS_IN,
                    frozenset().union(*(live_in[v] for v in entering)),
                )
                anno.setanno(
                    stmt,
                    anno.Static.LIVE_VARS_OUT,
                    frozenset().union(*(live_in[v] for v in leaving)),
                )
            else:
                cfg_node = graph.index[stmt]
                anno.setanno(stmt, anno.Static.LIVE_VARS_IN, live_in[cfg_node])
                anno.setanno(stmt, anno.Static.LIVE_VARS_OUT, live_out[cfg_node])
    return node


def branch_outputs(node: gast.If) -> list[QN]:
    """The names an if statement changes that are live after it (the cond's outputs)."""
    modified = anno.getanno(node, anno.Static.SCOPE).modified
    live = anno.getanno(node, anno.Static.LIVE_VARS_OUT)
    return sorted(q for q in modified if q in live)


def loop_carried(node: gast.While | gast.For) -> list[QN]:
    """The names a loop changes that are live into or out of it (the while's carried values)."""
    modified = anno.getanno(node, anno.Static.SCOPE).modified
    live = anno.getanno(node, anno.Static.LIVE_VARS_IN) | anno.getanno(
        node, anno.Static.LIVE_VARS_OUT
    )
    return sorted(q for q in modified if q in live)
