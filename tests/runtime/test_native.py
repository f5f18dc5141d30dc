"""The native tier (``runtime.lower``): lowered regions against the interpreted plan.

Each program below is compiled once per session (Numba takes about a second
per region; the disk cache of the run serves later plans of the same
program): every exact lowering rule is checked bit for bit against the
interpreted plan on random shapes (-1 dims, broadcasting), dtypes and edge
values, those adding in another order and the relaxed ones to a few ulps,
control flow and loop counters included; then tiering (a plan swapped while
it runs), the fallback for arguments the native code was not compiled for,
and the disk cache (a changed program never loads another's code, an
unreadable file is ignored with a warning, a second process starts native).
Without Numba these tests skip; the plan then stays interpreted (the last
tests check that).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import build, executor, lower
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.lower import loops, native, regions, rules
from dy2stat.static import framework

needs_numba = pytest.mark.skipif(not native.available(), reason="needs Numba")
RNG = np.random.default_rng(0)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30,
                    -7.0], "float32")


def add(block, type, *inputs, **attrs):
    return build.append(block, type, [block.var(x) if isinstance(x, str) else x
                                      for x in inputs], attrs)


def data(block, name, shape, dtype):
    return block.create_var(shape, dtype, name=name, is_data=True)


class Pair:
    """One program's native plan and interpreted plan, compiled once."""

    def __init__(self, program, feeds, fetches, relaxed=False):
        self.fetches = list(fetches)
        old = lower.settings.relaxed
        lower.settings.relaxed = relaxed
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", lower.NativeTierWarning)
                self.native = executor.compile(program, feeds, self.fetches, native=True)
                self.went_native = self.native.wait_native(300)
        finally:
            lower.settings.relaxed = old
        self.interpreted = executor.compile(program, feeds, self.fetches, native=False)
        assert self.went_native, self.native.tier.error

    def both(self, feeds, scope=None):
        with np.errstate(all="ignore"):
            got = self.native.run(feeds, Scope(dict(scope or {})))
            want = self.interpreted.run(feeds, Scope(dict(scope or {})))
        return got, want

    def same_bits(self, feeds, scope=None):
        got, want = self.both(feeds, scope)
        for name, g, w in zip(self.fetches, got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), name
            assert g.tobytes() == w.tobytes(), f"{name}:\n{g}\n{w}"


def static_program(build_fn, *feeds):
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        args = [d2s.static.data(name, shape, dtype) for name, shape, dtype in feeds]
        outs = build_fn(*args)
    return main, [v.name for v in outs]


# ------------------------------------------------------------ elementwise


@pytest.fixture(scope="module")
def floats():
    """Every exact float rule, with each broadcasting pattern: [-1, 5] with [5],
    [-1, 1] (a -1 dim that broadcasts) and a 0-d scalar, in float32 and float64."""
    p = Program()
    g = p.global_block()
    x, y = data(g, "x", (-1, 5), "float32"), data(g, "y", (5,), "float32")
    z, s = data(g, "z", (-1, 1), "float32"), data(g, "s", (), "float32")
    patterns = [(x, y), (z, x), (x, s), (s, s)]
    outs = []
    binary = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal",
              "not_equal", "less_than", "less_equal", "greater_than", "greater_equal",
              "logical_and", "logical_or", "logical_xor"]
    for k, op in enumerate(binary):
        a, b = patterns[k % len(patterns)]
        outs.append(add(g, op, a, b))
    for op in ["neg", "abs", "sqrt", "floor", "ceil", "relu", "logical_not"]:
        outs.append(add(g, op, x))
    outs.append(add(g, "scale", x, scale=1.7, bias=-0.3))
    outs.append(add(g, "scale", z, scale=-2.0))
    outs.append(add(g, "clip", x, min=-0.5, max=0.5))
    outs.append(add(g, "where", add(g, "greater_than", x, y), x, z))
    outs += [add(g, "cast", x, dtype="bool"), add(g, "cast", s, dtype="float64")]
    outs += [add(g, "assign", x), add(g, "assign", s),  # copies; constants in the region
             add(g, "add", x, add(g, "arange", start=0, end=5, step=1, dtype="float32")),
             add(g, "multiply", add(g, "eye", num_rows=5, dtype="float32"), y)]
    wide = add(g, "cast", x, dtype="float64")  # a fused chain in float64
    outs.append(add(g, "relu", add(g, "divide", add(g, "maximum", wide, wide), wide)))
    outs.append(add(g, "sqrt", add(g, "abs", add(g, "multiply", wide, wide))))
    return Pair(p, ["x", "y", "z", "s"], [o.name for o in outs])


@needs_numba
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_float_rules_give_the_interpreted_bits(floats, rows):
    for values in (SPECIAL, RNG.standard_normal(64).astype("float32") * 10):
        floats.same_bits({"x": RNG.choice(values, (rows, 5)).astype("float32"),
                          "y": RNG.choice(values, 5).astype("float32"),
                          "z": RNG.choice(values, (rows, 1)).astype("float32"),
                          "s": np.array(RNG.choice(values), "float32")})


