"""The executor: a program compiled once into a plan, then run many times.

``compile(program, feed_names, fetch_names, xp)`` rewrites the program with
the plan passes (``passes.optimize``: dead code, constant folding, common
subexpressions, loop invariants), then turns every block into one
straight-line Python function (generated source, kept as ``Plan.source``; see
``codegen``): the ops in order, each a direct call of its kernel with its
attrs bound, values in local slots released right after their last use,
sub-blocks as functions of their own. ``Plan.run(feeds, scope)`` checks the
feeds against the data variables, reads the persistables from the scope,
calls the function and returns the fetched arrays (device arrays: NumPy or
CuPy, as ``xp``). Ops that write a persistable variable (startup
initializers, optimizer updates, running statistics) store it into the scope
as they run.

A plan starts interpreted. When the native tier is on (``lower.tier``), a
plan with regions that lower is rebuilt, after enough calls and on a
background thread, with each region one machine-code function
(``_generate`` with a lowering), and that form is swapped in between two
calls (``Plan.native``, ``Plan.wait_native``, ``Plan.native_source``).

``Executor`` keeps one plan per (program, program.version, feed names, fetch
names) and reuses it for every run.
"""

from __future__ import annotations

import builtins
import copy
import linecache
import operator
import weakref

import numpy

from dy2stat.runtime import codegen, lower, passes, shapes
from dy2stat.runtime.codegen import Function, Module, cuda_graphs, host_scalars
from dy2stat.runtime.ir import Program
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.passes.constant_folding import evaluate
from dy2stat.runtime.quoting import quote

__all__ = ["Executor", "GpuPlan", "Plan", "Scope", "compile"]


class Scope:
    """Name -> array store for persistable values (parameters, buffers) across runs."""

    def __init__(self, values: dict | None = None):
        self._values: dict = dict(values or {})

    def __getitem__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"the scope has no value named {quote(name)}") from None

    def __setitem__(self, name: str, value) -> None:
        self._values[name] = value

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, name: str, default=None):
        return self._values.get(name, default)

    def pop(self, name: str, *default):
        return self._values.pop(name, *default)

    def items(self):
        return self._values.items()

    def names(self) -> list[str]:
        return list(self._values)

    def clear(self) -> None:
        self._values.clear()

    def __repr__(self) -> str:
        return f"Scope({', '.join(self._values)})"


# ----------------------------------------------------------------- the plan


