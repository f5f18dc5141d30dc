"""The pictures of a program (``dy2stat inspect --svg/--png``), checked on the SVG itself:
what lies inside which cluster, which edges exist, and that nothing overlaps."""

from __future__ import annotations

import io
import itertools
from xml.etree import ElementTree

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn, picture, program_view
from dy2stat.runtime import serialize
from dy2stat.runtime.ir import Operator, Program
from dy2stat.static import InputSpec
from tests.runtime import programs as P

SVG = "{http://www.w3.org/2000/svg}"


class Net(nn.Layer):
    """A while holding a cond, then a cond whose false branch is empty."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = nn.functional.relu(self.fc1(x))
        n = 0
        while h.abs().sum() < 40:
            if n > 3:
                h = h + 1
            else:
                h = h * 2
            n += 1
        y = self.fc2(h)
        if y.mean() > 0:
            y = self.fc2(h) * 2
        return y


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Net saved with jit.save and loaded back: the picture is of what the file holds."""
    d2s.seed(0)
    net = Net()
    net.eval()
    path = tmp_path_factory.mktemp("picture") / "net"
    d2s.jit.save(d2s.jit.to_static(net), str(path), input_spec=[InputSpec([-1, 4], "float32")])
    program, feeds, fetches, _ = serialize.load_model(path)
    return program, feeds, fetches


class Picture:
    """An SVG picture, parsed: its nodes, groups and edges by id."""

    def __init__(self, text: str):
        self.root = ElementTree.fromstring(text)
        self.parent = {child: up for up in self.root.iter() for child in up}
        gs = list(self.root.iter(f"{SVG}g"))
        self.nodes = {g.get("id"): g for g in gs if g.get("class").startswith("node")}
        self.groups = {g.get("id"): g for g in gs if g.get("class").startswith("group")}
        self.edges = [p for p in self.root.iter(f"{SVG}path")
                      if (p.get("class") or "").startswith("edge")]

    @staticmethod
    def title(element) -> str:
        return element.find(f"{SVG}title").text

    @staticmethod
    def box(element) -> tuple:
        rect = element.find(f"{SVG}rect")
        return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))

    def titled(self, prefix: str, where=None) -> list:
        where = self.nodes if where is None else where
        return [e for e in where.values() if self.title(e).startswith(prefix)]

    def the(self, prefix: str, where=None):
        (found,) = self.titled(prefix, where)
        return found

    def within(self, element, group) -> bool:
        while element is not None:
            if element is group:
                return True
            element = self.parent.get(element)
        return False

    def block(self, idx: int):
        return next(g for g in self.groups.values()
                    if g.get("class") == "group block" and f"(block {idx})" in self.title(g))

    def edges_to(self, element, kind: str | None = None) -> list:
        return [e for e in self.edges if e.get("data-to") == element.get("id")
                and (kind is None or kind in e.get("class").split())]

    def value(self, name: str):
        """The pill of the value ``name``."""
        (found,) = [n for n in self.nodes.values() if n.get("class").startswith("node value")
                    and self.title(n).startswith(f"{name}: ")]
        return found

    def op_node(self, block, op):
        """The box of ``op`` (the frame of a ``cond``/``while``)."""
        return self.the(program_view.op_line(block, op), {**self.nodes, **self.groups})


def contains(outer: tuple, inner: tuple) -> bool:
    ox, oy, ow, oh = outer
    x, y, w, h = inner
    return ox <= x and oy <= y and x + w <= ox + ow + 0.01 and y + h <= oy + oh + 0.01


def overlap(a: tuple, b: tuple) -> bool:
    return (a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and
            a[1] < b[1] + b[3] and b[1] < a[1] + a[3])


def sub_blocks(program):
    for block in program.blocks:
        for op in block.ops:
            for key, idx in op.attrs.items():
                if key.endswith("_block"):
                    yield block, op, key, program.blocks[idx]