@needs_numba
def test_dims_that_do_not_broadcast_are_the_same_error(floats):
    feeds = {"x": np.ones((3, 5), "float32"), "y": np.ones(5, "float32"),
             "z": np.ones((2, 1), "float32"), "s": np.array(1.0, "float32")}
    for plan in (floats.native, floats.interpreted):
        with pytest.raises(ValueError, match="broadcast") as info:
            plan.run(feeds, Scope())
        assert any("of the static program" in note for note in info.value.__notes__)


@needs_numba
def test_one_region_compiles_a_program_of_elementwise_ops(floats):
    (region,) = floats.native.native_regions
    assert "def region(" in region and "for i" in region and "SIGNATURE" in region
    assert "native_" in floats.native.native_source  # the call, with its fallback
    assert "except TypeError" in floats.native.native_source


@pytest.fixture(scope="module")
def integers():
    p = Program()
    g = p.global_block()
    a, b = data(g, "a", (-1, 4), "int64"), data(g, "b", (4,), "int32")
    c, m = data(g, "c", (-1, 4), "int32"), data(g, "m", (-1, 4), "bool")
    outs = [add(g, op, a, add(g, "cast", b, dtype="int64"))
            for op in ["add", "subtract", "multiply", "maximum", "minimum", "less_than",
                       "equal", "bitwise_and", "bitwise_or", "bitwise_xor"]]
    outs += [add(g, op, c, b) for op in ["add", "multiply", "greater_equal"]]  # int32 wraps
    outs += [add(g, "neg", a), add(g, "abs", c), add(g, "bitwise_not", a),
             add(g, "cast", a, dtype="int32"), add(g, "cast", c, dtype="float32"),
             add(g, "cast", m, dtype="int64"), add(g, "logical_and", m, add(g, "cast", a,
                                                                             dtype="bool")),
             add(g, "logical_not", m), add(g, "bitwise_not", m), add(g, "where", m, a, a),
             add(g, "relu", c), add(g, "scale", a, scale=3.0, bias=-2.0)]
    return Pair(p, ["a", "b", "c", "m"], [o.name for o in outs])


@needs_numba
@pytest.mark.parametrize("rows", [1, 5])
def test_integer_and_bool_rules_give_the_interpreted_bits(integers, rows):
    big = np.iinfo(np.int32).max
    integers.same_bits({
        "a": RNG.integers(-2 ** 62, 2 ** 62, (rows, 4)),
        "b": np.array([big, -big - 1, 7, -3], "int32"),
        "c": RNG.integers(-big - 1, big, (rows, 4)).astype("int32"),
        "m": RNG.random((rows, 4)) < 0.5})


# ------------------------------------------------------------- reductions


@pytest.fixture(scope="module")
def reductions():
    """sum/mean/max/min/any/all of whole arrays and along the last axis, keepdim or
    not, in every dtype they take; -1 dims so one compile serves every size."""
    p = Program()
    g = p.global_block()
    v, w = data(g, "v", (-1,), "float32"), data(g, "w", (-1, -1), "float64")
    i, b = data(g, "i", (-1, 3), "int32"), data(g, "b", (-1, 3), "bool")
    outs = []
    for x in (v, w):
        outs += [add(g, op, x) for op in ("sum", "mean", "max", "min")]
    outs += [add(g, op, w, axis=-1, keepdim=keep) for op in ("sum", "mean", "max", "min")
             for keep in (False, True)]
    outs += [add(g, "sum", i), add(g, "sum", i, axis=1), add(g, "max", i, axis=[1]),
             add(g, "sum", b), add(g, "any", b), add(g, "all", b, axis=-1),
             add(g, "sum", v, keepdim=True)]
    return Pair(p, ["v", "w", "i", "b"], [o.name for o in outs])