class Plan:
    """A program compiled for one set of feeds and fetches; ``run`` it many times."""

    def __init__(self, program: Program, feed_names, fetch_names, persistables: list[str],
                 mod: Module, fn: Function, source: str, compiled: Program):
        self._program = weakref.ref(program)
        self.compiled = compiled  # the program the plan runs: ``program`` optimized
        self.feed_names, self.fetch_names = tuple(feed_names), tuple(fetch_names)
        self.persistables = tuple(persistables)  # read from the scope on every run
        self.xp = xp = mod.xp
        self.source = source  # the generated code, for reading and debugging
        # Block 0's bookkeeping: the names released after each step, the ops
        # (block indices) run in place, and for each name the step after which
        # its (last) value is released (len(ops) for fetched values). Steps
        # follow the ops in order, except that overlap may move a heavy op up.
        self.releases: list[list[str]] = fn.releases
        self.in_place: list[int] = fn.in_place
        self.last_uses = {v.name: v.last_use for v in fn.values}
        self._fn = mod.ns[fn.name]
        self._uses_worker = bool(fn.joins)  # overlapped ops (see codegen)
        if self._uses_worker:
            self._fn_here = mod.run_here(fn.name)
        self._filename, self._line_ops = mod.filename, mod.line_ops
        self._feed_set = frozenset(self.feed_names)
        block = compiled.global_block()
        self._feed_specs = []
        carries = _carry_names(compiled)
        for name in self.feed_names:
            var = block.vars[name]
            if name in carries:  # a while loop's saved iterations: a Python list, fed as is
                self._feed_specs.append((name, None, 0, (), ()))
                continue
            known = tuple((i, d) for i, d in enumerate(var.shape) if d >= 0)
            self._feed_specs.append((name, var.dtype, len(var.shape), known, var.shape))
        self._ndarray = xp.ndarray
        self.tier = None  # how it goes native (``lower.tier``), when it can
        self._until_native = 0  # calls left before the native build starts (0: never)
        self.native_source = ""  # the native form's generated code, once swapped in
        self.native_regions: list[str] = []  # the compiled regions' modules
        names = self.persistables
        if not names:
            self._load = None
        elif len(names) == 1:
            self._load = lambda S, _n=names[0]: (S[_n],)
        else:
            self._load = operator.itemgetter(*names)

    @property
    def program(self) -> Program | None:
        return self._program()

    def run(self, feeds: dict, scope: Scope | dict) -> list:
        """Run with ``feeds`` (name -> array); read and write persistables in ``scope``."""
        if feeds.keys() != self._feed_set:
            self._feed_mismatch(feeds)
        S = scope._values if isinstance(scope, Scope) else scope
        return self.run_in_order([feeds[n] for n in self.feed_names], self._params(S), S)

    def run_in_order(self, arrays: list, params, S: dict) -> list:
        """``run`` given the feeds' arrays in ``feed_names`` order and the values of
        ``persistables`` in their order; ``S`` takes the persistables the plan writes."""
        return self.run_checked(self._checked_args(arrays), params, S)

    def run_checked(self, args: list, params, S: dict) -> list:
        """``run_in_order`` given feeds that passed ``_checked_args`` (or are of the very
        types, dtypes and shapes of feeds that did)."""
        if self._until_native:
            self._until_native -= 1
            if self._until_native <= 0:
                self._until_native = 0
                self.tier.start(self)
        try:
            if not self._uses_worker:
                return list(self._fn(S, *args, *params))
            if not codegen.blas_on_one_thread():  # eager's products, eager's bits
                return list(self._fn_here(S, *args, *params))
            with codegen.sharing_cores:
                return list(self._fn(S, *args, *params))
        except Exception as exc:
            self._annotate(exc)
            raise

    def _checked_args(self, arrays: list) -> list:
        """The feeds (in ``feed_names`` order) checked against the data variables."""
        if len(arrays) != len(self._feed_specs):
            raise ValueError(f"this plan takes {len(self._feed_specs)} feeds "
                             f"({quote(list(self.feed_names))}), got {len(arrays)}")
        args = []
        for a, (name, dtype, ndim, known, shape) in zip(arrays, self._feed_specs):
            if dtype is None:
                args.append(a)
                continue
            if type(a) is self._ndarray and a.dtype is dtype and a.shape == shape:
                args.append(a)  # the common case: every dim known and matching
                continue
            if type(a) is not self._ndarray:
                a = self._as_array(name, a, dtype)
            if a.dtype is not dtype and a.dtype != dtype:
                raise TypeError(f"feed {quote(name)}: expected {dtype}, got {a.dtype}")
            s = a.shape
            if len(s) != ndim:
                _shape_error(name, shape, s)
            for i, d in known:
                if s[i] != d:
                    _shape_error(name, shape, s)
            args.append(a)
        return args

    def _params(self, S) -> tuple:
        """The persistables' values in ``S``, in the function's order."""
        if self._load is None:
            return ()
        try:
            return self._load(S)
        except KeyError:
            missing = next(n for n in self.persistables if n not in S)
            raise RuntimeError(f"parameter {quote(missing)} has no value: "
                               "run the startup program first") from None

    def _swap_native(self, mod: Module, fn: Function, source: str, regions: list) -> None:
        """Run the native form from the next call on (the same values, another code)."""
        fn_here = mod.run_here(fn.name) if self._uses_worker else None
        self.native_source, self.native_regions = source, regions
        self._filename, self._line_ops = mod.filename, mod.line_ops
        if fn_here is not None:
            self._fn_here = fn_here
        self._fn = mod.ns[fn.name]

    @property
    def native(self) -> bool:
        """Whether the native form runs (see ``lower.tier``)."""
        return self.tier is not None and self.tier.state == "native"

    def wait_native(self, timeout: float | None = None) -> bool:
        """Start the native build now if it has not started, wait for it; whether the
        plan now runs natively."""
        if self.tier is None:
            return False
        if self.tier.state == "interpreted":
            self._until_native = 0
            self.tier.start(self)
        self.tier.ready.wait(timeout)
        return self.native

    def _as_array(self, name, value, dtype):
        if isinstance(value, (bool, int, float)):  # a Python scalar takes the var's dtype
            return self.xp.asarray(value, dtype=dtype)
        try:
            return self.xp.asarray(value)
        except Exception as exc:
            raise TypeError(f"feed {quote(name)}: cannot make an array of "
                            f"{type(value).__name__}: {str(exc)[:300]}") from None

    def _feed_mismatch(self, feeds) -> None:
        missing = [n for n in self.feed_names if n not in feeds]
        unknown = [n for n in feeds if n not in self._feed_set]
        if missing:
            raise ValueError(f"feed {quote(missing[0])} is missing (this plan takes "
                             f"{quote(list(self.feed_names))})")
        raise ValueError(f"feed {quote(unknown[0])} is not an input of this plan (it takes "
                         f"{quote(list(self.feed_names))})")

    def _annotate(self, exc: Exception) -> None:
        """Name the op that failed (the deepest frame in generated code)."""
        tb, where = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._filename:
                where = self._line_ops.get(tb.tb_lineno, where)
            tb = tb.tb_next
        if where is not None and hasattr(exc, "add_note"):
            exc.add_note(f"while running {where} of the static program")

    def __repr__(self) -> str:
        return (f"Plan(feeds={list(self.feed_names)}, fetches={list(self.fetch_names)}, "
                f"ops={len(self.releases)})")


