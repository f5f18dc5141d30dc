"""Fused elementwise kernels: a chain of elementwise ops run as one.

The chain is an *expr*, plain JSON data (``kernels.fusion_expr``: steps
``[op, refs, attrs, dtype]``). It runs two ways:

- ``evaluate(xp, expr, inputs)`` (NumPy, or CuPy's ufuncs) runs the steps
  through straight-line Python generated once per (expr, input shapes) from
  the table ``HOST`` (op -> Python code; ``host_code(...).source`` shows it).
  Each step writes into an operand buffer that this evaluation allocated and
  no later step reads (``out=``), so a chain allocates about one buffer, and
  the results equal the unfused ops' bit for bit.
- ``launch(cupy, expr, inputs)`` runs one generated CUDA kernel
  (``kernels.fusion_cuda``: ``cuda_source``, ``get_kernel``,
  ``cached_kernels``, ``FusedKernel``).

``run(xp, expr, inputs)`` picks the path by array module (a table, not
``if cupy``). Nothing here imports CuPy: it arrives as ``xp``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy

from dy2stat.kernels import fusion_cuda, select
from dy2stat.kernels.fusion_cuda import C_EXPR, FusedKernel, cached_kernels, cuda_source, get_kernel
from dy2stat.kernels.fusion_expr import OPS, Expr, broadcast_shapes, check_arity, parse

__all__ = [
    "C_EXPR", "HOST", "OPS", "Expr", "FusedKernel", "cached_kernels", "cuda_source",
    "evaluate", "get_kernel", "host_code", "launch", "parse", "run",
]


class HostOp(NamedTuple):
    # emit(g, dst, args, out, step) -> lines of Python binding ``dst``; ``out``
    # names a buffer the result may be written into (or is None).
    emit: Callable
    out: bool = True  # the code can write into ``out``


def _ufunc(name):
    def host(g, dst, args, out, step):
        return [f"{dst} = {g.fn(name)}({', '.join(args)}{g.out(out)})"]

    return host


def _sigmoid(g, dst, args, out, step):
    """1 / (1 + exp(-x)) as the sigmoid op computes it: in one buffer, ending in reciprocal."""
    one = g.const(step.dtype.type(1))
    neg, exp, add, inv = (g.fn(n) for n in ("negative", "exp", "add", "reciprocal"))
    if not g.array:  # 0-d: NumPy gives scalars, which cannot be written into
        return [f"{dst} = {inv}({add}({exp}({neg}({args[0]})), {one}))"]
    return [f"{dst} = {neg}({args[0]}{g.out(out)})", f"{exp}({dst}, out={dst})",
            f"{add}({dst}, {one}, out={dst})", f"{inv}({dst}, out={dst})"]


def _relu(g, dst, args, out, step):
    zero = g.const(step.dtype.type(0))
    return [f"{dst} = {g.fn('maximum')}({args[0]}, {zero}{g.out(out)})"]


def _scale(g, dst, args, out, step):
    t, bias = step.dtype.type, step.attrs.get("bias", 0.0)
    lines = [f"{dst} = {g.fn('multiply')}({args[0]}, "
             f"{g.const(t(step.attrs.get('scale', 1.0)))}{g.out(out)})"]
    if bias:
        lines.append(f"{dst} = {g.fn('add')}({dst}, {g.const(t(bias))}"
                     f"{g.out(dst if g.array else None)})")
    return lines


def _clip(g, dst, args, out, step):
    bounds = [step.attrs.get("min", -math.inf), step.attrs.get("max", math.inf)]
    lo, hi = ("None" if b is None else g.const(select.clip_bound(b, step.dtype))
              for b in bounds)
    return [f"{dst} = {g.fn('clip')}({args[0]}, {lo}, {hi}{g.out(out)})"]


def _cast(g, dst, args, out, step):
    return [f"{dst} = {args[0]}.astype({g.const(step.dtype)})"]  # a copy: the result is ours


def _where(g, dst, args, out, step):
    return [f"{dst} = {g.fn('where')}({', '.join(args)})"]


# op -> the Python that computes it ("full" constants are bound, not computed).
HOST: dict[str, HostOp] = {
    **{op: HostOp(_ufunc(name)) for op, name in {
        "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
        "floor_divide": "floor_divide", "remainder": "remainder", "pow": "power",
        "maximum": "maximum", "minimum": "minimum", "equal": "equal",
        "not_equal": "not_equal", "less_than": "less", "less_equal": "less_equal",
        "greater_than": "greater", "greater_equal": "greater_equal",
        "logical_and": "logical_and", "logical_or": "logical_or",
        "logical_xor": "logical_xor", "bitwise_and": "bitwise_and",
        "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "exp": "exp", "log": "log",
        "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos", "floor": "floor",
        "ceil": "ceil", "round": "round", "neg": "negative", "abs": "absolute",
        "sign": "sign", "logical_not": "logical_not", "bitwise_not": "invert",
    }.items()},
    "sigmoid": HostOp(_sigmoid),
    "relu": HostOp(_relu),
    "scale": HostOp(_scale),
    "clip": HostOp(_clip),
    "cast": HostOp(_cast, out=False),
    "where": HostOp(_where, out=False),
}

# ------------------------------------------------------------ host evaluation


class _HostCode:
    """Straight-line Python for one expr on inputs of known shapes (``source``, ``run``).

    Knowing the shapes decides every in-place write ahead: a step writes into
    operand ``a`` when ``a`` is an array this code allocated (not 0-d: NumPy
    returns scalars there), no later step reads it, and it has the step's
    dtype and result shape.
    """

    def __init__(self, xp, e: Expr, shapes):
        self.xp, self.ns = xp, {}
        n = e.arity
        last = {}
        for k, step in enumerate(e.steps):
            for a in step.args:
                last[a] = k
        names = [f"x{i}" for i in range(n)]
        shape_of = [tuple(s) for s in shapes]
        fresh = [False] * n
        lines = [f"def fused({', '.join(names)}):"]
        for k, step in enumerate(e.steps):
            if step.op == "full":  # a constant: bound in the namespace, never computed
                names.append(self.const(step.dtype.type(step.attrs.get("value", 0.0))))
                shape_of.append(())
                fresh.append(False)
                continue
            spec = HOST[step.op]
            shape = broadcast_shapes([shape_of[a] for a in step.args])
            self.array = bool(shape)
            target = None
            if spec.out:
                target = next((a for a in step.args if fresh[a] and last[a] == k
                               and e.steps[a - n].dtype == step.dtype and shape_of[a] == shape),
                              None)
            dst = f"t{k}"
            lines += ["    " + line for line in spec.emit(
                self, dst, [names[a] for a in step.args],
                names[target] if target is not None else None, step)]
            dead = sorted({names[a] for a in step.args
                           if a >= n and last[a] == k and a != target and fresh[a]})
            if dead:
                lines.append(f"    del {', '.join(dead)}")
            names.append(dst)
            shape_of.append(shape)
            fresh.append(self.array)
        lines.append(f"    return {names[-1]}")
        self.source = "\n".join(lines) + "\n"
        exec(compile(self.source, "<fused elementwise>", "exec"), self.ns)  # our own text
        self.run = self.ns["fused"]

    def fn(self, name: str) -> str:
        """Bind the array module's function ``name``; return the name to call it by."""
        self.ns[name] = getattr(self.xp, name)
        return name

    def const(self, value) -> str:
        name = f"c{len(self.ns)}"
        self.ns[name] = value
        return name

    @staticmethod
    def out(name) -> str:
        return f", out={name}" if name else ""


