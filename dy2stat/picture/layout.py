"""Where everything in a scene goes: a layered layout, group by group, in pure Python.

Each group is laid out on its own, innermost first, and is then one box in the
group holding it, so groups never overlap and no node lands in a group it does
not belong to. Inside a group its children are put in layers (ranks) along the
longest path of the edges between them, an edge that spans several ranks gets
a bend point in each, the order inside each rank is improved by barycenter
sweeps, and x positions are pulled toward neighbours without overlapping. A
``cond``/``while`` frame puts its sub-blocks side by side. Sizes come from the
label lengths in a monospace font (``CHAR_WIDTH``), which the renderers use.
"""

from __future__ import annotations

import collections

from dy2stat.picture.scene import Edge, Group, Scene

CHAR_WIDTH = 7.2  # of a 12 px monospace font
LINE_HEIGHT = 15.0
PAD = 8.0  # inside a group
HEADER = 16.0  # a group's title
NODE_GAP = 18.0  # between boxes in a rank
BEND_GAP = 8.0  # next to an edge's bend point
RANK_GAP = 20.0
SWEEPS = 8


def place(scene: Scene) -> Scene:
    """Set ``x, y, w, h`` (top left, absolute) of every node and group of ``scene``,
    and each edge's ``points``; returns ``scene``."""
    parent = {}
    _parents(scene.root, parent)
    links = _Links()
    routes = {}
    for edge in scene.edges:
        route = _route(edge, parent)
        routes[id(edge)] = route
        if route is None:  # one end holds the other: drawn straight
            scene.root.edges.append(edge)
            continue
        leave, (group, a, b), enter = route
        group.edges.append(edge)
        links.pairs[id(group)].append((a, b, edge))
        for container, child in leave:
            links.leaving[id(container)].append((child, edge))
        for container, child in enter:
            links.entering[id(container)].append((child, edge))
    at: dict[int, tuple] = {}  # id(element) -> top left relative to its group
    _measure(scene.root, links, at)
    _move(scene.root, 0.0, 0.0, at)
    for edge in scene.edges:
        _draw(edge, routes[id(edge)], links.bends)
    return scene


class _Links:
    """The edges as each group's layout sees them."""

    def __init__(self):
        self.pairs = collections.defaultdict(list)  # id(group) -> [(child, child, edge)]
        self.entering = collections.defaultdict(list)  # id(group) -> [(child, edge)]
        self.leaving = collections.defaultdict(list)  # id(group) -> [(child, edge)]
        self.bends: dict[tuple, list] = {}  # (id(edge), id(group)) -> points in the group


def node_size(lines: list[str]) -> tuple[float, float]:
    return (max(48.0, max(len(line) for line in lines) * CHAR_WIDTH + 16),
            len(lines) * LINE_HEIGHT + 8)


def _parents(group: Group, parent: dict) -> None:
    for child in group.children:
        parent[id(child)] = group
        if isinstance(child, Group):
            _parents(child, parent)


def _route(edge: Edge, parent: dict):
    """The groups ``edge`` passes through: (the groups it leaves, each with its child
    holding the source, innermost first; (the group holding both ends, its children
    holding each); the groups it enters, each with its child holding the target,
    outermost first). None when one end holds the other."""
    def up(element):
        chain = [element]
        while id(chain[-1]) in parent:
            chain.append(parent[id(chain[-1])])
        return chain

    source, target = up(edge.source), up(edge.target)
    if edge.source in target or edge.target in source:
        return None
    shared = {id(g) for g in source} & {id(g) for g in target}
    i = next(k for k, g in enumerate(source) if id(g) in shared)
    j = next(k for k, g in enumerate(target) if id(g) in shared)
    leave = [(source[k], source[k - 1]) for k in range(1, i)]
    enter = [(target[k], target[k - 1]) for k in range(j - 1, 0, -1)]
    return leave, (source[i], source[i - 1], target[j - 1]), enter


def _draw(edge: Edge, route, bends: dict) -> None:
    """``edge.points``: out of its source, through the bends of each group on its way,
    into its target (an edge against program order only through the shared group)."""
    s, t = edge.source, edge.target
    points = []
    if route is not None:
        leave, (group, _, _), enter = route
        way = [group] if edge.back else [g for g, _ in leave] + [group] + [g for g, _ in enter]
        for g in way:
            points += [(g.x + x, g.y + y) for x, y in bends.get((id(edge), id(g)), ())]
    if edge.back:  # drawn upward: from the top of the source to the bottom of the target
        edge.points = [(s.x + s.w / 2, s.y)] + points + [(t.x + t.w / 2, t.y + t.h)]
    else:
        edge.points = [(s.x + s.w / 2, s.y + s.h)] + points + [(t.x + t.w / 2, t.y)]


