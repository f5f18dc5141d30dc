"""Fused elementwise kernels: a chain of elementwise ops evaluated as one.

An *expr* is plain JSON data, a list of steps in topological order::

    [["multiply", ["x0", "x1"], {}, "float32"],          # t0 = x0 * x1
     ["full", [], {"value": 0.5}, "float32"],            # t1 = 0.5
     ["add", ["t0", "t1"], {}, "float32"]]               # t2 = t0 + t1  (the result)

Each step is ``[op, refs, attrs, dtype]``: ``x<i>`` refers to the i-th
input, ``t<k>`` to step k's result; attrs are the op's attrs with their
defaults filled in and ``dtype`` is the step's result dtype. The last step is
the result. Operands of a step already agree in dtype (the program builder
inserted the casts), so each step only follows its op's semantics.

Two ways to run one, sharing the table ``OPS`` (op -> NumPy code and C
expression):

- ``evaluate(xp, expr, inputs)`` runs the steps with NumPy/CuPy ufuncs,
  writing a step's result into an operand buffer that this evaluation
  allocated and no later step reads (``out=``), so a chain allocates about
  one buffer.
- ``cuda_source(expr, dtypes, ndims)`` is self-contained CUDA C for one
  ``RawKernel`` (``extern "C" __global__ void fused_<hash>``) that computes
  the whole chain per output element, indexing broadcast inputs through
  per-dim strides passed as arguments. ``get_kernel`` caches it as a
  ``FusedKernel`` (``.name``, ``.source``) keyed by (expr, dtypes, ranks,
  layout, device); ``launch(cupy, expr, inputs)`` compiles (once) and runs
  it. float16 has no C path: ``cuda_source`` refuses it.

``run(xp, expr, inputs)`` picks the path by array module (a table, not
``if cupy``). Nothing here imports CuPy: it arrives as ``xp``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy

__all__ = [
    "OPS", "Expr", "FusedKernel", "cached_kernels", "cuda_source", "evaluate", "get_kernel",
    "launch", "parse", "run",
]

# ----------------------------------------------------------------- the table

_CTYPES = {
    "bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "int32": "int", "int64": "long long", "float32": "float", "float64": "double",
}
_DTYPES = frozenset(_CTYPES) | {"float16"}


class OpSpec(NamedTuple):
    arity: int
    # How the result dtype follows from the operands': "same" (all equal the
    # result), "bool" (operands agree, result bool), "where", "cast", "const".
    rule: str
    # prepare(attrs, dtype) -> fn(xp, out, *operands); ``out`` is a buffer to
    # write into, or None.
    host: Callable
    # C expression over $a $b $c, or a dict by operand kind: "f", "i", "b" and
    # "u" (unsigned; falls back to "i").
    c: str | dict
    out: bool = True  # host fn honours ``out``
    fresh: bool = True  # host fn returns a new array (unless all operands are 0-d)


def _ufunc(name):
    def prepare(attrs, dtype):
        return lambda xp, out, *args: getattr(xp, name)(*args, out=out)

    return prepare


def _then(xp, r, fn, *args):
    """``fn(r, *args)`` into ``r`` when ``r`` is an array we own (not a 0-d scalar)."""
    return fn(r, *args, out=r if type(r) is xp.ndarray else None)


def _sigmoid(attrs, dtype):
    one = dtype.type(1)  # 1 / (1 + exp(-x)), as the sigmoid op computes it

    def fn(xp, out, x):
        r = _then(xp, xp.negative(x, out=out), xp.exp)
        r = _then(xp, r, xp.add, one)
        return xp.divide(one, r, out=r if type(r) is xp.ndarray else None)

    return fn


def _relu(attrs, dtype):
    zero = dtype.type(0)
    return lambda xp, out, x: xp.maximum(x, zero, out=out)


def _scale(attrs, dtype):
    s, b = attrs.get("scale", 1.0), attrs.get("bias", 0.0)
    scale, bias = dtype.type(s), dtype.type(b)
    if not b:
        return lambda xp, out, x: xp.multiply(x, scale, out=out)
    return lambda xp, out, x: _then(xp, xp.multiply(x, scale, out=out), xp.add, bias)


def _clip(attrs, dtype):
    lo, hi = attrs.get("min", -math.inf), attrs.get("max", math.inf)
    lo = None if lo is None else dtype.type(lo)
    hi = None if hi is None else dtype.type(hi)
    return lambda xp, out, x: xp.clip(x, lo, hi, out=out)


def _round(attrs, dtype):
    return lambda xp, out, x: xp.round(x, out=out)


def _cast(attrs, dtype):
    return lambda xp, out, x: x.astype(dtype)  # always a copy: the result is ours


def _where(attrs, dtype):
    return lambda xp, out, c, x, y: xp.where(c, x, y)


def _full(attrs, dtype):
    value = dtype.type(attrs.get("value", 0.0))
    return lambda xp, out: value


_BIN = ("$a", "$b")
OPS: dict[str, OpSpec] = {
    "add": OpSpec(2, "same", _ufunc("add"), "$a + $b"),
    "subtract": OpSpec(2, "same", _ufunc("subtract"), "$a - $b"),
    "multiply": OpSpec(2, "same", _ufunc("multiply"), "$a * $b"),
    "divide": OpSpec(2, "same", _ufunc("divide"), "$a / $b"),
    "floor_divide": OpSpec(2, "same", _ufunc("floor_divide"),
                           {"f": "fe_floordiv_$N($a, $b)", "i": "fe_ifloordiv_$N($a, $b)"}),
    "remainder": OpSpec(2, "same", _ufunc("remainder"),
                        {"f": "fe_fmod_$N($a, $b)", "i": "fe_imod_$N($a, $b)"}),
    "pow": OpSpec(2, "same", _ufunc("power"), {"f": "pow$f($a, $b)", "i": "fe_ipow_$N($a, $b)"}),
    "maximum": OpSpec(2, "same", _ufunc("maximum"), "fe_max_$N($a, $b)"),
    "minimum": OpSpec(2, "same", _ufunc("minimum"), "fe_min_$N($a, $b)"),
    "equal": OpSpec(2, "bool", _ufunc("equal"), "$a == $b"),
    "not_equal": OpSpec(2, "bool", _ufunc("not_equal"), "$a != $b"),
    "less_than": OpSpec(2, "bool", _ufunc("less"), "$a < $b"),
    "less_equal": OpSpec(2, "bool", _ufunc("less_equal"), "$a <= $b"),
    "greater_than": OpSpec(2, "bool", _ufunc("greater"), "$a > $b"),
    "greater_equal": OpSpec(2, "bool", _ufunc("greater_equal"), "$a >= $b"),
    "logical_and": OpSpec(2, "bool", _ufunc("logical_and"), "(bool)$a && (bool)$b"),
    "logical_or": OpSpec(2, "bool", _ufunc("logical_or"), "(bool)$a || (bool)$b"),
    "logical_xor": OpSpec(2, "bool", _ufunc("logical_xor"), "(bool)$a != (bool)$b"),
    "bitwise_and": OpSpec(2, "same", _ufunc("bitwise_and"), "$a & $b"),
    "bitwise_or": OpSpec(2, "same", _ufunc("bitwise_or"), "$a | $b"),
    "bitwise_xor": OpSpec(2, "same", _ufunc("bitwise_xor"), "$a ^ $b"),
    "exp": OpSpec(1, "same", _ufunc("exp"), {"f": "exp$f($a)"}),
    "log": OpSpec(1, "same", _ufunc("log"), {"f": "log$f($a)"}),
    "sqrt": OpSpec(1, "same", _ufunc("sqrt"), {"f": "sqrt$f($a)"}),
    "tanh": OpSpec(1, "same", _ufunc("tanh"), {"f": "tanh$f($a)"}),
    "sin": OpSpec(1, "same", _ufunc("sin"), {"f": "sin$f($a)"}),
    "cos": OpSpec(1, "same", _ufunc("cos"), {"f": "cos$f($a)"}),
    "floor": OpSpec(1, "same", _ufunc("floor"), {"f": "floor$f($a)"}),
    "ceil": OpSpec(1, "same", _ufunc("ceil"), {"f": "ceil$f($a)"}),
    "round": OpSpec(1, "same", _round, {"f": "rint$f($a)"}),  # half to even, as NumPy
    "sigmoid": OpSpec(1, "same", _sigmoid, {"f": "$one / ($one + exp$f(-$a))"}),
    "neg": OpSpec(1, "same", _ufunc("negative"), "-$a"),
    "abs": OpSpec(1, "same", _ufunc("absolute"),
                  {"f": "fabs$f($a)", "i": "($a < 0 ? -$a : $a)", "u": "$a"}),
    "sign": OpSpec(1, "same", _ufunc("sign"), {
        "f": "($a > $zero ? $one : ($a < $zero ? -$one : $a))",  # keeps NaN
        "i": "($a > 0 ? 1 : ($a < 0 ? -1 : 0))", "u": "($a > 0 ? 1 : 0)"}),
    "relu": OpSpec(1, "same", _relu, "fe_max_$N($a, $zero)"),
    "logical_not": OpSpec(1, "bool", _ufunc("logical_not"), "!(bool)$a"),
    "bitwise_not": OpSpec(1, "same", _ufunc("invert"), {"i": "~$a", "b": "!$a"}),
    "scale": OpSpec(1, "same", _scale, "$a * $scale$bias"),
    "clip": OpSpec(1, "same", _clip, "$clip"),
    "cast": OpSpec(1, "cast", _cast, "$a", out=False),
    "where": OpSpec(3, "where", _where, "$a ? $b : $c", out=False),
    "full": OpSpec(0, "const", _full, "$value", out=False, fresh=False),
}

# ---------------------------------------------------------------- the expr

_REF = re.compile(r"([xt])(0|[1-9][0-9]{0,5})\Z")


class Step(NamedTuple):
    op: str
    args: tuple  # value slots: inputs are 0..arity-1, step k is arity + k
    attrs: dict
    dtype: numpy.dtype


@dataclass(frozen=True)
class Expr:
    """A checked expr: steps over value slots, and the canonical JSON ``key``."""

    key: str
    arity: int  # number of inputs
    steps: tuple

    @property
    def dtype(self) -> numpy.dtype:
        return self.steps[-1].dtype


_PARSED: dict[str, Expr] = {}
_BY_ID: dict[int, tuple] = {}  # id(expr list) -> (the list, Expr): the executor's hot path


def parse(expr) -> Expr:
    """Check ``expr`` (any malformed part is a ValueError naming the step) and index it."""
    if isinstance(expr, Expr):
        return expr
    hit = _BY_ID.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    try:
        key = json.dumps(expr, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"fused expr: not JSON data ({exc})") from None
    parsed = _PARSED.get(key)
    if parsed is None:
        parsed = _PARSED[key] = _parse(expr, key)
    if len(_BY_ID) > 4096:
        _BY_ID.clear()
    _BY_ID[id(expr)] = (expr, parsed)  # holding the list keeps its id from being reused
    return parsed


def _parse(expr, key: str) -> Expr:
    if not isinstance(expr, (list, tuple)) or not expr:
        raise ValueError("fused expr: expected a non-empty list of steps")
    refs, arity = [], 0
    for k, step in enumerate(expr):
        where = f"fused expr, step {k}"
        if not isinstance(step, (list, tuple)) or len(step) != 4:
            raise ValueError(f"{where}: expected [op, refs, attrs, dtype], got {step!r:.80}")
        op, args, attrs, dtype = step
        if op not in OPS:
            raise ValueError(f"{where}: op {op!r:.40} cannot be fused (known: {', '.join(OPS)})")
        if not isinstance(args, (list, tuple)) or len(args) != OPS[op].arity:
            raise ValueError(f"{where} ({op}): expected {OPS[op].arity} operand refs")
        if not isinstance(attrs, dict) or not all(isinstance(a, str) for a in attrs):
            raise ValueError(f"{where} ({op}): attrs must be a dict with string keys")
        if dtype not in _DTYPES:
            raise ValueError(f"{where} ({op}): unsupported dtype {dtype!r:.40}")
        parsed = []
        for ref in args:
            m = _REF.match(ref) if isinstance(ref, str) else None
            if m is None or (m.group(1) == "t" and int(m.group(2)) >= k):
                raise ValueError(f"{where} ({op}): bad operand ref {ref!r:.40} (x<i> for an "
                                 "input, t<j> for an earlier step)")
            parsed.append((m.group(1), int(m.group(2))))
            if m.group(1) == "x":
                arity = max(arity, int(m.group(2)) + 1)
        for name, value in attrs.items():
            if name == "dtype" and value in _DTYPES:
                continue
            if value is not None and type(value) not in (bool, int, float):
                raise ValueError(f"{where} ({op}): attr {name!r} must be a number, "
                                 f"got {value!r:.40}")
        refs.append(parsed)
    steps = tuple(
        Step(op, tuple(i if kind == "x" else arity + i for kind, i in r), dict(attrs),
             numpy.dtype(dtype))
        for (op, _, attrs, dtype), r in zip(expr, refs)
    )
    return Expr(key, arity, steps)


def _check_arity(e: Expr, n: int) -> None:
    if n != e.arity:
        raise ValueError(f"fused expr: takes {e.arity} inputs, got {n}")


# ------------------------------------------------------------ host evaluation


class _HostPlan:
    """The steps bound to their NumPy code, with in-place writes decided ahead.

    A step may write into operand ``a`` when ``a`` is a step result this
    evaluation allocated (fresh), no later step reads it, and its dtype is
    the step's; at run time ``a`` must also be an array (not a 0-d scalar)
    that the other operands broadcast into.
    """

    def __init__(self, e: Expr):
        n = e.arity
        last = {}
        for k, step in enumerate(e.steps):
            for a in step.args:
                last[a] = k
        fresh, dtype_of, self.instrs = [False] * n, [None] * n, []
        for k, step in enumerate(e.steps):
            spec = OPS[step.op]
            target = -1
            if spec.out:
                for a in step.args:
                    if a >= n and fresh[a] and last[a] == k and dtype_of[a] == step.dtype:
                        target = a
                        break
            others = tuple(a for a in step.args if a != target)
            dying = tuple(a for a in set(step.args) if a >= n and last[a] == k)
            fn = spec.host(step.attrs, step.dtype)
            self.instrs.append((fn, step.args, n + k, target, others, dying))
            fresh.append(spec.fresh)
            dtype_of.append(step.dtype)
        self.n = n

    def __call__(self, xp, inputs):
        v = list(inputs)
        v.extend([None] * len(self.instrs))
        ndarray = xp.ndarray
        for fn, args, dst, target, others, dying in self.instrs:
            out = None
            if target >= 0:
                buf = v[target]
                if type(buf) is ndarray and all(_fits(buf.shape, v[o]) for o in others):
                    out = buf
            v[dst] = fn(xp, out, *[v[a] for a in args])
            for a in dying:
                v[a] = None
        return v[-1]


def _fits(shape, value) -> bool:
    """Whether ``value`` broadcasts into ``shape`` (so ``shape`` holds the result)."""
    other = getattr(value, "shape", ())
    if len(other) > len(shape):
        return False
    return all(o == 1 or o == s for s, o in zip(shape[len(shape) - len(other):], other))


_HOST_PLANS: dict[str, _HostPlan] = {}


def evaluate(xp, expr, inputs):
    """The expr's result over ``inputs`` (arrays of ``xp``: numpy or cupy)."""
    e = parse(expr)
    _check_arity(e, len(inputs))
    plan = _HOST_PLANS.get(e.key)
    if plan is None:
        plan = _HOST_PLANS[e.key] = _HostPlan(e)
    return plan(xp, inputs)


