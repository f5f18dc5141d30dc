"""Liveness and the contract the passes rely on: branch outputs and loop-carried values."""

import gast
import pytest

from dy2stat.dy2static import anno, parser
from dy2stat.dy2static.analysis import liveness, resolve


def first(fn, kind):
    return next(n for n in gast.walk(fn) if isinstance(n, kind))


def analyzed(code):
    return resolve(parser.parse_str(code).body[0])


IF_CASES = [
    ("def f(x):\n if x > 0:\n  y = x\n  t = 1\n else:\n  y = -x\n return y", ["y"]),
    ("def f(x):\n z = 0\n if x:\n  z = 1\n  w = 2\n return z", ["z"]),
    ("def f(x):\n if x:\n  x = 1\n  y = 2", []),
    ("def f(self, x):\n if x:\n  self.h = x\n return x", ["self.h"]),
    ("def f(self, x):\n if x:\n  self.h = x\n  self.g = x\n return self.h", ["self.g", "self.h"]),
    ("def f(d, x):\n if x:\n  d['k'] = x\n return 0", ["d['k']"]),
    ("def f(x):\n d = {}\n if x:\n  d['k'] = x\n return 1", []),
    ("def f(x):\n d = {}\n if x:\n  d['k'] = x\n return d", ["d['k']"]),
    ("def f(x):\n d = g()\n if x:\n  d.a = x\n return d.a.b", ["d.a"]),
    ("def f(x):\n out = []\n if x:\n  out.append(x)\n return out", ["out"]),
    ("def f(x):\n out = []\n if x:\n  out.append(x)\n return 0", []),
    ("def f(x, out):\n if x:\n  out.append(x)", ["out"]),
    ("def f(x):\n y = 0\n if x:\n  y = 1\n g = lambda: y\n return g", ["y"]),
    ("def f(x):\n g = lambda: y\n if x:\n  y = 1\n else:\n  y = 2\n return g", ["y"]),
    ("def f(x):\n global G\n if x:\n  G = 1", ["G"]),
    ("def f(x):\n if x:\n  a, b = 1, 2\n else:\n  a = 3\n return a + b", ["a", "b"]),
    ("def f(x):\n if x:\n  y = 1\n  return y\n return 0", []),
    ("def f(xs):\n for x in xs:\n  if x:\n   s = x\n  else:\n   s = 0\n  print(s)", ["s"]),
]


@pytest.mark.parametrize("code, outputs", IF_CASES)
def test_branch_outputs(code, outputs):
    assert liveness.branch_outputs(first(analyzed(code), gast.If)) == outputs


LOOP_CASES = [
    (
        "def f(n):\n i = 0\n s = 0\n while i < n:\n  t = i * 2\n  s = s + t\n  i = i + 1\n"
        " return s",
        ["i", "s"],
    ),
    ("def f(xs):\n s = 0\n for x in xs:\n  s += x\n return s, x", ["s", "x"]),
    ("def f(xs):\n s = 0\n for x in xs:\n  s += x\n return s", ["s"]),
    ("def f(n):\n i = 0\n while True:\n  i += 1\n  if i > n:\n   break\n return i", ["i"]),
    (
        "def f(self, n):\n while n > 0:\n  self.count = self.count + 1\n  n -= 1",
        ["n", "self.count"],
    ),
    ("def f(x):\n while x < 10:\n  x = g()", ["x"]),
    ("def f(x):\n while x < 10:\n  y = x\n  x = y + 1", ["x"]),
    ("def f(n):\n out = []\n for i in range(n):\n  out.append(i)\n return out", ["out"]),
    (
        "def f(n):\n i = 0\n while i < n:\n  j = 0\n  while j < i:\n   j += 1\n  i += j\n return i",
        ["i"],
    ),
]


@pytest.mark.parametrize("code, carried", LOOP_CASES)
def test_loop_carried(code, carried):
    loop = first(analyzed(code), (gast.While, gast.For))
    assert liveness.loop_carried(loop) == carried


def test_inner_loop_carries_only_its_own_names():
    fn = analyzed(LOOP_CASES[-1][0])
    inner = fn.body[1].body[1]
    assert isinstance(inner, gast.While) and liveness.loop_carried(inner) == ["j"]


def test_live_sets_on_statements():
    fn = analyzed(
        "def f(self, x, n):\n"
        "  y = x * 2\n"
        "  if y > n:\n"
        "    z = y\n"
        "    self.h = z\n"
        "  else:\n"
        "    z = n\n"
        "  return z + x\n"
    )
    assign, if_node, ret = fn.body
    live_in = anno.getanno(if_node, anno.Static.LIVE_VARS_IN)
    live_out = anno.getanno(if_node, anno.Static.LIVE_VARS_OUT)
    assert live_in == {"y", "n", "self", "x", "self.h"}
    assert live_out == {"z", "x", "self.h"}
    assert anno.getanno(assign, anno.Static.LIVE_VARS_OUT) == live_in
    assert anno.getanno(ret, anno.Static.LIVE_VARS_IN) == {"z", "x", "self.h"}
    assert anno.getanno(ret, anno.Static.LIVE_VARS_OUT) == {"self.h"}


def test_nested_functions_get_their_own_liveness():
    fn = analyzed(
        "def f(x):\n  acc = 0\n  def g(v):\n    nonlocal acc\n    if v:\n      acc = v\n"
        "  g(x)\n  return acc\n"
    )
    inner_if = fn.body[1].body[1]
    assert liveness.branch_outputs(inner_if) == ["acc"]
    scope = anno.getanno(fn.body[1], anno.Static.SCOPE)
    assert scope.mutated == {"acc"}
