"""Every op of the registry: exported to ONNX, run in ONNX Runtime, equal to dy2stat's own
result on the same inputs (the op table of tests/ops, in float32, at the default opset and
a newer one), or refused with an error that names the op and the line that built it."""

from __future__ import annotations

import pytest

ort = pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402

import dy2stat as d2s  # noqa: E402
from dy2stat.dispatch import apply  # noqa: E402
from dy2stat.onnx import ExportError  # noqa: E402
from dy2stat.onnx.lowering import REFUSED, RULES  # noqa: E402
from dy2stat.runtime.ops.indexing import encode_index  # noqa: E402
from dy2stat.runtime.registry import OPS  # noqa: E402
from tests.onnx.helpers import (  # noqa: E402
    assert_close,
    checked,
    export_traced,
    run,
    session,
    traced,
)
from tests.ops.harness import Case, distinct, randn  # noqa: E402
from tests.ops.test_ops import CASES  # noqa: E402

OPSETS = [17, 21]

# edge inputs (log of 0, division by 0) warn in the eager kernels that give the expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_every_op_has_a_rule_or_a_reason():
    assert not set(RULES) & set(REFUSED)
    assert set(RULES) | set(REFUSED) == set(OPS)
    assert all(reason.strip() for reason in REFUSED.values())


def _is_arrays(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value)


def _as_float(value, dtype):
    """The case's float64 arrays as ``dtype`` (float32: what models use; None: kept)."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and dtype is not None:
        return value.astype(dtype)
    if _is_arrays(value) and not isinstance(value, np.ndarray):
        return [_as_float(v, dtype) for v in value]
    return value


def _flat(values) -> list:
    if isinstance(values, (list, tuple)):
        return [v for value in values for v in _flat(value)]
    return [values]


def _exported(case: Case, opset: int, dynamic: bool = False, floats="float32"):
    """(the ONNX model of the case's op, its input arrays, dy2stat's eager results); the
    case's float64 inputs in the dtype ``floats``."""
    if case.op == "fused_elementwise":  # its expr names the dtypes
        floats = None
    inputs = [_as_float(x, floats) for x in case.inputs]
    arrays: dict = {}

    def feed(a):
        name = f"in{len(arrays)}"
        arrays[name] = a
        shape = [-1] * a.ndim if dynamic else list(a.shape)
        return name, (shape, str(a.dtype))

    specs = {}
    plan = []
    for x in inputs:
        if isinstance(x, np.ndarray):
            plan.append(feed(x)[0])
        elif _is_arrays(x):
            plan.append([feed(a)[0] for a in x])
        else:
            plan.append(x)
    for name, a in arrays.items():
        specs[name] = ([-1] * a.ndim if dynamic else list(a.shape), str(a.dtype))
    names = list(specs)

    def build(*variables):
        by_name = dict(zip(names, variables))
        args = [[by_name[n] for n in p] if isinstance(p, list) and p and isinstance(p[0], str)
                and p[0] in by_name else by_name[p] if isinstance(p, str) and p in by_name
                else p for p in plan]
        return _flat(apply(case.op, *args, **case.attrs))

    model = export_traced(build, specs, opset)
    eager_args = [d2s.to_tensor(x) if isinstance(x, np.ndarray) else
                  [d2s.to_tensor(a) for a in x] if _is_arrays(x) else x for x in inputs]
    expected = [t.numpy() for t in _flat(apply(case.op, *eager_args, **case.attrs))]
    return model, arrays, expected


def _run(model, arrays: dict) -> list:
    sess = session(model)
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in arrays.items() if k in names})


def _check(case: Case, opset: int, dynamic: bool = False, floats="float32",
           tolerance: float = 1e-4) -> None:
    _compare(*_exported(case, opset, dynamic, floats), tolerance)


def _compare(model, arrays: dict, expected: list, tolerance: float) -> None:
    checked(model)
    actual = _run(model, arrays)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_close(a, e, rtol=tolerance, atol=tolerance / 10)


def _expected_refusal(case: Case, opset: int) -> str | None:
    """The reason an op case cannot export (None: it exports)."""
    if case.op.startswith("bitwise_") and opset < 18 and any(
            isinstance(x, np.ndarray) and x.dtype != bool for x in case.inputs):
        return "need opset_version 18 or newer"
    if case.op == "batch_norm" and case.attrs.get("training", True):
        return "batch norm in training mode"
    return None


# Variations of the op table's cases that the ONNX forms make worth checking: advanced
# indices next to each other or apart (ONNX gathers them at once; an Ellipsis of no dims
# parts them too), negative steps from before the start (ONNX would clamp to the
# start), NumPy's integer and float division, ceil-mode and exclusive pooling, batch
# norm in eval mode, every pad mode and resize mode, repeated scatter indices.
_X = randn(3, 4, 5)