# ----------------------------------------------------------------- CUDA C

_KERNEL = string.Template("""\
// Fused elementwise kernel generated by dy2stat.kernels.fusion.
// ops: $ops
$helpers
extern "C" __global__ void $name($params) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) {
$body
    out[i] = $result;
  }
}
""")

# Device helpers, instantiated per C type ($N names the type, $T is it, $f the
# float suffix). NumPy's semantics: NaN propagates through maximum/minimum,
# floor division and remainder round toward -inf, integer division by zero is 0.
_HELPERS = {
    "fe_max": "__device__ __forceinline__ $T fe_max_$N($T a, $T b) "
              "{ return (a > b || a != a) ? a : b; }",
    "fe_min": "__device__ __forceinline__ $T fe_min_$N($T a, $T b) "
              "{ return (a < b || a != a) ? a : b; }",
    "fe_ifloordiv": """\
__device__ __forceinline__ $T fe_ifloordiv_$N($T a, $T b) {
  if (b == 0) return 0;
  $T q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}""",
    "fe_imod": """\
__device__ __forceinline__ $T fe_imod_$N($T a, $T b) {
  if (b == 0) return 0;
  $T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}""",
    "fe_floordiv": """\
__device__ __forceinline__ $T fe_floordiv_$N($T a, $T b) {
  if (b == 0) return a / b;
  $T mod = fmod$f(a, b);
  $T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign$f(($T)0, a / b);
  $T q = floor$f(div);
  if (div - q > ($T)0.5) q += 1;
  return q;
}""",
    "fe_fmod": """\
__device__ __forceinline__ $T fe_fmod_$N($T a, $T b) {
  if (b == 0) return fmod$f(a, b);
  $T mod = fmod$f(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = copysign$f(($T)0, b);
  }
  return mod;
}""",
    "fe_ipow": """\
__device__ __forceinline__ $T fe_ipow_$N($T a, $T b) {
  if (b < 0) return (a == 1) ? 1 : 0;  // NumPy raises here; 1 ** -k is 1
  $T r = 1;
  while (b) {
    if (b & 1) r *= a;
    a *= a;
    b >>= 1;
  }
  return r;
}""",
}
_HELPER_USE = re.compile(r"\b(fe_[a-z]+)_([a-z0-9_]+)\(")


