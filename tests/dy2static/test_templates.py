"""Templates: placeholders replaced by names, nodes and lists, with the right contexts."""

import gast
import pytest

from dy2stat.dy2static import anno, parser, templates


def ctx_of(node):
    return type(node.ctx).__name__


def test_names_and_contexts():
    (stmt,) = templates.replace("target = helper(pred, x)", target="y", helper="cond", pred="p")
    assert parser.unparse(stmt) == "y = cond(p, x)\n"
    assert ctx_of(stmt.targets[0]) == "Store" and ctx_of(stmt.value.args[0]) == "Load"


def test_list_target_becomes_store_tuple():
    (stmt,) = templates.replace("names = fn()", names=["a", "b"], fn="f")
    target = stmt.targets[0]
    assert isinstance(target, gast.Tuple) and ctx_of(target) == "Store"
    assert [ctx_of(e) for e in target.elts] == ["Store", "Store"]
    assert parser.unparse(stmt) == "a, b = f()\n"


def test_attribute_and_subscript_strings():
    (stmt,) = templates.replace("target = value", target="self.h", value="x[0]")
    assert parser.unparse(stmt) == "self.h = x[0]\n"
    target = stmt.targets[0]
    assert ctx_of(target) == "Store" and ctx_of(target.value) == "Load"
    assert ctx_of(stmt.value) == "Load"


def test_nodes_are_copied_at_each_use_and_keep_annotations():
    node = parser.parse_expression("self.h")
    node.ctx = gast.Store()
    anno.setanno(node, anno.Basic.ORIGIN, "origin")
    (stmt,) = templates.replace("a = b(v, v)", a="z", b="f", v=node)
    first, second = stmt.value.args
    assert first is not node and first is not second and first.value is not node.value
    assert ctx_of(first) == "Load" and ctx_of(node) == "Store"
    assert anno.getanno(first, anno.Basic.ORIGIN) == "origin"


def test_function_bodies_args_and_nonlocal():
    body = parser.parse_str("x = x + 1\ny = x * 2").body
    stmts = templates.replace(
        """
        def name(args):
            nonlocal state
            body
            return result
        name(1)
        """,
        name="if_body_0",
        args=["a", gast.Name("b", gast.Load(), None, None)],
        state=["x", "y", "self.h"],
        body=body,
        result=["x", "y"],
    )
    assert parser.unparse(stmts) == (
        "def if_body_0(a, b):\n"
        "    nonlocal x, y\n"
        "    x = x + 1\n"
        "    y = x * 2\n"
        "    return (x, y)\n"
        "if_body_0(1)\n"
    )
    assert [ctx_of(a) for a in stmts[0].args.args] == ["Param", "Param"]
    assert stmts[0].body[1] is not body[0]


def test_empty_lists():
    (fn,) = templates.replace("def f():\n    nonlocal s\n    body", s=[], body=[])
    assert parser.unparse(fn) == "def f():\n    pass\n"
    (call,) = templates.replace("g(args)", args=[], g="h")
    assert parser.unparse(call) == "h()\n"


def test_attribute_and_keyword_names():
    (stmt,) = templates.replace("obj.method(key=1)", obj="layer", method="forward", key="axis")
    assert parser.unparse(stmt) == "layer.forward(axis=1)\n"


def test_statement_and_expression_replacements():
    ret = parser.parse_str("return x", single=True)
    stmts = templates.replace("if p:\n    stmt\n    expr", p="c", stmt=ret, expr="g()")
    assert parser.unparse(stmts) == "if c:\n    return x\n    g()\n"


def test_replace_as_expression():
    expr = templates.replace_as_expression("helper(a, lambda: b)", helper="h", a="x", b=["y"])
    assert isinstance(expr, gast.Call) and parser.unparse(expr) == "h(x, lambda: (y,))"
    with pytest.raises(ValueError):
        templates.replace_as_expression("x = 1")


def test_generated_nodes_have_no_template_locations():
    (stmt,) = templates.replace("a = 1\n", a="b")
    assert getattr(stmt, "lineno", None) is None
