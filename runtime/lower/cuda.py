"""The CUDA target: ``while`` loops of GPU plans lowered to one kernel each.

Rules (registered under ``"cuda"`` in the lowering table, beside the CPU
target's): every elementwise op of the fused-kernel generator
(``kernels.fusion_cuda``'s C expression table) and ``fused_elementwise``
chains; full reductions (``sum``, ``mean``, ``max``, ``min``, ``any``,
``all`` of every axis); constants; ``assign``; ``cond`` on a 0-d predicate
and ``while`` on one. An array operand must have the op's output shape (no
broadcasting between arrays: a loop's arrays share one shape, 0-d values
aside). ``cuda_loops`` writes the kernel.

``CudaLowering`` is what a GPU plan's code generator asks: the regions of a
block (each ``while`` whose blocks lower) and each compiled into a
``LoopDispatcher``. Every loop kernel is registered (``kernels.cuda_kernels``)
with its reference: the same region as an interpreted NumPy function of the
kernel's arguments. ``settings.enabled`` is the ``gpu_loop_kernels`` flag.
"""

from __future__ import annotations

import builtins

import numpy

from dy2stat.kernels import backend, fusion_cuda
from dy2stat.kernels.fusion_expr import OPS as FUSABLE
from dy2stat.runtime.codegen import Function, Module
from dy2stat.runtime.lower import cuda_loops, regions
from dy2stat.runtime.lower.loops import LoweringError
from dy2stat.runtime.lower.rules import register_lowering
from dy2stat.runtime.passes.constant_folding import evaluate
from dy2stat.runtime.registry import OPS

__all__ = ["CudaLowering", "lowering", "settings"]

TARGET = "cuda"


class Settings:
    """The ``gpu_loop_kernels`` flag: GPU plans compiled from then on lower their loops."""

    __slots__ = ("enabled",)

    def __init__(self):
        self.enabled = True


settings = Settings()


def _has_c_type(var) -> bool:
    try:
        fusion_cuda.c_type(var.dtype)
        return True
    except KeyError:
        return False


def _shapes_fit(op, var_of) -> bool:
    """Every operand is 0-d or of the output's shape; every value has a C type."""
    out = [var_of(n) for n in op.output_names()]
    if len(out) != 1 or not all(v is not None and _has_c_type(v) for v in out):
        return False
    shape = tuple(out[0].shape)
    for name in op.input_names():
        var = var_of(name)
        if var is None or not _has_c_type(var) or tuple(var.shape) not in ((), shape):
            return False
    return True


def _elementwise_accepts(op, var_of, rounding) -> bool:
    if not _shapes_fit(op, var_of):
        return False
    opdef = OPS[op.type]
    promoted = {var_of(n).dtype for i in opdef.promote
                for n in op.inputs.get(opdef.inputs[i].name, [])}
    return len(promoted) <= 1  # the builder inserted the casts (as the fusion pass needs)


def _elementwise(op_type):
    def emit(args, step):
        return fusion_cuda.c_expression(op_type, args, step.in_dtypes, step.dtype, step.attrs)

    return emit


for _op in FUSABLE:
    if _op != "full":
        register_lowering(_op, TARGET, "elementwise", accepts=_elementwise_accepts)(
            _elementwise(_op))


@register_lowering("fused_elementwise", TARGET, "op",
                   accepts=lambda op, var_of, rounding: _shapes_fit(op, var_of))
def _fused(ctx, op, attrs, out_vars):
    return [cuda_loops.fused_expression(ctx, op, out_vars[0])]


def _constant_accepts(op, var_of, rounding) -> bool:
    (var,) = [var_of(n) for n in op.output_names()]
    return _has_c_type(var) and all(d >= 0 for d in var.shape)


def _constant(ctx, op, attrs, out_vars):
    values = evaluate(op, lambda n: dict(zip(op.output_names(), out_vars)).get(n),
                      lambda n: None)
    if values is None:
        raise LoweringError(f"{op.type}: not a constant")
    return [ctx.constant(values[n], var) for n, var in zip(op.output_names(), out_vars)]


for _op in ("full", "arange", "linspace", "eye"):
    register_lowering(_op, TARGET, "op", accepts=_constant_accepts)(_constant)


register_lowering("assign", TARGET, "op", accepts=lambda op, var_of, rounding: _shapes_fit(
    op, var_of))(lambda ctx, op, attrs, out_vars: [ctx.lookup(op.inputs["X"][0])])


def _reduce_accepts(kind):
    def accepts(op, var_of, rounding) -> bool:
        x = var_of(op.inputs["X"][0])
        (out,) = [var_of(n) for n in op.output_names()]
        if x is None or out is None or not (_has_c_type(x) and _has_c_type(out)):
            return False
        axis, ndim = op.attrs.get("axis"), len(x.shape)
        axes = tuple(range(ndim)) if axis is None else (
            tuple(axis) if isinstance(axis, (list, tuple)) else (axis,))
        if not all(isinstance(a, int) and -ndim <= a < ndim for a in axes) or (
                sorted({a % ndim for a in axes}) != list(range(ndim))):
            return False
        if tuple(out.shape) != () or (kind == "mean" and x.dtype.kind != "f"):
            return False
        return kind not in ("any", "all") or x.dtype.kind == "b"

    return accepts


def _reduce(kind):
    def emit(ctx, op, attrs, out_vars):
        return [ctx.reduce(kind, ctx.lookup(op.inputs["X"][0]), out_vars[0].dtype)]

    return emit


for _kind in ("sum", "mean", "max", "min", "any", "all"):
    register_lowering(_kind, TARGET, "op", accepts=_reduce_accepts(_kind))(_reduce(_kind))