def _kind(dtype: numpy.dtype) -> str:
    return dtype.kind if dtype.kind in "fbu" else "i"


def _literal(value, dtype: numpy.dtype) -> str:
    """A C literal of ``dtype`` holding ``value`` converted as NumPy converts it."""
    t = _CTYPES[dtype.name]
    if dtype.kind == "b":
        return "true" if bool(value) else "false"
    try:
        v = dtype.type(value).item()
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"fused kernel: {value!r} does not fit {dtype}: {exc}") from None
    if dtype.kind in "iu":
        if v == -(2**63):
            return "(-9223372036854775807LL - 1)"
        return f"(({t}){v}LL)"
    if math.isnan(v) or math.isinf(v):
        bits = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}[str(v)]
        if dtype.itemsize == 4:
            return f"__int_as_float({bits:#010x})"
        bits64 = {"nan": 0x7FF8000000000000, "inf": 0x7FF0000000000000,
                  "-inf": 0xFFF0000000000000}[str(v)]
        return f"__longlong_as_double((long long){bits64:#018x}ULL)"
    return f"(({t}){v!r})"


def _c_expr(step: Step, operands: list[str], dtypes: list[numpy.dtype]) -> str:
    spec = OPS[step.op]
    # The type the expression computes in: the operands' (the first that is
    # not a where-condition), or the result's for a constant.
    compute = dtypes[1] if step.op == "where" else (dtypes[0] if dtypes else step.dtype)
    text = spec.c
    if isinstance(text, dict):
        kind = _kind(compute)
        text = text.get(kind, text.get("i") if kind == "u" else None)
        if text is None:
            raise TypeError(f"fused kernel: {step.op} has no C form for {compute}")
    ctype = _CTYPES[compute.name]
    subs = {
        "a": operands[0] if operands else "", "b": operands[1] if len(operands) > 1 else "",
        "c": operands[2] if len(operands) > 2 else "",
        "T": ctype, "N": ctype.replace(" ", "_"), "f": "f" if compute == numpy.float32 else "",
        "one": _literal(1, compute), "zero": _literal(0, compute),
    }
    attrs = step.attrs
    if step.op == "scale":
        bias = attrs.get("bias", 0.0)
        subs["scale"] = _literal(attrs.get("scale", 1.0), compute)
        subs["bias"] = f" + {_literal(bias, compute)}" if bias else ""
    elif step.op == "clip":
        clip, n = operands[0], subs["N"]
        if attrs.get("min", -math.inf) is not None:
            clip = f"fe_max_{n}({clip}, {_literal(attrs.get('min', -math.inf), compute)})"
        if attrs.get("max", math.inf) is not None:
            clip = f"fe_min_{n}({clip}, {_literal(attrs.get('max', math.inf), compute)})"
        subs["clip"] = clip
    elif step.op == "full":
        subs["value"] = _literal(attrs.get("value", 0.0), step.dtype)
    elif step.op == "cast":
        return f"({_CTYPES[step.dtype.name]})({operands[0]})"
    return string.Template(text).substitute(subs)


