"""The elementwise fusion pass (``runtime/passes/fusion.py``) and ``fused_elementwise``.

Every program of the corpus (composite chains built here, the elementwise op
table of ``tests/ops/cases_math.py``, the shared control-flow corpus of
``tests/dy2static/corpus.py`` with and without backward) is run before and
after the pass through the executor: the results must be identical, and the
fused program must pass ``verify``.

``corpus()`` is also what ``tests/kernels/test_fusion_codegen.py`` compiles
with nvcc.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dispatch import apply
from dy2stat.dy2static.convert import convert_to_static
from dy2stat.kernels import fusion
from dy2stat.runtime import backward, build, executor, serialize
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.passes import PASSES, fuse_elementwise, run_passes
from dy2stat.runtime.registry import OPS
from dy2stat.runtime.verify import VerifyError, verify
from dy2stat.static import framework, nest
from dy2stat.static.builder import captured_tensors
from dy2stat.static.variable import Variable
from tests.dy2static.corpus import CASES as CF_CASES
from tests.ops.cases_math import CASES as MATH_CASES

RNG = np.random.default_rng(0)
FUSED = "fused_elementwise"

# print() of a static tensor warns that the runtime has no print op (yet).
pytestmark = pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")


@dataclasses.dataclass
class Prog:
    """A program with what it takes to run it."""

    name: str
    program: Program
    feeds: list  # one or more feed dicts (name -> array)
    fetch: list
    params: dict = dataclasses.field(default_factory=dict)
    min_fused: int = 0  # at least this many fused ops after the pass


def add(block, type, *inputs, **attrs):
    return build.append(block, type, list(inputs), attrs)


def run(program, feed, fetch, params):
    """The program's results as it is (the plan passes off: each pass is checked alone)."""
    plan = executor.compile(program, list(feed), fetch, optimize=False)
    return plan.run(feed, Scope(dict(params)))


def fused_ops(program):
    return [(block.idx, op) for block in program.blocks for op in block.ops if op.type == FUSED]


def check(prog: Prog) -> Program:
    """Fuse; verify; every feed gives identical results before and after."""
    before = str(prog.program)
    fused = fuse_elementwise(prog.program, prog.fetch)
    assert str(prog.program) == before, "the pass changed its input"
    verify(fused)
    assert len(fused_ops(fused)) >= prog.min_fused, f"{prog.name}:\n{fused}"
    for feed in prog.feeds:
        expected = run(prog.program, feed, prog.fetch, prog.params)
        got = run(fused, feed, prog.fetch, prog.params)
        for name, g, e in zip(prog.fetch, got, expected):
            g, e = np.asarray(g), np.asarray(e)
            assert g.dtype == e.dtype and g.shape == e.shape, (prog.name, name)
            np.testing.assert_array_equal(g, e, err_msg=f"{prog.name}: {name}")
    return fused


# ------------------------------------------------------------- composite


def _program(**data):
    """A program with data variables ``name=(shape, dtype)``; returns (program, block, vars)."""
    p = Program()
    g = p.global_block()
    vs = {n: g.create_var(shape, dtype, name=n, is_data=True) for n, (shape, dtype) in data.items()}
    return p, g, vs