def _scalar_bool(var_of, name) -> bool:
    var = var_of(name)
    return var is not None and tuple(var.shape) == () and var.dtype.kind == "b"


@register_lowering("cond", TARGET, "control",
                   accepts=lambda op, var_of, rounding: _scalar_bool(var_of, op.inputs["Cond"][0]))
def _cond(ctx, op, attrs, out_vars):
    pred = ctx.lookup(op.inputs["Cond"][0])
    if pred.lane:
        raise LoweringError("cond: an array predicate")
    results = [ctx.declare(var) for var in out_vars]
    program = ctx.program
    for key, outs, head in (("true_block", "true_outs", f"if ({pred.ref}) {{"),
                            ("false_block", "false_outs", "} else {")):
        ctx.line(head)
        ctx.depth += 1
        vals = ctx.lower_block(program.blocks[attrs[key]], {}, attrs[outs])
        for target, val in zip(results, vals):
            ctx.assign(target, val)
        ctx.depth -= 1
    ctx.line("}")
    return results


def _while_accepts(op, var_of, rounding) -> bool:
    return not op.outputs.get("Carries") and _scalar_bool(var_of, op.attrs["cond_out"])


@register_lowering("while", TARGET, "control", accepts=_while_accepts)
def _while(ctx, op, attrs, out_vars):
    program = ctx.program
    cond_block, body = program.blocks[attrs["cond_block"]], program.blocks[attrs["body_block"]]
    carried = [ctx.declare(var) for var in out_vars]
    for target, name in zip(carried, op.inputs["X"]):
        ctx.assign(target, ctx.lookup(name))
    ctx.line("while (true) {")
    ctx.depth += 1
    (pred,) = ctx.lower_block(cond_block, dict(zip(attrs["cond_args"], carried)),
                              [attrs["cond_out"]])
    if pred.lane:
        raise LoweringError("while: an array predicate")
    ctx.line(f"if (!({pred.ref})) break;")
    news = ctx.lower_block(body, dict(zip(attrs["body_args"], carried)), attrs["body_outs"])
    _update(ctx, carried, news)
    ctx.line("__syncthreads();")
    ctx.depth -= 1
    ctx.line("}")
    return carried


def _update(ctx, carried, news) -> None:
    """All carried values take their next values at once (a body may swap them)."""
    pairs = [(c, v) for c, v in zip(carried, news) if c.ref != v.ref]
    temps = []
    for c, v in pairs:
        if not c.lane:
            temps.append((c, ctx.scalar(c.dtype, v.ref)))
    lanes = [(c, v) for c, v in pairs if c.lane]
    if lanes:
        reads = [f"const {fusion_cuda.c_type(c.dtype)} u{k} = {v.at};"
                 for k, (c, v) in enumerate(lanes)]
        writes = [f"{c.ref}[i] = u{k};" for k, (c, _) in enumerate(lanes)]
        ctx.lane_loop(reads + writes)
    for c, t in temps:
        ctx.line(f"{c.ref} = {t.ref};")


# ------------------------------------------------------------------ the regions


class CudaLowering:
    """A GPU plan's lowering: its regions (each ``while`` whose blocks lower) and
    each compiled into a ``LoopDispatcher``; ``kernels`` are the loop kernels made."""

    def __init__(self, xp):
        self.xp = xp
        self.target = regions.Lowering(TARGET)
        self._kernels: dict = {}  # name -> CudaKernel

    @property
    def kernels(self) -> list:
        return list(self._kernels.values())

    def spans(self, program, ops, var_of) -> list[tuple]:
        return [(k, k + 1) for k, op in enumerate(ops)
                if op.type == "while" and regions.lowerable(program, op, var_of, self.target)]

    def compile(self, program, ops, var_of, params, outs, constant_of):
        """``(dispatcher, [])`` for the region ``ops``, or None (it stays interpreted)."""
        try:
            reference = _reference(program, ops, params, outs, constant_of)
            kernel, dispatcher = cuda_loops.loop_kernel(
                self.xp, program, ops, var_of, params, outs, constant_of, reference)
        except LoweringError:
            return None
        self._kernels[kernel.name] = kernel
        return dispatcher, []

    def __repr__(self) -> str:
        return "CudaLowering()"


def lowering(xp) -> CudaLowering | None:
    """The lowering of a GPU plan compiled now (None: the flag is off)."""
    return CudaLowering(xp) if settings.enabled else None


def _reference(program, ops, params, outs, constant_of):
    """The region's interpreted code on NumPy, as a function of its kernel's arguments
    (free values, then results to fill): what the kernel computes."""
    block = next(b for b in program.blocks if any(o is ops[0] for o in b.ops))
    mod = Module(program, numpy)
    fn = Function(mod, "region", list(ops), [block], [], list(outs), lowers=False)
    fn.emit(fresh_results=True)
    exec(builtins.compile(mod.source(), mod.filename, "exec"), mod.ns)  # our own text
    run = mod.ns[fn.name]
    names = [name for name, _, _ in params]
    constants = {}
    for name in fn.free:
        if name not in names:
            value = constant_of(name)
            if value is None:
                raise LoweringError(f"{name!r} is neither an argument nor a constant")
            constants[name] = backend.to_host(value)

    def reference(*args):
        values = dict(zip(names, args))
        results = args[len(names):len(names) + len(outs)]
        free = [values[n] if n in values else constants[n] for n in fn.free]
        for target, value in zip(results, run({}, *free)):
            numpy.copyto(target, value)

    return reference