@needs_numba
@pytest.mark.parametrize("n", [1, 7, 8, 9, 127, 128, 129, 300, 1000, 4097])
def test_reductions_sum_in_numpys_pairwise_order(reductions, n):
    rows, cols = max(n // 64, 1), min(n, 257)
    for scale in (1.0, 1e6):
        reductions.same_bits({
            "v": (RNG.standard_normal(n) * scale).astype("float32"),
            "w": RNG.standard_normal((rows, cols)) * scale,
            "i": RNG.integers(-2 ** 31, 2 ** 31 - 1, (rows, 3)).astype("int32"),
            "b": RNG.random((rows, 3)) < 0.5})


@needs_numba
def test_reductions_of_edge_values_and_empty_arrays(reductions):
    reductions.same_bits({"v": RNG.choice(SPECIAL, 40), "w": RNG.choice(SPECIAL, (3, 20))
                          .astype("float64"), "i": np.zeros((2, 3), "int32"),
                          "b": np.zeros((2, 3), bool)})
    zeros = np.array([0.0, -0.0, -0.0, 0.0, -0.0], "float32")
    reductions.same_bits({"v": zeros, "w": zeros.astype("float64").reshape(1, 5),
                          "i": np.ones((1, 3), "int32"), "b": np.ones((1, 3), bool)})
    with pytest.raises(ValueError, match="zero-size array"):  # as NumPy's max
        reductions.native.run({"v": np.zeros(0, "float32"), "w": np.ones((1, 1)),
                               "i": np.ones((1, 3), "int32"), "b": np.ones((1, 3), bool)},
                              Scope())



def _leading(x, kind, axes, keepdim):
    """A reduction over ``axes`` adding (or comparing) one element at a time in index
    order, as the loops of leading-axis reductions do."""
    moved = np.moveaxis(x, axes, range(len(axes)))
    flat = moved.reshape((-1,) + moved.shape[len(axes):])
    if kind in ("max", "min"):
        out = (np.maximum if kind == "max" else np.minimum).reduce(flat, axis=0)
    elif kind in ("any", "all"):
        out = (np.logical_or if kind == "any" else np.logical_and).reduce(flat, axis=0)
    else:
        out = np.zeros(flat.shape[1:], np.int64 if x.dtype.kind in "iub" else x.dtype)
        for row in flat:
            out = out + row
        if kind == "mean":
            out = (out.astype(np.float64) / len(flat)).astype(x.dtype)
    return np.expand_dims(out, axes) if keepdim else out


LEADING = [("sum", (0,), False), ("mean", (0, 1), True), ("sum", (1,), True),
           ("mean", (0, 2), False), ("any", (0,), False), ("all", (1,), True),
           ("sum", (0, 1), False)]


@pytest.fixture(scope="module")
def leading():
    """Reductions along leading and middle axes of [2, -1, 5] arrays."""
    p = Program()
    g = p.global_block()
    x, b = data(g, "x", (2, -1, 5), "float32"), data(g, "b", (2, -1, 5), "bool")
    i = data(g, "i", (2, -1, 5), "int32")
    outs = [add(g, kind, b if kind in ("any", "all") else x, axis=list(axes), keepdim=keep)
            for kind, axes, keep in LEADING]
    outs.append(add(g, "sum", i, axis=[0]))
    return Pair(p, ["x", "b", "i"], [o.name for o in outs])


@needs_numba
@pytest.mark.parametrize("n", [1, 3, 40])
def test_leading_axis_reductions_add_in_index_order(leading, n):
    feeds = {"x": (RNG.standard_normal((2, n, 5)) * 1e3).astype("float32"),
             "b": RNG.random((2, n, 5)) < 0.3, "i": RNG.integers(-9, 9, (2, n, 5), "int32")}
    got, want = leading.both(feeds)
    for k, (kind, axes, keep) in enumerate(LEADING):
        x = feeds["b" if kind in ("any", "all") else "x"]
        expected = _leading(x, kind, axes, keep)
        assert got[k].shape == want[k].shape == expected.shape, (kind, axes)
        assert got[k].tobytes() == expected.astype(got[k].dtype).tobytes(), (kind, axes)
    assert got[-1].tobytes() == want[-1].tobytes()


def test_reductions_larger_than_loops_pay_for_stay_numpy_calls():
    def lowers(kind, shape, **attrs):
        p = Program()
        g = p.global_block()
        x = data(g, "x", shape, "bool" if kind in ("any", "all") else "float32")
        add(g, kind, x, **attrs)
        return regions.lowerable(p, g.ops[0], g.find_var, regions.Lowering())

    assert lowers("max", (4, 256)) and not lowers("max", (4, 257))
    assert lowers("sum", (64, 128), axis=0) and not lowers("sum", (65, 128), axis=0)
    assert lowers("any", (8192,)) and not lowers("all", (8193,))
    assert lowers("sum", (-1, 4096), axis=-1)  # known when it runs: see below


@needs_numba
def test_a_reduction_found_too_large_as_it_runs_gives_way_to_the_interpreted_code():
    """Sizes past what loops pay for, known only at run time: the region's interpreted
    code runs, with its results."""
    def build_fn(x):
        y = d2s.nn.functional.relu(x * 2.0 - 1.0)
        return [y.max(), y.sum(axis=-1), (y * 0.5).mean(axis=0)]

    main, fetch = static_program(build_fn, ("x", [-1, 300], "float32"))
    pair = Pair(main, ["x"], fetch)
    for rows in (1, 3, 40):  # 300 to 12,000 elements
        pair.same_bits({"x": RNG.standard_normal((rows, 300)).astype("float32")})

# ----------------------------------------------------------- control flow


def w2_program():
    """The second seed's loop: ``while x.sum() < 1000 and i < 100`` with a tensor
    ``if`` inside and a Python-int counter."""
    def build_fn(x):
        def body(i, h):
            h = d2s.static.nn.cond(h.mean() > 20.0, lambda: h * 1.1 + 1.0, lambda: h + 3.0)
            return i + 1, h

        i, h = d2s.static.nn.while_loop(
            lambda i, h: d2s.logical_and(h.sum() < 1000.0, i < 100), body,
            [d2s.zeros([], "int64"), x])
        return [i, h]

    return static_program(build_fn, ("x", [-1], "float32"))


@pytest.fixture(scope="module")
def w2():
    main, fetch = w2_program()
    return Pair(main, ["x"], fetch)


@needs_numba
@pytest.mark.parametrize("start", [0.5, 300.0])  # 0 trips at 300
def test_a_loop_carrying_one_value_is_one_native_function(start):
    """One carried value: the loop's next value is that value, not a 1-tuple of it."""
    def build_fn(x):
        (h,) = d2s.static.nn.while_loop(lambda h: h.sum() < 100.0,
                                        lambda h: [h * 2.0 + 1.0], [x])
        return [h]

    main, fetch = static_program(build_fn, ("x", [-1], "float32"))
    pair = Pair(main, ["x"], fetch)  # a region left interpreted warns: an error here
    assert any("while True:" in source for source in pair.native.native_regions)
    pair.same_bits({"x": np.full(8, start, "float32")})


@needs_numba
@pytest.mark.parametrize("start", [1.0, 30.0, 2000.0, -5.0])  # 0 trips at 2000
def test_a_loop_with_a_branch_and_a_counter_is_one_native_function(w2, start):
    for n in (1, 16, 33):
        w2.same_bits({"x": np.full(n, start, "float32") + RNG.standard_normal(n)
                      .astype("float32")})
    (region,) = w2.native.native_regions
    assert "while True:" in region and "if " in region
    got = w2.native.run({"x": np.ones(16, "float32")}, Scope())
    assert got[0].dtype == np.int64 and got[0].shape == ()  # the counter, as an array


@pytest.fixture(scope="module")
def nested():
    """A loop in a loop, a branch yielding an outer value, captured inputs."""
    def build_fn(x, scale):
        def outer(i, h):
            def inner(j, g):
                return j + 1, g * scale + d2s.full([], 1.0)

            _, g = d2s.static.nn.while_loop(lambda j, g: j < i, inner,
                                            [d2s.zeros([], "int64"), h])
            g = d2s.static.nn.cond(g.max() > 100.0, lambda: g * 0.01, lambda: h)
            return i + 1, g

        return d2s.static.nn.while_loop(lambda i, h: i < 4, outer,
                                        [d2s.zeros([], "int64"), x])

    main, fetch = static_program(build_fn, ("x", [2, -1], "float32"),
                                 ("scale", [-1], "float32"))
    return Pair(main, ["x", "scale"], fetch)


@needs_numba
def test_nested_loops_and_branches(nested):
    for n in (1, 3):
        nested.same_bits({"x": RNG.standard_normal((2, n)).astype("float32"),
                          "scale": RNG.uniform(0.5, 3.0, n).astype("float32")})
    nested.same_bits({"x": np.ones((2, 1), "float32"), "scale": np.full(4, 2.0, "float32")})


# ----------------------------------------------------------------- relaxed


@pytest.fixture(scope="module")
def relaxed():
    p = Program()
    g = p.global_block()
    x, w = data(g, "x", (-1, 6), "float32"), data(g, "w", (6, 4), "float32")
    v = data(g, "v", (6,), "float32")
    pos = add(g, "abs", x)
    outs = [add(g, op, x) for op in ("exp", "tanh", "sigmoid", "sin", "cos")]
    outs += [add(g, "log", pos), add(g, "pow", pos, add(g, "abs", v))]
    outs += [add(g, "max", w, axis=0)]
    return Pair(p, ["x", "w", "v"], [o.name for o in outs], relaxed=True)


def reordered_program(rows):
    """Sums in another order than NumPy's: small products and sums along leading axes."""
    p = Program()
    g = p.global_block()
    x, w = data(g, "x", (rows, 6), "float32"), data(g, "w", (6, 40), "float32")
    v, n = data(g, "v", (6,), "float32"), data(g, "n", (rows, 3), "int32")
    outs = [add(g, "matmul", x, w), add(g, "matmul", v, w), add(g, "matmul", x, v),
            add(g, "matmul", w, x, transpose_x=True, transpose_y=True),
            add(g, "matmul", add(g, "relu", add(g, "matmul", x, w)), w, transpose_y=True)]
    outs += [add(g, "sum", x, axis=0), add(g, "mean", x, axis=0, keepdim=True),
             add(g, "sum", n, axis=0)]
    return p, Pair(p, ["x", "w", "v", "n"], [o.name for o in outs])


@needs_numba
@pytest.mark.parametrize("rows", [1, 5])
def test_products_and_leading_sums_lower_by_default_within_rounding(rows):
    program, pair = reordered_program(rows)
    ops = program.global_block().ops
    assert regions.spans(program, ops, program.global_block().find_var,
                         regions.Lowering()) == [(0, len(ops))]  # one native function
    feeds = {"x": RNG.standard_normal((rows, 6)).astype("float32"),
             "w": RNG.standard_normal((6, 40)).astype("float32"),
             "v": RNG.standard_normal(6).astype("float32"),
             "n": RNG.integers(-9, 9, (rows, 3)).astype("int32")}
    got, want = pair.both(feeds)
    for name, g, w in zip(pair.fetches, got, want):
        assert np.asarray(g).shape == np.asarray(w).shape and g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(got[-1], want[-1])  # integers add exactly in any order


# (x's shape, y's shape, attrs): rows 1 to 8, summed lengths around the loops' unroll
# (8 for one row, 4 for more: a remainder or none), 1-D operands and transposes.
PRODUCTS = [((1, 7), (7, 16), {}), ((1, 8), (8, 33), {}), ((1, 19), (19, 16), {}),
            ((19,), (19, 40), {}), ((2, 4), (4, 20), {}), ((3, 9), (9, 17), {}),
            ((8, 33), (33, 16), {}), ((13, 5), (13, 24), {"transpose_x": True}),
            ((5, 13), (9, 13), {"transpose_y": True}), ((4, 16), (16,), {}),
            ((17,), (17,), {})]


@pytest.fixture(scope="module")
def products():
    p = Program()
    g = p.global_block()
    feeds, outs = {}, []
    for k, (xs, ys, attrs) in enumerate(PRODUCTS):
        feeds[f"x{k}"] = RNG.standard_normal(xs).astype("float32")
        feeds[f"y{k}"] = RNG.standard_normal(ys).astype("float32")
        outs.append(add(g, "matmul", data(g, f"x{k}", xs, "float32"),
                        data(g, f"y{k}", ys, "float32"), **attrs))
    return Pair(p, list(feeds), [o.name for o in outs]), feeds


def _in_index_order(x, y, transpose_x=False, transpose_y=False):
    """x @ y in float32, each sum adding one term at a time in index order from 0."""
    x = np.atleast_2d(x.T if transpose_x else x)
    y = (y.T if transpose_y else y).reshape(x.shape[1], -1)
    total = np.zeros((x.shape[0], y.shape[1]), np.float32)
    for p in range(x.shape[1]):
        total = total + x[:, p:p + 1] * y[p]
    return total


@needs_numba
def test_products_add_each_sum_in_index_order(products):
    pair, feeds = products
    got, want = pair.both(feeds)
    for k, (xs, ys, attrs) in enumerate(PRODUCTS):
        order = _in_index_order(feeds[f"x{k}"], feeds[f"y{k}"], **attrs)
        assert got[k].shape == want[k].shape, (xs, ys)
        assert got[k].tobytes() == order.reshape(want[k].shape).tobytes(), (xs, ys, attrs)
        np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=1e-5)