def _index(op, x, index, value=None, name=""):
    encoded, tensors = encode_index(index)
    inputs = [x, tensors] if op == "getitem" else [x, value, tensors]
    return Case(op, inputs, {"index": encoded}, name=name)


EXTRA = [
    _index("getitem", _X, (0, np.array([2, 0])), name="int-next-to-array"),
    _index("getitem", _X, (np.array([1, 2]), slice(None), 3), name="int-apart-from-array"),
    _index("getitem", _X, (slice(1, None), np.array([[0, 1]]), np.array([2, -1])),
           name="arrays-broadcast-in-place"),
    _index("getitem", _X, (np.array([-1, 0]),), name="negative-array"),
    _index("getitem", _X, (slice(None), [True, False, True, True]), name="bool-list"),
    _index("getitem", _X, (Ellipsis, slice(None, None, np.array(-2))), name="tensor-step"),
    _index("getitem", _X, (None, _X[:, :, 0] > 0), name="newaxis-and-2d-mask"),
    _index("getitem", _X, (slice(-5, None, -1),), name="back-from-before-the-start"),
    _index("getitem", _X, (slice(None), slice(np.array(-9), 1, np.array(-1))),
           name="tensor-back-from-before-the-start"),
    _index("getitem", _X, (slice(None), np.array([0, 2]), Ellipsis, -1),
           name="array-and-int-parted-by-an-empty-ellipsis"),
    _index("setitem", _X, (slice(None), np.array([3, 1]), 2), value=randn(3, 2),
           name="array-and-int"),
    _index("setitem", _X, (slice(None), 1, Ellipsis, np.array([4, 0])), value=randn(2, 3),
           name="int-and-array-parted-by-an-empty-ellipsis"),
    _index("setitem", _X, (slice(-4, None, -2),), value=randn(4, 5),
           name="back-from-before-the-start"),
    _index("setitem", _X, _X > 0.5, value=randn(1), name="mask-vector"),
    _index("setitem", _X, (Ellipsis, slice(np.array(1), None, 2)), value=randn(4, 2),
           name="tensor-bound"),
    Case("floor_divide", [np.array([1.0, -7.5, 7.5, 3.0]), np.array([0.1, 2.0, -2.0, 0.0])],
         name="float-numpy-rules"),
    Case("floor_divide", [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])], name="int"),
    Case("remainder", [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])], name="int"),
    Case("remainder", [np.array([5.5, -5.5, 5.5]), np.array([2.0, 2.0, -2.0])], name="float"),
    Case("max_pool2d", [distinct(1, 2, 5, 7)],
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, name="ceil"),
    Case("avg_pool2d", [randn(1, 2, 5, 7)],
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "exclusive": False},
         name="ceil-inclusive"),
    Case("batch_norm", [randn(2, 3, 4, 4), randn(3), np.abs(randn(3)) + 0.5, randn(3),
                        randn(3)], {"training": False}, name="eval"),
    Case("batch_norm", [randn(2, 4, 3), randn(3), np.abs(randn(3)) + 0.5, None, None],
         {"training": False, "data_format": "NLC"}, name="eval-channel-last"),
    *[Case("pad", [randn(2, 3, 4)], {"paddings": [0, 0, 1, 2, 2, 1], "mode": mode},
           name=mode) for mode in ("reflect", "replicate", "circular")],
    *[Case("interpolate", [randn(1, 2, 3, 5)],
           {"size": [5, 8], "mode": mode, "align_corners": corners, "align_mode": align},
           name=f"{mode}-{corners}-{align}")
      for mode, corners, align in [("nearest", False, 0), ("nearest", True, 0),
                                   ("bilinear", False, 0), ("bilinear", True, 0),
                                   ("bilinear", False, 1)]],
    Case("interpolate", [randn(1, 4, 6, 2)], {"scale": [0.5, 1.5], "mode": "bilinear",
                                              "channel_last": True}, name="scale-nhwc"),
    Case("scatter", [randn(4, 3), np.array([1, -1, 1]), randn(3, 3)], name="repeated"),
    Case("scatter", [randn(4, 3), np.array([1, 3, 1]), randn(3, 3)], {"overwrite": False},
         name="accumulate"),
    Case("repeat_interleave", [randn(3, 2), np.array([2, 0, 3])], {"axis": 0},
         name="tensor-repeats"),
    Case("topk", [np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])], {"k": 3}, name="ties"),
    Case("argsort", [np.array([2, 1, 2, 1, 2])], {"descending": True}, name="ties"),
    Case("cumprod", [randn(2, 0, 3)], {"dim": 2}, name="empty"),
    Case("diag", [randn(3)], {"offset": -2, "padding_value": 1.5}, name="below"),
    Case("diag", [randn(3, 5)], {"offset": 2}, name="above"),
    Case("roll", [randn(3, 4)], {"shifts": [5, -1], "axis": [0, 1]}, name="past-the-dim"),
    Case("cross_entropy", [randn(4, 5), np.array([[1], [-100], [4], [0]])],
         {"ignore_index": -100, "reduction": "mean"}, name="ignored"),
    Case("logsumexp", [np.array([[-np.inf, -np.inf], [1.0, 2.0]])], {"axis": 1},
         name="all-minus-inf"),
]
_TABLE = [c for c in CASES if c.op in RULES and c.check is None] + EXTRA


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", _TABLE, ids=[c.id for c in _TABLE])
def test_op_runs_in_onnx_runtime_as_in_dy2stat(case, opset):
    reason = _expected_refusal(case, opset)
    if reason is None:
        _check(case, opset)
        return
    with pytest.raises(ExportError, match=reason) as info:
        _exported(case, opset)
    assert info.value.op_type == case.op


