"""What every plan compiles: the plan passes (``passes.optimize``) and the code
generator's own folding (plan constants, loop counters, reductions, predicates).

Each pass of the pipeline runs alone on the corpus (with and without backward):
the input is unchanged, the verifier accepts the result after every pass, and
the unoptimized plan gives the same bytes. Then the generated code is checked
for what the passes are for: no constant rebuilt per call or per iteration, no
invariant recomputed per iteration, Python-int loop counters.
"""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import build, executor
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.passes import (
    PASSES,
    eliminate_dead_code,
    hoist_loop_invariants,
    optimize,
)
from dy2stat.runtime.passes.pipeline import PLAN_PASSES
from dy2stat.runtime.registry import OPS
from dy2stat.runtime.verify import verify
from dy2stat.static import framework
from tests.runtime.test_passes import check, corpus, loop, raw

pytestmark = pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")


def add(block, type, *inputs, **attrs):
    """Append an op with inferred outputs; inputs are variables or their names."""
    return build.append(block, type, [block.var(x) if isinstance(x, str) else x
                                      for x in inputs], attrs)


def run(program, feed, fetch, params=None, optimize=True):
    plan = executor.compile(program, list(feed), fetch, optimize=optimize)
    return plan, plan.run(feed, Scope(dict(params or {})))


def same(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape, g.tobytes()) == (w.dtype, w.shape, w.tobytes())


def static_program(build_fn, *feeds):
    """A static-frontend program: ``build_fn(*data vars)`` returns the fetched values."""
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        args = [d2s.static.data(name, shape, dtype) for name, shape, dtype in feeds]
        outs = build_fn(*args)
    return main, [v.name for v in outs]


def counting_loop(x, extra=lambda i, h: h):
    """``i = 0; while h.sum() < 1000 and i < 100: h = h * 1.5 + 1 (extra); i += 1``."""
    def body(i, h):
        return i + 1, extra(i, h * 1.5 + 1.0)

    i, h = d2s.static.nn.while_loop(lambda i, h: d2s.logical_and(h.sum() < 1000.0, i < 100),
                                    body, [d2s.zeros([], "int64"), x])
    return i, h


# ------------------------------------------------------------ the pipeline


def test_each_plan_pass_keeps_the_corpus_results_and_verifies():
    """(The corpus with every pass at once: ``test_passes``; here each in turn,
    on the programs with sub-blocks, where these passes have most to do.)"""
    progs = [p for p in corpus() if len(p.program.blocks) > 1]
    assert len(progs) >= 60
    for prog in progs[::3]:
        program = prog.program
        for run_pass in PLAN_PASSES:
            program = check(run_pass, program, prog.fetch, prog.feeds, prog.params)
        assert str(optimize(prog.program, prog.fetch)) == str(program)


def test_the_new_passes_are_registered_and_idempotent():
    assert PASSES["eliminate_dead_code"] is eliminate_dead_code
    assert PASSES["hoist_loop_invariants"] is hoist_loop_invariants
    for prog in corpus()[:40]:
        once = optimize(prog.program, prog.fetch)
        assert str(optimize(once, prog.fetch)) == str(once)


def test_plans_run_the_optimized_program_and_keep_the_original():
    main, fetch = static_program(lambda x: counting_loop(x), ("x", [4], "float32"))
    plan = executor.compile(main, ["x"], fetch)
    assert plan.program is main and plan.compiled is not main
    assert len(plan.compiled.global_block().ops) < len(main.global_block().ops) + 10
    x = np.arange(4, dtype="float32")
    _, want = run(main, {"x": x}, fetch, optimize=False)
    same(plan.run({"x": x}, Scope()), want)


# ------------------------------------------------------------ dead code


def test_dead_code_goes_in_sub_blocks_and_effects_stay():
    p = Program()
    g = p.global_block()
    g.create_var((3,), "float32", name="x", is_data=True)
    n = g.create_var((), "int64", name="n", is_data=True).name
    i0 = add(g, "full", shape=[], value=0, dtype="int64").name

    def cond_fn(b, args):
        return add(b, "less_than", args[0], n).name

    def body_fn(b, args):
        i, h = args
        add(b, "exp", h)  # dead
        add(b, "tanh", add(b, "exp", h))  # dead chain
        b.append_op(Operator("print", {"X": [h]}, {}, {"texts": ["h"]}))  # an effect
        one = add(b, "full", shape=[], value=1, dtype="int64").name
        return [add(b, "add", i, one).name, add(b, "scale", h, scale=2.0).name]

    outs = loop(p, g, [i0, "x"], [n], cond_fn, body_fn)
    out = check(eliminate_dead_code, p, [outs[1]],
                [{"x": np.ones(3, "float32"), "n": np.array(k)} for k in (0, 2)])
    body = out.blocks[out.global_block().ops[-1].attrs["body_block"]]
    assert [op.type for op in body.ops] == ["print", "full", "add", "scale"]


