"""Constant folding and common-subexpression elimination (``runtime/passes``).

Every pass runs on hand-built programs, static-frontend programs and the
corpus of ``test_fusion`` (with control flow, with and without backward): the
input is unchanged, the result passes ``verify`` and the executor gives the
same bytes before and after.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import serialize
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.passes import (
    PASSES,
    eliminate_common_subexpressions,
    fold_constants,
    run_passes,
)
from dy2stat.runtime.verify import verify
from dy2stat.static import framework
from tests.runtime.test_fusion import COMPOSITE, _program, add, control_flow_programs, randn, run

pytestmark = pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")


def check(pass_fn, program, fetch, feeds, params=None, keep=None) -> Program:
    """Run the pass; verify; identical results for every feed; return the new program."""
    before = str(program)
    out = pass_fn(program, fetch if keep is None else keep)
    assert str(program) == before, "the pass changed its input"
    verify(out)
    for feed in feeds:
        want = run(program, feed, fetch, dict(params or {}))
        got = run(out, feed, fetch, dict(params or {}))
        for name, g, w in zip(fetch, got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), name
            assert g.tobytes() == w.tobytes(), f"{name}: {g} != {w}"
    return out


def types(program, block=0):
    return [op.type for op in program.blocks[block].ops]


def raw(block, type_, inputs, attrs, like, name=None, **flags):
    """Append an op as written (attrs not filled in), its output shaped like ``like``."""
    var = block.var(like)
    name = name or block.program.unique_name(type_)
    if name not in block.vars:
        block.create_var(var.shape, var.dtype, name=name, **flags)
    block.append_op(Operator(type_, inputs, {"Out": [name]}, attrs))
    return name


def cond(p, g, pred, inputs, true_fn, false_fn, like):
    """``cond`` over two branch builders (block -> name); returns the output name."""
    tb, fb = p.create_block(g.idx), p.create_block(g.idx)
    t, f = true_fn(tb), false_fn(fb)
    out = g.create_var(g.var(like).shape, g.var(like).dtype, name=p.unique_name("cond")).name
    g.append_op(Operator("cond", {"Cond": [pred], "Input": inputs}, {"Out": [out]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t], "false_outs": [f]}))
    return out


def loop(p, g, xs, inputs, cond_fn, body_fn):
    """``while`` carrying ``xs``; the builders get (block, arg names); returns the outs."""
    cb, bb = p.create_block(g.idx), p.create_block(g.idx)
    cargs = [cb.create_var(g.var(x).shape, g.var(x).dtype).name for x in xs]
    bargs = [bb.create_var(g.var(x).shape, g.var(x).dtype).name for x in xs]
    c, body = cond_fn(cb, cargs), body_fn(bb, bargs)
    outs = [g.create_var(g.var(x).shape, g.var(x).dtype).name for x in xs]
    g.append_op(Operator("while", {"X": xs, "Input": inputs}, {"Out": outs, "Carries": []},
                         {"cond_block": cb.idx, "body_block": bb.idx, "cond_args": cargs,
                          "cond_out": c, "body_args": bargs, "body_outs": body}))
    return outs


def full(block, value, shape=(3,), dtype="float32"):
    return add(block, "full", shape=list(shape), value=value, dtype=dtype)


# ------------------------------------------------------------ constant folding


def test_folding_turns_constant_arithmetic_into_one_full():
    p, g, v = _program(x=((3,), "float32"))
    b = add(g, "scale", add(g, "add", full(g, 2.0), 1.0), scale=3.0)
    y = add(g, "multiply", v["x"], b)
    out = check(fold_constants, p, [y.name], [{"x": randn(3)}])
    assert types(p) == ["full", "full", "add", "scale", "multiply"]
    assert types(out) == ["full", "multiply"]
    op = out.global_block().ops[0]
    assert op.outputs == {"Out": [b.name]}
    assert op.attrs == {"shape": [3], "value": 9.0, "dtype": "float32"}


def test_values_that_are_not_uniform_keep_their_op_but_feed_folding():
    p, g, v = _program(x=((3,), "float32"))
    total = add(g, "sum", add(g, "scale", add(g, "arange", end=4, dtype="float32"), scale=2.0))
    ramp = add(g, "linspace", start=0.0, stop=1.0, num=3)  # read by an op on x: stays
    m = add(g, "matmul", add(g, "eye", num_rows=3), full(g, 2.0, (3, 3)))  # all 2.0
    y = add(g, "add", add(g, "multiply", v["x"], ramp), add(g, "matmul", m, v["x"]))
    y = add(g, "add", y, total)
    out = check(fold_constants, p, [y.name], [{"x": randn(3)}])
    assert len(types(p)) == 11
    assert types(out) == ["full", "linspace", "full", "multiply", "matmul", "add", "add"]
    assert out.global_block().ops[0].attrs["value"] == 12.0


def test_folding_leaves_random_ops_effects_and_persistable_writes():
    p, g, v = _program(x=((3,), "float32"))
    g.create_var((3,), "float32", name="state", persistable=True)
    noisy = add(g, "scale", add(g, "uniform", shape=[3], seed=7), scale=2.0)
    g.append_op(Operator("scale", {"X": [full(g, 1.0).name]}, {"Out": ["state"]},
                         {"scale": 2.0, "bias": 0.0}))
    from_state = add(g, "neg", g.var("state"))
    ok = add(g, "less_than", full(g, 0.0, ()), 1.0)
    g.append_op(Operator("assert", {"Cond": [ok.name]}, {}, {"message": "folded away?"}))
    fetch = [noisy.name, from_state.name]
    out = check(fold_constants, p, fetch, [{"x": randn(3)}], {"state": randn(3)})
    assert types(out) == ["uniform", "scale", "full", "scale", "neg", "full", "assert"]
    assert types(p)[-1] == "assert"


def test_kept_names_and_names_control_flow_reads_stay():
    p, g, v = _program(x=((3,), "float32"), pred=((), "bool"), n=((), "int64"))
    a = full(g, 1.0)
    c = add(g, "add", a, 2.0)
    d = add(g, "exp", full(g, 0.0))  # only named by false_outs and Input
    y = cond(p, g, "pred", ["x", c.name, d.name],
             lambda b: add(b, "multiply", v["x"], add(b, "scale", c, scale=2.0)).name,
             lambda b: d.name, "x")
    k = add(g, "cast", full(g, 2.0, ()), dtype="int64")
    (i,) = loop(p, g, [full(g, 0, (), "int64").name], ["n", k.name],
                lambda b, a_: add(b, "less_than", b.var(a_[0]), v["n"]).name,
                lambda b, a_: [add(b, "add", b.var(a_[0]), add(b, "multiply", k, 3)).name])
    feeds = [{"x": randn(3), "pred": np.array(t), "n": np.array(7)} for t in (True, False)]
    out = check(fold_constants, p, [y, i], feeds, keep=[y, i, a.name])
    assert types(out).count("full") == 5  # a (kept), c, d, k, the loop's start
    assert a.name in out.global_block().vars
    assert types(out, 1) == ["full", "multiply"]  # scale(c) folded inside the branch
    assert types(out, 4) == ["full", "add"]  # k * 3 folded inside the loop body


@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")
def test_edge_values_fold_bit_for_bit_and_save():
    p, g, _ = _program()
    zero = full(g, 0.0, (2,))
    inf = add(g, "divide", full(g, 1.0, (2,)), zero)
    fetch = [add(g, "neg", zero).name, inf.name, add(g, "subtract", inf, inf).name,
             add(g, "add", full(g, 2**62, (), "int64"), 1).name,
             add(g, "less_than", zero, inf).name, add(g, "concat", [zero, zero]).name]
    out = check(fold_constants, p, fetch, [{}])
    # -0.0 folds too: the executor keeps its sign (a -0.0 attr is not the default 0.0).
    assert types(out) == ["full", "full", "full", "full", "full", "full"]
    assert np.signbit(run(out, {}, fetch, {})[0]).all()
    values = {op.output_names()[0]: op.attrs.get("value") for op in out.global_block().ops}
    assert values[fetch[1]] == np.inf and np.isnan(values[fetch[2]])
    assert values[fetch[3]] == 2**62 + 1
    text = serialize.program_to_json(out, [], fetch)
    loaded, _, _ = serialize.program_from_json(text)
    assert str(loaded) == str(out)
    for got, want in zip(run(loaded, {}, fetch, {}), run(p, {}, fetch, {})):
        np.testing.assert_array_equal(got, want)  # JSON keeps no NaN sign: equal, not bitwise


def test_folding_a_static_frontend_program():
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        x = d2s.static.data("x", [3], "float32")
        c = d2s.ones([3]) * 2.0 + d2s.arange(3, dtype="float32").sum()
        y = x * c
    out = check(fold_constants, main, [y.name], [{"x": randn(3)}])
    assert len(types(out)) == 2 < len(types(main))


# ------------------------------------------------------------------------ CSE


def test_repeated_ops_merge_and_so_do_the_ops_that_read_them():
    p, g, v = _program(x=((-1, 3), "float32"))
    y = add(g, "add", add(g, "tanh", add(g, "exp", v["x"])),
            add(g, "tanh", add(g, "exp", v["x"])))
    s1 = add(g, "scale", v["x"], scale=2.0)  # every attr filled in
    s2 = raw(g, "scale", {"X": ["x"]}, {"scale": 2.0}, like="x")  # defaults left out
    s3 = add(g, "scale", v["x"], scale=3.0)
    z = add(g, "add", add(g, "add", s1, g.var(s2)), s3)
    out = check(eliminate_common_subexpressions, p, [y.name, z.name], [{"x": randn(2, 3)}])
    assert len(types(p)) == 10
    assert types(out) == ["exp", "tanh", "add", "scale", "scale", "add", "add"]
    ops = out.global_block().ops
    (t,) = ops[1].output_names()
    assert ops[2].inputs == {"X": [t], "Y": [t]}


def test_cse_leaves_random_ops_effects_and_persistable_state():
    p, g, v = _program(x=((3,), "float32"))
    g.create_var((3,), "float32", name="w", persistable=True)
    u1, u2 = (add(g, "uniform", shape=[3], seed=5) for _ in range(2))
    for _ in range(2):
        g.append_op(Operator("print", {"X": ["x"]}, {}, {"texts": [None]}))
    before = add(g, "exp", g.var("w"))
    raw(g, "scale", {"X": ["x"]}, {"scale": 2.0}, like="x", name="w")  # w changes here
    after = add(g, "exp", g.var("w"))
    again = add(g, "exp", g.var("w"))  # same w as `after`: merged
    raw(g, "scale", {"X": ["x"]}, {"scale": 2.0}, like="x", name="w")  # written twice: kept
    fetch = [u1.name, u2.name, before.name, after.name]
    out = check(eliminate_common_subexpressions, p, fetch, [{"x": randn(3)}], {"w": randn(3)})
    assert again.name not in out.global_block().vars
    assert types(out) == ["uniform", "uniform", "print", "print", "exp", "scale", "exp",
                          "scale"]


def test_a_kept_duplicate_becomes_an_assign():
    p, g, v = _program(x=((3,), "float32"))
    a, b = add(g, "exp", v["x"]), add(g, "exp", v["x"])
    y = add(g, "add", a, b)
    out = check(eliminate_common_subexpressions, p, [b.name, y.name], [{"x": randn(3)}])
    assert types(out) == ["exp", "assign", "add"]
    assert out.global_block().ops[1].inputs == {"X": [a.name]}
    assert out.global_block().ops[2].inputs == {"X": [a.name], "Y": [a.name]}


def test_cse_renames_into_sub_blocks_and_control_flow_attrs_but_never_merges_across():
    p, g, v = _program(x=((3,), "float32"), pred=((), "bool"), n=((), "int64"))
    a, b = add(g, "exp", v["x"]), add(g, "exp", v["x"])
    y = cond(p, g, "pred", ["x", a.name, b.name],
             lambda blk: add(blk, "multiply", b, add(blk, "exp", v["x"])).name,
             lambda blk: b.name, "x")
    start = full(g, 0, (), "int64")

    def body(blk, args):
        i, _, h, _ = (blk.var(n) for n in args)
        return [add(blk, "add", i, 1).name, add(blk, "add", i, 1).name,
                add(blk, "tanh", add(blk, "add", h, b)).name,
                add(blk, "tanh", add(blk, "add", h, b)).name]

    outs = loop(p, g, [start.name, start.name, b.name, a.name], ["n", b.name],
                lambda blk, args: add(blk, "less_than", blk.var(args[0]), v["n"]).name, body)
    fetch = [y, *outs]
    feeds = [{"x": randn(3), "pred": np.array(t), "n": np.array(3)} for t in (True, False)]
    out = check(eliminate_common_subexpressions, p, fetch, feeds)
    glob = out.global_block()
    assert types(out) == ["exp", "cond", "full", "while"]
    cond_op, while_op = glob.ops[1], glob.ops[3]
    assert cond_op.inputs["Input"] == ["x", a.name]
    assert cond_op.attrs["false_outs"] == [a.name]
    assert types(out, 1) == ["exp", "multiply"]  # not merged with the outer exp
    assert out.blocks[1].ops[1].inputs["X"] == [a.name]
    assert while_op.inputs == {"X": [start.name, start.name, a.name, a.name],
                               "Input": ["n", a.name]}
    assert types(out, 4) == ["full", "add", "add", "tanh"]
    assert len(set(while_op.attrs["body_outs"])) == 2


def test_cse_on_a_static_frontend_program_with_cond():
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        x = d2s.static.data("x", [3], "float32")
        pred = d2s.static.data("pred", [], "bool")
        y = (x * 2.0 + 1.0) + (x * 2.0 + 1.0)
        z = d2s.static.nn.cond(pred, lambda: d2s.exp(x) * d2s.exp(x), lambda: x - y)
    fetch = [y.name, z.name]
    feeds = [{"x": randn(3), "pred": np.array(t)} for t in (True, False)]
    out = check(eliminate_common_subexpressions, main, fetch, feeds)
    assert len(types(main)) == 10 and len(types(out)) == 6
    assert len(types(main, 1)) == 3 and types(out, 1) == ["exp", "multiply"]


def test_cse_in_a_loop_body_with_backward_renames_the_saved_values():
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        x = d2s.static.data("x", [3], "float32")
        n = d2s.static.data("n", [], "int64")
        _, h = d2s.static.nn.while_loop(lambda i, h: i < n,
                                        lambda i, h: (i + 1, d2s.tanh(h) * d2s.tanh(h) + h),
                                        [d2s.zeros([], "int64"), x])
        loss = h.sum()
        (gx,) = d2s.static.gradients([loss], [x])
    feeds = [{"x": randn(3), "n": np.array(k)} for k in (0, 3)]
    out = check(eliminate_common_subexpressions, main, [loss.name, gx.name], feeds)
    saved = [op.attrs["saved"] for op in main.all_ops() if op.type in ("while", "while_grad")]
    assert saved[0] == saved[1] and len(saved[0]) == 2  # both tanh values
    saved = [op.attrs["saved"] for op in out.all_ops() if op.type in ("while", "while_grad")]
    assert saved[0] == saved[1] and len(saved[0]) == 1  # one tanh, saved once


# ------------------------------------------------------------ corpus, registry


@functools.cache
def corpus():
    return ([make() for make in COMPOSITE] + control_flow_programs()
            + control_flow_programs(grads=True))


def _op_count(program):
    return sum(len(b.ops) for b in program.blocks)


@pytest.mark.parametrize("names", [["fold_constants"], ["eliminate_common_subexpressions"],
                                   list(PASSES)], ids=["fold", "cse", "all"])
def test_the_corpus_keeps_its_results(names):
    progs = corpus()
    assert len(progs) >= 200
    dropped = 0
    for prog in progs:
        out = check(lambda p, keep: run_passes(p, names, keep), prog.program, prog.fetch,
                    prog.feeds, prog.params)
        dropped += _op_count(prog.program) - _op_count(out)
    assert dropped >= (0 if names == ["fold_constants"] else 100)


def test_passes_are_registered_idempotent_and_check_keep():
    assert PASSES["fold_constants"] is fold_constants
    assert PASSES["eliminate_common_subexpressions"] is eliminate_common_subexpressions
    for prog in corpus()[:20]:
        for fn in (fold_constants, eliminate_common_subexpressions):
            once = fn(prog.program, prog.fetch)
            assert str(fn(once, prog.fetch)) == str(once)
    p, g, v = _program(x=((3,), "float32"))
    for fn in (fold_constants, eliminate_common_subexpressions):
        with pytest.raises(ValueError, match="'nope' \\(in keep\\) is not a variable"):
            fn(p, ["nope"])