# ONNX Runtime's CPU kernels of Conv, ConvTranspose, AveragePool and Erf take no float64:
# a float64 model with these ops is valid ONNX that ONNX Runtime does not load (as
# docs/deploying.md says). Every other op runs in float64 and float16 as in dy2stat.
ORT_HAS_NO_FLOAT64 = {"Conv", "ConvTranspose", "AveragePool", "Erf"}


@pytest.mark.parametrize("floats, tolerance", [("float64", 1e-6), ("float16", 1e-2)])
@pytest.mark.parametrize("case", _TABLE, ids=[c.id for c in _TABLE])
def test_op_in_float64_and_float16(case, floats, tolerance):
    if _expected_refusal(case, 18) is not None:
        pytest.skip("refused (test_op_runs_in_onnx_runtime_as_in_dy2stat)")
    model, arrays, expected = _exported(case, 18, floats=floats)
    if floats == "float64" and {n.op_type for n in model.graph.node} & ORT_HAS_NO_FLOAT64:
        with pytest.raises(ort.capi.onnxruntime_pybind11_state.NotImplemented):
            session(checked(model))
        return
    _compare(model, arrays, expected, tolerance)


# Integer cases whose ONNX form differs from the float one: division and remainder by 0
# (NumPy gives 0 where ONNX Runtime would stop), and pad of int16 (which ONNX Runtime
# pads as int32).
_INT_CASES = [
    *[Case(op, [np.array([7, -7 if dtype != "uint8" else 9, 0, 5], dtype),
                np.array([0, 0, 0, 2], dtype)], name=dtype)
      for op in ("floor_divide", "remainder") for dtype in ("int8", "uint8", "int32", "int64")],
    *[Case("pad", [np.arange(12, dtype="int16").reshape(3, 4)],
           {"paddings": [1, 0, 2, 1], "mode": mode, "value": 7}, name=f"int16-{mode}")
      for mode in ("constant", "reflect", "replicate", "circular")],
]


@pytest.mark.parametrize("case", _INT_CASES, ids=[c.id for c in _INT_CASES])
def test_integer_forms(case):
    _check(case, 17, tolerance=0)


# Ops whose ONNX form reads dims from the tensors when the model runs: checked with every
# dim of every input unknown (-1) when the program is built.
_DYNAMIC = [c for c in _TABLE if c.op in {
    "reshape", "flatten", "split", "unstack", "concat", "stack", "tile", "expand_as", "roll",
    "repeat_interleave", "getitem", "setitem", "sequence_mask", "meshgrid", "one_hot",
    "cumsum", "cumprod", "var", "logsumexp", "mean", "sum", "argmax", "topk", "argsort",
    "layer_norm", "softmax", "gather_nd", "scatter", "masked_select", "nonzero", "diag",
    "array_write", "full_like", "cross_entropy", "embedding"}
    and not (c.op == "split" and isinstance(c.attrs.get("num_or_sections"), int))]


@pytest.mark.parametrize("case", _DYNAMIC, ids=[c.id for c in _DYNAMIC])
def test_op_with_unknown_dims(case):
    try:
        _exported(case, 17, dynamic=True)
    except ValueError as exc:  # the op needs a known dim to be built at all
        if isinstance(exc, ExportError):
            raise
        pytest.skip(f"not buildable with unknown dims: {exc}")
    _check(case, 17, dynamic=True)


# (assert, which has no output to export, is refused in test_errors.py)
_REFUSED_CASES = [c for c in CASES if c.op in REFUSED and OPS[c.op].outputs]


@pytest.mark.parametrize("case", _REFUSED_CASES, ids=[c.id for c in _REFUSED_CASES])
def test_an_op_without_onnx_form_names_itself_and_the_line(case):
    with pytest.raises(ExportError) as info:
        _exported(case, 17)
    error = info.value
    assert error.op_type == case.op and error.reason == REFUSED[case.op]
    assert error.filename == __file__ and "apply(case.op" in error.source
    assert str(error).startswith(f"op {case.op} at {__file__}:{error.lineno} (`")


