"""The fused-expr format: a chain of elementwise ops as plain JSON data.

An expr is a list of steps in topological order::

    [["multiply", ["x0", "x1"], {}, "float32"],          # t0 = x0 * x1
     ["full", [], {"value": 0.5}, "float32"],            # t1 = 0.5
     ["add", ["t0", "t1"], {}, "float32"]]               # t2 = t0 + t1  (the result)

Each step is ``[op, refs, attrs, dtype]``: ``x<i>`` refers to the i-th
input, ``t<k>`` to step k's result; attrs are the op's attrs with their
defaults filled in (numbers, None, or a dtype name for ``cast``) and
``dtype`` is the step's result dtype. The last step is the result. Operands
of a step already agree in dtype (the program builder inserted the casts), so
each step only follows its op's semantics (``OPS[op].rule``).

``parse`` checks an expr once and caches the indexed form (``Expr``); the
host and CUDA paths (``kernels.fusion``, ``kernels.fusion_cuda``) run it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy

__all__ = ["DTYPES", "OPS", "Expr", "OpSig", "Step", "broadcast_shapes", "check_arity",
           "check_types", "parse"]

DTYPES = frozenset({"bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                    "float64"})


class OpSig(NamedTuple):
    arity: int
    # How the result dtype follows from the operands': "same" (all equal the
    # result), "bool" (operands agree, result bool), "where" (bool, x, y),
    # "cast" (attr dtype), "const" (no operands).
    rule: str


_BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow",
           "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"]
_COMPARE = ["equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal",
            "logical_and", "logical_or", "logical_xor"]
_UNARY = ["exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "round", "sigmoid",
          "neg", "abs", "sign", "relu", "bitwise_not", "scale", "clip"]

# The ops a fused expr may hold (op types of the registry, plus "full" for constants).
OPS: dict[str, OpSig] = {
    **{op: OpSig(2, "same") for op in _BINARY},
    **{op: OpSig(2, "bool") for op in _COMPARE},
    **{op: OpSig(1, "same") for op in _UNARY},
    "logical_not": OpSig(1, "bool"),
    "cast": OpSig(1, "cast"),
    "where": OpSig(3, "where"),
    "full": OpSig(0, "const"),
}

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
        if dtype not in DTYPES:
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
            if name == "dtype" and value in DTYPES:
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


def check_arity(e: Expr, n: int) -> None:
    if n != e.arity:
        raise ValueError(f"fused expr: takes {e.arity} inputs, got {n}")


def check_types(e: Expr, in_dtypes) -> list[numpy.dtype]:
    """The dtype of every value slot; a step whose operands break its rule is an error."""
    types = [numpy.dtype(t) for t in in_dtypes]
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


def broadcast_shapes(shapes) -> tuple:
    """NumPy broadcasting of concrete shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for j, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[j] not in (1, d):
                    raise ValueError(f"fused expr: shapes {[list(x) for x in shapes]} "
                                     "cannot be broadcast together")
                out[j] = d
    return tuple(out)
