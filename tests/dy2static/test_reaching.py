"""Reaching definitions: must/may-defined names before statements, and undefined_before."""

import gast
import pytest

from dy2stat.dy2static import anno, parser
from dy2stat.dy2static.analysis import resolve
from dy2stat.dy2static.analysis.reaching_definitions import undefined_before


def analyzed(code):
    return resolve(parser.parse_str(code).body[0])


def last(fn):
    return fn.body[-1]


def defs(node):
    return anno.getanno(node, anno.Static.DEFINED_VARS_IN)


# (function, name, maybe undefined before the last statement, definitely undefined there)
CASES = [
    ("def f(x):\n if x:\n  y = 1\n return y", "y", True, False),
    ("def f(x):\n if x:\n  y = 1\n else:\n  y = 2\n return y", "y", False, False),
    ("def f(x):\n return y", "y", False, False),
    ("def f(x):\n return print(x)", "print", False, False),
    ("def f(x):\n return x", "x", False, False),
    ("def f(x):\n y = 1\n del y\n return y", "y", True, True),
    ("def f(xs):\n for i in xs:\n  pass\n return i", "i", True, False),
    ("def f(n):\n while n:\n  t = n\n  n -= 1\n return t", "t", True, False),
    ("def f(self):\n return self.h", "self.h", False, False),
    ("def f(x):\n d = {}\n return d['k']", "d['k']", False, False),
    ("def f(x):\n if x:\n  d = {}\n return d['k']", "d['k']", True, False),
    ("def f(x):\n try:\n  y = g()\n except E:\n  y = 0\n return y", "y", False, False),
    ("def f(x):\n try:\n  y = g()\n except E:\n  pass\n return y", "y", True, False),
    ("def f(x):\n with g() as h:\n  pass\n return h", "h", False, False),
    ("def f(x):\n while x:\n  if x:\n   return 1\n  y = 2\n  break\n return y", "y", True, False),
    ("def f(x):\n def g():\n  return x\n return g", "g", False, False),
]


@pytest.mark.parametrize("code, name, maybe, definitely", CASES)
def test_undefined_before(code, name, maybe, definitely):
    fn = analyzed(code)
    assert undefined_before(last(fn), name) is maybe
    assert defs(last(fn)).definitely_undefined(name) is definitely


def test_loop_entry_ignores_back_edge():
    fn = analyzed("def f(n):\n while n:\n  t = n\n  n -= 1\n return t")
    loop = fn.body[0]
    assert undefined_before(loop, "t") and defs(loop).definitely_undefined("t")
    assert defs(loop).must == {"n"} and defs(loop.test).must == {"n"}
    assert not undefined_before(loop.body[1], "t")


def test_reaching_assignments():
    fn = analyzed("def f(c):\n x = 1\n if c:\n  x = 2\n y = 3\n return x")
    first, if_node, y_assign, ret = fn.body
    reaching = defs(ret).reaching
    assert reaching["x"] == {first, if_node.body[0]}
    assert reaching["y"] == {y_assign}
    assert reaching["c"] == {fn.args}
    assert defs(ret).must == {"c", "x", "y"}


def test_nested_function_has_its_own_definitions():
    fn = analyzed("def f(x):\n def g(a):\n  if a:\n   b = 1\n  return b\n return g")
    inner_return = fn.body[0].body[-1]
    assert undefined_before(inner_return, "b")
    assert not undefined_before(inner_return, "x")
    assert isinstance(inner_return, gast.Return)
