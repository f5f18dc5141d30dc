"""The executor's code generator: a block becomes one Python function.

``Function`` analyses a block's ops (each name's definitions as separate
values, free names, last uses) and emits the source of one function:
``def block_3(S, v0, v1, ...)`` with the ops in order, values in local slots
(``v<n>``: a slot is reused or ``del``-ed right after its value's last use),
kernels and constants taken from the plan's namespace (``Module.ns``), and
persistable outputs stored in ``S`` (the scope's dict). The function's
parameters are its ``args`` followed by its ``free`` names, which the caller
passes from its own values; a function returns its ``outs``.

Control flow is inline: ``cond`` an ``if`` calling one of two branch
functions; ``while`` a Python ``while`` over its cond and body functions
(pushing each iteration's carried values onto the ``Carries`` list when it is
wanted); ``while_grad`` a call of a runner that pops the saved carries in
reverse and runs the loop body and its gradient block as one function.

Buffer reuse: an elementwise op writes into its first input
(``v3 = add(v3, v2, out=v3)``) when that input was allocated by an op known
to allocate (``_ALLOCATING``), is dead after the op, shares its buffer with no
live value nor another operand, is not in the scope, and provably has the
output's shape and dtype. Values that may be views (``reshape``,
``getitem``, ``cast``, control-flow outputs, ...) are taken to share every
input's buffer.

Overlap (top-level functions on NumPy, ``overlap.enabled``): a convolution
or pooling op whose result is first needed after another heavy op runs on a
worker thread (``_f7 = _submit(k3, xp, v1, v2)``) and is joined right before
its first reader (``v9 = _f7.result()``). NumPy releases the GIL inside these
kernels, so on two cores a weight gradient is computed while the input
gradient chain goes on. The values it reads stay live (never written in
place) until the join. Only while BLAS runs each product on one thread: a
product's last bits depend on how many threads BLAS splits it over, so a
plan then runs ``_submit``-ed ops on its own thread (``run_here``), with
BLAS as eager mode finds it (see ``Plan.run``).

Every identifier in the text is made here (slot numbers, namespace keys);
program names appear only in comments, escaped with ``ascii()``, so a
hostile program cannot inject code.
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import math
import os
import sys
import threading
import types
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from dy2stat.runtime import shapes
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.ops.conv import CHWN_FORMS
from dy2stat.runtime.registry import get_op

__all__ = ["Function", "Module", "blas_on_one_thread", "on_worker", "overlap", "run_here",
           "run_on_worker", "sharing_cores"]

# Ops whose kernel is exactly one array-module function: called directly.
_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "pow": "power",
    "maximum": "maximum", "minimum": "minimum", "equal": "equal", "not_equal": "not_equal",
    "less_than": "less", "less_equal": "less_equal", "greater_than": "greater",
    "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
}
_UNARY = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
    "floor": "floor", "ceil": "ceil", "neg": "negative", "abs": "absolute", "sign": "sign",
    "logical_not": "logical_not", "bitwise_not": "invert",
}
# Ops that may write their result into their first input (``out=``).
_IN_PLACE = frozenset(_BINARY) | frozenset(_UNARY) | {"relu"}
# Heavy kernels that spend most of their time with the GIL released (BLAS,
# large copies and ufunc loops): what overlap may move to the worker thread.
_OVERLAPPABLE = frozenset({"conv2d", "conv2d_grad_input", "conv2d_grad_filter", "max_pool2d",
                           "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad"})
_OVERLAPPABLE |= {f"{t}_chwn" for t in _OVERLAPPABLE if t in CHWN_FORMS}
# Ops whose output is always a new buffer that nothing else references (a
# whitelist: reshape, transpose, getitem, expand, cast, sum_to_like, ... may
# return views of their input or the input itself).
_ALLOCATING = (_IN_PLACE | _OVERLAPPABLE
               | {"matmul", "full", "full_like", "assign", "fused_elementwise"})


class _OverlapSettings:
    """Whether plans compiled from now on overlap heavy ops (the flag
    ``inter_op_parallelism``); only worth it with a second core."""

    def __init__(self):
        self.enabled = (os.cpu_count() or 1) > 1


overlap = _OverlapSettings()
_worker = {"pool": None, "pid": None}
_worker_lock = threading.Lock()
_WORKER_NAME = "dy2stat-worker"


def run_on_worker(function, *args):
    """Start ``function(*args)`` on the one worker thread (made again after a fork);
    returns its future."""
    pool = _worker["pool"]
    if pool is None or _worker["pid"] != os.getpid():
        with _worker_lock:
            if _worker["pool"] is None or _worker["pid"] != os.getpid():
                _worker["pool"] = ThreadPoolExecutor(1, thread_name_prefix=_WORKER_NAME)
                _worker["pid"] = os.getpid()
            pool = _worker["pool"]
    return pool.submit(function, *args)


class _SharingCores:
    """Entered while plan work runs on the worker thread and on this one at once.

    The interpreter then hands the GIL over every ``SWITCH_INTERVAL`` seconds
    instead of Python's 5 ms (a thread back from a GIL-free kernel would
    otherwise wait up to the whole interval while the other runs small ops,
    which keep the GIL), and BLAS runs each product on one thread (two
    threads' products, each spread over every core, would fight for them).
    Counted, so overlapping users restore both only when the last one leaves.
    """

    SWITCH_INTERVAL = 1e-4

    def __init__(self):
        self._lock, self._users = threading.Lock(), 0
        self._interval, self._blas_threads = None, []

    def __enter__(self):
        with self._lock:
            if self._users == 0:
                self._interval = sys.getswitchinterval()
                sys.setswitchinterval(min(self._interval, self.SWITCH_INTERVAL))
                self._blas_threads = [(lib, lib.get_num_threads()) for lib in _blas_libraries()]
                for lib, _ in self._blas_threads:
                    lib.set_num_threads(1)
            self._users += 1

    def __exit__(self, *exc):
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._interval)
                for lib, threads in self._blas_threads:
                    lib.set_num_threads(threads)


sharing_cores = _SharingCores()


@functools.cache
def _blas_libraries() -> tuple:
    """The thread controls of the BLAS libraries loaded in this process
    (threadpoolctl's), or none when threadpoolctl is not installed."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


class _Done:
    """A result already computed, read as a future's (``run_here``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def run_here(function, *args) -> _Done:
    """``function(*args)`` run now on this thread, as a finished future: what an
    overlapped op does when the worker must not run it (``blas_on_one_thread``)."""
    return _Done(function(*args))


def blas_on_one_thread() -> bool:
    """Whether every BLAS library of this process runs each product on one thread.

    Only then may a product run on the worker thread (where ``sharing_cores``
    keeps BLAS on one thread) and give the bits eager mode's product gives:
    OpenBLAS rounds a product split over two threads differently in the last
    bits. Unknown (no BLAS control found) counts as no.
    """
    libraries = _blas_libraries()
    return bool(libraries) and all(lib.get_num_threads() == 1 for lib in libraries)


def on_worker() -> bool:
    """Whether this is the worker thread (which must not wait for itself)."""
    return threading.current_thread().name.startswith(_WORKER_NAME)


def _pred(value) -> bool:
    """A cond/while predicate, read on the host."""
    try:
        return bool(value)
    except ValueError:
        raise ValueError("a cond/while predicate must hold exactly one element, got shape "
                         f"{shapes.fmt(value.shape)}") from None


class _Value:
    """One definition of a name inside one generated function (SSA)."""

    __slots__ = ("name", "var", "param", "fresh", "buffers", "first_use", "last_use", "slot")

    def __init__(self, name: str, var: Var | None, param: bool):
        self.name, self.var, self.param = name, var, param
        self.fresh = False  # allocated by an op in this function: may be written in place
        self.buffers: frozenset = frozenset()  # buffers it may share (for aliasing)
        self.first_use = -1  # the first op reading it; len(ops) when only returned
        self.last_use = -1  # the last op reading it; len(ops) when returned
        self.slot = -1


class _Step:
    __slots__ = ("index", "number", "op", "opdef", "attrs", "ins", "outs", "reads", "subs",
                 "join")

    def __init__(self, index, number, op, opdef, attrs):
        self.index, self.op, self.opdef, self.attrs = index, op, opdef, attrs
        self.number = number  # the op's index in its block (index: where it runs)
        self.join = -1  # run on the worker thread, joined before this op (overlap)
        self.ins: list[list[_Value]] = []
        self.outs: list[list[_Value]] = []
        self.reads: list[_Value] = []
        self.subs: list[tuple[Function, list[_Value]]] = []  # sub-functions and their free args


class Module:
    """The generated source of one plan, and the namespace it runs in."""

    _ids = itertools.count()

    def __init__(self, program: Program, xp):
        self.program, self.xp = program, xp
        self.ns: dict = {"xp": xp, "_pred": _pred}
        self.functions: list[list[str]] = []
        self.line_ops: dict[int, str] = {}  # line number -> the op it runs
        self._names = itertools.count()
        self._buffers = itertools.count()
        self.scope_buffers: set[int] = set()  # buffers the scope holds: never written
        self.compiling: set[int] = set()  # blocks being compiled (to refuse cycles)
        self.filename = f"<dy2stat plan {next(self._ids)}>"

    def const(self, value, prefix: str = "c") -> str:
        name = f"{prefix}{next(self._names)}"
        self.ns[name] = value
        return name

    def function_name(self, base: str) -> str:
        return base if base not in self.ns else f"{base}_{next(self._names)}"

    def buffer(self) -> int:
        return next(self._buffers)

    def run_here(self, name: str):
        """The generated function ``name`` with its overlapped ops run on the
        calling thread (``run_here``) instead of the worker: the same code."""
        fn = self.ns[name]
        return types.FunctionType(fn.__code__, {**self.ns, "_submit": run_here}, fn.__name__)

    def ufunc(self, name: str) -> str:
        self.ns.setdefault(name, getattr(self.xp, name))
        return name

    def source(self) -> str:
        lines, line_ops = [], {}
        for fn in self.functions:
            for text, desc in fn:
                lines.append(text)
                if desc:
                    line_ops[len(lines)] = desc
            lines.append("")
        self.line_ops = line_ops
        return "\n".join(lines)


class Function:
    """One block (or body + gradient block) as one generated function.

    Its parameters are ``args`` (bound positionally by the caller) followed by
    ``free``: the outer names it reads, which the caller passes from its own
    values. It returns the values named by ``outs`` (a tuple, or one value
    when ``single``).
    """

    def __init__(self, mod: Module, base: str, ops: list[Operator], blocks: list[Block],
                 args: list[str], outs: list[str], single: bool = False,
                 overlap_ops: bool = False):
        self.mod, self.blocks, self.single = mod, blocks, single
        self.name = mod.function_name(base)
        mod.ns[self.name] = None  # reserve the name
        self.env: dict[str, _Value] = {}
        self.values: list[_Value] = []
        self.params = [self._define(n, param=True) for n in args]
        self.free: list[str] = []
        order = _heavy_ops_early(ops) if overlap_ops else range(len(ops))
        entered = [b.idx for b in blocks if b.idx not in mod.compiling]
        mod.compiling.update(entered)
        self.steps = [self._step(i, k, ops[k]) for i, k in enumerate(order)]
        mod.compiling.difference_update(entered)
        self.results = [self._read(n) for n in outs]
        for step in self.steps:
            for v in step.reads:
                if v.first_use < 0:
                    v.first_use = step.index
                v.last_use = step.index
        for v in self.results:
            if v.first_use < 0:
                v.first_use = len(self.steps)
            v.last_use = len(self.steps)
        self.joins: dict[int, list[_Step]] = defaultdict(list)  # op index -> steps joined
        if overlap_ops:
            self._choose_overlap()

    # ------------------------------------------------------------ analysis

    def lookup(self, name: str) -> Var | None:
        for block in self.blocks:
            var = block.find_var(name)
            if var is not None:
                return var
        return None

    def _define(self, name: str, param: bool = False) -> _Value:
        value = _Value(name, self.lookup(name), param)
        self.env[name] = value
        self.values.append(value)
        return value

    def _read(self, name: str) -> _Value:
        value = self.env.get(name)
        if value is None:
            value = self._define(name, param=True)
            self.params.append(value)
            self.free.append(name)
        return value

    def _step(self, index: int, number: int, op: Operator) -> _Step:
        opdef = get_op(op.type)
        where = f"block {self.blocks[0].idx}, op {number} ({op.type})"
        try:
            attrs = opdef.full_attrs(op.attrs)
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None
        step = _Step(index, number, op, opdef, attrs)
        _check_slots(where, op.inputs, opdef.inputs, "input")
        _check_slots(where, op.outputs, opdef.outputs, "output")
        for slot in opdef.inputs:
            group = [self._read(n) for n in op.inputs.get(slot.name, [])]
            step.ins.append(group)
            step.reads += group
        if op.type in CONTROL_FLOW:
            for fn in self._sub_functions(where, op, attrs):
                free_args = [self._read(n) for n in fn.free]
                step.subs.append((fn, free_args))
                step.reads += free_args
        for slot in opdef.outputs:
            step.outs.append([self._define(n) for n in op.outputs.get(slot.name, [])])
        return step

    def _sub_functions(self, where: str, op: Operator, attrs: dict) -> list[Function]:
        mod, blocks = self.mod, self.mod.program.blocks

        def block(key):
            idx = attrs[key]
            if not isinstance(idx, int) or not 0 < idx < len(blocks):
                raise ValueError(f"{where}: {key} {idx!r} is not a sub-block of the program")
            if idx in mod.compiling:
                raise ValueError(f"{where}: {key} {idx} contains this op (a cycle of blocks)")
            return blocks[idx]

        def sub(key, args, outs, single=False, ops=None, extra=()):
            b = block(key)
            fn = Function(mod, f"block_{b.idx}", list(b.ops) if ops is None else ops,
                           [b, *extra], list(args), list(outs), single)
            fn.emit()
            return fn

        n_out = len(op.outputs.get("Out", []))
        if op.type == "cond":
            for key in ("true_outs", "false_outs"):
                if len(attrs[key]) != n_out:
                    raise ValueError(f"{where}: {key} names {len(attrs[key])} values for "
                                     f"{n_out} outputs")
            return [sub("true_block", [], attrs["true_outs"]),
                    sub("false_block", [], attrs["false_outs"])]
        if op.type == "while":
            n = len(op.inputs.get("X", []))
            counts = {"Out": n_out, "cond_args": len(attrs["cond_args"]),
                      "body_args": len(attrs["body_args"]), "body_outs": len(attrs["body_outs"])}
            bad = {k: c for k, c in counts.items() if c != n}
            if bad:
                raise ValueError(f"{where}: {n} carried values (X) but {bad}")
            saved = list(attrs.get("saved", [])) if op.outputs.get("Carries") else []
            return [sub("cond_block", attrs["cond_args"], [attrs["cond_out"]], single=True),
                    sub("body_block", attrs["body_args"], list(attrs["body_outs"]) + saved)]
        # while_grad: the body (recomputed from a saved carry), then its gradient block.
        body, grad = block("body_block"), block("grad_block")
        n_grads = len(op.inputs.get("DOut", []))
        if not (len(attrs["grad_args"]) == n_grads == len(attrs["grad_outs"])
                == len(op.outputs.get("DX", []))):
            raise ValueError(f"{where}: DOut, grad_args, grad_outs and DX must have one entry "
                             "per carried value")
        if len(attrs["grad_inputs"]) != len(op.outputs.get("DInput", [])):
            raise ValueError(f"{where}: grad_inputs and DInput differ in length")
        outs = list(attrs["grad_outs"]) + list(attrs["grad_inputs"])
        saved = set(attrs.get("saved", []))
        # Body ops whose values the forward loop saved are not run again.
        recompute = [o for o in body.ops if not o.output_names() or not set(o.output_names())
                     <= saved]
        ops = _needed_ops(mod.program, recompute + list(grad.ops), outs, grad)
        args = list(attrs["body_args"]) + list(attrs.get("saved", [])) + list(attrs["grad_args"])
        return [sub("grad_block", args, outs, ops=ops, extra=[body])]

    def _choose_overlap(self) -> None:
        """Mark the heavy ops to run on the worker thread (see the module docstring).

        Decided from the last op back, so an op counts the heavy ops after it
        that stay on the calling thread, and a long side branch (a weight
        gradient read only at the end) wins over its neighbours.
        """
        heavy = {s.index for s in self.steps if s.op.type in _OVERLAPPABLE}
        for step in reversed(self.steps):
            outs = _flat(step.outs)
            if (step.op.type not in _OVERLAPPABLE or not outs
                    or any(v.var is None or v.var.persistable or v.first_use < 0
                           for v in outs)):
                continue
            join = min(v.first_use for v in outs)
            if not any(step.index < h < join for h in heavy):
                continue  # nothing heavy to run meanwhile: the thread hop would only cost
            step.join = join
            self.joins[join].insert(0, step)
            heavy.discard(step.index)
            for v in step.reads:  # read by the worker until the join: keep them intact
                v.last_use = max(v.last_use, join)

    # -------------------------------------------------------------- codegen

    def emit(self, persistable_params=(), copy_scope_results=False) -> None:
        """Generate the function's source (after the caller has classified ``free``)."""
        mod = self.mod
        holders: dict[int, list[_Value]] = defaultdict(list)
        for k, v in enumerate(self.params):
            v.slot = k
            v.buffers = frozenset([mod.buffer()])
            holders[next(iter(v.buffers))].append(v)
            if v.name in persistable_params:
                mod.scope_buffers |= v.buffers
        self.n_slots = len(self.params)
        free_slots: list[int] = []
        args = ", ".join(["S"] + [f"v{v.slot}" for v in self.params])
        lines = [(f"def {self.name}({args}):", None)]
        self.releases: list[list[str]] = []
        self.in_place: list[int] = []
        for step in self.steps:
            lines += self._joins(step.index)
            lines += self._emit_step(step, holders, free_slots)
        lines += self._joins(len(self.steps))
        results = []
        for v in self.results:
            text = f"v{v.slot}"
            if copy_scope_results and v.buffers & mod.scope_buffers:
                text += ".copy()"  # the caller must not be able to change the scope
            results.append(text)
        if self.single:
            lines.append((f"    return {results[0]}", None))
        else:
            lines.append((f"    return {_tuple(results)}", None))
        mod.functions.append(lines)

    def _joins(self, index: int) -> list:
        """Lines that wait for the worker's ops whose results op ``index`` reads."""
        lines = []
        for step in self.joins.get(index, ()):
            outs = ", ".join(f"v{v.slot}" for v in _flat(step.outs))
            lines.append((f"    {outs} = _f{step.index}.result()", self._describe(step)))
            lines.append((f"    del _f{step.index}", None))
        return lines

    def _describe(self, step: _Step) -> str:
        desc = f"block {self.blocks[0].idx}, op {step.number} ({step.op.type})"
        if step.op.origin:
            desc += f", built at\n{step.op.origin}"
        return desc

    def _emit_step(self, step: _Step, holders, free_slots: list[int]) -> list:
        i, op, mod = step.index, step.op, self.mod
        dying = list({id(v): v for v in step.reads if v.last_use == i}.values())
        target = self._in_place_target(step, holders)
        # Slots for the outputs. A while loop reads its inputs again after
        # assigning its outputs, so it only takes slots that hold nothing.
        reusable = [] if op.type == "while" else [v.slot for v in dying if v is not target]
        taken = set()
        for group_index, group in enumerate(step.outs):
            for v in group:
                if target is not None and group_index == 0:
                    v.slot = target.slot
                elif reusable:
                    v.slot = reusable.pop(0)
                elif free_slots:
                    v.slot = free_slots.pop()
                else:
                    v.slot, self.n_slots = self.n_slots, self.n_slots + 1
                taken.add(v.slot)
        self._track_buffers(step, target, holders)
        desc = self._describe(step)
        code = [(f"    # {step.number}: {_comment(op)}", None)]
        code += [(line, desc) for line in self._code(step, target)]
        released, dels = [], []
        for v in _flat(step.outs):
            if v.var is not None and v.var.persistable:
                code.append((f"    S[{mod.const(v.name, 'n')}] = v{v.slot}", desc))
                mod.scope_buffers |= v.buffers
            if v.last_use < 0:  # never read: released right away
                v.last_use = i
                released.append(v.name)
                dels.append(f"v{v.slot}")
                free_slots.append(v.slot)
        for v in dying:
            released.append(v.name)
            if v.slot in taken:
                continue  # rebinding the slot to an output released it
            if not v.param:  # parameters are held by the caller: dropping them frees nothing
                dels.append(f"v{v.slot}")
            free_slots.append(v.slot)
        if dels:
            code.append((f"    del {', '.join(dels)}", None))
        self.releases.append(released)
        if target is not None:
            self.in_place.append(step.number)
        return code

    def _in_place_target(self, step: _Step, holders) -> _Value | None:
        """The first input when the op may write its result into it, else None."""
        if step.op.type not in _IN_PLACE or len(step.outs) != 1 or len(step.outs[0]) != 1:
            return None
        a, out = step.ins[0][0], step.outs[0][0]
        if not a.fresh or a.last_use != step.index or a.var is None or out.var is None:
            return None
        (buffer,) = a.buffers
        if buffer in self.mod.scope_buffers:
            return None
        if any(h is not a and h.last_use > step.index for h in holders[buffer]):
            return None  # a live view of the same buffer
        if any(v is not a and buffer in v.buffers for v in step.reads):
            return None  # another operand overlaps it
        others = [v.var.shape if v.var is not None else None for v in step.reads if v is not a]
        if a.var.dtype != out.var.dtype or not _keeps_shape(a.var.shape, others, out.var.shape):
            return None
        return a

    def _track_buffers(self, step: _Step, target, holders) -> None:
        mod = self.mod
        if step.op.type in _ALLOCATING:
            for v in _flat(step.outs):
                v.fresh = True
                v.buffers = target.buffers if target is not None else frozenset([mod.buffer()])
        else:  # may be a view of (or hold) any input
            union = frozenset().union(*(v.buffers for v in step.reads))
            for v in _flat(step.outs):
                v.buffers = union
        for v in _flat(step.outs):
            for b in v.buffers:
                holders[b].append(v)

    def _code(self, step: _Step, target) -> list[str]:
        op, opdef, mod, t = step.op, step.opdef, self.mod, step.op.type
        ins = [[f"v{v.slot}" for v in group] for group in step.ins]
        outs = [[f"v{v.slot}" for v in group] for group in step.outs]
        out_kw = f", out=v{target.slot}" if target is not None else ""
        if t == "cond":
            (fn_t, free_t), (fn_f, free_f) = step.subs
            lhs = _targets(outs[0])
            call_t = f"{fn_t.name}({', '.join(['S'] + [f'v{v.slot}' for v in free_t])})"
            call_f = f"{fn_f.name}({', '.join(['S'] + [f'v{v.slot}' for v in free_f])})"
            return [f"    if _pred({ins[0][0]}):", f"        {lhs}{call_t}",
                    "    else:", f"        {lhs}{call_f}"]
        if t == "while":
            (fn_c, free_c), (fn_b, free_b) = step.subs
            carried = outs[0]
            cond = f"{fn_c.name}({', '.join(['S', *carried] + [f'v{v.slot}' for v in free_c])})"
            body = f"{fn_b.name}({', '.join(['S', *carried] + [f'v{v.slot}' for v in free_b])})"
            lines = [f"    {_targets(carried)}{_tuple(ins[0])}" if carried else "    pass"]
            stack = outs[1][0] if outs[1] else None
            if stack:
                lines.append(f"    {stack} = []")
            lines.append(f"    while _pred({cond}):")
            n_saved = len(op.attrs.get("saved", [])) if stack else 0
            if stack and n_saved:
                # The body also returns the values the gradient reads: save them too.
                res = f"_r{step.index}"
                lines.append(f"        {res} = {body}")
                lines.append(f"        {stack}.append({_tuple(carried)} + "
                             f"{res}[{len(carried)}:])")
                lines.append(f"        {_targets(carried)}{res}[:{len(carried)}]")
            elif stack:
                lines.append(f"        {stack}.append({_tuple(carried)})")
                lines.append(f"        {_targets(carried)}{body}")
            else:
                lines.append(f"        {_targets(carried)}{body}")
            return lines
        if t == "while_grad":
            ((fn, free),) = step.subs
            sources = _dinput_sources(op, self.lookup)
            runner = mod.const(_while_grad_runner(
                mod.ns, fn.name, len(op.attrs["body_args"]) + len(op.attrs.get("saved", [])),
                len(step.ins[2]),
                [v.var.dtype if v.var is not None else None for v in step.outs[1]], mod.xp),
                "while_grad_")
            inputs = _tuple([ins[1][k] for k in sources])
            call = ", ".join(["S", ins[0][0], inputs, _tuple(ins[2])]
                             + [f"v{v.slot}" for v in free])
            return [f"    {_targets(outs[0] + outs[1])}{runner}({call})"]
        fast = None if step.join >= 0 else self._fast_call(step, ins, out_kw)
        if fast is not None:
            return [f"    {outs[0][0]} = {fast}"]
        kernel = mod.const(_bind(opdef.kernel, step.attrs), "k")
        args = []
        for slot, group in zip(opdef.inputs, ins):
            if slot.variadic:
                args.append(f"[{', '.join(group)}]")
            else:
                args.append(group[0] if group else "None")
        if step.join >= 0:  # overlapped: _joins assigns the outputs
            mod.ns.setdefault("_submit", run_on_worker)
            return [f"    _f{step.index} = _submit({', '.join([kernel, 'xp', *args])})"]
        call = f"{kernel}({', '.join(['xp', *args])})"
        lhs = []
        for slot, group in zip(opdef.outputs, outs):
            if slot.variadic:
                lhs.append(_tuple(group) if group else "_")
            else:
                lhs.append(group[0] if group else "_")
        if all(x == "_" for x in lhs):
            return [f"    {call}"]
        return [f"    {', '.join(lhs)} = {call}"]

    def _fast_call(self, step: _Step, ins, out_kw) -> str | None:
        t, mod = step.op.type, self.mod
        if t in _BINARY:
            return f"{mod.ufunc(_BINARY[t])}({ins[0][0]}, {ins[1][0]}{out_kw})"
        if t in _UNARY:
            return f"{mod.ufunc(_UNARY[t])}({ins[0][0]}{out_kw})"
        if t == "relu" and step.ins[0][0].var is not None:
            # A 0-d array: NumPy converts a scalar operand on every call.
            zero = mod.const(mod.xp.zeros((), dtype=step.ins[0][0].var.dtype))
            return f"{mod.ufunc('maximum')}({ins[0][0]}, {zero}{out_kw})"
        if t == "matmul":
            x, y = (v.var for v in step.reads[:2])
            # dot equals matmul on 1-D and 2-D operands, and is faster for small ones.
            two_d = x is not None and y is not None and {len(x.shape), len(y.shape)} <= {1, 2}
            tx, ty = step.attrs["transpose_x"], step.attrs["transpose_y"]
            if not tx and not ty:
                return f"{mod.ufunc('dot' if two_d else 'matmul')}({ins[0][0]}, {ins[1][0]})"
            if two_d and len(x.shape) == 2 and len(y.shape) == 2:
                # The gradients' transposed products: .T is a view, dot reads it as is.
                a = f"{ins[0][0]}.T" if tx else ins[0][0]
                b = f"{ins[1][0]}.T" if ty else ins[1][0]
                return f"{mod.ufunc('dot')}({a}, {b})"
        return None


def _flat(groups):
    return [v for group in groups for v in group]


def _heavy_ops_early(ops: list[Operator]) -> list[int]:
    """The order to run ``ops`` in (their indices): each overlappable op moved up to
    right after the last op it depends on, so the worker thread can start it
    before the ops it skipped.

    An op moves above another only when neither writes a name the other reads
    or writes; it never crosses control flow, an op with no outputs (print,
    assert), whose effects are not named, or a heavy op moved up before it
    (moved heavy ops keep their order: the first goes to the worker).
    """
    order, moved = list(range(len(ops))), set()
    for i, op in enumerate(ops):
        if op.type not in _OVERLAPPABLE:
            continue
        reads, writes = set(op.input_names()), set(op.output_names())
        to = i  # ops before i moved only up: op i is still at position i
        while to > 0:
            prev = ops[order[to - 1]]
            prev_writes = set(prev.output_names())
            if (prev.type in CONTROL_FLOW or order[to - 1] in moved or not prev_writes
                    or prev_writes & (reads | writes) or writes & set(prev.input_names())):
                break
            to -= 1
        if to < i:
            moved.add(i)
            order.insert(to, order.pop(i))
    return order


def _tuple(items) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def _targets(items) -> str:
    """The left-hand side of an assignment from a tuple (empty: no assignment)."""
    if not items:
        return ""
    return f"{items[0]}, = " if len(items) == 1 else f"{', '.join(items)} = "


def _comment(op: Operator) -> str:
    outs = ", ".join(ascii(n) for n in op.output_names())
    ins = ", ".join(ascii(n) for n in op.input_names())
    kind = op.type if op.type.isidentifier() else ascii(op.type)
    return f"{outs} = {kind}({ins})"


def _check_slots(where: str, given: dict, slots, kind: str) -> None:
    known = {s.name: s for s in slots}
    for name, names in given.items():
        slot = known.get(name)
        if slot is None:
            raise ValueError(f"{where}: unknown {kind} slot {name!r} "
                             f"(known: {', '.join(known) or 'none'})")
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{where}: {kind} slot {name!r} must list variable names")
    for slot in slots:
        n = len(given.get(slot.name, []))
        if not slot.variadic and (n > 1 or (n == 0 and not slot.optional and kind == "input")):
            raise ValueError(f"{where}: {kind} slot {slot.name!r} takes one value, got {n}")


def _keeps_shape(shape, others, out_shape) -> bool:
    """Whether broadcasting ``others`` against ``shape`` provably gives ``shape``."""
    if not shape or tuple(shape) != tuple(out_shape):
        return False
    for other in others:
        if other is None or len(other) > len(shape):
            return False
        for d, o in zip(reversed(shape), reversed(other)):
            if o != 1 and (d == -1 or o != d):
                return False
    return True


def _same(a, b) -> bool:
    """An attr equal to the kernel's default (so it need not be bound); -0.0 is not 0.0."""
    try:
        if type(a) is float and type(b) is float:
            return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


@functools.cache
def _kernel_defaults(kernel) -> dict:
    try:
        params = inspect.signature(kernel).parameters
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def _bind(kernel, attrs: dict):
    """The kernel with the attrs it does not already default to bound."""
    defaults = _kernel_defaults(kernel)
    bound = {k: copy.deepcopy(v) for k, v in attrs.items()
             if not (k in defaults and _same(defaults[k], v))}
    return functools.partial(kernel, **bound) if bound else kernel


def _needed_ops(program: Program, ops: list[Operator], outs: list[str], block: Block):
    """``ops`` without those whose outputs nothing needs (for body recomputation)."""
    needed, kept = set(outs), []
    for op in reversed(ops):
        writes_scope = any((v := block.find_var(n)) is not None and v.persistable
                           for n in op.output_names())
        if op.type in CONTROL_FLOW or writes_scope or needed & set(op.output_names()):
            kept.append(op)
            needed |= set(op.input_names()) | _sub_block_reads(program, op)
    return kept[::-1]


def _sub_block_reads(program: Program, op: Operator) -> set:
    names = set()
    for idx in op.sub_blocks():
        if isinstance(idx, int) and 0 < idx < len(program.blocks):
            for inner in program.blocks[idx].ops:
                names |= set(inner.input_names()) | _sub_block_reads(program, inner)
    return names


def _dinput_sources(op: Operator, lookup) -> list[int]:
    """For each DInput, the index of its captured Input (the float ones, in order)."""
    captured = op.inputs.get("Input", [])
    n = len(op.outputs.get("DInput", []))
    floats = [k for k, name in enumerate(captured)
              if (var := lookup(name)) is not None and var.dtype.kind == "f"]
    if len(floats) == n:
        return floats
    if len(captured) == n:
        return list(range(n))
    raise ValueError(f"while_grad: {n} DInput for {len(floats)} float captured inputs")


def _while_grad_runner(ns: dict, fn_name: str, n_entry: int, n_grads: int, dtypes: list, xp):
    """The reverse loop of a while: pop each saved entry (carry, then saved values;
    a later gradient of the same loop may have appended more), apply the gradient."""
    n_in = len(dtypes)

    def while_grad(S, stack, inputs, douts, *free):
        fn = ns[fn_name]
        grads, acc = douts, [None] * n_in
        for entry in reversed(stack):
            res = fn(S, *entry[:n_entry], *grads, *free)
            grads = res[:n_grads]
            for j in range(n_in):
                g = res[n_grads + j]
                acc[j] = g if acc[j] is None else acc[j] + g
        for j in range(n_in):
            if acc[j] is None:  # the loop ran zero times
                x = inputs[j]
                acc[j] = xp.zeros(getattr(x, "shape", ()), dtype=dtypes[j] or x.dtype)
        return (*grads, *acc)

    return while_grad