def randn(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def mlp(layers=3, width=8):
    p, g, v = _program(x=((-1, width), "float32"))
    h, params = v["x"], {}
    for i in range(layers):
        w = g.create_var((width, width), "float32", name=f"fc_{i}.w", persistable=True)
        b = g.create_var((width,), "float32", name=f"fc_{i}.b", persistable=True)
        params[w.name], params[b.name] = randn(width, width), randn(width)
        h = add(g, "relu", add(g, "add", add(g, "matmul", h, w), b))
    return Prog("mlp_bias_relu", p, [{"x": randn(5, width)}, {"x": randn(1, width)}],
                [h.name], params, min_fused=layers)


def gelu(g, x):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))"""
    inner = add(g, "multiply", add(g, "add", x, add(g, "multiply", add(g, "pow", x, 3.0),
                                                       0.044715)), 0.7978845608)
    return add(g, "multiply", add(g, "multiply", x, 0.5), add(g, "add", add(g, "tanh", inner), 1.0))


def gelu_prog():
    p, g, v = _program(x=((-1, 6), "float32"))
    y = gelu(g, v["x"])
    return Prog("gelu", p, [{"x": randn(4, 6)}], [y.name], min_fused=1)


def swish():
    p, g, v = _program(x=((-1, 5), "float64"))
    y = add(g, "multiply", v["x"], add(g, "sigmoid", v["x"]))
    return Prog("swish", p, [{"x": randn(3, 5, dtype="float64")}], [y.name], min_fused=1)


def broadcasting():
    p, g, v = _program(x=((-1, 4), "float32"), y=((4,), "float32"), z=((-1, 1), "float32"),
                       s=((), "float32"))
    h = add(g, "add", add(g, "multiply", v["x"], v["y"]), v["z"])
    h = add(g, "divide", add(g, "maximum", h, v["s"]), add(g, "exp", v["y"]))
    feeds = [{"x": randn(3, 4), "y": randn(4), "z": randn(3, 1), "s": np.float32(0.25)},
             {"x": randn(1, 4), "y": randn(4), "z": randn(5, 1), "s": np.float32(-1.0)}]
    return Prog("broadcasting", p, feeds, [h.name], min_fused=1)


def scalars_and_casts():
    p, g, v = _program(i=((-1,), "int64"), f=((-1,), "float32"))
    h = add(g, "add", v["i"], 0.5)  # int + float scalar -> float32 (a cast op)
    h = add(g, "scale", add(g, "multiply", h, v["f"]), scale=2.0, bias=1.0)
    k = add(g, "cast", add(g, "floor", h), dtype="int32")
    k = add(g, "remainder", add(g, "floor_divide", k, 3), 5)
    out = add(g, "add", add(g, "cast", k, dtype="float64"), 1)
    feeds = [{"i": np.arange(-4, 4), "f": randn(8)}, {"i": np.array([7]), "f": randn(3)}]
    return Prog("scalars_and_casts", p, feeds, [out.name], min_fused=1)


def booleans():
    p, g, v = _program(x=((-1, 3), "float32"), y=((3,), "float32"))
    m = add(g, "logical_and", add(g, "greater_than", v["x"], 0.0),
            add(g, "less_than", v["y"], 0.5))
    m = add(g, "logical_xor", add(g, "logical_not", m), add(g, "equal", v["x"], v["y"]))
    out = add(g, "multiply", add(g, "cast", m, dtype="float32"), add(g, "clip", v["x"], min=-0.5))
    return Prog("booleans", p, [{"x": randn(4, 3), "y": randn(3)}], [out.name], min_fused=1)


def ints_and_bits():
    p, g, v = _program(a=((-1,), "int32"), b=((-1,), "int32"))
    h = add(g, "bitwise_xor", add(g, "bitwise_and", v["a"], v["b"]), add(g, "bitwise_not", v["a"]))
    h = add(g, "pow", add(g, "abs", add(g, "sign", h)), add(g, "minimum", v["b"], 3))
    h = add(g, "subtract", add(g, "relu", add(g, "neg", h)), add(g, "bitwise_or", v["a"], 1))
    feed = {"a": RNG.integers(-9, 9, 10).astype("int32"),
            "b": RNG.integers(0, 5, 10).astype("int32")}
    return Prog("ints_and_bits", p, [feed], [h.name], min_fused=1)


def unary_floats():
    p, g, v = _program(x=((2, 5), "float64"))
    h = add(g, "sqrt", add(g, "abs", add(g, "sin", v["x"])))
    h = add(g, "log", add(g, "add", add(g, "cos", h), 2.0))
    h = add(g, "ceil", add(g, "scale", add(g, "round", add(g, "scale", h, scale=7.0)), scale=0.5))
    return Prog("unary_floats", p, [{"x": randn(2, 5, dtype="float64")}], [h.name], min_fused=1)


def dag():
    """t = exp(x) read twice inside the group: the group is a DAG, not a chain."""
    p, g, v = _program(x=((-1,), "float32"))
    t = add(g, "exp", v["x"])
    y = add(g, "multiply", t, add(g, "add", t, 1.0))
    return Prog("dag", p, [{"x": randn(6)}], [y.name], min_fused=1)


def with_where():
    p, g, v = _program(x=((-1, 3), "float32"), y=((-1, 3), "float32"))
    c = add(g, "greater_than", add(g, "tanh", v["x"]), 0.1)
    out = add(g, "where", c, add(g, "exp", v["x"]), add(g, "neg", v["y"]))
    out = add(g, "sqrt", add(g, "abs", out))
    return Prog("with_where", p, [{"x": randn(2, 3), "y": randn(2, 3)}], [out.name])


def chain(n=10, shape=(-1, 8)):
    """A chain of ``n`` elementwise ops (the benchmark's program)."""
    p, g, v = _program(x=(shape, "float32"))
    h = v["x"]
    kinds = ["scale", "tanh", "multiply", "exp", "add", "sigmoid", "relu", "neg", "abs", "sqrt"]
    for k in range(n):
        kind = kinds[k % len(kinds)]
        if kind == "scale":
            h = add(g, "scale", h, scale=0.5, bias=0.1)
        elif kind == "multiply":
            h = add(g, "multiply", h, v["x"])
        elif kind == "add":
            h = add(g, "add", h, 1.0)
        else:
            h = add(g, kind, h)
    return p, h


def chain_prog():
    p, h = chain()
    return Prog("chain10", p, [{"x": randn(4, 8)}], [h.name], min_fused=1)


def while_body():
    """x = tanh(x * a + 1) * 0.5 while i < n: the body's chain is fused inside the loop."""
    p, g, v = _program(x=((-1, 3), "float32"), n=((), "int64"))
    a = g.create_var((3,), "float32", name="a", persistable=True)
    i0 = add(g, "full", shape=[], value=0.0, dtype="int64")
    cb = p.create_block(0)
    ci, cx = cb.create_var((), "int64", name="ci"), cb.create_var((-1, 3), "float32", name="cx")
    c = add(cb, "less_than", ci, v["n"])
    bb = p.create_block(0)
    bi, bx = bb.create_var((), "int64", name="bi"), bb.create_var((-1, 3), "float32", name="bx")
    ni = add(bb, "add", bi, 1)
    nx = add(bb, "scale", add(bb, "tanh", add(bb, "add", add(bb, "multiply", bx, a), 1.0)),
             scale=0.5)
    g.create_var((), "int64", name="i_out")
    g.create_var((-1, 3), "float32", name="x_out")
    g.append_op(Operator("while", {"X": [i0.name, "x"], "Input": ["n", "a"]},
                         {"Out": ["i_out", "x_out"], "Carries": []},
                         {"cond_block": cb.idx, "body_block": bb.idx,
                          "cond_args": [ci.name, cx.name], "cond_out": c.name,
                          "body_args": [bi.name, bx.name], "body_outs": [ni.name, nx.name]}))
    y = add(g, "exp", add(g, "neg", g.var("x_out")))
    feeds = [{"x": randn(2, 3), "n": np.array(3)}, {"x": randn(4, 3), "n": np.array(0)}]
    return Prog("while_body", p, feeds, ["i_out", y.name], {"a": randn(3)}, min_fused=2)


def cond_branches():
    p, g, v = _program(x=((4,), "float32"), pred=((), "bool"))

    def branch(fn):
        block = p.create_block(0)
        return block, fn(block)

    tb, t = branch(lambda b: add(b, "scale", add(b, "relu", add(b, "add", v["x"], 1.0)),
                                 scale=2.0))
    fb, f = branch(lambda b: add(b, "sigmoid", add(b, "neg", v["x"])))
    g.create_var((4,), "float32", name="y")
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": ["x"]}, {"Out": ["y"]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t.name], "false_outs": [f.name]}))
    feeds = [{"x": randn(4), "pred": np.array(True)}, {"x": randn(4), "pred": np.array(False)}]
    return Prog("cond_branches", p, feeds, ["y"], min_fused=2)


COMPOSITE = [mlp, gelu_prog, swish, broadcasting, scalars_and_casts, booleans, ints_and_bits,
             unary_floats, dag, with_where, chain_prog, while_body, cond_branches]


# ------------------------------------------------------------- op table

_PREFIX = {"f": lambda g, x: add(g, "scale", x, scale=1.0),  # exact identities: they
           "i": lambda g, x: add(g, "scale", x, scale=1.0),  # only make the op's input
           "u": lambda g, x: add(g, "scale", x, scale=1.0),  # a computed value
           "b": lambda g, x: add(g, "logical_not", add(g, "logical_not", x))}
_SUFFIX = {"f": lambda g, x: add(g, "scale", x, scale=2.0, bias=1.0),
           "i": lambda g, x: add(g, "scale", x, scale=3.0),
           "u": lambda g, x: add(g, "scale", x, scale=3.0),
           "b": lambda g, x: add(g, "logical_not", x)}


def op_table_programs():
    """Each elementwise case of the op table, between an identity op and a follow-up op."""
    progs = []
    for case in MATH_CASES:
        opdef = OPS[case.op]
        if not opdef.elementwise or case.op not in fusion.OPS:
            continue
        p = Program()
        g = p.global_block()
        feed, args = {}, []
        for k, value in enumerate(case.inputs):
            if isinstance(value, np.ndarray):
                name = f"in{k}"
                var = g.create_var(value.shape, value.dtype, name=name, is_data=True)
                feed[name] = value
                args.append(var)
            else:
                args.append(value)
        first = next(k for k, a in enumerate(args) if not isinstance(a, (int, float, bool)))
        args[first] = _PREFIX[args[first].dtype.kind](g, args[first])
        out = add(g, case.op, *args, **case.attrs)
        out = _SUFFIX[out.dtype.kind](g, out)
        progs.append(Prog(f"op_{case.id}", p, [feed], [out.name], min_fused=1))
    return progs


# ------------------------------------------------- the control-flow corpus


def trace(case, args, grads=False):
    """The corpus function traced into (main, startup, fetch names)."""
    main, startup = d2s.static.Program(), d2s.static.Program()
    shapes = list(case.shapes or [])
    with framework.program_guard(main, startup), framework.static_guard(True):
        static_args = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                shape = shapes.pop(0) if shapes else list(a.shape)
                static_args.append(d2s.static.data(f"arg{i}", shape, str(a.dtype)))
            else:
                static_args.append(a)
        outputs = convert_to_static(case.fn)(*static_args)
    fetch = [v.name for v in nest.flatten(outputs) if isinstance(v, Variable)]
    if grads:
        fetch += _append_grads(main, fetch, [v for v in static_args if isinstance(v, Variable)])
    return main, startup, fetch


def _append_grads(program, fetch, inputs):
    """d sum(float outputs) / d float inputs, appended; returns the gradient names."""
    block = program.global_block()
    outs = [block.var(n) for n in fetch if block.var(n).dtype.kind == "f"]
    wrt = [v.name for v in inputs if block.var(v.name).dtype.kind == "f"]
    if not outs or not wrt:
        return []
    total = None
    for o in outs:
        s = build.append(block, "sum", [o], {})
        total = s if total is None else build.append(block, "add", [total, s], {})
    try:
        grads = backward.gradients(program, [total], wrt)
    except (TypeError, ValueError, NotImplementedError):
        return []
    return [gr.name for gr in grads if gr is not None]


def control_flow_programs(grads=False):
    progs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in CF_CASES:
            if not case.static:
                continue
            groups: dict = {}
            for args in case.inputs:
                key = repr([a.shape if isinstance(a, np.ndarray) else a for a in args])
                groups.setdefault(key, []).append(args)
            for k, group in enumerate(groups.values()):
                main, startup, fetch = trace(case, group[0], grads)
                params = {n: t._data for n, t in captured_tensors(main).items()}
                if startup.global_block().ops:
                    scope = Scope()
                    executor.compile(startup, [], []).run({}, scope)
                    params.update(scope.items())
                feeds = [{f"arg{i}": a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
                         for args in group]
                progs.append(Prog(f"cf_{case.name}_{k}", main, feeds, fetch, params))
    return progs


def corpus():
    """Every program the fusion tests check (and the codegen test compiles)."""
    return ([make() for make in COMPOSITE] + op_table_programs() + control_flow_programs()
            + control_flow_programs(grads=True))


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("make", COMPOSITE, ids=lambda f: f.__name__)
def test_composite_programs_keep_their_results(make):
    check(make())


@pytest.mark.parametrize("prog", op_table_programs(), ids=lambda p: p.name)
def test_op_table_programs_keep_their_results(prog):
    check(prog)


def test_control_flow_corpus_keeps_its_results_and_fuses_inside_sub_blocks():
    progs = control_flow_programs()
    assert len(progs) >= 100
    in_sub_blocks = 0
    for prog in progs:
        fused = check(prog)
        in_sub_blocks += sum(1 for idx, _ in fused_ops(fused) if idx > 0)
    assert in_sub_blocks >= 10


def test_control_flow_corpus_with_backward_keeps_its_results():
    progs = control_flow_programs(grads=True)
    with_grads = [p for p in progs if any("@GRAD" in n for n in p.fetch)]
    assert len(with_grads) >= 50
    total = 0
    for prog in progs:
        total += len(fused_ops(check(prog)))
    assert total >= 50


def test_the_pass_leaves_fetched_persistable_and_shared_values_alone():
    p, g, v = _program(x=((3,), "float32"))
    state = g.create_var((3,), "float32", name="state", persistable=True)
    h = add(g, "exp", add(g, "multiply", v["x"], 2.0))  # fused: h is read twice below
    y = add(g, "add", add(g, "neg", h), 1.0)
    z = add(g, "tanh", add(g, "multiply", h, 3.0))
    fetched = add(g, "sqrt", add(g, "abs", v["x"]))  # fetched, and read below
    w = add(g, "log", add(g, "add", fetched, 1.0))
    # state = state * 0.9 + x: the write to a persistable stays its own op
    decayed = add(g, "scale", state, scale=0.9)
    g.append_op(Operator("add", {"X": [decayed.name], "Y": ["x"]}, {"Out": ["state"]}, {}))
    fetch = [y.name, z.name, fetched.name, w.name, h.name]
    prog = Prog("shared", p, [{"x": randn(3)}], fetch, {"state": randn(3)}, min_fused=4)
    fused = check(prog)
    block = fused.global_block()
    producers = {op.output_names()[0]: op for op in block.ops}
    for name in fetch:
        assert producers[name].type == FUSED
    assert producers["state"].type == "add"
    # The fetched value is not inside w's group; h is an input of y's and z's.
    assert fetched.name in producers[w.name].inputs["X"]
    assert h.name in producers[y.name].inputs["X"] and h.name in producers[z.name].inputs["X"]
    # Not fetched, the sqrt(abs(x)) value joins w's group; h still has two groups reading it.
    again = fuse_elementwise(p, [y.name, z.name, w.name])
    assert fetched.name not in again.global_block().vars
    assert h.name in again.global_block().vars


def test_a_persistable_written_in_between_is_read_before_the_write():
    p, g, v = _program(x=((3,), "float32"))
    g.create_var((3,), "float32", name="w", persistable=True)
    a = add(g, "multiply", g.var("w"), 2.0)  # reads the old w
    g.append_op(Operator("scale", {"X": ["x"]}, {"Out": ["w"]}, {"scale": 3.0, "bias": 0.0}))
    y = add(g, "neg", add(g, "exp", a))
    fused = check(Prog("hazard", p, [{"x": randn(3)}], [y.name], {"w": randn(3)}, min_fused=1))
    # The multiply stays before the write; the ops after it are fused.
    assert [op.type for op in fused.global_block().ops] == ["full", "multiply", "scale", FUSED]


def test_constants_are_inlined_and_dropped_when_unread():
    prog = gelu_prog()
    fused = check(prog)
    ops = fused.global_block().ops
    assert [op.type for op in ops] == [FUSED]
    assert ops[0].inputs["X"] == ["x"]
    steps = ops[0].attrs["expr"]
    assert [s[2]["value"] for s in steps if s[0] == "full"] == [3.0, 0.044715, 0.7978845608,
                                                                  0.5, 1.0]
    assert not any(n.startswith("full") for n in fused.global_block().vars)


def test_a_constant_read_outside_the_group_stays():
    p, g, v = _program(x=((3,), "float32"))
    c = add(g, "full", shape=[], value=2.0, dtype="float32")
    y = add(g, "exp", add(g, "multiply", v["x"], c))
    z = add(g, "sum", c)  # not elementwise: c must stay for it
    fused = check(Prog("const", p, [{"x": randn(3)}], [y.name, z.name], min_fused=1))
    assert c.name in fused.global_block().vars


def test_fusing_twice_changes_nothing_more_and_inlines_fused_ops():
    prog = broadcasting()
    once = fuse_elementwise(prog.program, prog.fetch)
    twice = fuse_elementwise(once, prog.fetch)
    assert str(twice) == str(once)
    # Two fused groups separated by a fetched value merge once it is no longer fetched.
    p, g, v = _program(x=((3,), "float32"))
    h = add(g, "exp", add(g, "neg", v["x"]))
    y = add(g, "sqrt", add(g, "abs", h))
    first = fuse_elementwise(p, [h.name, y.name])
    assert len(fused_ops(first)) == 2
    merged = fuse_elementwise(first, [y.name])
    ((_, op),) = fused_ops(merged)
    assert [s[0] for s in op.attrs["expr"]] == ["neg", "exp", "abs", "sqrt"]
    feed = {"x": randn(3)}
    np.testing.assert_array_equal(run(merged, feed, [y.name], {})[0],
                                  run(p, feed, [y.name], {})[0])


def test_float16_and_mismatched_dtypes_are_not_fused():
    p, g, v = _program(x=((3,), "float16"))
    y = add(g, "exp", add(g, "neg", v["x"]))
    assert not fused_ops(fuse_elementwise(p, [y.name]))
    p, g, v = _program(a=((3,), "float32"), b=((3,), "float64"))
    g.create_var((3,), "float64", name="s")
    g.append_op(Operator("add", {"X": ["a"], "Y": ["b"]}, {"Out": ["s"]}, {}))
    y = add(g, "exp", g.var("s"))
    verify(p)
    fused = fuse_elementwise(p, [y.name])
    assert not fused_ops(fused)


def test_fused_programs_save_and_load():
    prog = scalars_and_casts()
    fused = fuse_elementwise(prog.program, prog.fetch)
    text = serialize.program_to_json(fused, list(prog.feeds[0]), prog.fetch)
    loaded, feeds, fetch = serialize.program_from_json(text)
    assert str(loaded) == str(fused)
    feed = prog.feeds[0]
    np.testing.assert_array_equal(run(loaded, feed, fetch, {})[0],
                                  run(prog.program, feed, prog.fetch, {})[0])


@pytest.mark.parametrize("expr, message", [
    ([["exp", ["x0"], {}, "float32"], ["frobnicate", ["t0"], {}, "float32"]], "cannot be fused"),
    ([["exp", ["x3"], {}, "float32"]], "reads 4 inputs"),
    ([["exp", ["t0"], {}, "float32"]], "bad operand ref"),
    ([["exp", ["x0"], {}, "float64"]], "computes float32"),
    ([["scale", ["x0"], {"scale": "2"}, "float32"]], "must be a number"),
    ([["exp", ["x0"], {}, "float32"], ["equal", ["t0", "x0"], {}, "bool"]], "dtype attr"),
])
def test_a_malformed_fused_op_fails_verify(expr, message):
    p, g, v = _program(x=((3,), "float32"))
    g.create_var((3,), "float32", name="y")
    g.append_op(Operator(FUSED, {"X": ["x"]}, {"Out": ["y"]}, {"expr": expr, "dtype": "float32"}))
    with pytest.raises(VerifyError, match=message):
        verify(p)


def test_keep_names_variables_of_the_program():
    prog = dag()
    with pytest.raises(ValueError, match="'nope' \\(in keep\\) is not a variable"):
        fuse_elementwise(prog.program, ["nope"])


def test_the_pass_registry():
    assert PASSES["fuse_elementwise"] is fuse_elementwise
    prog = mlp()
    out = run_passes(prog.program, ["dead_code_elimination", "fuse_elementwise"], prog.fetch)
    assert len(fused_ops(out)) == 3
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        run_passes(prog.program, ["nope"])


# ------------------------------------------------------------ gradients


def _loss_program(fuse_first):
    """mean(gelu(x * w + b)) with parameters w, b; fused before backward when asked."""
    p, g, v = _program(x=((-1, 4), "float32"))
    w = g.create_var((4,), "float32", name="w", persistable=True)
    b = g.create_var((4,), "float32", name="b", persistable=True)
    h = gelu(g, add(g, "add", add(g, "multiply", v["x"], w), b))
    loss = add(g, "mean", add(g, "sigmoid", h))
    if fuse_first:
        p = fuse_elementwise(p, [loss.name])
        assert fused_ops(p)
    pairs = backward.append_backward(p, loss.name)
    return p, loss.name, [gr.name for _, gr in pairs]


def test_the_gradient_rule_replays_the_steps():
    params = {"w": randn(4), "b": randn(4)}
    feed = {"x": randn(3, 4)}
    plain, loss, grads = _loss_program(fuse_first=False)
    fused, loss_f, grads_f = _loss_program(fuse_first=True)
    verify(fused)
    expected = run(plain, feed, [loss] + grads, params)
    got = run(fused, feed, [loss_f] + grads_f, params)
    for g_, e in zip(got, expected):
        np.testing.assert_allclose(g_, e, rtol=1e-5, atol=1e-7)
    # Fusing after backward as well (the intended use) keeps the results too.
    check(Prog("after_backward", plain, [feed], [loss] + grads, params, min_fused=2))


def test_the_gradient_rule_in_eager_mode():
    prog = gelu_prog()
    fused = fuse_elementwise(prog.program, prog.fetch)
    ((_, op),) = fused_ops(fused)
    x_np = randn(3, 6, dtype="float64")
    expr = [[s[0], s[1], s[2], "float64"] for s in op.attrs["expr"]]
    x = d2s.to_tensor(x_np, stop_gradient=False)
    y = apply(FUSED, [x], expr=expr, dtype="float64")
    (gx,) = d2s.grad([y.sum()], [x])
    x2 = d2s.to_tensor(x_np, stop_gradient=False)
    ref = 0.5 * x2 * (1 + d2s.tanh(0.7978845608 * (x2 + 0.044715 * x2 ** 3.0)))
    (gx2,) = d2s.grad([ref.sum()], [x2])
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), gx2.numpy(), rtol=1e-10)


# ------------------------------------------------------------ in place


def test_the_host_path_allocates_one_buffer_for_a_chain():
    p, h = chain(10, (64, 64))
    fused = fuse_elementwise(p, [h.name])
    ((_, op),) = fused_ops(fused)
    x = randn(64, 64)
    x_before = x.copy()
    allocated = []
    real = np.ndarray

    class Spy:  # an array module that counts the arrays its ufuncs allocate
        __name__ = "spy"
        ndarray = real

        def __getattr__(self, name):
            fn = getattr(np, name)

            def call(*args, out=None, **kw):
                result = fn(*args, out=out, **kw)
                if out is None and type(result) is real:
                    allocated.append(name)
                return result

            return call

    got = fusion.evaluate(Spy(), op.attrs["expr"], [x])
    np.testing.assert_array_equal(x, x_before)  # inputs are never written
    np.testing.assert_array_equal(got, run(p, {"x": x}, [h.name], {})[0])
    assert len(allocated) == 1, allocated