def _check_types(e: Expr, in_dtypes) -> list[numpy.dtype]:
    """The dtype of every value slot; a step whose operands break its rule is an error."""
    types = list(in_dtypes)
    for k, step in enumerate(e.steps):
        ts = [types[a] for a in step.args]
        rule, ok = OPS[step.op].rule, True
        if rule == "same":
            ok = all(t == step.dtype for t in ts)
        elif rule == "bool":
            ok = step.dtype == numpy.bool_ and len(set(ts)) <= 1
        elif rule == "where":
            ok = ts[0] == numpy.bool_ and ts[1] == ts[2] == step.dtype
        elif rule == "cast":
            ok = step.attrs.get("dtype", step.dtype.name) == step.dtype.name
        if not ok:
            names = ", ".join(str(t) for t in ts)
            raise TypeError(f"fused expr, step {k} ({step.op}): operands ({names}) do not give "
                            f"{step.dtype} (insert the casts before fusing)")
        types.append(step.dtype)
    return types


def _signature(dtypes, ndims, dense) -> tuple:
    n = len(dtypes)
    dtypes = tuple(numpy.dtype(d).name for d in dtypes)
    ndims = tuple(int(d) for d in ndims)
    dense = tuple(bool(d) for d in dense) if dense is not None else (False,) * n
    if not len(ndims) == len(dense) == n:
        raise ValueError("fused kernel: dtypes, ndims and dense need one entry per input")
    return dtypes, ndims, dense