def test_only_products_that_loops_win_lower():
    def lowers(xs, ys, **attrs):
        p = Program()
        g = p.global_block()
        add(g, "matmul", data(g, "x", xs, "float32"), data(g, "y", ys, "float32"), **attrs)
        return regions.lowerable(p, g.ops[0], g.find_var, regions.Lowering())

    assert lowers((1, 512), (512, 256)) and lowers((512,), (512, 256))  # a vector: loops win
    assert lowers((4, 8), (8, 4)) and lowers((128,), (128, 2))  # tiny
    assert not lowers((64, 400), (400, 120))  # BLAS wins on many rows
    assert not lowers((64, 400), (64, 120), transpose_x=True)  # 400 rows, transposed
    assert not lowers((-1, 512), (512, 256))  # rows unknown
    assert not lowers((1, 4096), (4096, 512))  # past the size loops are kept to
    # A transposed y is read across its rows: only tiny products of it lower.
    assert not lowers((1, 512), (256, 512), transpose_y=True)
    assert lowers((2, 16), (16, 16), transpose_y=True)


@needs_numba
def test_relaxed_rules_round_within_a_few_ulps(relaxed):
    for rows in (1, 5):
        got, want = relaxed.both({"x": RNG.standard_normal((rows, 6)).astype("float32"),
                                  "w": RNG.standard_normal((6, 4)).astype("float32"),
                                  "v": RNG.standard_normal(6).astype("float32")})
        for name, g, w in zip(relaxed.fetches, got, want):
            assert np.asarray(g).shape == np.asarray(w).shape, name
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, err_msg=name)


