"""kernels/fusion.py: host evaluation against NumPy, and the generated CUDA C.

Every op of the C table is checked on every dtype it takes: ``evaluate``
against NumPy (and, on a GPU, the compiled kernel against ``evaluate``). Every
kernel generated for those cases and for the fusion test corpus
(``tests/runtime/test_fusion.py``) is compiled with ``nvcc`` when it is
installed, so codegen errors show up on a machine without a GPU.
"""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
import types

import numpy as np
import pytest

from dy2stat.kernels import backend, fusion
from dy2stat.runtime.passes import fuse_elementwise
from tests.runtime.test_fusion import COMPOSITE, corpus, fused_ops, run

RNG = np.random.default_rng(0)

FLOATS = ["float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8"]
NUMERIC = FLOATS + INTS

# op -> (operand dtypes it takes, NumPy reference, attrs)
TABLE = {
    "add": (NUMERIC, np.add, {}),
    "subtract": (NUMERIC, np.subtract, {}),
    "multiply": (NUMERIC + ["bool"], np.multiply, {}),
    "divide": (FLOATS, np.divide, {}),
    "floor_divide": (NUMERIC, np.floor_divide, {}),
    "remainder": (NUMERIC, np.remainder, {}),
    "pow": (FLOATS + ["int32", "int64"], np.power, {}),
    "maximum": (NUMERIC, np.maximum, {}),
    "minimum": (NUMERIC, np.minimum, {}),
    "equal": (NUMERIC + ["bool"], np.equal, {}),
    "not_equal": (NUMERIC + ["bool"], np.not_equal, {}),
    "less_than": (NUMERIC, np.less, {}),
    "less_equal": (NUMERIC, np.less_equal, {}),
    "greater_than": (NUMERIC, np.greater, {}),
    "greater_equal": (NUMERIC, np.greater_equal, {}),
    "logical_and": (["bool", "float32", "int64"], np.logical_and, {}),
    "logical_or": (["bool", "float32", "int64"], np.logical_or, {}),
    "logical_xor": (["bool", "float32", "int64"], np.logical_xor, {}),
    "bitwise_and": (INTS + ["bool"], np.bitwise_and, {}),
    "bitwise_or": (INTS + ["bool"], np.bitwise_or, {}),
    "bitwise_xor": (INTS + ["bool"], np.bitwise_xor, {}),
    "exp": (FLOATS, np.exp, {}),
    "log": (FLOATS, np.log, {}),
    "sqrt": (FLOATS, np.sqrt, {}),
    "tanh": (FLOATS, np.tanh, {}),
    "sin": (FLOATS, np.sin, {}),
    "cos": (FLOATS, np.cos, {}),
    "floor": (FLOATS, np.floor, {}),
    "ceil": (FLOATS, np.ceil, {}),
    "round": (FLOATS, np.round, {}),
    "sigmoid": (FLOATS, lambda x: 1 / (1 + np.exp(-x)), {}),
    "neg": (NUMERIC, np.negative, {}),
    "abs": (NUMERIC, np.abs, {}),
    "sign": (NUMERIC, np.sign, {}),
    "relu": (NUMERIC, lambda x: np.maximum(x, x.dtype.type(0)), {}),
    "logical_not": (["bool", "float32", "int64"], np.logical_not, {}),
    "bitwise_not": (INTS + ["bool"], np.invert, {}),
    "scale": (NUMERIC, lambda x: x * x.dtype.type(2.0) + x.dtype.type(1.0),
              {"scale": 2.0, "bias": 1.0}),
    "clip": (NUMERIC, lambda x: np.clip(x, x.dtype.type(1.0), x.dtype.type(5.0)),
             {"min": 1.0, "max": 5.0}),
    "cast": (NUMERIC + ["bool"], lambda x: x.astype("float32"), {"dtype": "float32"}),
    "where": (NUMERIC + ["bool"], np.where, {}),
}
_BOOL_RESULT = {"equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal",
                "logical_and", "logical_or", "logical_xor", "logical_not"}


