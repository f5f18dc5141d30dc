"""Every registered op, fed every dtype: inference, the eager op and the static
program agree.

Each op's cases (``cases_*.py``) are rerun with their tensors cast to each of
dy2stat's dtypes: the float inputs all at once, and each input on its own (a
float16 value beside float64 parameters, an int32 index, a float mask); a
``dtype`` attr takes each dtype too. The elementwise ops and the reductions
also run on random shapes (broadcasting, axes, keepdim), mixed dtypes and
Python numbers. For each variant:

- static inference refuses it exactly when the eager op refuses it, with the
  same exception type and a message naming the op;
- when inference accepts it, the kernel runs (in eager mode and in the
  compiled program), the program verifies, and the dtypes the kernel returns
  are the inferred ones; its shapes agree with the inferred shapes.

So a program that passes validation computes the dtypes it declares, and a
converted function computes what the eager one does.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import warnings

import numpy as np
import pytest

import dy2stat as d2s
import tests.ops as cases_package
from dy2stat.dispatch import apply
from dy2stat.runtime import build, executor
from dy2stat.runtime.ir import Program
from dy2stat.runtime.registry import OPS
from dy2stat.runtime.verify import verify
from dy2stat.tensor import Tensor

CASES = []
for _info in pkgutil.iter_modules(cases_package.__path__):
    if _info.name.startswith("cases_"):
        CASES += importlib.import_module(f"tests.ops.{_info.name}").CASES

DTYPES = [np.dtype(d) for d in ("bool", "uint8", "int8", "int16", "int32", "int64",
                                "float16", "float32", "float64")]

# Ops whose kernels may fail on the values a cast gives (not on the dtype): both modes
# then fail alike, at run time.
VALUE_ERRORS = {
    "pow": "an integer to a negative integer power",
    "range": "a float step that rounds to 0",
    "getitem_grad": "how many elements a bool mask selects",
    "assert": "the condition may be false",
}


# ------------------------------------------------------------------ variants


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """``x`` as ``dtype``; None where the values would change their meaning (an
    index or a shape that does not fit the dtype). Float data becomes small ints."""
    if x.dtype.kind == "f" and dtype.kind != "f":
        if dtype.kind == "b":
            return np.asarray(x > 0)
        small = np.round(np.clip(np.nan_to_num(x), -50, 50) * 2)
        return np.asarray(np.abs(small) if dtype.kind == "u" else small).astype(dtype)
    out = np.asarray(x.astype(dtype))
    if x.dtype.kind != "f" and not np.array_equal(out.astype(x.dtype), x):
        return None
    return out


def _tensor_slots(inputs):
    """(input index, list index or None) of every array input."""
    found = []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            found.append((i, None))
        elif isinstance(x, list):
            found += [(i, j) for j, v in enumerate(x) if isinstance(v, np.ndarray)]
    return found


def _get(inputs, where):
    i, j = where
    return inputs[i] if j is None else inputs[i][j]


def _arrays(values):
    """The case's inputs with NumPy scalars as 0-d arrays (tensors, as eager sees them)."""
    return [_arrays(v) if isinstance(v, list) else
            np.asarray(v) if isinstance(v, np.generic) else v for v in values]


def _variants(case):
    """(description, inputs, attrs) for each dtype: the float inputs all cast to it,
    each input alone cast to it, and a ``dtype`` attr set to it."""
    original = _arrays(case.inputs)
    slots = _tensor_slots(original)
    floats = [w for w in slots if _get(original, w).dtype.kind == "f"]
    seen = set()
    for dtype in DTYPES:
        groups = [("float inputs", floats)] if len(floats) > 1 else []
        groups += [(_slot_name(case, w), [w]) for w in slots]
        for what, chosen in groups:
            key = (dtype, tuple(chosen))
            if not chosen or key in seen:
                continue
            seen.add(key)
            inputs = [list(x) if isinstance(x, list) else x for x in original]
            cast = [_cast(_get(original, w), dtype) for w in chosen]
            if any(c is None for c in cast):
                continue
            for (i, j), c in zip(chosen, cast):
                if j is None:
                    inputs[i] = c
                else:
                    inputs[i][j] = c
            yield f"{what} as {dtype}", inputs, case.attrs
        if "dtype" in OPS[case.op].attrs and case.op != "fused_elementwise":
            yield f"attr dtype={dtype}", original, {**case.attrs, "dtype": str(dtype)}


def _slot_name(case, where):
    i, j = where
    name = OPS[case.op].inputs[i].name
    return name if j is None else f"{name}[{j}]"


# ------------------------------------------------------------------ running


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [] if out is None else [out]


def _run_eager(op, attrs, inputs):
    values = [Tensor(v) if isinstance(v, np.ndarray) else
              [Tensor(t) if isinstance(t, np.ndarray) else t for t in v]
              if isinstance(v, list) else v for v in inputs]
    out = apply(op, *values, **attrs)
    return [(t.dtype, tuple(t.shape)) for t in _flat(out)]