def cuda_source(expr, dtypes, ndims, dense=None) -> str:
    """CUDA C of one RawKernel computing ``expr`` per output element.

    ``dtypes`` and ``ndims`` are the inputs' dtypes and ranks. An input of
    rank 0 is read at index 0; one flagged in ``dense`` (C-contiguous with the
    output's shape) at the output index; any other through its element
    strides (0 along broadcast dims). Arguments, in order: the inputs, the
    output, ``n`` (the output's size), then the output's dims ``d0..`` and each
    strided input k's strides ``s<k>_0..`` (all ``long long``), when any input
    is strided.
    """
    e = parse(expr)
    dtypes, ndims, dense = _signature(dtypes, ndims, dense)
    _check_arity(e, len(dtypes))
    types = _check_types(e, [numpy.dtype(d) for d in dtypes])
    for t in set(types):
        if t.name not in _CTYPES:
            raise NotImplementedError(f"fused kernel: no CUDA path for {t} (evaluate it instead)")
    rank = max(ndims, default=0)
    strided = [k for k in range(len(dtypes)) if ndims[k] > 0 and not dense[k]]
    params = [f"const {_CTYPES[t]}* __restrict__ x{k}" for k, t in enumerate(dtypes)]
    params += [f"{_CTYPES[e.dtype.name]}* __restrict__ out", "const long long n"]
    body = []
    if strided:
        params += [f"const long long d{j}" for j in range(rank)]
        params += [f"const long long s{k}_{j}" for k in strided for j in range(ndims[k])]
        body.append("    long long rem = i, c;")
        body.append(f"    long long {', '.join(f'o{k} = 0' for k in strided)};")
        for j in range(rank - 1, -1, -1):
            body.append(f"    c = rem % d{j}; rem /= d{j};" if j else "    c = rem;")
            for k in strided:
                if j >= rank - ndims[k]:
                    body.append(f"    o{k} += c * s{k}_{j - (rank - ndims[k])};")
    names = []
    for k, t in enumerate(dtypes):
        index = "i" if dense[k] else (f"o{k}" if k in strided else "0")
        body.append(f"    const {_CTYPES[t]} v{k} = x{k}[{index}];")
        names.append(f"v{k}")
    for k, step in enumerate(e.steps):
        slot = e.arity + k
        text = _c_expr(step, [names[a] for a in step.args], [types[a] for a in step.args])
        body.append(f"    const {_CTYPES[step.dtype.name]} v{slot} = "
                    f"({_CTYPES[step.dtype.name]})({text});")
        names.append(f"v{slot}")
    used = sorted({m.group(1, 2) for m in _HELPER_USE.finditer("\n".join(body))})
    ctype_of = {t.replace(" ", "_"): t for t in _CTYPES.values()}
    helpers = [
        string.Template(_HELPERS[h]).substitute(
            T=ctype_of[n], N=n, f="f" if ctype_of[n] == "float" else "")
        for h, n in used
    ]
    digest = hashlib.sha1(repr((e.key, dtypes, ndims, dense)).encode()).hexdigest()[:16]
    return _KERNEL.substitute(
        ops=", ".join(s.op for s in e.steps), helpers="\n".join(helpers),
        name=f"fused_{digest}", params=",\n    ".join(params), body="\n".join(body),
        result=names[-1],
    )