def test_relaxed_rules_lower_only_when_asked():
    p = Program()
    g = p.global_block()
    x = data(g, "x", (3,), "float32")
    tanh = add(g, "tanh", x)
    exact, loose = regions.Lowering(), regions.Lowering(rounding="library")
    assert not regions.lowerable(p, g.ops[0], g.find_var, exact)
    assert regions.lowerable(p, g.ops[0], g.find_var, loose)
    assert tanh is not None


# ------------------------------------------------------------------ tiering


@needs_numba
def test_a_plan_swapped_while_it_runs_keeps_its_results(w2):
    main, fetch = w2_program()
    d2s.set_flags({"native_after_calls": 5})
    plan = executor.compile(main, ["x"], fetch)
    assert plan.tier is not None and not plan.native
    seen_native, results = [], []
    for k in range(400):
        x = np.full(16, float(k % 40), "float32")
        with np.errstate(all="ignore"):
            results.append((x, plan.run({"x": x}, Scope())))
        seen_native.append(plan.native)
        if sum(seen_native) > 20:
            break
        if k > 20 and not plan.native:
            plan.tier.ready.wait(0.05)  # (give the build thread the GIL now and then)
    assert not seen_native[0] and seen_native[-1], "the plan did not go native while it ran"
    for x, got in results:
        want = w2.interpreted.run({"x": x}, Scope())
        for g, w in zip(got, want):
            assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