def test_values_read_from_an_outer_block_are_drawn_outside_the_cluster(saved):
    program, feeds, fetches = saved
    pic = Picture(picture.svg(program, feeds, fetches))
    checked = 0
    for _, _, _, block in sub_blocks(program):
        cluster = pic.block(block.idx)
        for op in block.ops:
            reader = pic.op_node(block, op)
            assert pic.within(reader, cluster)
            for name in op.input_names():
                if name in block.vars:
                    continue
                value = pic.value(name)  # one node per value, wherever it is read
                assert not pic.within(value, cluster)
                assert not contains(pic.box(cluster), pic.box(value))
                assert any(e.get("data-from") == value.get("id") for e in pic.edges_to(reader))
                checked += 1
    assert checked >= 5  # a loop value, the loop's result and fc2's parameters


def test_each_branch_result_links_to_the_output_and_an_empty_branch_is_drawn(saved):
    program, feeds, fetches = saved
    pic = Picture(picture.svg(program, feeds, fetches))
    results = {"cond": [("true_block", "true_outs"), ("false_block", "false_outs")],
               "while": [("body_block", "body_outs")]}
    passed = 0
    for block in program.blocks:
        for op in block.ops:
            for key, yields in results.get(op.type, []):
                sub = program.blocks[op.attrs[key]]
                cluster = pic.block(sub.idx)
                for result, out in zip(op.attrs[yields], op.outputs["Out"]):
                    target = pic.value(out)
                    sources = [pic.nodes[e.get("data-from")]
                               for e in pic.edges_to(target, "result")]
                    (source,) = [s for s in sources if pic.within(s, cluster)]
                    assert pic.title(source).startswith(result)
                    if not sub.ops:  # the empty branch yields its outer value as it is
                        assert source.get("class") == "node pass"
                        outer = pic.value(result)
                        assert not pic.within(outer, cluster)
                        assert any(e.get("data-from") == outer.get("id")
                                   for e in pic.edges_to(source))
                        passed += 1
    assert passed == 1


def test_a_branch_with_nothing_in_it_says_so():
    program = Program()
    g = program.global_block()
    g.create_var((), "bool", name="pred", is_data=True)
    empty_true, empty_false = program.create_block(0), program.create_block(0)
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": []}, {"Out": []},
                         {"true_block": empty_true.idx, "false_block": empty_false.idx,
                          "true_outs": [], "false_outs": []}))
    pic = Picture(picture.svg(program, ["pred"], []))
    for idx in (1, 2):
        (node,) = [n for n in pic.nodes.values() if pic.within(n, pic.block(idx))]
        assert node.get("class") == "node empty"
    frame = pic.op_node(g, g.ops[0])
    assert pic.edges_to(frame) and pic.within(pic.block(1), frame)


def test_ops_are_grouped_by_the_layer_that_built_them(saved):
    program, feeds, fetches = saved
    pic = Picture(picture.svg(program, feeds, fetches))
    for block in program.blocks:
        for op in block.ops:
            up = pic.parent[pic.op_node(block, op)]
            while up.get("class") not in ("group layer", "group program"):
                up = pic.parent[up]
            assert (up.get("data-scope") or "") == op.scope, program_view.op_line(block, op)
    layers = [g for g in pic.groups.values() if g.get("class") == "group layer"]
    assert sorted(g.get("data-scope") for g in layers) == ["Net", "Net/fc1", "Net/fc2",
                                                           "Net/fc2"]
    for layer in layers:  # a group's box holds everything drawn in it
        for element in layer.iter(f"{SVG}g"):
            assert contains(pic.box(layer), pic.box(element))


