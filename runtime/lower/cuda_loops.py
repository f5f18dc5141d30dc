"""The CUDA target's code generator: a ``while`` loop becomes one kernel with the loop inside.

On a GPU each op of an interpreted loop is a kernel launch, and the loop's
predicate is read on the host once per iteration (a copy, and a wait for
the queue). A loop whose ops all lower (``lower.cuda``'s rules) runs instead
as one kernel of one thread block:

- a 0-d value is a local of every thread (``s3``), computed alike by all of
  them, so every thread takes the same branch and the same number of turns;
- an array is a *lane* value, every array of the loop having one shape: a
  global buffer (``t5``: a kernel argument, or a slice of the scratch buffer)
  whose element ``i`` thread ``i % blockDim`` computes, in a loop over its
  elements (``for (i = tid; i < n; i += NT)``); an elementwise op reads only
  its own thread's elements, so no barrier is needed between them;
- a full reduction (sum, mean, max, min, any, all) adds each thread's
  elements, then combines the threads' partial values in shared memory
  (barriers between the steps) into one value every thread reads;
- ``cond`` is an ``if`` on a 0-d predicate; ``while`` is ``while (true)``
  whose cond block ends in ``break``.

Float sums add in this order (each thread's elements in turn, then a tree
over the threads), which is not CuPy's: a lowered loop's sums and means may
round differently from the interpreted plan's in the last bits. The flag
``gpu_loop_kernels`` turns the lowering off.

``loop_kernel(...)`` returns the ``CudaKernel`` (registered with a NumPy
reference: the interpreted region, see ``lower.cuda``) and the
``LoopDispatcher`` the plan calls.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy

from dy2stat.kernels import cuda_kernels, fusion_cuda
from dy2stat.kernels.fusion_expr import parse
from dy2stat.runtime.lower.loops import LoweringError, Step
from dy2stat.runtime.lower.rules import rule_for
from dy2stat.runtime.registry import OPS

__all__ = ["MAX_ELEMENTS", "THREADS", "LoopDispatcher", "Val", "loop_kernel"]

THREADS = 256  # one block: the shared-memory reductions assume a power of two
MAX_ELEMENTS = 1 << 16  # larger arrays run interpreted: one block would be slow there
TARGET = "cuda"


@dataclass
class Val:
    """A value in generated code: a 0-d local (``lane`` False) or a lane buffer."""

    dtype: numpy.dtype
    lane: bool
    ref: str

    @property
    def at(self) -> str:
        """The value of element ``i`` (the local itself for a 0-d value)."""
        return f"{self.ref}[i]" if self.lane else self.ref


class Emitter:
    """Writes one loop kernel; the rules of ``lower.cuda`` call back into it."""

    def __init__(self, program, var_of, constant_of):
        self.program, self.constant_of = program, constant_of
        self.var_of = [var_of]
        self.lines: list[str] = []
        self.prologue: list[str] = []
        self.depth = 1
        self._ids = itertools.count()
        self.scopes: list[dict] = [{}]
        self.scratch = 0  # bytes per lane element of the scratch buffer so far
        self.lane_shape = None  # the one shape of every array value
        self.uses_elements = False  # a reduction reads elements (none: n may be 0)
        self.code_for_helpers: list[str] = []

    # ---------------------------------------------------------------- text
    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def lane_loop(self, statements: list[str]) -> None:
        self.line("for (long long i = tid; i < n; i += NT) {")
        for s in statements:
            self.line(f"  {s}")
        self.line("}")

    # -------------------------------------------------------------- values
    def var(self, name: str):
        for var_of in reversed(self.var_of):
            var = var_of(name)
            if var is not None:
                return var
        return None

    def is_lane(self, var) -> bool:
        """Whether ``var`` is an array (a lane value); checks the loop's one shape."""
        if var is None:
            raise LoweringError("a value without a description")
        shape = tuple(var.shape)
        if not shape:
            return False
        if self.lane_shape is None:
            self.lane_shape = shape
        elif shape != self.lane_shape:
            raise LoweringError(f"arrays of two shapes ({self.lane_shape} and {shape})")
        return True

    def lookup(self, name: str) -> Val:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        value = self.constant_of(name)
        if value is None:
            raise LoweringError(f"{name!r} is read before it is defined")
        return self.constant(value, self.var(name))

    def bind(self, name: str, val: Val) -> None:
        self.scopes[-1][name] = val

    def constant(self, value, var) -> Val:
        """A value known when the plan compiles: a literal (0-d, or one value repeated)."""
        host = numpy.asarray(value.get() if hasattr(value, "get") else value)
        lane = self.is_lane(var)
        flat = host.reshape(-1)
        if flat.size == 0 or len({v.tobytes() for v in flat}) != 1:
            raise LoweringError("an array constant with different values")
        text = fusion_cuda.literal(flat[0].item(), host.dtype)
        if not lane:
            return Val(host.dtype, False, text)
        out = self.new_lane(host.dtype)
        self.lane_loop([f"{out.ref}[i] = {text};"])
        return out

    def new_lane(self, dtype) -> Val:
        """A scratch lane buffer of ``dtype``."""
        dtype = numpy.dtype(dtype)
        ref = self.fresh("t")
        ctype = fusion_cuda.c_type(dtype)
        self.prologue.append(f"{ctype}* {ref} = ({ctype}*)(scratch + n_al * {self.scratch});")
        self.scratch += dtype.itemsize
        return Val(dtype, True, ref)

    def scalar(self, dtype, expression: str) -> Val:
        dtype = numpy.dtype(dtype)
        ref = self.fresh("s")
        ctype = fusion_cuda.c_type(dtype)
        self.line(f"{ctype} {ref} = ({ctype})({expression});")
        return Val(dtype, False, ref)

    def elementwise(self, dtype, expression_of, operands: list[Val], lane: bool) -> Val:
        """The result of an elementwise op: ``expression_of([operand C exprs])``."""
        self.code_for_helpers.append(expression_of([v.at for v in operands]))
        if not lane:
            return self.scalar(dtype, expression_of([v.ref for v in operands]))
        out = self.new_lane(dtype)
        ctype = fusion_cuda.c_type(out.dtype)
        self.lane_loop([f"{out.ref}[i] = ({ctype})({expression_of([v.at for v in operands])});"])
        return out

    def assign(self, target: Val, value: Val) -> None:
        """``target = value`` for a declared local or a lane buffer."""
        if target.lane:
            if value.ref != target.ref:
                self.lane_loop([f"{target.ref}[i] = {value.at};"])
        elif value.ref != target.ref:
            self.line(f"{target.ref} = {value.ref};")

    def declare(self, var) -> Val:
        """A value assigned later (a branch's or a loop's result)."""
        dtype = numpy.dtype(var.dtype)
        if self.is_lane(var):
            return self.new_lane(dtype)
        ref = self.fresh("s")
        self.line(f"{fusion_cuda.c_type(dtype)} {ref};")
        return Val(dtype, False, ref)

    def reduce(self, kind: str, x: Val, dtype) -> Val:
        """A full reduction of ``x`` to a 0-d value every thread holds."""
        dtype = numpy.dtype(dtype)
        ctype = fusion_cuda.c_type(dtype)
        if not x.lane:
            if kind in ("any", "all"):
                return self.scalar(dtype, f"{x.ref} != 0")
            return self.scalar(dtype, x.ref)
        self.uses_elements = True
        identity, combine = _REDUCERS[kind](dtype)
        part, shared, out = self.fresh("p"), self.fresh("red"), self.fresh("s")
        self.code_for_helpers.append(combine("a", "b"))
        self.line(f"{ctype} {out};")
        self.line("{")
        self.depth += 1
        self.line(f"__shared__ {ctype} {shared}[{THREADS}];")
        self.line(f"{ctype} {part} = {identity};")
        self.lane_loop([f"{part} = {combine(part, f'({ctype}){x.at}')};"])
        self.line(f"{shared}[tid] = {part};")
        self.line("__syncthreads();")
        self.line("for (long long step = NT / 2; step > 0; step /= 2) {")
        pair = combine(f"{shared}[tid]", f"{shared}[tid + step]")
        self.line(f"  if (tid < step) {shared}[tid] = {pair};")
        self.line("  __syncthreads();")
        self.line("}")
        self.line(f"{out} = {shared}[0];")
        self.line("__syncthreads();")
        self.depth -= 1
        self.line("}")
        if kind == "mean":
            self.line(f"{out} = {out} / ({ctype})n;")
        return Val(dtype, False, out)

    # -------------------------------------------------------------- blocks
    def lower_block(self, block, bindings: dict, outs: list[str]) -> list[Val]:
        """Lower ``block``'s ops with ``bindings`` for its arguments; the values of ``outs``."""
        self.scopes.append(dict(bindings))
        self.var_of.append(block.find_var)
        try:
            for op in block.ops:
                self.lower_op(op)
            return [self.lookup(n) for n in outs]
        finally:
            self.scopes.pop()
            self.var_of.pop()

    def lower_op(self, op) -> None:
        rule = rule_for(op.type, TARGET)
        if rule is None:
            raise LoweringError(f"{op.type} has no CUDA lowering")
        opdef = OPS[op.type]
        attrs = opdef.full_attrs(op.attrs)
        out_vars = [self.var(n) for n in op.output_names()]
        if rule.kind == "elementwise":
            ins = [self.lookup(op.inputs[slot.name][0]) for slot in opdef.inputs
                   if op.inputs.get(slot.name)]
            (out_var,) = out_vars
            lane = self.is_lane(out_var)
            step = Step(attrs, [v.dtype for v in ins], numpy.dtype(out_var.dtype))
            vals = [self.elementwise(out_var.dtype, lambda args: rule.emit(args, step), ins,
                                     lane)]
        else:
            vals = rule.emit(self, op, attrs, out_vars)
        for name, val in zip(op.output_names(), vals):
            self.bind(name, val)