def test_the_tables_cover_every_op():
    assert set(TABLE) | {"full"} == set(fusion.OPS) == set(fusion.C_EXPR)
    assert set(fusion.HOST) | {"full"} == set(fusion.OPS)


def values(op, dtype, shape):
    """Inputs that keep ``op`` inside its domain."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.random(shape) > 0.5
    if dt.kind == "f":
        if op in ("log", "sqrt", "pow"):
            return (RNG.random(shape) * 3 + 0.1).astype(dt)
        return (RNG.standard_normal(shape) * 3).astype(dt)
    low = 0 if dt.kind == "u" else -9
    if op == "pow":
        low = 0
    high = 4 if op == "pow" else 9
    out = RNG.integers(low, high, shape).astype(dt)
    if op in ("floor_divide", "remainder"):
        out[out == 0] = 1
    return out


def cases():
    for op, (dtypes, ref, attrs) in TABLE.items():
        arity = fusion.OPS[op].arity
        for dtype in dtypes:
            yield pytest.param(op, dtype, ref, attrs, arity, id=f"{op}-{dtype}")


def single(op, dtype, attrs, arity):
    """The one-step expr of ``op`` on inputs of ``dtype``, and its input dtypes."""
    if op == "where":
        ins = ["bool", dtype, dtype]
        out = dtype
    else:
        ins = [dtype] * arity
        out = "bool" if op in _BOOL_RESULT else attrs.get("dtype", dtype)
    refs = [f"x{k}" for k in range(arity)]
    return [[op, refs, dict(attrs), out]], ins


def inputs_for(op, in_dtypes, shapes):
    return [values(op, d, s) for d, s in zip(in_dtypes, shapes)]


SHAPES = {1: [(3, 4)], 2: [(3, 4), (4,)], 3: [(3, 1), (3, 4), (4,)]}


@pytest.mark.parametrize("op, dtype, ref, attrs, arity", list(cases()))
def test_evaluate_matches_numpy(xp, op, dtype, ref, attrs, arity):
    expr, in_dtypes = single(op, dtype, attrs, arity)
    host = inputs_for(op, in_dtypes, SHAPES[arity])
    with np.errstate(all="ignore"):
        want = ref(*host)
        got = backend.to_host(fusion.evaluate(xp, expr, [xp.asarray(a) for a in host]))
    assert got.dtype == want.dtype and got.shape == want.shape
    if xp is np:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_chain_reuses_its_buffers_but_never_its_inputs():
    x, y = RNG.standard_normal((3, 1)), RNG.standard_normal(4)
    expr = [["scale", ["x0"], {"scale": 2.0, "bias": 0.0}, "float64"],  # t0: fresh, [3, 1]
            ["add", ["t0", "x1"], {}, "float64"],  # grows to [3, 4]: not into t0
            ["exp", ["t1"], {}, "float64"],  # into t1
            ["multiply", ["t2", "t1"], {}, "float64"]]  # t1 is read here: not into t1 before
    x0, y0 = x.copy(), y.copy()
    got = fusion.evaluate(np, expr, [x, y])
    t1 = x * 2.0 + y
    np.testing.assert_array_equal(got, np.exp(t1) * t1)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def test_zero_d_operands_give_numpy_scalars_as_the_ops_do():
    expr = [["multiply", ["x0", "x1"], {}, "float32"], ["sigmoid", ["t0"], {}, "float32"],
            ["full", [], {"value": 1.5}, "float32"], ["add", ["t1", "t2"], {}, "float32"]]
    a, b = np.asarray(np.float32(0.5)), np.asarray(np.float32(-2.0))
    got = fusion.evaluate(np, expr, [a, b])
    want = 1 / (1 + np.exp(-(a * b))) + np.float32(1.5)
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("expr, message", [
    ([], "non-empty list"),
    ([["exp", ["x0"], {}]], r"\[op, refs, attrs, dtype\]"),
    ([["nope", ["x0"], {}, "float32"]], "cannot be fused"),
    ([["add", ["x0"], {}, "float32"]], "2 operand refs"),
    ([["exp", ["y0"], {}, "float32"]], "bad operand ref"),
    ([["exp", ["t0"], {}, "float32"]], "bad operand ref"),
    ([["exp", ["x0"], {}, "complex64"]], "unsupported dtype"),
    ([["scale", ["x0"], {"scale": [1]}, "float32"]], "must be a number"),
    ([["exp", ["x0"], {}, "float32"], ["exp", [0], {}, "float32"]], "bad operand ref"),
])
def test_malformed_exprs_are_errors_naming_the_step(expr, message):
    with pytest.raises(ValueError, match=message):
        fusion.parse(expr)


def test_an_expr_takes_exactly_its_inputs():
    with pytest.raises(ValueError, match="takes 2 inputs, got 1"):
        fusion.evaluate(np, [["add", ["x0", "x1"], {}, "float32"]], [np.ones(2, "float32")])


# ------------------------------------------------------------------ CUDA C


def test_the_source_is_one_self_contained_kernel():
    expr = [["multiply", ["x0", "x1"], {}, "float32"], ["full", [], {"value": 0.5}, "float32"],
            ["add", ["t0", "t1"], {}, "float32"], ["tanh", ["t2"], {}, "float32"],
            ["clip", ["t3"], {"min": None, "max": math.inf}, "float32"]]
    kernel = fusion.get_kernel(expr, ["float32", "float32"], [2, 1], [True, False])
    assert fusion.get_kernel(expr, ["float32", "float32"], [2, 1], [True, False]) is kernel
    assert kernel in fusion.cached_kernels()
    src = kernel.source
    assert f'extern "C" __global__ void {kernel.name}(' in src
    assert kernel.name.startswith("fused_") and "#include" not in src
    assert "const float* __restrict__ x0" in src and "float* __restrict__ out" in src
    assert "x0[i]" in src and "x1[o1]" in src  # dense x0, broadcast x1 through its strides
    assert "tanhf(" in src and "((float)0.5)" in src and "__int_as_float(0x7f800000)" in src
    other = fusion.get_kernel(expr, ["float32", "float32"], [2, 0])
    assert other.name != kernel.name and "x1[0]" in other.source  # a scalar input


def test_float64_uses_the_double_functions_and_ints_their_helpers():
    expr = [["exp", ["x0"], {}, "float64"], ["floor_divide", ["t0", "x0"], {}, "float64"]]
    src = fusion.cuda_source(expr, ["float64"], [1])
    assert "exp(v0)" in src and "expf" not in src and "fe_floordiv_double(" in src
    expr = [["remainder", ["x0", "x1"], {}, "int64"], ["maximum", ["t0", "x0"], {}, "int64"]]
    src = fusion.cuda_source(expr, ["int64", "int64"], [1, 1])
    assert "long long fe_imod_long_long(" in src and "fe_max_long_long(" in src


def test_codegen_refuses_float16_and_inconsistent_dtypes():
    with pytest.raises(NotImplementedError, match="float16"):
        fusion.cuda_source([["exp", ["x0"], {}, "float16"]], ["float16"], [1])
    with pytest.raises(TypeError, match="insert the casts"):
        fusion.cuda_source([["add", ["x0", "x1"], {}, "float32"]], ["float32", "int64"], [1, 1])
    with pytest.raises(ValueError, match="does not fit"):
        fusion.cuda_source([["scale", ["x0"], {"scale": 1e12}, "int32"]], ["int32"], [1])


def test_an_integer_clip_without_a_bound_clips_at_the_dtypes_end():
    """As the clip kernel does: -inf (no lower bound) of an int32 is its minimum."""
    src = fusion.cuda_source([["clip", ["x0"], {"min": -math.inf, "max": 5.0}, "int32"]],
                             ["int32"], [1])
    assert "((int)-2147483648LL)" in src and "((int)5LL)" in src


def _table_kernels():
    kernels = []
    for param in cases():
        op, dtype, _, attrs, arity = param.values
        expr, in_dtypes = single(op, dtype, attrs, arity)
        for layout in ("strided", "dense", "scalar"):
            ndims = [0] * arity if layout == "scalar" else [2] * arity
            dense = [layout == "dense"] * arity
            kernels.append(fusion.get_kernel(expr, in_dtypes, ndims, dense))
        # followed by a constant and a second op, with the first input broadcast
        result = expr[0][3]
        expr += [["full", [], {"value": 2.0}, result],
                 ["equal" if result == "bool" else "maximum", ["t0", "t1"], {}, result]]
        kernels.append(fusion.get_kernel(expr, in_dtypes, [1] + [2] * (arity - 1)))
    return kernels


def _corpus_kernels():
    kernels = []
    for prog in corpus():
        fused = fuse_elementwise(prog.program, prog.fetch)
        for idx, op in fused_ops(fused):
            block = fused.blocks[idx]
            xs = [block.var(n) for n in op.inputs["X"]]
            dtypes = [v.dtype for v in xs]
            ndims = [len(v.shape) for v in xs]
            kernels.append(fusion.get_kernel(op.attrs["expr"], dtypes, ndims))
            rank = max(ndims)
            kernels.append(fusion.get_kernel(op.attrs["expr"], dtypes, ndims,
                                             [n == rank for n in ndims]))
    return kernels


def _nvcc(path, out):
    return subprocess.run(["nvcc", "-arch=sm_90", "-c", "-o", str(out), str(path)],
                          capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_every_generated_kernel_compiles_with_nvcc(tmp_path):
    kernels = {k.name: k for k in _table_kernels() + _corpus_kernels()}
    assert len(kernels) > 300
    # One translation unit: each kernel in its own namespace (their helpers may repeat).
    unit = "\n".join(f"namespace k{i} {{\n{k.source}\n}}" for i, k in enumerate(kernels.values()))
    path = tmp_path / "all.cu"
    path.write_text(unit)
    result = _nvcc(path, tmp_path / "all.o")
    if result.returncode == 0:
        return
    for kernel in kernels.values():  # find the kernel that fails, to show it
        one = tmp_path / f"{kernel.name}.cu"
        one.write_text(kernel.source)
        single_result = _nvcc(one, tmp_path / f"{kernel.name}.o")
        assert single_result.returncode == 0, f"{single_result.stderr}\n{kernel.source}"
    pytest.fail(result.stderr[-4000:])


# ------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("op, dtype, ref, attrs, arity", list(cases()))
def test_the_cuda_kernel_matches_evaluate(op, dtype, ref, attrs, arity):
    cp = backend.cupy
    expr, in_dtypes = single(op, dtype, attrs, arity)
    host = inputs_for(op, in_dtypes, SHAPES[arity])
    with np.errstate(all="ignore"):
        want = fusion.evaluate(np, expr, host)
    got = cp.asnumpy(fusion.launch(cp, expr, [cp.asarray(a) for a in host]))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.gpu
def test_the_cuda_kernel_reads_strided_broadcast_and_scalar_inputs():
    cp = backend.cupy
    expr = [["multiply", ["x0", "x1"], {}, "float32"], ["add", ["t0", "x2"], {}, "float32"],
            ["full", [], {"value": 0.5}, "float32"], ["multiply", ["t1", "t2"], {}, "float32"],
            ["tanh", ["t3"], {}, "float32"]]
    a = RNG.standard_normal((5, 3)).astype("float32").T  # transposed: not contiguous
    b = RNG.standard_normal((5,)).astype("float32")
    c = np.float32(2.0).reshape(1, 1)
    want = fusion.evaluate(np, expr, [a, b, c])
    got = fusion.launch(cp, expr, [cp.asarray(a), cp.asarray(b), cp.asarray(c)])
    np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-6)
    empty = fusion.launch(cp, expr, [cp.zeros((0, 5), "float32"), cp.asarray(b), cp.asarray(c)])
    assert empty.shape == (0, 5)


# ------------------------------------------- the CUDA source, run on the host
#
# Without a GPU, the generated CUDA still runs: the same source compiles as
# C++ for the CPU with a few lines standing in for CUDA's built-ins (one
# "thread" whose grid-stride loop covers every element). ``launch`` is driven
# through a stand-in for CuPy whose RawKernel records each call; the recorded
# kernels are compiled in one g++ run and the calls replayed into their
# outputs. This checks the C expressions, the helpers, the strided and
# broadcast indexing and launch's arguments, everywhere but in the GPU itself.

_HOST_SHIM = r"""
#include <math.h>
#include <string.h>
struct fe_dim3 { unsigned x; };
static const fe_dim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
#define __global__
#define __device__
#define __forceinline__ inline
static inline float __int_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
"""


class _RecordingKernel:
    """``cupy.RawKernel``'s interface; calls are recorded, to be replayed on the host."""

    calls: list = []

    def __init__(self, source, name):
        self.source, self.name = source, name

    def compile(self):
        pass

    def __call__(self, grid, block, args):
        self.calls.append((self, args))