@needs_numba
def test_a_converted_function_goes_native_with_the_same_results():
    main, fetch = w2_program()  # (the same region text as the w2 fixture: a cache hit)

    @d2s.jit.to_static
    def loop(x):
        i = 0
        while x.sum() < 1000 and i < 100:
            if x.mean() > 20:
                x = x * 1.1 + 1
            else:
                x = x + 3
            i += 1
        return x

    x = d2s.to_tensor(np.ones(16, "float32"))
    with d2s.no_grad():
        want = loop(x).numpy()
        (plan,) = loop.concrete_program.runner._plans.values()
        assert plan.wait_native(300)
        assert loop(x).numpy().tobytes() == want.tobytes()


@needs_numba
def test_arguments_the_native_code_was_not_compiled_for_run_interpreted(floats):
    wide = RNG.standard_normal((4, 10)).astype("float32")
    feeds = {"x": wide[:, ::2], "y": RNG.standard_normal(5).astype("float32"),  # a view
             "z": RNG.standard_normal((4, 1)).astype("float32"),
             "s": np.array(2.0, "float32")}
    assert not feeds["x"].flags.c_contiguous
    floats.same_bits(feeds)


@needs_numba
def test_an_argument_of_another_shape_than_compiled_for_is_refused(tmp_path):
    """The loops index with the program's dims: an array of other dims (a shape the
    program declared wrongly) raises TypeError, which runs the interpreted code."""
    p = Program()
    g = p.global_block()
    x = data(g, "x", (3, 4), "float32")
    h = add(g, "relu", add(g, "scale", x, scale=2.0, bias=1.0))
    source = loops.region_source(p, g.ops, g.find_var, [("x", x, False)], [h.name],
                                 lambda name: None, "order")
    region = native.compile_region(source.text, tmp_path)
    good = RNG.standard_normal((3, 4)).astype("float32")
    np.testing.assert_array_equal(region(good)[0], np.maximum(good * 2 + 1, 0))
    for other in ((2, 4), (3, 5), (30, 40)):
        with pytest.raises(TypeError, match="not the shape compiled for"):
            region(np.ones(other, "float32"))


# --------------------------------------------------------------- disk cache


@needs_numba
def test_a_changed_program_never_loads_another_programs_code(tmp_path):
    def program(scale):
        p = Program()
        g = p.global_block()
        x = data(g, "x", (-1,), "float32")
        h = x
        for _ in range(4):
            h = add(g, "scale", add(g, "add", h, x), scale=scale)
        return p, h.name

    d2s.set_flags({"native_cache_dir": str(tmp_path)})
    x = np.arange(5, dtype="float32")
    outs = []
    for scale in (1.5, 2.5):
        p, out = program(scale)
        plan = executor.compile(p, ["x"], [out])
        assert plan.wait_native(300)
        outs.append(plan.run({"x": x}, Scope())[0])
        want = executor.compile(p, ["x"], [out], native=False).run({"x": x}, Scope())[0]
        assert outs[-1].tobytes() == want.tobytes()
    assert not np.array_equal(outs[0], outs[1])
    (directory,) = tmp_path.glob("native-*")
    assert len(list(directory.glob("r*.py"))) == 2  # one module per program's region


TINY = textwrap.dedent("""\
    import numpy as np
    import numba as nb

    SIGNATURE = (nb.float64,)

    def region(p0):
        return (p0 * 2.0,)
    """)


@needs_numba
def test_unreadable_cache_files_are_ignored_with_a_warning(tmp_path):
    assert native.compile_region(TINY, tmp_path)(3.0) == (6.0,)
    (directory,) = tmp_path.glob("native-*")
    files = list((directory / "__pycache__").glob("*.nb[ic]"))
    assert files
    for file in files:
        file.write_bytes(b"not a cache file")
    with pytest.warns(lower.NativeTierWarning, match="ignored unreadable native cache files"):
        dispatcher = native.compile_region(TINY, tmp_path)
    assert dispatcher(4.0) == (8.0,)
    (module,) = directory.glob("r*.py")
    module.write_text(TINY.replace("2.0", "3.0"))  # not the code its name stands for
    with pytest.warns(lower.NativeTierWarning, match="did not hold the code"):
        dispatcher = native.compile_region(TINY, tmp_path)
    assert dispatcher(4.0) == (8.0,)