# ------------------------------------------------------------ loop invariants


def test_invariant_ops_leave_the_loop_and_results_stay():
    def build_fn(x, w):
        def body(i, h):
            scale = d2s.exp(w) * 2.0  # invariant: w is read, never written, in the loop
            return i + 1, h * scale + d2s.full([4], 0.5)

        return d2s.static.nn.while_loop(lambda i, h: i < 3, body,
                                        [d2s.zeros([], "int64"), x])

    main, fetch = static_program(build_fn, ("x", [4], "float32"), ("w", [4], "float32"))
    feeds = [{"x": np.arange(4, dtype="float32"), "w": np.full(4, -0.5, "float32")}]
    out = check(hoist_loop_invariants, main, fetch, feeds)
    g = out.global_block()
    (loop_op,) = [op for op in g.ops if op.type == "while"]
    body = out.blocks[loop_op.attrs["body_block"]]
    assert [op.type for op in body.ops] == ["add", "multiply", "add"]
    hoisted = [op.type for op in g.ops[:g.ops.index(loop_op)]]
    assert hoisted.count("exp") == 1 and hoisted.count("full") >= 3
    assert set(loop_op.inputs["Input"]) >= {op.output_names()[0] for op in g.ops
                                            if op.type in ("scale", "multiply")}


def test_ops_on_loop_state_in_branches_or_with_effects_stay_in_the_loop():
    p = Program()
    g = p.global_block()
    g.create_var((3,), "float32", name="x", is_data=True)
    g.create_var((3,), "float32", name="w", persistable=True)
    n = g.create_var((), "int64", name="n", is_data=True).name
    i0 = add(g, "full", shape=[], value=0, dtype="int64").name

    def cond_fn(b, args):
        return add(b, "less_than", args[0], n).name

    def body_fn(b, args):
        i, h = args
        raw(b, "scale", {"X": ["w"]}, {"scale": 0.5}, "w", name="w")  # writes w each time
        wx = add(b, "multiply", "w", "x")  # reads the w the loop writes: stays
        noise = add(b, "uniform", shape=[3], dtype="float32")  # random: stays
        one = add(b, "full", shape=[], value=1, dtype="int64").name
        return [add(b, "add", i, one).name, add(b, "add", add(b, "add", h, wx), noise).name]

    outs = loop(p, g, [i0, "x"], [n, "w"], cond_fn, body_fn)
    out = hoist_loop_invariants(p, outs)
    verify(out)
    body = out.blocks[out.global_block().ops[-1].attrs["body_block"]]
    assert [op.type for op in body.ops] == ["scale", "multiply", "uniform", "add", "add", "add"]
    feeds = {"x": np.ones(3, "float32"), "n": np.array(3)}
    d2s.seed(1)
    _, want = run(p, feeds, outs, {"w": np.full(3, 2.0, "float32")}, optimize=False)
    d2s.seed(1)
    _, got = run(out, feeds, outs, {"w": np.full(3, 2.0, "float32")}, optimize=False)
    same(got, want)


def test_a_loop_a_while_grad_differentiates_is_left_alone():
    def build_fn(x, w):
        _, h = d2s.static.nn.while_loop(lambda i, h: i < 3,
                                        lambda i, h: (i + 1, h * d2s.exp(w)),
                                        [d2s.zeros([], "int64"), x])
        loss = h.sum()
        return [loss, *d2s.static.gradients([loss], [x])]

    main, fetch = static_program(build_fn, ("x", [4], "float32"), ("w", [4], "float32"))
    out = hoist_loop_invariants(main, fetch)
    assert str(out) == str(main)


# ------------------------------------------------------------ the generated code


def _functions(source):
    """name -> lines of each generated function."""
    functions, name = {}, None
    for line in source.splitlines():
        if line.startswith("def "):
            name = line[4:line.index("(")]
            functions[name] = []
        elif name:
            functions[name].append(line)
    return functions