def _shape_error(name, expected, got):
    raise ValueError(f"feed {quote(name)}: expected shape {shapes.fmt(expected)}, "
                     f"got {shapes.fmt(got)}")


def _carry_names(program: Program) -> set:
    """Names that hold a while loop's saved carries (opaque stacks, not arrays)."""
    names = set()
    for op in program.all_ops():
        if op.type == "while":
            names.update(op.outputs.get("Carries", ()))
        elif op.type == "while_grad":
            names.update(op.inputs.get("Carries", ()))
    return names


def compile(program: Program, feed_names, fetch_names, xp=numpy,  # noqa: A001
            overlap: bool | None = None, optimize: bool = True, native: bool | None = None) -> Plan:
    """Compile ``program`` for these feeds and fetches into a ``Plan``; ``overlap``
    (default: the ``inter_op_parallelism`` flag) lets it use the worker thread;
    ``optimize`` runs the plan passes first (``passes.optimize``); ``native``
    (default: the ``native_tier`` flag) lets the plan go native once called
    often (``lower.tier``)."""
    feed_names, fetch_names = list(feed_names), list(fetch_names)
    block = program.global_block()
    for name in feed_names:
        if name not in block.vars:
            raise ValueError(f"feed {quote(name)}: the program has no variable of that name")
    for name in fetch_names:
        if block.find_var(name) is None:
            raise ValueError(f"fetch {quote(name)}: the program has no variable of that name")
    source_program = program
    if optimize and _nested_properly(program):  # else code generation says what is wrong
        program = passes.optimize(program, fetch_names)
    if xp is not numpy:
        return _gpu_plan(source_program, program, feed_names, fetch_names, xp, optimize)
    overlap_ops = codegen.overlap.enabled if overlap is None else overlap
    mod, fn, persistables, source = _generate(program, feed_names, fetch_names, xp, overlap_ops)
    plan = Plan(source_program, feed_names, fetch_names, persistables, mod, fn, source, program)
    weakref.finalize(plan, linecache.cache.pop, mod.filename, None)
    if lower.settings.active if native is None else native:
        _attach_tier(plan, program, feed_names, fetch_names, overlap_ops)
    return plan