@needs_numba
@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_cache_directory_others_may_write_to_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    directory = native.cache_dir(shared)
    directory.mkdir()
    directory.chmod(0o777)  # anyone could plant code there
    with pytest.warns(lower.NativeTierWarning, match="others may write to it"):
        dispatcher = native.compile_region(TINY, shared)
    assert dispatcher(3.0) == (6.0,)
    assert not list(directory.glob("r*.py"))  # compiled, but not from (or into) it


@needs_numba
def test_a_second_process_starts_native_from_the_cache(w2):
    script = textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.dirname(__file__)))!r})
        import numpy as np
        from dy2stat.runtime import executor
        from dy2stat.runtime.executor import Scope
        from tests.runtime.test_native import w2_program
        main, fetch = w2_program()
        plan = executor.compile(main, ["x"], fetch)
        assert plan.tier.calls_before_native() == 1, "no marker"
        plan.run({{"x": np.ones(16, "float32")}}, Scope())  # the first call starts the build
        assert plan.wait_native(300), plan.tier.error
        assert plan.tier.loaded == 1, "compiled instead of loaded"
        print("native from the cache")
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "native from the cache" in done.stdout


# --------------------------------------------------------- table and regions


def test_one_rule_per_op_and_target_and_other_targets_fit():
    assert rules.rule_for("add", "cpu").kind == "elementwise"
    assert rules.rule_for("while", "cpu").kind == "control"
    assert rules.rule_for("tanh", "cpu") is None  # relaxed only
    assert rules.rule_for("conv2d", "cpu") is None
    with pytest.raises(ValueError, match="two lowerings"):
        rules.register_lowering("add", "cpu", "elementwise")(lambda a, s: "")
    try:  # a target registers its rules beside the others'
        rules.register_lowering("add", "test-target", "elementwise")(lambda a, s: "")
        assert rules.rule_for("add", "test-target").target == "test-target"
        assert rules.rule_for("add", "cpu").target == "cpu"
    finally:
        del rules.LOWERINGS["add", "test-target"]


def test_regions_are_runs_of_lowerable_ops_that_pay():
    p = Program()
    g = p.global_block()
    x = data(g, "x", (2, 1, 6, 6), "float32")
    w = g.create_var((1, 1, 3, 3), "float32", name="w", persistable=True)
    h = x
    for _ in range(4):
        h = add(g, "relu", add(g, "scale", h, scale=2.0))
    h = add(g, "conv2d", h, w)  # no rule: splits the block
    h = add(g, "relu", add(g, "add", h, h))  # two ops: not worth a native call
    add(g, "tanh", h)  # relaxed only
    lowering = regions.Lowering()
    assert regions.spans(p, g.ops, g.find_var, lowering) == [(0, 8)]
    loop_program, _ = w2_program()
    block = loop_program.global_block()
    assert any(op.type == "while" for op in block.ops)
    assert regions.spans(loop_program, block.ops, block.find_var, lowering)  # control flow


def test_the_flag_turns_the_tier_off_and_without_numba_it_is_off(monkeypatch):
    main, fetch = w2_program()
    d2s.set_flags({"native_tier": False})
    plan = executor.compile(main, ["x"], fetch)
    assert plan.tier is None and not plan.wait_native(0)
    d2s.set_flags({"native_tier": True})
    monkeypatch.setattr(native, "available", lambda: False)
    plan = executor.compile(main, ["x"], fetch)
    assert plan.tier is None
    got = plan.run({"x": np.ones(3, "float32")}, Scope())
    assert int(got[0]) > 0


def test_a_loop_that_saves_its_iterations_for_backward_stays_interpreted():
    main, startup = Program(), Program()
    with d2s.static.program_guard(main, startup), framework.static_guard(True):
        x = d2s.static.data("x", [3], "float32")
        x.stop_gradient = False
        _, h = d2s.static.nn.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * 2.0),
                                        [d2s.zeros([], "int64"), x])
        loss = h.sum()
        d2s.static.gradients([loss], [x])
    forward = [op for op in main.global_block().ops if op.type == "while"]
    assert forward and forward[0].outputs.get("Carries")
    block = main.global_block()
    assert not regions.lowerable(main, forward[0], block.find_var, regions.Lowering())
    assert Operator  # (the IR is read, not built, here)