def test_an_int_bitwise_op_names_the_opset_it_needs():
    with pytest.raises(ExportError, match="bitwise_and .* need opset_version 18 or newer"):
        export_traced(lambda x: x & x, {"x": ([3], "int64")}, 17)
    model = export_traced(lambda x: x & 6, {"x": ([3], "int64")}, 18)
    assert run(checked(model), np.array([3, 5, 6]))[0].tolist() == [2, 4, 6]


# Elementwise ops and reductions in every dtype dy2stat allows them (ONNX Runtime lacks
# kernels for some dtypes: those compute in a wider one and are cast back).
_UNARY_ATTRS = {
    "exp": {}, "log": {}, "sqrt": {}, "tanh": {}, "sigmoid": {}, "sin": {}, "cos": {},
    "floor": {}, "ceil": {}, "round": {}, "neg": {}, "abs": {}, "sign": {}, "relu": {},
    "logical_not": {}, "bitwise_not": {}, "rsqrt": {}, "isnan": {}, "isinf": {},
    "isfinite": {}, "scale": {"scale": 2.0, "bias": 1.0}, "clip": {"min": 1.0, "max": 3.0},
    "cumsum": {"axis": 1}, "cumprod": {"dim": 1}, "sum": {}, "mean": {"axis": 0},
    "max": {"axis": 1}, "min": {}, "prod": {"axis": 0}, "any": {}, "all": {"axis": 1},
    "argmax": {}, "argmin": {"axis": 1}, "argsort": {}, "topk": {"k": 2}, "flip": {"axis": 1},
    "tril": {}, "nonzero": {}, "cast": {"dtype": "int32"},
}
_BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow",
           "maximum", "minimum", "equal", "not_equal", "less_than", "less_equal",
           "greater_than", "greater_equal", "logical_and", "logical_or", "logical_xor",
           "bitwise_and", "bitwise_or", "bitwise_xor", "where"]
_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
           "float64"]
# dy2stat's kernels give NumPy's dtype here where inference declares another (int64 for
# a sum of uint8, the input's for a product of small ints); ONNX gives the declared one
_KERNEL_DTYPE_DIFFERS = {("sum", "uint8")} | {("prod", t) for t in ("int8", "uint8", "int16",
                                                                      "int32")}


def _sample(dtype: str, seed: int, shape=(2, 3)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("float"):
        return (rng.random(shape) * 3 + 0.5).astype(dtype)
    return rng.integers(1, 5, shape).astype(dtype)


_DTYPE_CASES = [
    (op, dtype) for op in [*_UNARY_ATTRS, *_BINARY] for dtype in _DTYPES
    if (OPS[op].dtypes is None or np.dtype(dtype) in OPS[op].dtypes)
    and (op, dtype) not in _KERNEL_DTYPE_DIFFERS]


@pytest.mark.parametrize("op, dtype", _DTYPE_CASES, ids=[f"{o}-{t}" for o, t in _DTYPE_CASES])
def test_elementwise_ops_and_reductions_in_every_dtype(op, dtype):
    x, y = _sample(dtype, 0), _sample(dtype, 1)
    cond = _sample("bool", 2)
    if op in _BINARY:
        def call(a, b):
            return apply(op, d2s.to_tensor(cond), a, b) if op == "where" else apply(op, a, b)
        feeds, arrays = {"x": ([2, 3], dtype), "y": ([2, 3], dtype)}, [x, y]
    else:
        def call(a):
            return apply(op, a, **_UNARY_ATTRS[op])
        feeds, arrays = {"x": ([2, 3], dtype)}, [x]
    expected = _flat(call(*[d2s.to_tensor(a) for a in arrays]))
    actual = run(checked(export_traced(call, feeds, 18)), *arrays)
    for a, e in zip(actual, expected):
        tolerance = 1e-3 if dtype == "float16" else 1e-5
        assert_close(a, e.numpy(), rtol=tolerance, atol=tolerance)


class _Cube(d2s.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensor()
        return grad * 3 * x * x


def test_a_pylayer_exports_its_forward():
    """(py_layer has no case in the op table: its forward's ops are in the program.)"""
    def cubed_plus_one(x):
        return _Cube.apply(x) + 1

    model = export_traced(cubed_plus_one, {"x": ([2, 3], "float32")})
    x = np.arange(6, dtype="float32").reshape(2, 3) / 3
    program = traced(cubed_plus_one, {"x": ([2, 3], "float32")})[0]
    assert "py_layer" in {op.type for op in program.all_ops()}
    np.testing.assert_allclose(run(checked(model), x)[0], x ** 3 + 1, rtol=1e-6)
