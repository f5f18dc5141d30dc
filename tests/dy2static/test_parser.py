"""Parsing user functions: methods, closures, decorators, lambdas, and the user's line numbers."""

import functools
import inspect
import linecache
import os

import gast
import pytest

from dy2stat.dy2static import anno, parser
from dy2stat.dy2static.errors import ConversionError, Dy2StaticError


def plain(x):
    y = x + 1  # marker: plain-y
    return y


def decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)  # marker: wrapper-return

    return wrapper


@decorate
def decorated(x):
    return x * 2  # marker: decorated-return


class Model:
    def forward(self, x):
        doc = """
keep
  this"""
        return x, doc  # marker: method-return

    @staticmethod
    def static(x):
        return -x

    @classmethod
    def klass(cls, x):
        return x


def make_closure(k):
    def inner(a):
        return a + k  # marker: closure-return

    return inner


TWO_LAMBDAS = (lambda x: x + 1), (lambda y: y * 2)
SAME_ARGS = (lambda x: x + 1), (lambda x: x * 2)
POSONLY = (lambda a, /, b=2, *c, d, **e: a), (lambda a: a)


def marker_line(text):
    for n, line in enumerate(linecache.getlines(__file__), 1):
        if f"# marker: {text}" in line:
            return n
    raise AssertionError(text)


@pytest.mark.parametrize(
    "fn, name, marker",
    [
        (plain, "plain", "plain-y"),
        # A functools.wraps wrapper is parsed as itself (converting it keeps the decorator).
        (decorated, "wrapper", "wrapper-return"),
        (decorated.__wrapped__, "decorated", "decorated-return"),
        (Model.forward, "forward", "method-return"),
        (Model().forward, "forward", "method-return"),
        (make_closure(3), "inner", "closure-return"),
    ],
)
def test_parse_function_keeps_file_lines(fn, name, marker):
    node, info = parser.parse_function(fn)
    assert isinstance(node, gast.FunctionDef) and node.name == name
    assert node.decorator_list == []
    assert info.filename == __file__ and info.function_name == name
    line = marker_line(marker)
    found = [n for n in gast.walk(node) if getattr(n, "lineno", None) == line]
    assert found, "no node on the marked line"
    for n in found:
        origin = anno.getanno(n, anno.Basic.ORIGIN)
        assert origin.filename == __file__ and origin.lineno == line
        assert f"# marker: {marker}" in origin.source_line
        assert origin.col == n.col_offset
        if isinstance(n, gast.Name):
            assert origin.source_line[origin.col :].startswith(n.id)


def test_every_node_line_is_the_file_line():
    node, _ = parser.parse_function(Model.forward)
    for n in gast.walk(node):
        if isinstance(n, gast.stmt):
            text = linecache.getline(__file__, n.lineno)
            assert text[n.col_offset :].startswith(parser.unparse(n).split()[0][:3])


def test_multiline_strings_keep_their_text():
    node, _ = parser.parse_function(Model.forward)
    (doc,) = [n for n in gast.walk(node) if isinstance(n, gast.Constant) and "keep" in str(n.value)]
    assert doc.value == "\nkeep\n  this"


@pytest.mark.parametrize("fn", [Model.static, Model.__dict__["static"], Model.klass])
def test_static_and_class_methods(fn):
    node, _ = parser.parse_function(fn)
    assert node.name in ("static", "klass") and node.decorator_list == []


def test_lambdas_on_one_line_are_told_apart():
    for fn, text in zip(TWO_LAMBDAS, ["x + 1", "y * 2"]):
        node, _ = parser.parse_function(fn)
        assert isinstance(node, gast.Lambda) and parser.unparse(node.body) == text
    for fn, text in zip(SAME_ARGS, ["x + 1", "x * 2"]):
        node, _ = parser.parse_function(fn)
        assert parser.unparse(node.body) == text
        assert node.lineno == inspect.getsourcelines(fn)[1]
    node, _ = parser.parse_function(POSONLY[0])
    assert [a.id for a in node.args.posonlyargs] == ["a"] and node.args.kwarg.id == "e"


def test_no_source_is_a_clear_error():
    namespace = {}
    exec("f = lambda x: x + 1", namespace)
    with pytest.raises(ConversionError) as err:
        parser.parse_function(namespace["f"])
    assert "source code is not available" in str(err.value)
    assert "not_to_static" in str(err.value)
    with pytest.raises(ConversionError, match="not a Python function"):
        parser.parse_function(len)


def test_error_message_names_file_line_and_source():
    err = Dy2StaticError("x is bad", "model.py", 12, "    y = x + 1\n", "Rename it")
    assert str(err) == 'File "model.py", line 12\n    y = x + 1\nx is bad. Rename it'
    assert str(Dy2StaticError("plain")) == "plain."


def test_parse_str_and_unparse_round_trip():
    code = "def f(a, *b, c=1, **d):\n    return [i for i in b if i > a]\n"
    module = parser.parse_str(code)
    assert parser.unparse(module) == code
    assert parser.unparse(module.body[0].body) == "return [i for i in b if i > a]\n"
    assert parser.unparse(parser.parse_expression("(i < n)")) == "i < n"
    assert parser.unparse(parser.parse_expression("(a, b)")) == "(a, b)"
    match = "match x:\n    case [a, *rest]:\n        pass\n    case _:\n        pass\n"
    assert parser.unparse(parser.parse_str(match)) == match
    stmt = parser.parse_str("    x = 1\n", single=True)
    assert isinstance(stmt, gast.Assign)


@pytest.mark.parametrize("fn", [plain, decorated, decorated.__wrapped__, Model.forward,
                                Model.__dict__["static"].__func__, make_closure(3),
                                TWO_LAMBDAS[1], SAME_ARGS[0]])
def test_source_lines_are_inspects(fn):
    file_lines, lines, first = parser.source_lines(fn)
    assert file_lines == inspect.findsource(fn)[0]
    assert (lines, first) == inspect.getsourcelines(fn.__code__)


def test_source_lines_follow_an_edited_file(tmp_path):
    path = tmp_path / "edited_module.py"
    path.write_text("def f(x):\n    return x + 1\n")
    namespace = {"__name__": "edited_module"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    assert parser.source_lines(namespace["f"])[1] == ["def f(x):\n", "    return x + 1\n"]
    path.write_text("def f(x):\n    return x + 2\n")
    os.utime(path, (1, 1))  # another mtime, even within the file system's resolution
    assert parser.source_lines(namespace["f"])[1][1] == "    return x + 2\n"