def _measure(group: Group, links: _Links, at: dict) -> None:
    """Size ``group`` and put its children (``at``: relative to it)."""
    for child in group.children:
        if isinstance(child, Group):
            _measure(child, links, at)
        else:
            child.w, child.h = node_size(child.lines)
    header = HEADER if group.title else 0.0
    if group.kind == "control":  # its sub-blocks side by side
        x = PAD
        for child in group.children:
            at[id(child)] = (x, header + PAD)
            x += child.w + NODE_GAP
        group.w = max(x - NODE_GAP + PAD, len(group.title) * CHAR_WIDTH + 2 * PAD)
        group.h = header + 2 * PAD + max((c.h for c in group.children), default=0.0)
        return
    ranks = _Ranks(group, links)
    width, height = ranks.place(at, PAD, header + PAD)
    group.w = max(width + 2 * PAD, len(group.title) * CHAR_WIDTH + 2 * PAD)
    group.h = header + height + 2 * PAD


def _move(group: Group, x: float, y: float, at: dict) -> None:
    """Make positions absolute: ``group`` at ``x, y``."""
    group.x, group.y = x, y
    for child in group.children:
        cx, cy = x + at[id(child)][0], y + at[id(child)][1]
        if isinstance(child, Group):
            _move(child, cx, cy, at)
        else:
            child.x, child.y = cx, cy