def _max_combine(dtype):
    t = fusion_cuda.c_type(dtype)
    n = t.replace(" ", "_")
    return lambda a, b: f"fe_max_{n}({a}, {b})"


def _min_combine(dtype):
    t = fusion_cuda.c_type(dtype)
    n = t.replace(" ", "_")
    return lambda a, b: f"fe_min_{n}({a}, {b})"


def _lowest(dtype):
    if dtype.kind == "f":
        return fusion_cuda.literal(-math.inf, dtype)
    return fusion_cuda.literal(numpy.iinfo(dtype).min, dtype)


def _highest(dtype):
    if dtype.kind == "f":
        return fusion_cuda.literal(math.inf, dtype)
    return fusion_cuda.literal(numpy.iinfo(dtype).max, dtype)


_REDUCERS = {
    "sum": lambda d: (fusion_cuda.literal(0, d), lambda a, b: f"{a} + {b}"),
    "mean": lambda d: (fusion_cuda.literal(0, d), lambda a, b: f"{a} + {b}"),
    "max": lambda d: (_lowest(d), _max_combine(d)),
    "min": lambda d: (_highest(d), _min_combine(d)),
    "any": lambda d: ("false", lambda a, b: f"({a} || ({b} != 0))"),
    "all": lambda d: ("true", lambda a, b: f"({a} && ({b} != 0))"),
}