@dataclass
class FusedKernel:
    """One generated kernel: ``source`` (CUDA C) and its entry point ``name``."""

    key: tuple
    name: str
    source: str
    _compiled: dict = field(default_factory=dict, repr=False)

    def function(self, xp):
        """The compiled ``xp.RawKernel`` (compiled on first use)."""
        fn = self._compiled.get("fn")
        if fn is None:
            try:
                fn = xp.RawKernel(self.source, self.name)
                fn.compile()
            except Exception as exc:
                numbered = "\n".join(f"{i + 1:4} {line}"
                                     for i, line in enumerate(self.source.splitlines()))
                raise RuntimeError(f"fused kernel {self.name} failed to compile: {exc}\n"
                                   f"source (FusedKernel.source):\n{numbered}") from exc
            self._compiled["fn"] = fn
        return fn


_KERNELS: dict[tuple, FusedKernel] = {}


def get_kernel(expr, dtypes, ndims, dense=None, device=None) -> FusedKernel:
    """The cached kernel for (expr, input dtypes, ranks, layout, device)."""
    e = parse(expr)
    sig = _signature(dtypes, ndims, dense)
    key = (e.key, *sig, device)
    kernel = _KERNELS.get(key)
    if kernel is None:
        source = cuda_source(e, *sig)
        name = re.search(r"void (fused_[0-9a-f]+)\(", source).group(1)
        kernel = _KERNELS[key] = FusedKernel(key, name, source)
    return kernel