def _generate(program: Program, feed_names, fetch_names, xp, overlap_ops: bool, lowering=None,
              loop_graphs: list | None = None):
    """The generated module of a plan: ``(module, block 0's function, persistables, source)``;
    ``loop_graphs`` collects the loops that replay a captured graph per iteration."""
    block = program.global_block()
    mod = Module(program, xp, lowering, loop_graphs)
    fn = Function(mod, "block_0", list(block.ops), [block], feed_names, fetch_names,
                  overlap_ops=overlap_ops)
    persistables = []
    for name in fn.free:
        var = block.find_var(name)
        if var is not None and var.persistable:
            persistables.append(name)
        elif var is not None and var.is_data:
            raise ValueError(f"feed {quote(name)} is missing: the program reads data variable "
                             f"{quote(name)} (fed: {quote(list(feed_names))})")
        else:
            raise ValueError(f"variable {quote(name)} is read before any op defines it "
                             "(it is not fed, not a parameter and not computed earlier)")
    fn.emit(persistable_params=set(persistables), copy_scope_results=True)
    source = mod.source()
    code = builtins.compile(source, mod.filename, "exec")
    exec(code, mod.ns)  # our own generated text: see the module docstring
    linecache.cache[mod.filename] = (len(source), None, source.splitlines(True), mod.filename)
    return mod, fn, persistables, source


# ------------------------------------------------------------- on a GPU


class GpuPlan(Plan):
    """A plan on a GPU (CuPy): elementwise chains fused into one kernel each, loops
    that lower run as one kernel (``lower.cuda``), compiled once per device (its
    constants live on one), and -- when it runs straight through -- captured as a
    CUDA graph on the second call of a feed signature and replayed from then on
    (``codegen.cuda_graphs``). ``not_captured`` says why a plan is not (None: it
    is, or will be); a loop left on the host may still replay its iterations as a
    graph (``loop_graphs``)."""

    def __init__(self, *args, regenerate, not_captured: str | None, loop_graphs: list):
        super().__init__(*args)
        self._regenerate = regenerate  # (module, function) of this plan for the current device
        self._device = self.xp.cuda.runtime.getDevice()
        self._forms = {self._device: (self._fn, self._filename, self._line_ops)}
        self.not_captured = not_captured
        self.graphs: dict = {}  # (device, feed shapes and dtypes) -> cuda_graphs.Captured
        self.loop_kernels: list = []  # the CudaKernels its lowered loops run
        self.loop_graphs = loop_graphs  # its cuda_graphs.LoopGraphs (every device's)
        self._seen: set = set()  # signatures run once (uncaptured: compiles, warms the pools)

    def run_in_order(self, arrays: list, params, S: dict) -> list:
        device = self.xp.cuda.runtime.getDevice()
        if device != self._device:
            self._use_device(device)
        args = self._checked_args(arrays)
        if self.not_captured is None:
            key = (device, *[(a.shape, a.dtype) for a in args])
            captured = self.graphs.get(key)
            if captured is not None:
                return captured.replay(args, params, S)
            if key in self._seen and not self.xp.cuda.get_current_stream().is_capturing():
                try:
                    captured = cuda_graphs.capture(self.xp, self._fn, args, params,
                                                   self.persistables, S)
                except cuda_graphs.NotCapturable as exc:
                    self.not_captured = f"its capture failed ({exc})"
                else:
                    self.graphs[key] = captured
                    return captured.replay(args, params, S)
            self._seen.add(key)
        try:
            return list(self._fn(S, *args, *params))
        except Exception as exc:
            self._annotate(exc)
            raise

    def _use_device(self, device: int) -> None:
        """Run on ``device`` from now on: this plan's code compiled for it (once)."""
        form = self._forms.get(device)
        if form is None:
            with self.xp.cuda.Device(device):
                mod, fn = self._regenerate()
            weakref.finalize(self, linecache.cache.pop, mod.filename, None)
            form = self._forms[device] = (mod.ns[fn.name], mod.filename, mod.line_ops)
        self._fn, self._filename, self._line_ops = form
        self._device = device


