"""Activity: read, written and mutated qualified names per statement and block."""

import pytest

from dy2stat.dy2static import anno, parser
from dy2stat.dy2static.analysis import activity
from dy2stat.dy2static.analysis.qual_names import QN

S = anno.Static


def analyzed(code):
    fn = parser.parse_str("def f(self, a, b, *args, k=1, **kw):\n" + code).body[0]
    activity.resolve(fn)
    return fn


def last_scope(code):
    return anno.getanno(analyzed(code).body[-1], S.SCOPE)


# (body of f (indented), reads, writes, mutated) of its last statement.
CASES = [
    ("  x = a + b", {"a", "b"}, {"x"}, set()),
    ("  x, (y, *z) = a", {"a"}, {"x", "y", "z"}, set()),
    ("  self.h = a", {"self", "a"}, {"self.h"}, set()),
    ("  self.fc.w = self.fc.w * 2", {"self", "self.fc", "self.fc.w"}, {"self.fc.w"}, set()),
    ("  a[0] = b['k']", {"a", "b", "b['k']"}, {"a[0]"}, set()),
    ("  a[-1] += 1", {"a", "a[-1]"}, {"a[-1]"}, set()),
    ("  a[i] = b", {"a", "b", "i"}, set(), {"a"}),
    ("  self.xs[i].h = b", {"self", "self.xs", "b", "i"}, set(), {"self.xs"}),
    ("  a += b", {"a", "b"}, {"a"}, set()),
    ("  x: int = a", {"a"}, {"x"}, set()),
    ("  x: int", set(), set(), set()),
    ("  del a, b.c", {"b"}, set(), set()),
    ("  a.append(b)", {"a", "b"}, set(), {"a"}),
    ("  self.cache.update(k=b)", {"self", "self.cache", "b"}, set(), {"self.cache"}),
    ("  y = a.sum() + self.fc(b)", {"a", "self", "b"}, {"y"}, set()),
    ("  y = [x * a for x in b if x > k]", {"a", "b", "k"}, {"y"}, set()),
    ("  y = {i: j for i, j in kw.items()}", {"kw"}, {"y"}, set()),
    ("  y = lambda t, u=b: t + a", {"a", "b"}, {"y"}, set()),
    (
        "  for i, x in enumerate(a):\n    s = s + x",
        {"enumerate", "a", "s", "x"},
        {"i", "x", "s"},
        set(),
    ),
    ("  with g(a) as (h, m):\n    h.append(b)", {"g", "a", "h", "b"}, {"h", "m"}, {"h"}),
    ("  import numpy as np, os.path", set(), {"np", "os"}, set()),
    ("  from math import sqrt as r", set(), {"r"}, set()),
    ("  def g(u, v=a):\n    w = u + b\n    return w + v", {"a", "b"}, {"g"}, set()),
    ("  class C(Base):\n    z = b", {"Base", "b"}, {"C"}, set()),
    (
        "  try:\n    x = a\n  except E as e:\n    x = e\n  finally:\n    y = x",
        {"a", "E", "e", "x"},
        {"x", "e", "y"},
        set(),
    ),
    ("  while (n := a) > 0:\n    a -= 1", {"a"}, {"n", "a"}, set()),
    (
        "  if a:\n    lst.pop()\n  else:\n    self.h = b",
        {"a", "lst", "self", "b"},
        {"self.h"},
        {"lst"},
    ),
]


@pytest.mark.parametrize("code, reads, writes, mutated", CASES)
def test_statement_scopes(code, reads, writes, mutated):
    scope = last_scope(code)
    assert scope.read == reads
    assert scope.written == writes
    assert scope.mutated == mutated


def test_del_and_modified():
    scope = last_scope("  del a, b.c")
    assert scope.deleted == {"a", "b.c"}
    assert scope.modified == {"a", "b.c"}


def test_nested_function_free_names_and_declarations():
    fn = analyzed(
        "  def g(u):\n    nonlocal acc\n    acc = acc + u + a\n    lst.append(u)\n  return g"
    )
    scope = anno.getanno(fn.body[0], S.SCOPE)
    assert scope.read == {"acc", "a", "lst"} and scope.closure_reads == {"acc", "a", "lst"}
    assert scope.written == {"g"} and scope.mutated == {"acc", "lst"}
    inner = anno.getanno(fn.body[0], S.BODY_SCOPE)
    assert inner.params == {"u"} and inner.nonlocals == {"acc"}
    assert inner.local_names == {"u"}
    body = anno.getanno(fn, S.BODY_SCOPE)
    assert body.params == {"self", "a", "b", "args", "k", "kw"}
    assert anno.getanno(fn.args, S.SCOPE).written == body.params


def test_block_scopes_of_compound_statements():
    fn = analyzed("  if a > 0:\n    x = 1\n  else:\n    y = b\n  for i in b:\n    z = i\n")
    if_node, for_node = fn.body
    assert anno.getanno(if_node, S.COND_SCOPE).read == {"a"}
    assert anno.getanno(if_node.test, S.SCOPE).read == {"a"}
    assert anno.getanno(if_node, S.BODY_SCOPE).written == {"x"}
    assert anno.getanno(if_node, S.ORELSE_SCOPE).written == {"y"}
    header = anno.getanno(for_node, S.HEADER_SCOPE)
    assert header.read == {"b"} and header.written == {"i"}
    assert activity.node_scope(for_node).read == {"b"}
    assert activity.node_scope(for_node.target).written == {"i"}
    assert anno.getanno(for_node, S.BODY_SCOPE).written == {"z"}


def test_qualified_names():
    fn = analyzed("  self.h[0].w = a['k']\n")
    target = fn.body[0].targets[0]
    qn = anno.getanno(target, anno.Basic.QN)
    assert qn == "self.h[0].w" and qn.is_composite and qn.root == "self"
    assert qn.ancestors == ("self", "self.h", "self.h[0]")
    assert qn.is_descendant_of("self.h") and not qn.is_descendant_of("self.w")
    assert QN.parse("d['k']").key == "k" and QN.parse("x[-1]").key == -1
    assert QN.parse("a.b") == "a.b" and {QN.parse("a.b")} == {"a.b"}
    with pytest.raises(ValueError):
        QN.parse("f(x)")
