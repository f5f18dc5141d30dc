"""Control-flow graphs: edges of branches, loops, jumps and try; the dataflow solver."""

import pytest

from dy2stat.dy2static import cfg, parser


def graph(code):
    return cfg.build(parser.parse_str(code).body[0])


CASES = [
    (
        "def f(x):\n  if x > 0:\n    y = 1\n  else:\n    y = 2\n  return y",
        {
            ("args", "if x > 0"),
            ("if x > 0", "y = 1"),
            ("if x > 0", "y = 2"),
            ("y = 1", "return y"),
            ("y = 2", "return y"),
            ("return y", "exit"),
        },
    ),
    (
        "def f(x):\n  if x:\n    x = 1\n  g(x)",
        {
            ("args", "if x"),
            ("if x", "x = 1"),
            ("if x", "g(x)"),
            ("x = 1", "g(x)"),
            ("g(x)", "exit"),
        },
    ),
    (
        "def f(n):\n  while n > 0:\n    if n == 3:\n      break\n    if n == 5:\n"
        "      continue\n    n -= 1\n  else:\n    n = 9\n  return n",
        {
            ("args", "while n > 0"),
            ("while n > 0", "if n == 3"),
            ("if n == 3", "break"),
            ("if n == 3", "if n == 5"),
            ("if n == 5", "continue"),
            ("if n == 5", "n -= 1"),
            ("continue", "while n > 0"),
            ("n -= 1", "while n > 0"),
            ("while n > 0", "n = 9"),
            ("n = 9", "return n"),
            ("break", "return n"),
            ("return n", "exit"),
        },
    ),
    (
        "def f(xs):\n  for x in xs:\n    if x:\n      return x\n    y = x\n  return None",
        {
            ("args", "for x in xs"),
            ("for x in xs", "x = next(xs)"),
            ("x = next(xs)", "if x"),
            ("if x", "return x"),
            ("if x", "y = x"),
            ("y = x", "for x in xs"),
            ("for x in xs", "return None"),
            ("return x", "exit"),
            ("return None", "exit"),
        },
    ),
    (
        "def f(a):\n  for i in a:\n    for j in a:\n      break\n    continue\n  return 0",
        {
            ("args", "for i in a"),
            ("for i in a", "i = next(a)"),
            ("i = next(a)", "for j in a"),
            ("for j in a", "j = next(a)"),
            ("j = next(a)", "break"),
            ("break", "continue"),
            ("for j in a", "continue"),
            ("continue", "for i in a"),
            ("for i in a", "return 0"),
            ("return 0", "exit"),
        },
    ),
    (
        "def f(a):\n  def g(b):\n    return b + a\n  with open(a) as h:\n    h.read()\n  return g",
        {
            ("args", "def g(b)"),
            ("def g(b)", "with open(a) as h"),
            ("with open(a) as h", "h.read()"),
            ("h.read()", "return g"),
            ("return g", "exit"),
        },
    ),
    (
        "def f(a):\n  try:\n    x = g(a)\n  except E as e:\n    x = 0\n  else:\n    x += 1\n"
        "  finally:\n    cleanup()\n  return x",
        {
            ("args", "x = g(a)"),
            ("args", "except E as e"),
            ("x = g(a)", "except E as e"),
            ("x = g(a)", "x += 1"),
            ("except E as e", "x = 0"),
            ("x = 0", "cleanup()"),
            ("x += 1", "cleanup()"),
            ("cleanup()", "return x"),
            ("return x", "exit"),
        },
    ),
    (
        "def f(a):\n  while a:\n    try:\n      return 1\n    finally:\n      a = 0\n  raise E",
        {
            ("args", "while a"),
            ("while a", "return 1"),
            ("return 1", "a = 0"),
            ("a = 0", "while a"),
            ("a = 0", "exit"),
            ("while a", "raise E"),
            ("raise E", "exit"),
        },
    ),
]


@pytest.mark.parametrize("code, edges", CASES)
def test_edges(code, edges):
    assert graph(code).edges() == edges


def test_index_and_dead_code():
    fn = parser.parse_str("def f(x):\n  return x\n  y = 1").body[0]
    g = cfg.build(fn)
    dead = g[fn.body[1]]
    assert dead.prev == [] and dead.next == [g.exit]
    assert g.entry.ast_node is fn.args and g.find("return x").ast_node is fn.body[0]


def test_build_all_covers_nested_functions():
    fn = parser.parse_str("def f():\n  def g():\n    return 1\n  return g").body[0]
    graphs = cfg.build_all(fn)
    assert set(graphs) == {fn, fn.body[0]}
    assert graphs[fn.body[0]].edges() == {("args", "return 1"), ("return 1", "exit")}


def test_solver_counts_paths_forward_and_backward():
    g = graph("def f(n):\n  while n:\n    n -= 1\n  return n")

    def reached(node, value):
        return value | {node.label}

    def union(values):
        return frozenset().union(*values)

    none = frozenset()
    before, _ = cfg.solve(g, reached, union, forward=True, boundary=none, empty=none)
    assert before[g.find("return n")] == {"args", "while n", "n -= 1"}
    after, _ = cfg.solve(g, reached, union, forward=False, boundary=none, empty=none)
    assert after[g.find("args")] == {"while n", "n -= 1", "return n", "exit"}