def cached_kernels() -> list[FusedKernel]:
    """Every kernel generated so far (for reading their source, or compiling them all)."""
    return list(_KERNELS.values())


def _broadcast_shapes(shapes) -> tuple:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for j, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[j] not in (1, d):
                    raise ValueError(f"fused kernel: shapes {[list(x) for x in shapes]} "
                                     "cannot be broadcast together")
                out[j] = d
    return tuple(out)


_THREADS = 256
_MAX_BLOCKS = 65535 * 4


def launch(xp, expr, inputs):
    """Run the generated kernel on CuPy arrays; returns a new array of the expr's dtype."""
    e = parse(expr)
    _check_arity(e, len(inputs))
    arrays = [a if isinstance(a, xp.ndarray) else xp.asarray(a) for a in inputs]
    shape = _broadcast_shapes([a.shape for a in arrays])
    out = xp.empty(shape, dtype=e.dtype)
    n = out.size
    if n == 0:
        return out
    ndims, dense, strides = [], [], []
    for a in arrays:
        if a.size == 1:  # a scalar, whatever its rank
            ndims.append(0)
            dense.append(False)
            a_strides = ()
        elif a.shape == shape and a.flags.c_contiguous:
            ndims.append(a.ndim)
            dense.append(True)
            a_strides = ()
        else:
            ndims.append(a.ndim)
            dense.append(False)
            lead = len(shape) - a.ndim
            a_strides = [0 if d == 1 and shape[lead + j] != 1 else s // a.itemsize
                         for j, (d, s) in enumerate(zip(a.shape, a.strides))]
        strides.extend(numpy.int64(s) for s in a_strides)
    device = xp.cuda.runtime.getDevice()
    kernel = get_kernel(e, [a.dtype for a in arrays], ndims, dense, device)
    args = [*arrays, out, numpy.int64(n)]
    if strides:
        args += [numpy.int64(d) for d in shape] + strides
    blocks = min((n + _THREADS - 1) // _THREADS, _MAX_BLOCKS)
    kernel.function(xp)((blocks,), (_THREADS,), tuple(args))
    return out


_RUNNERS = {"numpy": evaluate, "cupy": launch}


def run(xp, expr, inputs):
    """The expr over ``inputs``: NumPy evaluation on the host, one CUDA kernel on CuPy."""
    return _RUNNERS.get(xp.__name__, evaluate)(xp, expr, inputs)
