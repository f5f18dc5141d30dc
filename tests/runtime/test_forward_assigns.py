"""``forward_assigns``: a copy of a value nothing else reads becomes the value."""

from dy2stat.runtime.ir import Operator
from dy2stat.runtime.passes import forward_assigns
from tests.runtime.test_fusion import _program, add, randn
from tests.runtime.test_passes import check, corpus, types


def _assign(block, source, target):
    block.append_op(Operator("assign", {"X": [source]}, {"Out": [target]}, {}))


def test_a_copy_into_a_parameter_becomes_the_update():
    p, g, v = _program(x=((3,), "float32"))
    w = g.create_var((3,), "float32", name="w", persistable=True)
    new = add(g, "subtract", w, add(g, "multiply", v["x"], v["x"]))
    _assign(g, new.name, "w")
    out = add(g, "add", w, w)  # reads the updated parameter
    result = check(forward_assigns, p, [out.name], [{"x": randn(3)}], {"w": randn(3)})
    assert types(result) == ["multiply", "subtract", "add"]
    assert result.global_block().ops[1].outputs["Out"] == ["w"]


def test_a_read_of_the_target_in_between_keeps_the_copy():
    p, g, v = _program(x=((3,), "float32"))
    w = g.create_var((3,), "float32", name="w", persistable=True)
    new = add(g, "multiply", v["x"], v["x"])
    old = add(g, "add", w, v["x"])  # the parameter before the write
    _assign(g, new.name, "w")
    out = add(g, "add", old, w)
    result = check(forward_assigns, p, [out.name], [{"x": randn(3)}], {"w": randn(3)})
    assert "assign" in types(result)


def test_a_value_read_twice_or_kept_is_copied():
    p, g, v = _program(x=((3,), "float32"))
    t = add(g, "exp", v["x"])
    c = g.create_var((3,), "float32", name="c")
    _assign(g, t.name, "c")
    twice = add(g, "add", t, c)
    check(forward_assigns, p, [twice.name], [{"x": randn(3)}])
    assert "assign" in types(forward_assigns(p, [twice.name]))
    p, g, v = _program(x=((3,), "float32"))
    t = add(g, "exp", v["x"])
    g.create_var((3,), "float32", name="c")
    _assign(g, t.name, "c")
    assert "assign" in types(forward_assigns(p, [t.name, "c"]))  # t is fetched
    assert "assign" not in types(forward_assigns(p, ["c"]))


def test_the_corpus_keeps_its_results_and_loses_copies():
    dropped = 0
    for prog in corpus():
        out = check(forward_assigns, prog.program, prog.fetch, prog.feeds, prog.params)
        dropped += sum(len(b.ops) for b in prog.program.blocks) - sum(
            len(b.ops) for b in out.blocks)
    assert dropped > 0