class _Ranks:
    """The layered layout of one group's children, and of the edges through it."""

    def __init__(self, group: Group, links: _Links):
        self.group, self.links = group, links
        self.items = sorted(group.children, key=lambda item: item.order)
        self.index = {id(item): i for i, item in enumerate(self.items)}
        n = len(self.items)
        self.preds = [set() for _ in range(n)]
        self.succs = [set() for _ in range(n)]
        for a, b, _ in links.pairs[id(group)]:
            i, j = sorted((self.index[id(a)], self.index[id(b)]))  # up: against program order
            self.succs[i].add(j)
            self.preds[j].add(i)

    def ranks(self) -> list[int]:
        n = len(self.items)
        rank = [0] * n
        for j in range(n):  # program order is a topological order
            if self.preds[j]:
                rank[j] = max(rank[i] + 1 for i in self.preds[j])
        # What depends on nothing but constants and parameters (``floating``) sits just
        # above what reads it, rather than at the top.
        floating = [False] * n
        for j in range(n):
            floating[j] = self.items[j].pin != "top" and all(floating[i] for i in self.preds[j])
        for i in reversed(range(n)):
            if floating[i] and self.succs[i]:
                rank[i] = min(rank[j] for j in self.succs[i]) - 1
        last = max(rank, default=0)
        for i, item in enumerate(self.items):
            if item.pin == "bottom" and not self.succs[i]:
                rank[i] = last
            elif item.pin == "top" and not self.preds[i]:
                rank[i] = 0
        return rank

    def place(self, at: dict, left: float, top: float) -> tuple[float, float]:
        """Put the items (``at``) and the edges' bend points; the size they take."""
        rank = self.ranks()
        n = len(self.items)
        last = max(rank, default=0)
        # vertices: the items, then one bend vertex per rank an edge crosses
        vrank, widths = list(rank), [item.w for item in self.items]
        below, above = [set() for _ in range(n)], [set() for _ in range(n)]

        def chain(ranks, start=None, end=None) -> list:
            made, prev = [], start
            for r in ranks:
                v = len(vrank)
                vrank.append(r)
                widths.append(0.0)
                below.append(set())
                above.append(set())
                if prev is not None:
                    below[prev].add(v)
                    above[v].add(prev)
                made.append(v)
                prev = v
            if end is not None and prev is not None:
                below[prev].add(end)
                above[end].add(prev)
            return made

        chains = {}  # key -> bend vertices, top to bottom
        for i in range(n):
            for j in self.succs[i]:
                chains[(i, j)] = chain(range(rank[i] + 1, rank[j]), i, j)
        # edges from outside come in at the top, edges to outside go out at the bottom:
        # one bundle per child, bent around what lies on their way
        for child, _ in self.links.entering[id(self.group)]:
            j = self.index[id(child)]
            if ("in", j) not in chains:
                chains[("in", j)] = chain(range(0, rank[j]), None, j)
        for child, _ in self.links.leaving[id(self.group)]:
            i = self.index[id(child)]
            if ("out", i) not in chains:
                chains[("out", i)] = chain(range(rank[i] + 1, last + 1), i, None)
        x, layers = self._order_and_spread(vrank, widths, above, below)
        heights = [max((self.items[v].h for v in layer if v < n), default=0.0)
                   for layer in layers]
        tops, y = [], 0.0
        for h in heights:
            tops.append(y)
            y += h + RANK_GAP
        low = min((x[v] - widths[v] / 2 for v in x), default=0.0)
        for i, item in enumerate(self.items):
            r = rank[i]
            at[id(item)] = (left + x[i] - low - item.w / 2,
                            top + tops[r] + (heights[r] - item.h) / 2)

        def points(key) -> list:
            return [(left + x[v] - low, top + tops[vrank[v]] + heights[vrank[v]] / 2)
                    for v in chains.get(key, ())]

        bends, group = self.links.bends, id(self.group)
        for a, b, edge in self.links.pairs[group]:
            i, j = self.index[id(a)], self.index[id(b)]
            edge.back = i > j
            bends[(id(edge), group)] = points((i, j))[::-1] if edge.back else points((i, j))
        for child, edge in self.links.entering[group]:
            bends[(id(edge), group)] = points(("in", self.index[id(child)]))
        for child, edge in self.links.leaving[group]:
            bends[(id(edge), group)] = points(("out", self.index[id(child)]))
        width = max((x[v] + widths[v] / 2 for v in x), default=0.0) - low
        return width, max(y - RANK_GAP, 0.0)

    def _order_and_spread(self, vrank, widths, above, below):
        """The vertices' x (centers) and the ranks' vertices, left to right."""
        layers = collections.defaultdict(list)
        for v in range(len(vrank)):
            layers[vrank[v]].append(v)
        depth = max(layers, default=-1) + 1
        layers = [layers[r] for r in range(depth)]
        pos = {}
        for layer in layers:
            for k, v in enumerate(layer):
                pos[v] = k
        for sweep in range(SWEEPS):  # barycenters, down then up
            down = sweep % 2 == 0
            near = above if down else below
            for r in (range(1, depth) if down else range(depth - 2, -1, -1)):
                key = {v: (sum(pos[u] for u in near[v]) / len(near[v]) if near[v] else pos[v])
                       for v in layers[r]}
                layers[r].sort(key=lambda v: key[v])
                for k, v in enumerate(layers[r]):
                    pos[v] = k
        x = {}
        for layer in layers:
            packed = 0.0
            for v in layer:
                x[v] = packed + widths[v] / 2
                packed += widths[v] + NODE_GAP
        for sweep in range(SWEEPS):  # pull each vertex toward its neighbours' mean
            down = sweep % 2 == 0
            near = above if down else below
            for r in (range(1, depth) if down else range(depth - 2, -1, -1)):
                wanted = [sum(x[u] for u in near[v]) / len(near[v]) if near[v] else x[v]
                          for v in layers[r]]
                self._spread(layers[r], wanted, widths, x)
        return x, layers

    @staticmethod
    def _spread(layer: list, wanted: list, widths: list, x: dict) -> None:
        """x positions for ``layer`` as near ``wanted`` as the gaps between them allow."""
        def gap(u, v):
            space = NODE_GAP if widths[u] and widths[v] else BEND_GAP
            return (widths[u] + widths[v]) / 2 + space

        n = len(layer)
        ahead, behind = list(wanted), list(wanted)
        for k in range(1, n):
            ahead[k] = max(wanted[k], ahead[k - 1] + gap(layer[k - 1], layer[k]))
        for k in range(n - 2, -1, -1):
            behind[k] = min(wanted[k], behind[k + 1] - gap(layer[k], layer[k + 1]))
        for k in range(n):
            x[layer[k]] = (ahead[k] + behind[k]) / 2
            if k:
                x[layer[k]] = max(x[layer[k]], x[layer[k - 1]] + gap(layer[k - 1], layer[k]))