_HOST_CODE: dict[tuple, _HostCode] = {}


def host_code(xp, expr, shapes) -> _HostCode:
    """The cached straight-line code of ``expr`` for inputs of ``shapes`` (``.source``)."""
    e = parse(expr)
    key = (e.key, xp.__name__, tuple(tuple(s) for s in shapes))
    code = _HOST_CODE.get(key)
    if code is None:
        if len(_HOST_CODE) > 4096:
            _HOST_CODE.clear()
        code = _HOST_CODE[key] = _HostCode(xp, e, key[2])
    return code


def evaluate(xp, expr, inputs):
    """The expr's result over ``inputs`` (arrays of ``xp``: numpy or cupy)."""
    e = parse(expr)
    check_arity(e, len(inputs))
    key = (e.key, xp.__name__, tuple(getattr(a, "shape", ()) for a in inputs))
    code = _HOST_CODE.get(key)
    if code is None:
        code = host_code(xp, e, key[2])
    return code.run(*inputs)


def _reference(e: Expr):
    """What a fused kernel computes, over its own arguments (inputs, out, ...), in NumPy."""

    def reference(*args):
        numpy.copyto(args[e.arity], evaluate(numpy, e, list(args[:e.arity])))

    return reference


def launch(xp, expr, inputs):
    """The expr over CuPy arrays as one generated CUDA kernel (``fusion_cuda.launch``)."""
    return fusion_cuda.launch(xp, expr, inputs, reference=_reference)


_RUNNERS = {"numpy": evaluate, "cupy": launch}


def run(xp, expr, inputs):
    """The expr over ``inputs``: NumPy evaluation on the host, one CUDA kernel on CuPy."""
    return _RUNNERS.get(xp.__name__, evaluate)(xp, expr, inputs)