def _gpu_plan(source_program, program, feed_names, fetch_names, xp, optimize) -> GpuPlan:
    lowering = lower.cuda.lowering(xp) if optimize else None
    loop_graphs = [] if _can_capture(xp) is None else None
    if optimize and _nested_properly(program):
        program = _fused(program, fetch_names, lowering, loop_graphs is not None)

    def regenerate():
        mod, fn, _, _ = _generate(program, feed_names, fetch_names, xp, False, lowering,
                                  loop_graphs)
        return mod, fn

    mod, fn, persistables, source = _generate(program, feed_names, fetch_names, xp, False,
                                              lowering, loop_graphs)
    plan = GpuPlan(source_program, feed_names, fetch_names, persistables, mod, fn, source,
                   program, regenerate=regenerate, loop_graphs=loop_graphs or [],
                   not_captured=_not_capturable(xp, program, fn))
    plan.loop_kernels = lowering.kernels if lowering is not None else []
    weakref.finalize(plan, linecache.cache.pop, mod.filename, None)
    return plan


def _fused(program: Program, fetch_names, lowering, loop_graphs: bool = False) -> Program:
    """``program`` with its elementwise chains fused (one kernel each), except in the
    blocks of loops that stay on the host with counters: there the counter's
    comparisons and steps stay ops of their own, run on Python ints
    (``codegen.host_scalars``), which fusing them with device values would undo.
    (A loop that replays its iterations as a graph, with ``loop_graphs``, keeps
    its counters on the device, inside the graph.)"""
    protected = _host_counter_blocks(program, lowering, loop_graphs)
    if not protected:
        return passes.fuse_elementwise(program, fetch_names)
    reads = {n for idx in protected for op in program.blocks[idx].ops
             for n in op.input_names() + op.output_names()}
    fused = passes.fuse_elementwise(program, list(fetch_names) + sorted(reads))
    for idx in protected:
        fused.blocks[idx].ops = copy.deepcopy(program.blocks[idx].ops)
        fused.blocks[idx].vars = copy.deepcopy(program.blocks[idx].vars)
    fused._forget_names()
    fused.bump()
    return fused


def _host_counter_blocks(program: Program, lowering, loop_graphs: bool = False) -> set[int]:
    """The blocks (and blocks below them) of the loops that do not lower to a kernel,
    do not replay as a graph and have counters."""
    found: set[int] = set()

    def below(idx):
        found.add(idx)
        for op in program.blocks[idx].ops:
            for sub in op.sub_blocks():
                below(sub)

    target = lowering.target if lowering is not None else None
    for block in program.blocks:
        for op in block.ops:
            if op.type != "while" or (target is not None and lower.regions.lowerable(
                    program, op, block.find_var, target)) or (
                    loop_graphs and cuda_graphs.loop_accepts(program, op)):
                continue
            if host_scalars.loop_counters(program, op, _compile_time_value):
                below(op.attrs["cond_block"])
                below(op.attrs["body_block"])
    return found


def _compile_time_value(block, name):
    """The value of ``name`` read in ``block`` when an input-less op of it (or of a
    block around it) defines it, else None."""
    while block is not None:
        for op in block.ops:
            if name in op.output_names():
                if op.input_names():
                    return None
                values = evaluate(op, block.find_var, lambda n: None)
                return None if values is None else values[name]
        if name in block.vars and block.parent_idx < 0:
            return None
        block = block.program.blocks[block.parent_idx] if block.parent_idx >= 0 else None
    return None


def _can_capture(xp) -> str | None:
    """Why GPU plans compiled now capture no CUDA graphs (None: they may)."""
    if not cuda_graphs.settings.enabled:
        return "the cuda_graphs flag is off"
    if not hasattr(xp.cuda, "Stream") or not hasattr(xp.cuda.Stream, "begin_capture"):
        return "this CuPy cannot capture streams"
    return None