def test_constants_are_plan_constants_never_rebuilt():
    """The second seed's W2 loop: no constant made per call or per iteration."""
    main, fetch = static_program(lambda x: counting_loop(x), ("x", [16], "float32"))
    plan, got = run(main, {"x": np.ones(16, "float32")}, fetch)
    _, want = run(main, {"x": np.ones(16, "float32")}, fetch, optimize=False)
    same(got, want)
    for name, lines in _functions(plan.source).items():
        code = [line for line in lines if not line.strip().startswith("#")]
        assert not any(" = k" in line and "(xp)" in line for line in code), name
    assert plan.source.count("(a plan constant") >= 4
    # a fetched constant is the caller's to change: a copy
    p = Program()
    c = add(p.global_block(), "full", shape=[3], value=2.0, dtype="float32")
    cplan = executor.compile(p, [], [c.name])
    first = cplan.run({}, Scope())[0]
    first += 1
    np.testing.assert_array_equal(cplan.run({}, Scope())[0], np.full(3, 2.0, "float32"))


def test_constants_in_a_scope_store_are_copies():
    p = Program()
    g = p.global_block()
    g.create_var((3,), "float32", name="w", persistable=True)
    c = add(g, "full", shape=[3], value=2.0, dtype="float32")
    raw(g, "reshape", {"X": [c.name]}, {"shape": [3]}, "w", name="w")
    plan = executor.compile(p, [], [])
    scope = Scope({"w": np.zeros(3, "float32")})
    plan.run({}, scope)
    scope["w"] += 1  # as an in-place optimizer update would
    plan.run({}, scope)
    np.testing.assert_array_equal(scope["w"], np.full(3, 2.0, "float32"))


def test_a_python_int_counter_stays_a_python_int():
    main, fetch = static_program(lambda x: counting_loop(x), ("x", [16], "float32"))
    plan, got = run(main, {"x": np.ones(16, "float32")}, fetch)
    code = "\n".join(plan.source.splitlines())
    assert " < c" in code and " + c" in code  # comparisons and steps on Python ints
    assert isinstance(got[0], np.ndarray) and got[0].dtype == np.int64 and got[0].shape == ()
    _, want = run(main, {"x": np.ones(16, "float32")}, fetch, optimize=False)
    same(got, want)


@pytest.mark.parametrize("use", ["cast", "fed", "carried out"])
def test_a_counter_used_otherwise_stays_an_array(use):
    def build_fn(x, n):
        start = n if use == "fed" else d2s.zeros([], "int64")

        def body(i, h):
            h = h * 1.5 + 1.0
            if use == "cast":
                h = h + i.astype("float32")
            return i + 1, h

        return d2s.static.nn.while_loop(lambda i, h: i < 5, body, [start, x])

    main, fetch = static_program(build_fn, ("x", [3], "float32"), ("n", [], "int64"))
    feed = {"x": np.ones(3, "float32"), "n": np.array(1)}
    plan, got = run(main, feed, fetch)
    _, want = run(main, feed, fetch, optimize=False)
    same(got, want)
    counted = " + c" in plan.source
    assert counted == (use == "carried out")


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reductions_run_as_one_ufunc_reduce_with_the_kernels_bits(op):
    rng = np.random.default_rng(0)
    fast = 0
    for dtype in ["float32", "float64", "int64", "int32", "bool", "float16"]:
        for shape in [(), (5,), (3, 4), (2, 3, 17), (1, 130), (-1, 7)]:
            for axis in [None, 0, -1, [0, 1]]:
                for keepdim in (False, True):
                    p = Program()
                    g = p.global_block()
                    g.create_var(shape, dtype, name="x", is_data=True)
                    try:
                        out = add(g, op, "x", axis=axis, keepdim=keepdim).name
                    except (ValueError, TypeError):
                        continue  # a dtype or an axis the op refuses
                    concrete = [9 if d == -1 else d for d in shape]
                    x = (rng.standard_normal(concrete) * 100).astype(dtype)
                    try:
                        want = OPS[op].kernel(np, x, axis=axis, keepdim=keepdim)
                    except np.exceptions.AxisError:
                        with pytest.raises(np.exceptions.AxisError):
                            run(p, {"x": x}, [out])
                        continue
                    plan, (got,) = run(p, {"x": x}, [out])
                    got = np.asarray(got)
                    assert (got.dtype, got.shape, got.tobytes()) == (
                        want.dtype, want.shape, want.tobytes()), (dtype, shape, axis)
                    fast += ".reduce(" in plan.source
    assert fast >= 40


def test_a_one_element_predicate_is_read_as_it_is():
    main, fetch = static_program(
        lambda x: [d2s.static.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)],
        ("x", [3], "float32"))
    plan, _ = run(main, {"x": np.ones(3, "float32")}, fetch)
    assert "_pred(" not in plan.source