def _build_static(op, attrs, inputs):
    """The program of the one op fed with ``inputs``: (program, feeds, outputs)."""
    program = Program()
    block = program.global_block()
    feeds = {}

    def data(a):
        var = block.create_var(a.shape, a.dtype, name=f"in_{len(feeds)}", is_data=True)
        feeds[var.name] = a
        return var

    values = [data(v) if isinstance(v, np.ndarray) else
              [data(t) if isinstance(t, np.ndarray) else t for t in v]
              if isinstance(v, list) else v for v in inputs]
    outs = _flat(build.append(block, op, values, dict(attrs)))
    return program, feeds, outs


def _outcome(fn, *args):
    """(result, None) or (None, the exception)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return fn(*args), None
    except Exception as exc:  # noqa: BLE001  (compared between the modes below)
        return None, exc


def _run_static(program, feeds, outs):
    verify(program, feed_names=list(feeds))
    plan = executor.compile(program, list(feeds), [v.name for v in outs], native=False)
    return [(np.asarray(a).dtype, tuple(np.shape(a))) for a in plan.run(feeds, {})]


def _problems(op, what, inputs, attrs):
    """What disagrees for this variant (an empty list: all agree)."""
    eager, eager_error = _outcome(_run_eager, op, attrs, inputs)
    built, build_error = _outcome(_build_static, op, attrs, inputs)
    if build_error is not None:
        if eager_error is None:
            return [f"{what}: static inference refuses it ({build_error}) but eager computes "
                    f"{eager}"]
        if type(eager_error) is not type(build_error):
            return [f"{what}: static refuses it with {build_error!r}, eager with "
                    f"{eager_error!r}"]
        if op.split("_chwn")[0] not in str(build_error):
            return [f"{what}: the error does not name the op: {build_error}"]
        return []
    program, feeds, outs = built
    inferred = [(v.dtype, tuple(v.shape)) for v in outs]
    ran, run_error = _outcome(_run_static, program, feeds, outs)
    if eager_error is not None or run_error is not None:
        if eager_error is not None and run_error is not None and op in VALUE_ERRORS:
            return []
        return [f"{what}: inference accepts it (giving {inferred}) but the kernel fails: "
                f"eager {eager_error!r}, static {run_error!r}"]
    problems = []
    if [d for d, _ in eager] != [d for d, _ in inferred]:
        problems.append(f"{what}: inference gives {[str(d) for d, _ in inferred]}, the eager "
                        f"op returns {[str(d) for d, _ in eager]}")
    if [d for d, _ in ran] != [d for d, _ in inferred]:
        problems.append(f"{what}: inference gives {[str(d) for d, _ in inferred]}, the "
                        f"program computes {[str(d) for d, _ in ran]}")
    if [s for _, s in eager] != [s for _, s in ran]:
        problems.append(f"{what}: eager shapes {[s for _, s in eager]}, program shapes "
                        f"{[s for _, s in ran]}")
    for (_, want), (_, got) in zip(inferred, ran):
        if len(want) != len(got) or any(w not in (-1, g) for w, g in zip(want, got)):
            problems.append(f"{what}: inferred shape {list(want)}, computed {list(got)}")
    return problems


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_dtype_is_inferred_and_computed_alike(case):
    problems = [p for what, inputs, attrs in _variants(case)
                for p in _problems(case.op, what, inputs, attrs)]
    assert not problems, f"{case.id}:\n  " + "\n  ".join(problems)


# ------------------------------------------------- random shapes and operands

UNARY = sorted(name for name, op in OPS.items() if op.elementwise and len(op.inputs) == 1
               and op.inputs[0].name == "X" and not op.inputs[0].variadic)
BINARY = sorted(name for name, op in OPS.items() if op.elementwise
                and op.input_names == ("X", "Y"))
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "var",
              "logsumexp", "cumsum", "cumprod"]
_UNARY_ATTRS = {"scale": {"scale": 2.5, "bias": 1.5}, "clip": {"min": -1.5, "max": 1.0}}


def _random_shape(rng, rank=None):
    rank = int(rng.integers(0, 4)) if rank is None else rank
    return tuple(int(d) for d in rng.integers(1, 4, rank))


def _random_tensor(rng, shape, dtype):
    return _cast(rng.standard_normal(shape) * 3, dtype)


def _broadcast_partner(rng, shape):
    """A shape that broadcasts with ``shape``: some dims 1, maybe fewer of them."""
    partner = tuple(1 if rng.random() < 0.3 else d for d in shape)
    return partner[int(rng.integers(0, len(partner) + 1)):]


def _random_variants(op, rng):
    """(description, inputs, attrs) of the op on random shapes, for every dtype."""
    for dtype in DTYPES:
        shape = _random_shape(rng)
        x = _random_tensor(rng, shape, dtype)
        if op in UNARY:
            attrs = dict(_UNARY_ATTRS.get(op, {}))
            if op == "cast":
                attrs["dtype"] = str(DTYPES[int(rng.integers(len(DTYPES)))])
            yield f"{dtype}{list(shape)} {attrs}", [x], attrs
        elif op in BINARY:
            other = DTYPES[int(rng.integers(len(DTYPES)))]
            y_shape = _broadcast_partner(rng, shape)
            y = _random_tensor(rng, y_shape, other)
            yield f"{dtype}{list(shape)} and {other}{list(y_shape)}", [x, y], {}
            yield f"{dtype}{list(shape)} and {dtype}{list(y_shape)}", \
                [x, _random_tensor(rng, y_shape, dtype)], {}
            for number in (2, 0.5, True):
                yield f"{dtype}{list(shape)} and {number!r}", [x, number], {}
                yield f"{number!r} and {dtype}{list(shape)}", [number, x], {}
        else:
            shape = _random_shape(rng, rank=int(rng.integers(1, 4)))
            x = _random_tensor(rng, shape, dtype)
            for attrs in _reduction_attrs(op, rng, len(shape)):
                yield f"{dtype}{list(shape)} {attrs}", [x], attrs


def _reduction_attrs(op, rng, rank):
    axis = int(rng.integers(-rank, rank))
    if op == "cumsum":
        return [{"axis": None}, {"axis": axis, "reverse": bool(rng.random() < 0.5)}]
    if op == "cumprod":
        return [{"dim": None}, {"dim": axis}]
    if op in ("argmax", "argmin"):
        return [{"axis": None, "keepdim": True}, {"axis": axis}]
    axes = sorted({int(a) % rank for a in rng.integers(-rank, rank, 2)})
    return [{"axis": None}, {"axis": axes, "keepdim": bool(rng.random() < 0.5)}]


@pytest.mark.parametrize("op", UNARY + BINARY + REDUCTIONS)
def test_random_shapes_and_operands_are_inferred_and_computed_alike(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    problems = []
    for what, inputs, attrs in _random_variants(op, rng):
        problems += _problems(op, what, inputs, attrs)
    assert not problems, f"{op}:\n  " + "\n  ".join(problems)


# --------------------------------------------------- eager and converted code


def test_kernel_defaults_are_the_registry_defaults():
    """Eager mode passes a kernel only the attrs given, a program all of them: a kernel
    default that differs from the registry's makes the two compute different things
    (an integer clip with one bound failed in converted code)."""
    differ = []
    for name, op in OPS.items():
        try:
            params = inspect.signature(op.kernel).parameters
        except (TypeError, ValueError):
            continue
        for attr, default in op.attrs.items():
            given = params[attr].default if attr in params else inspect.Parameter.empty
            if given is not inspect.Parameter.empty and not _same_default(given, default):
                differ.append(f"{name}.{attr}: kernel {given!r}, registry {default!r}")
    assert not differ


def _same_default(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and (a == b or a != a and b != b)


def clip_above(x):
    return d2s.clip(x, max=5)


def sum_of(x):
    return x.sum(), d2s.sum(x, axis=0, keepdim=True)


def product_of(x):
    return x.prod(), d2s.prod(x, axis=0)


def normalized_half(x, weight, bias):
    return d2s.nn.functional.layer_norm(x, [4], weight, bias)


def selected(cond, x):
    return d2s.where(cond, x, -x)


@pytest.mark.parametrize("fn, args", [
    (clip_above, [np.array([-3, 0, 2, 7], np.int32)]),
    (clip_above, [np.array([0, 200], np.uint8)]),
    (sum_of, [np.array([200, 100], np.uint8)]),
    (sum_of, [np.array([[True, False], [True, True]])]),
    (product_of, [np.array([300, -7], np.int16)]),
    (product_of, [np.array([200, 100], np.uint8)]),
    (normalized_half, [np.ones((2, 4), np.float16), np.ones(4, np.float32),
                       np.zeros(4, np.float32)]),
    (selected, [np.array([1, 0, 2], np.int32), np.ones(3, np.float32)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_converted_functions_compute_the_dtypes_eager_does(fn, args):
    def run(f):
        try:
            out = f(*[d2s.to_tensor(a) for a in args])
        except TypeError:
            return "refused"
        return [(str(t.dtype), t.shape, t.numpy().tolist()) for t in _flat(out)]

    eager = run(fn)
    assert run(d2s.jit.to_static(fn)) == eager
    if fn is selected:
        assert eager == "refused"  # an int condition, in both
    elif fn in (sum_of, product_of):
        assert {dtype for dtype, _, _ in eager} == {"int64"}
    elif fn is normalized_half:
        assert eager[0][0] == "float16"


@pytest.mark.parametrize("make", [
    lambda: d2s.to_tensor(np.array([1j])),
    lambda: d2s.to_tensor(np.array([1], np.uint16)),
    lambda: d2s.static.InputSpec([2], "complex64"),
    lambda: d2s.cast(d2s.ones([2]), "complex64"),
], ids=["to_tensor-complex", "to_tensor-uint16", "InputSpec-complex", "cast-complex"])
def test_dtypes_dy2stat_has_no_ops_for_are_refused_where_tensors_enter(make):
    with pytest.raises(TypeError, match="unsupported dtype|unknown dtype|expected a dtype"):
        make()