def test_deeper_layers_collapse_into_one_box_and_outputs_stay_in_view(saved):
    program, feeds, fetches = saved
    pic = Picture(picture.svg(program, feeds, fetches, depth=2))
    boxes = [n for n in pic.nodes.values() if n.get("class") == "node layer"]
    assert sorted(pic.title(b).split(":")[0] for b in boxes) == ["Net/fc1", "Net/fc2", "Net/fc2"]
    assert not pic.titled("matmul_")  # the ops inside are not drawn
    fc1 = next(b for b in boxes if pic.title(b).startswith("Net/fc1"))
    relu = pic.the(program_view.op_line(program.global_block(), next(
        op for op in program.global_block().ops if op.type == "relu")))
    assert any(e.get("data-from") == fc1.get("id") for e in pic.edges_to(relu))
    assert pic.value(fetches[0])
    assert len(Picture(picture.svg(program, feeds, fetches, depth=1)).titled("Net: ")) == 1


class Tower(nn.Layer):
    """About 200 ops: residual blocks, some with a branch, and a skip across many blocks."""

    def __init__(self, depth: int = 30):
        super().__init__()
        self.blocks = nn.LayerList([nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
                                    for _ in range(depth)])

    def forward(self, x):
        first = x
        for i, block in enumerate(self.blocks):
            y = block(x)
            if i % 6 == 5:
                if y.mean() > 0:
                    y = y * 0.5
            x = x + y
        return x + first


def assert_legible(pic: Picture) -> None:
    boxes = [pic.box(n) for n in pic.nodes.values()]
    for a, b in itertools.combinations(boxes, 2):
        assert not overlap(a, b), (a, b)
    for group in pic.groups.values():  # sibling groups never overlap either
        inner = [pic.box(c) for c in group if c.tag == f"{SVG}g"]
        for a, b in itertools.combinations(inner, 2):
            assert not overlap(a, b), (a, b)
    for edge in pic.edges:
        assert edge.get("d").startswith("M")


def test_a_200_op_program_is_laid_out_without_overlaps():
    tower = d2s.jit.to_static(Tower())
    tower(d2s.ones([2, 8]))
    program = tower.forward.main_program
    assert len(list(program.all_ops())) >= 200
    text = picture.svg(program, ["x"], [])
    pic = Picture(text)
    assert len(pic.nodes) > 300
    assert_legible(pic)
    width = float(pic.root.get("width"))
    assert width < 2500  # a column of blocks, not one long row
    collapsed = Picture(picture.svg(program, ["x"], [], depth=3))
    assert len([n for n in collapsed.nodes.values() if n.get("class") == "node layer"]) == 30
    assert_legible(collapsed)


def test_a_tangled_program_without_layers_has_no_overlaps():
    rng = np.random.default_rng(0)
    program = Program()
    g = program.global_block()
    g.create_var((4,), "float32", name="x", is_data=True)
    names = ["x"]
    for _ in range(200):  # each op adds two earlier values, near or far back
        a, b = rng.choice(names[-12:]), rng.choice(names)
        names.append(P.op(g, "add", {"X": a, "Y": b}))
    pic = Picture(picture.svg(program, ["x"], [names[-1]]))
    assert len(pic.nodes) == 401
    assert_legible(pic)


def test_the_hand_made_programs_draw_their_results_and_arguments():
    program = P.with_while()
    pic = Picture(picture.svg(program, ["n"], ["i"]))
    (body,) = [b for _, op, key, b in sub_blocks(program) if key == "body_block"]
    (carried,) = pic.edges_to(pic.value("bi"), "carry")
    assert pic.title(pic.nodes[carried.get("data-from")]).startswith("i0: ")
    (result,) = pic.edges_to(pic.value("i"), "result")
    assert pic.within(pic.nodes[result.get("data-from")], pic.block(body.idx))
    assert_legible(pic)


def test_png_is_the_same_picture():
    Image = pytest.importorskip("PIL.Image")
    program = P.with_cond()
    data = picture.png(program, ["x", "pred"], ["y"])
    image = Image.open(io.BytesIO(data))
    width = float(Picture(picture.svg(program, ["x", "pred"], ["y"])).root.get("width"))
    assert image.format == "PNG" and abs(image.size[0] - 2 * width) <= 2