def _train_eager_and_converted(steps=5):
    """Losses and final parameters of an eager Layer and its converted twin, trained
    side by side; the converted plans go native after the first step."""
    class Net(d2s.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = d2s.nn.Linear(8, 8)

        def forward(self, x):
            h = self.fc(x)
            return ((h * 0.5 + 1.0).abs() * h - d2s.nn.functional.relu(h)).mean()

    d2s.seed(3)
    eager, converted = Net(), Net()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    d2s.set_flags({"native_after_calls": 1})
    x = d2s.to_tensor(RNG.standard_normal((4, 8)).astype("float32"))
    runs = []
    for net in (eager, converted):
        opt = d2s.optimizer.SGD(parameters=net.parameters(), learning_rate=0.1)

        def step(net=net, opt=opt):
            loss = net(x)
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss.numpy()

        runs.append(step)
    losses = []
    for k in range(steps):
        losses.append([step() for step in runs])
        if k == 0:
            plans = list(converted.forward.concrete_program.runner._plans.values())
            assert all(plan.wait_native(300) for plan in plans)
    params = [[p.numpy() for p in net.state_dict().values()] for net in (eager, converted)]
    return losses, params


@needs_numba
def test_a_converted_layer_trains_as_eager_bit_for_bit_once_native_when_exact():
    """With ``native_exact`` the native plans keep eager mode's bits (the products
    stay BLAS calls)."""
    d2s.set_flags({"native_exact": True})
    losses, (eager, converted) = _train_eager_and_converted()
    for k, (want, got) in enumerate(losses):
        assert want.tobytes() == got.tobytes(), k
    for a, b in zip(eager, converted):
        assert a.tobytes() == b.tobytes()


@needs_numba
def test_a_converted_layer_trains_as_eager_within_rounding_once_native():
    """By default the small products lower too: sums in loop order, within rounding."""
    losses, (eager, converted) = _train_eager_and_converted()
    for k, (want, got) in enumerate(losses):
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=str(k))
    for a, b in zip(eager, converted):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def _passes_y_through_a_branch(x, y):
    if x.mean() > -10.0:
        a = y
    else:
        a = x
    b = a * d2s.tanh(y)  # the plan multiplies into a's array: it must not be y's
    return b + y


def _passes_y_through_a_loop_that_never_runs(x, y):
    a = y
    i = d2s.zeros([], "int64")
    while i < x.shape[0] - 3:
        a = a * 0.5 + x
        i += 1
    b = a * d2s.tanh(y)
    return b + y


@needs_numba
@pytest.mark.parametrize("fn", [_passes_y_through_a_branch,
                                _passes_y_through_a_loop_that_never_runs])
def test_a_region_returns_new_arrays_not_its_arguments(fn):
    """A value a region's branch or loop passes through is copied out: the plan writes
    into a region's results."""
    d2s.set_flags({"native_after_calls": 1})
    converted = d2s.jit.to_static(fn)
    x = d2s.to_tensor(np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4))
    y = d2s.to_tensor(np.linspace(0, 2, 12, dtype="float32").reshape(3, 4))
    converted(x, y)
    plans = list(converted.concrete_program.runner._plans.values())
    assert all(plan.wait_native(300) for plan in plans)
    for _ in range(2):
        np.testing.assert_array_equal(converted(x, y).numpy(), fn(x, y).numpy())
    np.testing.assert_array_equal(y.numpy(), np.linspace(0, 2, 12, dtype="float32").reshape(3, 4))


def _passes_a_pending_value_through_one_branch(x, y):
    z = y * 2.0 + 1.0  # an elementwise chain the region computes lazily
    if x.mean() > 0:
        a = x + 1.0
    else:
        a = z
    return a * z  # z is needed whichever branch ran


@needs_numba
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_value_one_branch_passes_through_is_computed_before_the_branch(sign):
    d2s.set_flags({"native_after_calls": 1})
    converted = d2s.jit.to_static(_passes_a_pending_value_through_one_branch)
    x = d2s.to_tensor(np.full((3, 4), sign, "float32"))
    y = d2s.to_tensor(np.linspace(0, 2, 12, dtype="float32").reshape(3, 4))
    converted(x, y)
    plans = list(converted.concrete_program.runner._plans.values())
    assert all(plan.wait_native(300) for plan in plans)
    for value in (x, -x):
        np.testing.assert_array_equal(converted(value, y).numpy(),
                                      _passes_a_pending_value_through_one_branch(value, y).numpy())


def _overwrites_what_nothing_else_reads(x, w, b):
    h = d2s.nn.functional.relu(d2s.matmul(x, w) + b)  # into the product's own array
    m = d2s.matmul(x, w)
    k, q = m + b, m * 2.0  # m is read twice: neither overwrites it
    outside = d2s.matmul(x, w)  # read once, but in every iteration of the loop
    total = d2s.zeros([2, 16], "float32")
    i = d2s.zeros([], "int64")
    while i < 3:
        total = total + outside * 2.0
        i += 1
    return h + k + q + total


@needs_numba
def test_a_chain_overwrites_only_arrays_nothing_else_reads():
    d2s.set_flags({"native_after_calls": 1})
    converted = d2s.jit.to_static(_overwrites_what_nothing_else_reads)
    x, w, b = (d2s.to_tensor(RNG.standard_normal(s).astype("float32"))
               for s in ((2, 6), (6, 16), (16,)))
    converted(x, w, b)
    (plan,) = converted.concrete_program.runner._plans.values()
    assert plan.wait_native(300)
    (region,) = plan.native_regions
    assert "while True:" in region
    xa, wa, ba = x.numpy(), w.numpy(), b.numpy()
    m = _in_index_order(xa, wa)
    want = np.maximum(m + ba, 0) + (m + ba) + m * 2 + (m * 2 + m * 2 + m * 2)
    for _ in range(2):
        np.testing.assert_allclose(converted(x, w, b).numpy(), want, rtol=1e-6, atol=1e-6)
