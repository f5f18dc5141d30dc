"""The base transformer, fresh names, and the source map from generated lines to user lines."""

import copy
import linecache
import traceback

import gast

from dy2stat.dy2static import anno, naming, parser, templates, transformer

SCALE = 3


def user_fn(x):
    y = x * SCALE
    z = y + 1  # the line that fails
    return z


class DoubleAssign(transformer.Base):
    """Turns `t = e` into `tmp_N = e` then `t = check(tmp_N)`."""

    def visit_Assign(self, node):
        tmp = self.new_name("tmp")
        return templates.replace(
            "tmp = value\ntarget = check(tmp)",
            tmp=tmp,
            value=node.value,
            target=node.targets[0],
            check="check",
        )


def convert(fn):
    node, info = parser.parse_function(fn)
    ctx = transformer.Context.for_function(node, fn, info)
    return DoubleAssign(ctx).visit(node), info


def test_namer_gives_fresh_readable_names():
    namer = naming.Namer({"if_body_0", "x"})
    assert [namer.new("if_body") for _ in range(3)] == ["if_body_1", "if_body_2", "if_body_3"]
    assert namer.new("else_body") == "else_body_0"
    assert namer.new("x") == "x_0"


def test_namer_avoids_function_globals_and_closure_names():
    k = 1

    def fn(a):
        tmp_0 = a + k
        return tmp_0 + tmp_1  # noqa: F821

    node, _ = parser.parse_function(fn)
    namer = naming.Namer.for_function(node, fn)
    assert namer.new("tmp") == "tmp_2"
    assert namer.new("k") == "k_0" and namer.new("SCALE") == "SCALE_0"
    assert "DoubleAssign" in namer.reserved and "print" in namer.reserved


def test_new_nodes_take_the_origin_of_the_visited_node():
    node, _ = convert(user_fn)
    code = parser.unparse(node)
    assert "tmp_0 = x * SCALE\n    y = check(tmp_0)\n    tmp_1 = y + 1\n" in code
    first, second = node.body[0], node.body[1]
    for stmt in (first, second):
        origin = anno.getanno(stmt, anno.Basic.ORIGIN)
        assert origin.source_line.strip() == "y = x * SCALE"
        assert stmt.lineno == origin.lineno
    for n in gast.walk(second):
        if isinstance(n, (gast.stmt, gast.expr)):
            assert anno.hasanno(n, anno.Basic.ORIGIN) and n.lineno == first.lineno


def test_skip_annotation_leaves_nodes_alone():
    node, info = parser.parse_function(user_fn)
    anno.setanno(node.body[0], anno.Basic.SKIP, True)
    DoubleAssign(transformer.Context.for_function(node, user_fn, info)).visit(node)
    assert parser.unparse(node.body[0]) == "y = x * SCALE\n"
    assert parser.unparse(node.body[1]) == "tmp_0 = y + 1\n"


def test_source_map_points_errors_at_the_user_line():
    node, _ = convert(user_fn)
    code, source_map = parser.unparse_with_source_map(node)
    namespace = {"SCALE": SCALE, "check": lambda v: v}
    exec(compile(code, "<generated>", "exec"), namespace)
    try:
        namespace["user_fn"]("a string")
    except TypeError as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
    origin = source_map.lookup(frame.lineno)
    assert origin is not None and origin.filename == __file__
    assert origin.source_line.strip() == "z = y + 1  # the line that fails"
    assert linecache.getline(__file__, origin.lineno).strip() == origin.source_line.strip()
    assert origin.function_name == "user_fn"
    assert "> " in origin.excerpt() and "the line that fails" in origin.excerpt()
    assert source_map.lookup(1).source_line.startswith("def user_fn")
    assert source_map.lookup(999) is None


def test_anno_copies():
    node = parser.parse_expression("x + 1")
    anno.setanno(node, anno.Basic.QN, "q")
    shallow = copy.copy(node)
    anno.setanno(shallow, anno.Basic.QN, "changed")
    assert anno.getanno(node, anno.Basic.QN) == "q"
    deep = copy.deepcopy(node)
    assert anno.getanno(deep, anno.Basic.QN) == "q"
    mine = anno.deepcopy(node)
    assert mine.left is not node.left and anno.getanno(mine, anno.Basic.QN) == "q"
    anno.delanno(mine, anno.Basic.QN)
    assert not anno.hasanno(mine, anno.Basic.QN) and anno.hasanno(node, anno.Basic.QN)
    anno.copyanno(node, mine, anno.Basic.QN)
    assert anno.getanno(mine, anno.Basic.QN) == "q"
    assert anno.getanno(mine, anno.Basic.SKIP, None) is None
    for key in [*anno.Basic, *anno.Static]:
        assert isinstance(key.value, str) and len(key.value) > 20
