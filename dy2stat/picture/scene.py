"""What a picture of a program shows, before anything is placed.

Ops are boxes and values are pills. A ``cond`` or ``while`` is a frame holding
one cluster per sub-block, and ops are grouped by the Layer whose ``forward``
built them (their recorded scope, ``LeNet/conv1``): each run of ops from one
call of a Layer is one group. A value is drawn once, in the innermost group of
the block that declares it holding the op that makes it (or, when none makes
it, every op that reads it), so a value a sub-block reads from an outer block
stays outside the sub-block's cluster and its edges cross into it. A branch's
results link to the ``cond``/``while`` outputs; a branch that only passes on an
outer value shows it passing, and a branch with nothing in it says so.

Every string here (labels, details) is printable: names from a file have their
control and direction characters escaped already; each renderer escapes what
its own format needs (XML, DOT quotes).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

from dy2stat.program_view import op_line
from dy2stat.runtime import shapes
from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.quoting import printable

# Characters of a name shown in a label; the whole name is in the details.
LABEL_LIMIT = 28
# Characters of a detail line (an op's attrs can be long lists).
DETAIL_LIMIT = 500


@dataclass(eq=False)
class Node:
    """One box or pill. ``kind``: op, value, pass (a branch yielding an outer value),
    empty (a sub-block with nothing in it) or layer (a collapsed Layer group)."""

    id: str
    kind: str
    lines: list[str]
    details: str
    order: float
    style: str = ""  # values: feed, fetch, param or ""
    pin: str = ""  # "top" or "bottom" of its container
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


@dataclass(eq=False)
class Group:
    """A container. ``kind``: program (the whole picture), layer (ops of one Layer
    call), control (a ``cond``/``while`` frame) or block (one of its sub-blocks)."""

    id: str
    kind: str
    title: str
    details: str
    order: float
    scope: str = ""  # layer: the scope path
    count: str = ""  # layer and block: how many ops, by type
    children: list = field(default_factory=list)
    edges: list = field(default_factory=list)  # drawn inside this group (set by layout)
    pin: str = ""
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


@dataclass(eq=False)
class Edge:
    """``source`` -> ``target`` (Nodes or Groups). ``kind``: data, result (a branch's
    result to the op's output) or carry (a loop's initial value to a sub-block's
    argument). ``points`` is set by the layout; ``back`` when it points up."""

    source: object
    target: object
    kind: str
    details: str
    points: list = field(default_factory=list)
    back: bool = False


@dataclass
class Scene:
    root: Group
    edges: list[Edge]


def build(program: Program, feed_names, fetch_names, depth: int | None = None) -> Scene:
    """The scene of ``program``; with ``depth``, each Layer group that many levels
    down (``LeNet`` is 1, ``LeNet/conv1`` is 2) is one box."""
    scene = _Builder(program, list(feed_names), set(fetch_names)).scene()
    if depth is not None:
        _collapse(scene, depth)
    return scene


def short(text: str) -> str:
    """``text`` for a label: printable and at most ``LABEL_LIMIT`` characters."""
    text = printable(text)
    return text if len(text) <= LABEL_LIMIT else text[:LABEL_LIMIT - 1] + "\u2026"


def _next_name(scope: str, op_scope: str) -> str | None:
    """The first name of ``op_scope`` below ``scope`` (None: the op is at ``scope``)."""
    if not scope:
        rest = op_scope
    elif op_scope.startswith(scope + "/"):
        rest = op_scope[len(scope) + 1:]
    else:  # at this scope, or (in a hand-made file) outside it
        rest = ""
    return rest.split("/")[0] or None


class _Builder:
    def __init__(self, program: Program, feeds: list, fetches: set):
        self.program, self.feeds, self.fetches = program, feeds, fetches
        self.counter = itertools.count()
        self.parent: dict[int, Group] = {}  # id(element) -> its container
        self.element: dict[int, object] = {}  # id(op) -> its Node or control Group
        self.block_of: dict[int, int] = {}  # id(element of an op) -> its block index
        self.frame_of: dict[int, Group] = {}  # sub-block index -> its control Group
        self.block_group: dict[int, Group] = {}
        self.values: dict[tuple, Node] = {}  # (declaring block, name) -> Node
        self.pins: dict[tuple, str] = {}  # value key -> "top" or "bottom" of its block
        self.edges: list[Edge] = []
        self.root = Group("g0", "program", "", "", self._next())

    def _next(self) -> int:
        return next(self.counter)

    def _add(self, container: Group, element) -> None:
        container.children.append(element)
        self.parent[id(element)] = container

    # ---- groups and ops, in program order
    def scene(self) -> Scene:
        self.block_group[0] = self.root
        self.root.details = f"the program: {_count(self.program, self.program.global_block().ops)}"
        self._fill(self.root, self.program.global_block(), self.program.global_block().ops, "")
        self._values()
        for group in self.block_group.values():
            if not group.children:
                self._add(group, Node(f"n{self._next()}", "empty", ["empty"],
                                      "this block computes nothing", self._next()))
        return Scene(self.root, self.edges)

    def _fill(self, container: Group, block: Block, ops, scope: str) -> None:
        for name, run in itertools.groupby(ops, key=lambda op: _next_name(scope, op.scope)):
            if name is None:
                for op in run:
                    self._op(container, block, op)
                continue
            path = f"{scope}/{name}" if scope else name
            run = list(run)
            count = _count(self.program, run)
            group = Group(f"g{self._next()}", "layer", short(name), f"{printable(path)}: {count}",
                          self._next(), scope=printable(path), count=count)
            self._add(container, group)
            self._fill(group, block, run, path)

    def _op(self, container: Group, block: Block, op: Operator) -> None:
        text = printable(op_line(block, op), DETAIL_LIMIT)
        if op.scope:
            text += f"\nin {printable(op.scope)}"
        if op.origin:
            text += "".join(f"\n{printable(line.strip(), DETAIL_LIMIT)}"
                            for line in op.origin.splitlines()[:4])
        sub_blocks = [(k, v) for k, v in op.attrs.items()
                      if k.endswith("_block") and isinstance(v, int)
                      and 0 < v < len(self.program.blocks) and v not in self.block_group]
        if sub_blocks:
            element = Group(f"g{self._next()}", "control", short(op.type), text, self._next())
        else:
            element = Node(f"n{self._next()}", "op", [short(op.type)], text, self._next())
        self._add(container, element)
        self.element[id(op)] = element
        self.block_of[id(element)] = block.idx
        for key, idx in sub_blocks:
            sub = self.program.blocks[idx]
            group = Group(f"g{self._next()}", "block", short(f"{key} (block {idx})"),
                          f"{printable(key)} (block {idx}): {_count(self.program, sub.ops)}",
                          self._next())
            self.block_group[idx] = group
            self.frame_of[idx] = element
            self._add(element, group)
            self._fill(group, sub, sub.ops, op.scope)

    # ---- values and edges
    def _values(self) -> None:
        """Place every value, then draw the edges (values must exist first)."""
        made = collections.defaultdict(list)  # value key -> elements that make it
        read = collections.defaultdict(list)  # value key -> elements that read it
        links = []
        for idx in self.block_group:
            block = self.program.blocks[idx]
            for op in block.ops:
                element = self.element[id(op)]
                for source, target, kind in self._links(block, op, element):
                    links.append((source, target, kind))
                    if _is_value(target) and kind != "carry":
                        made[target].append(element)
                    if _is_value(source) and kind != "result":
                        read[source].append(element)
                    elif not _is_value(source) and isinstance(source, tuple):  # a pass node
                        read[self._passed(source)].append(element)
        for name in self.feeds:  # inputs come before everything
            self._value((0, name), self.root, -1.0, "top")
        mentioned = [end for link in links for end in link[:2] if _is_value(end)]
        for key in mentioned + list(self.pins) + [(0, n) for n in sorted(self.fetches)]:
            if key not in self.values:
                home, order = self._home(key[0], made[key], +0.5)
                if not made[key]:
                    home, order = self._home(key[0], read[key], -0.5)
                self._value(key, home, order, self.pins.get(key, ""))
        for source, target, kind in links:
            source, target = self._resolve(source), self._resolve(target)
            self.edges.append(Edge(source, target, kind, _edge_details(source, target)))

    def _links(self, block: Block, op: Operator, element):
        """(source, target, kind) for ``op``: a value is (declaring block, name), a pass
        node ("pass", block, name); anything else is a scene element."""
        def value(name):
            return self._declared(block, name), name

        if isinstance(element, Node):
            for name in op.input_names():
                yield value(name), element, "data"
            for name in op.output_names():
                yield element, value(name), "data"
            return
        outs = op.outputs.get("Out", [])
        if op.type == "cond":
            for name in op.inputs.get("Cond", []):
                yield value(name), element, "data"
            for key, yields in (("true_block", "true_outs"), ("false_block", "false_outs")):
                for name, out in zip(op.attrs.get(yields, []), outs):
                    yield self._result(op.attrs.get(key), name), value(out), "result"
        elif op.type == "while":
            for x, c, b in itertools.zip_longest(op.inputs.get("X", []),
                                                 op.attrs.get("cond_args", []),
                                                 op.attrs.get("body_args", [])):
                for key, arg in (("cond_block", c), ("body_block", b)):
                    target = self._argument(op.attrs.get(key), arg, "top")
                    if x is not None and target is not None:
                        yield value(x), target, "carry"
            self._argument(op.attrs.get("cond_block"), op.attrs.get("cond_out"), "bottom")
            for name, out in zip(op.attrs.get("body_outs", []), outs):
                yield self._result(op.attrs.get("body_block"), name), value(out), "result"
            for name in op.outputs.get("Carries", []):
                yield element, value(name), "data"
        else:
            for slot, names in op.inputs.items():
                if slot != "Input":  # captured values: the sub-blocks' ops read them
                    for name in names:
                        yield value(name), element, "data"
            for name in op.output_names():
                yield element, value(name), "data"

    def _argument(self, idx, name, pin: str):
        """The value a sub-block binds on entry (or yields, pinned to its bottom)."""
        if idx not in self.block_group or not isinstance(name, str) or not name:
            return None
        key = (self._declared(self.program.blocks[idx], name), name)
        if key[0] == idx:
            self.pins.setdefault(key, pin)  # an argument that is also a result stays on top
        return key

    def _result(self, idx, name: str):
        """A sub-block's result: its value (at the bottom of the block), or a pass node
        when the block yields an outer value as it is."""
        key = self._argument(idx, name, "bottom")
        if key is not None and key[0] == idx:
            return key
        return ("pass", idx, name)

    def _passed(self, end) -> tuple:
        """The outer value a pass node passes on."""
        _, idx, name = end
        block = self.program.blocks[idx] if idx in self.block_group else self.program.blocks[0]
        return self._declared(block, name), name

    def _declared(self, block: Block, name: str) -> int:
        """The block whose vars declare ``name`` as ``block`` sees it (``block`` when
        none does: the verifier refuses such a file)."""
        found = block
        while found is not None:
            if name in found.vars:
                return found.idx
            found = found.parent
        return block.idx

    def _home(self, idx: int, elements, offset: float) -> tuple[Group, float]:
        """The innermost container, within block ``idx``, holding ``elements`` (each
        taken at the op of that block holding it), and a place in its order next to
        the first of them (``offset`` after it, or before it when negative)."""
        if idx not in self.block_group:  # a block no op of the picture owns
            return self.root, float(self._next())
        chains = []
        for element in elements:
            while element is not None and self.block_of.get(id(element), idx) != idx:
                element = self.frame_of.get(self.block_of[id(element)])
            if element is None:  # not inside block idx
                continue
            chain = [element]
            while chain[-1] is not self.block_group[idx]:
                chain.append(self.parent[id(chain[-1])])
            chains.append(chain[::-1])
        if not chains:
            return self.block_group[idx], float(self._next())
        depth = 0
        # go down while one container below holds them all (never into an op or frame)
        while all(len(c) > depth + 2 and c[depth + 1] is chains[0][depth + 1] for c in chains):
            depth += 1
        first = min(c[depth + 1].order for c in chains)
        return chains[0][depth], first + offset

    def _value(self, key, container: Group, order, pin: str) -> Node:
        idx, name = key
        var = self.program.blocks[idx].vars.get(name)
        kind = ("feed" if idx == 0 and name in self.feeds else
                "fetch" if idx == 0 and name in self.fetches else
                "param" if var is not None and var.persistable else "")
        lines, details = [short(name)], printable(name)
        if var is not None:
            lines.append(short(f"{var.dtype}{shapes.fmt(var.shape)}"))
            details += f": {var.dtype}{shapes.fmt(var.shape)}"
        details += {"feed": ", an input", "fetch": ", an output", "param": ", a parameter",
                    "": ""}[kind] + (f", in block {idx}" if idx else "")
        node = Node(f"n{self._next()}", "value", lines, details,
                    float(self._next()) if order is None else order, style=kind,
                    pin=pin or ("bottom" if kind == "fetch" else ""))
        self.values[key] = node
        self._add(container, node)
        return node

    def _resolve(self, end):
        if not isinstance(end, tuple):
            return end
        if end[0] == "pass":
            return self._pass(end[1], end[2])
        return self.values[end]

    def _pass(self, idx: int, name: str) -> Node:
        key = ("pass", idx, name)
        node = self.values.get(key)
        if node is None:
            text = printable(name)
            node = Node(f"n{self._next()}", "pass", [short(name), "passed on"],
                        f"{text}: this block yields the outer value as it is",
                        float(self._next()), pin="bottom")
            self.values[key] = node
            self._add(self.block_group.get(idx, self.root), node)
            outer = self.values.get(self._passed(key))
            if outer is not None:
                self.edges.append(Edge(outer, node, "data", outer.details))
        return node


def _is_value(end) -> bool:
    return isinstance(end, tuple) and end[0] != "pass"


def _edge_details(source, target) -> str:
    for end in (source, target):
        if isinstance(end, Node) and end.kind == "value":
            return end.details
    return ""


def _count(program: Program, ops) -> str:
    """How many ops (sub-blocks' counted in), by type: ``5 ops (2 matmul, 3 add)``."""
    types = collections.Counter()

    def count(ops):
        for op in ops:
            types[op.type] += 1
            for idx in op.sub_blocks():
                if isinstance(idx, int) and 0 < idx < len(program.blocks):
                    count(program.blocks[idx].ops)

    count(ops)
    total = sum(types.values())
    shown = ", ".join(f"{n} {printable(t, LABEL_LIMIT)}" for t, n in types.most_common(8))
    more = ", ..." if len(types) > 8 else ""
    return f"{total} op{'s' * (total != 1)} ({shown}{more})"


def _collapse(scene: Scene, depth: int) -> None:
    """Draw each Layer group ``depth`` levels down as one box: edges to anything in it
    go to the box, edges inside it go."""
    standing: dict[int, object] = {}  # id(hidden element) -> the box standing for it

    def walk(group: Group) -> None:
        for i, child in enumerate(group.children):
            if not isinstance(child, Group):
                continue
            if child.kind == "layer" and child.scope.count("/") + 1 >= depth:
                box = Node(child.id, "layer", [child.title, child.count.partition(" (")[0]],
                           child.details, child.order)
                group.children[i] = box
                hide(child, box, group)
            else:
                walk(child)

    def hide(group: Group, box: Node, outside: Group) -> None:
        standing[id(group)] = box
        for child in group.children:
            if isinstance(child, Node) and child.style == "fetch":  # outputs stay in view
                child.order = box.order + 0.5
                outside.children.append(child)
                continue
            standing[id(child)] = box
            if isinstance(child, Group):
                hide(child, box, outside)

    walk(scene.root)
    edges, seen = [], set()
    for edge in scene.edges:
        source = standing.get(id(edge.source), edge.source)
        target = standing.get(id(edge.target), edge.target)
        key = (id(source), id(target), edge.kind)
        if source is target or key in seen:
            continue
        seen.add(key)
        edge.source, edge.target = source, target
        edges.append(edge)
    scene.edges = edges