def fused_expression(emitter: Emitter, op, out_var) -> Val:
    """A ``fused_elementwise`` op: its steps, one after another (0-d or lane each)."""
    e = parse(op.attrs["expr"])
    vals = [emitter.lookup(n) for n in op.inputs.get("X", [])]
    lane = emitter.is_lane(out_var)
    for step in e.steps:
        args = [vals[a] for a in step.args]
        in_dtypes = [v.dtype for v in args]
        step_lane = lane and any(v.lane for v in args)
        if not args:  # a constant
            vals.append(Val(step.dtype, False, fusion_cuda.literal(
                step.attrs.get("value", 0.0), step.dtype)))
            continue
        vals.append(emitter.elementwise(step.dtype, lambda a, s=step, d=in_dtypes: (
            fusion_cuda.c_expression(s.op, a, d, s.dtype, s.attrs)), args, step_lane))
    return vals[-1]


# ------------------------------------------------------------------ the kernel


@dataclass(frozen=True)
class Param:
    """A kernel argument for one free value of the region."""

    name: str
    dtype: numpy.dtype
    lane: bool
    host: bool  # a Python int passed by value (a loop counter)


class LoopDispatcher:
    """What the plan calls for a lowered region: checks the arguments (a ``TypeError``
    sends the call to the interpreted region), allocates the results, launches."""

    def __init__(self, xp, kernel, params: list[Param], outs: list, scratch: int,
                 static_lane, uses_elements: bool):
        self.xp, self.kernel, self.params, self.outs = xp, kernel, params, outs
        self.scratch, self.static_lane = scratch, static_lane
        self.uses_elements = uses_elements

    def __call__(self, *args):
        xp = self.xp
        lane_shape, kargs = self.static_lane, []
        for param, a in zip(self.params, args):
            if param.host:
                if type(a) is not int:
                    raise TypeError(f"{param.name}: expected a Python int")
                kargs.append(numpy.int64(a))
                continue
            if not isinstance(a, xp.ndarray) or a.dtype != param.dtype:
                raise TypeError(f"{param.name}: expected a {param.dtype} device array")
            if param.lane:
                if lane_shape is None:
                    lane_shape = a.shape
                elif a.shape != lane_shape:
                    raise TypeError(f"{param.name}: arrays of two shapes")
            elif a.size != 1:
                raise TypeError(f"{param.name}: expected one element")
            kargs.append(xp.ascontiguousarray(a))
        lane_shape = tuple(lane_shape or ())
        n = math.prod(lane_shape)
        if n > MAX_ELEMENTS or (n == 0 and self.uses_elements):
            raise TypeError("the loop's arrays are too large (or empty) for one block")
        results = [xp.empty(lane_shape if lane else (), dtype=dtype) for lane, dtype in self.outs]
        n_al = -(-n // 32) * 32
        scratch = xp.empty((max(n_al * self.scratch, 1),), dtype=xp.uint8)
        fn = cuda_kernels.function(xp, self.kernel)
        fn((1,), (THREADS,), (*kargs, *results, scratch, numpy.int64(n)))
        return tuple(results)


_KERNEL = """\
// A loop lowered by dy2stat.runtime.lower.cuda_loops: one block runs the whole loop.
$helpers
extern "C" __global__ void $name($params) {
  const long long tid = threadIdx.x, NT = blockDim.x;
  const long long n_al = (n + 31) / 32 * 32;
$prologue
$body
}
"""


def loop_kernel(xp, program, ops, var_of, params, outs, constant_of, reference):
    """The kernel and dispatcher computing ``ops`` (a region of one ``while``).

    ``params`` are the region's free values ``(name, var, host)``; ``outs`` the
    names it must return; ``reference`` the NumPy function of the kernel's
    arguments registered with it. Raises ``LoweringError`` when it does not lower."""
    emitter = Emitter(program, var_of, constant_of)
    kparams, decls = [], []
    for k, (name, var, host) in enumerate(params):
        dtype = numpy.dtype(var.dtype)
        ctype = fusion_cuda.c_type(dtype)
        lane = emitter.is_lane(var) and not host
        kparams.append(Param(name, dtype, lane, host))
        if host:
            decls.append(f"const long long h{k}")
            emitter.bind(name, Val(dtype, False, f"(({ctype})h{k})"))
        elif lane:
            decls.append(f"const {ctype}* __restrict__ p{k}")
            emitter.bind(name, Val(dtype, True, f"p{k}"))
        else:
            decls.append(f"const {ctype}* __restrict__ p{k}")
            emitter.prologue.append(f"const {ctype} a{k} = *p{k};")
            emitter.bind(name, Val(dtype, False, f"a{k}"))
    for op in ops:
        emitter.lower_op(op)
    out_specs = []
    for k, name in enumerate(outs):
        val = emitter.lookup(name)
        ctype = fusion_cuda.c_type(val.dtype)
        decls.append(f"{ctype}* __restrict__ r{k}")
        out_specs.append((val.lane, val.dtype))
        if val.lane:
            emitter.lane_loop([f"r{k}[i] = {val.ref}[i];"])
        else:
            emitter.line(f"if (tid == 0) *r{k} = {val.ref};")
    decls += ["unsigned char* __restrict__ scratch", "const long long n"]
    body = "\n".join(emitter.lines)
    helpers = fusion_cuda.helpers_for("\n".join(emitter.code_for_helpers + [body]))
    text = _KERNEL.replace("$helpers", helpers).replace("$params", ",\n    ".join(decls))
    text = text.replace("$prologue", "\n".join("  " + p for p in emitter.prologue))
    text = text.replace("$body", body)
    name = "loop_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    source = text.replace("$name", name)
    kernel = cuda_kernels.register(name, source, reference)
    static = emitter.lane_shape if emitter.lane_shape and all(
        d >= 0 for d in emitter.lane_shape) and not any(p.lane for p in kparams) else None
    return kernel, LoopDispatcher(xp, kernel, kparams, out_specs, emitter.scratch, static,
                                  emitter.uses_elements)