def _not_capturable(xp, program: Program, fn: Function) -> str | None:
    """Why a GPU plan's function cannot be captured as a CUDA graph (None: it can)."""
    why = _can_capture(xp)
    if why is not None:
        return why
    for step in fn.steps:
        if step.op.type in CONTROL_FLOW:
            return f"it runs a {step.op.type} op on the host (its predicate is read there)"
    return cuda_graphs.leaves_the_device(program.all_ops())


def _attach_tier(plan: Plan, program: Program, feed_names, fetch_names, overlap_ops) -> None:
    """Let ``plan`` go native once called often, when some region of it lowers."""
    lowering = lower.Lowering("cpu", lower.settings.rounding)
    if not any(lower.regions.spans(program, b.ops, b.find_var, lowering)
               for b in program.blocks):
        return
    key = "\n".join([str(program), repr(feed_names), repr(fetch_names), repr(lowering),
                     repr(overlap_ops)])
    cache_root = lower.tier.cache_root()

    def build():
        native = lower.NativeLowering(lowering, cache_root)
        mod, fn, persistables, source = _generate(program, feed_names, fetch_names, numpy,
                                                  overlap_ops, native)
        if not native.compiled or persistables != list(plan.persistables) or bool(
                fn.joins) != plan._uses_worker:
            return None
        weakref.finalize(plan, linecache.cache.pop, mod.filename, None)
        plan.tier.loaded = native.loaded
        return mod, fn, source, native.sources

    plan.tier = lower.Tier(key, build, cache_root)
    plan._until_native = plan.tier.calls_before_native()


def _nested_properly(program: Program) -> bool:
    """Whether every sub-block an op names exists and no block contains itself."""
    n = len(program.blocks)
    children = {}
    for block in program.blocks:
        subs = [idx for op in block.ops for idx in op.sub_blocks()]
        if not all(isinstance(idx, int) and 0 < idx < n for idx in subs):
            return False
        children[block.idx] = subs
    state = dict.fromkeys(range(n), 0)  # 0 new, 1 on the path, 2 done

    def acyclic(idx) -> bool:
        state[idx] = 1
        for child in children[idx]:
            if state[child] == 1 or (state[child] == 0 and not acyclic(child)):
                return False
        state[idx] = 2
        return True

    return acyclic(0)


class Executor:
    """Runs programs through plans compiled once per (program version, feeds, fetches)."""

    def __init__(self, xp=numpy):
        self.xp = xp
        self.scope = Scope()  # used when run() is given none
        self._plans: dict[tuple, Plan] = {}

    def plan(self, program: Program, feed_names, fetch_names) -> Plan:
        """The cached plan for these feeds and fetches (compiled on first use)."""
        fetch_names = tuple(fetch_names)
        key = (id(program), program.version, frozenset(feed_names), fetch_names)
        plan = self._plans.get(key)
        if plan is not None and plan.program is program:
            return plan
        for old in [k for k in self._plans if k[0] == id(program)]:
            if old[1] != program.version or self._plans[old].program is not program:
                del self._plans[old]  # stale: the program changed (or died)
        plan = compile(program, list(feed_names), fetch_names, self.xp)
        if not any(k[0] == id(program) for k in self._plans):
            weakref.finalize(program, _forget, self._plans, id(program))
        self._plans[key] = plan
        return plan

    def run(self, program: Program, feed: dict | None = None, fetch_list=(),
            scope: Scope | None = None) -> list:
        """Run ``program``; return the fetched values as arrays of this executor's module."""
        feed = feed if feed is not None else {}
        fetch_names = tuple(f if type(f) is str else f.name for f in fetch_list or ())
        plan = self.plan(program, feed, fetch_names)
        return plan.run(feed, scope if scope is not None else self.scope)


def _forget(plans: dict, program_id: int) -> None:
    for key in [k for k in plans if k[0] == program_id]:
        del plans[key]