def _host_cupy():
    """NumPy posing as CuPy, with the recording RawKernel."""
    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.RawKernel = _RecordingKernel
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: -1))
    return fake


def _replay(tmp_path):
    """Compile every recorded kernel with g++ (one run) and run the recorded calls."""
    calls, _RecordingKernel.calls = _RecordingKernel.calls, []
    kernels = {k.name: k for k, _ in calls}
    unit = _HOST_SHIM + "\n".join(f"namespace k{i} {{\n{k.source}\n}}"
                                  for i, k in enumerate(kernels.values()))
    (tmp_path / "host.cpp").write_text(unit)
    result = subprocess.run(["g++", "-O0", "-w", "-shared", "-fPIC", "-o",
                             str(tmp_path / "host.so"), str(tmp_path / "host.cpp")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    lib = ctypes.CDLL(str(tmp_path / "host.so"))
    for kernel, args in calls:
        fn = getattr(lib, kernel.name)
        fn.restype = None
        fn(*[ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray)
             else ctypes.c_longlong(int(a)) for a in args])


def _layouts(op, in_dtypes, arity):
    """Input sets of one op: dense, broadcast, transposed (strided) and 0-d."""
    yield inputs_for(op, in_dtypes, SHAPES[arity])
    yield inputs_for(op, in_dtypes, [(4,)] + [(3, 1)] * (arity - 1))
    if arity > 1:  # the highest-ranked input has one element: the kernel walks fewer dims
        yield inputs_for(op, in_dtypes, [(1, 1, 1)] + [(2, 4)] * (arity - 1))
    yield [a.T if a.ndim == 2 else a for a in inputs_for(op, in_dtypes, [(4, 3)] * arity)]
    yield inputs_for(op, in_dtypes, [()] * arity)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_cuda_source_computes_what_evaluate_does(tmp_path):
    cp = _host_cupy()
    checks = []
    with np.errstate(all="ignore"):
        for param in cases():
            op, dtype, _, attrs, arity = param.values
            expr, in_dtypes = single(op, dtype, attrs, arity)
            for inputs in _layouts(op, in_dtypes, arity):
                checks.append((param.id, fusion.run(cp, expr, inputs),
                               fusion.evaluate(np, expr, inputs)))
        for prog in [make() for make in COMPOSITE]:
            fused = fuse_elementwise(prog.program, prog.fetch)
            for idx, op in fused_ops(fused):
                if idx == 0:  # its inputs are values of the unfused program too
                    inputs = run(prog.program, prog.feeds[0], op.inputs["X"], prog.params)
                    checks.append((prog.name, fusion.run(cp, op.attrs["expr"], inputs),
                                   fusion.evaluate(np, op.attrs["expr"], inputs)))
    _replay(tmp_path)
    assert len(checks) > 800
    for name, got, want in checks:
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if want.dtype.kind == "f":  # C's libm and NumPy's may differ in the last bit
            tol = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}[want.dtype.name]
            np.testing.assert_allclose(got, want, *tol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
