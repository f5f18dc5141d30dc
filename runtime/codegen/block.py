"""Block code generation: a block becomes one Python function.

``Function`` analyses a block's ops (each name's definitions as separate
values, free names, last uses) and emits the source of one function:
``def block_3(S, v0, v1, ...)`` with the ops in order, values in local slots
(``v<n>``: a slot is reused or ``del``-ed right after its value's last use),
kernels and constants taken from the plan's namespace (``Module.ns``), and
persistable outputs stored in ``S`` (the scope's dict). The function's
parameters are its ``args`` followed by its ``free`` names, which the caller
passes from its own values; a function returns its ``outs``.

Every identifier in the text is made here (slot numbers, namespace keys);
program names appear only in comments, escaped with ``ascii()``, so a
hostile program cannot inject code.
"""

from __future__ import annotations

import itertools
import types
from collections import defaultdict

from dy2stat.runtime.codegen import (
    buffers,
    calls,
    constants,
    control_flow,
    cuda_graphs,
    host_scalars,
    worker,
)
from dy2stat.runtime.codegen.control_flow import targets, tuple_text
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW, attr_names
from dy2stat.runtime.registry import get_op

__all__ = ["Function", "Module"]


class _Value:
    """One definition of a name inside one generated function (SSA)."""

    __slots__ = ("name", "var", "param", "fresh", "buffers", "first_use", "last_use", "slot",
                 "const", "ref", "host")

    def __init__(self, name: str, var: Var | None, param: bool):
        self.name, self.var, self.param = name, var, param
        self.fresh = False  # allocated by an op in this function: may be written in place
        self.buffers: frozenset = frozenset()  # buffers it may share (for aliasing)
        self.first_use = -1  # the first op reading it; len(ops) when only returned
        self.last_use = -1  # the last op reading it; len(ops) when returned
        self.slot = -1
        self.const = None  # a plan constant's array (see ``constants``)
        self.ref = ""  # how code reads it: its slot ``v<n>``, or a constant's name
        self.host = False  # a Python int or bool (a loop counter, see ``host_scalars``)

    @property
    def one_element(self) -> bool:
        """Known to hold exactly one element (a predicate read without checks)."""
        return self.host or (self.var is not None and all(d == 1 for d in self.var.shape))


class _Step:
    __slots__ = ("index", "number", "op", "opdef", "attrs", "ins", "outs", "reads", "subs",
                 "join", "constant", "counters", "native", "rebound", "replays")

    def __init__(self, index, number, op, opdef, attrs):
        self.index, self.op, self.opdef, self.attrs = index, op, opdef, attrs
        self.number = number  # the op's index in its block (index: where it runs)
        self.join = -1  # run on the worker thread, joined before this op (overlap)
        self.ins: list[list[_Value]] = []
        self.outs: list[list[_Value]] = []
        self.reads: list[_Value] = []
        self.subs: list[tuple[Function, list[_Value]]] = []  # sub-functions and their free args
        self.constant = False  # computed when the plan compiled: no code
        self.counters: set[int] = set()  # a while's carried values kept Python ints
        self.native = None  # a region's compiled code: (namespace name, constant names)
        # Persistables a cond's branches or a while's body write (running statistics):
        # read again from the scope after the op, as new values of their names here.
        self.rebound: list[_Value] = []
        self.replays = False  # a while whose iterations replay a captured graph


class Module:
    """The generated source of one plan, and the namespace it runs in."""

    _ids = itertools.count()

    def __init__(self, program: Program, xp, lowering=None, loop_graphs: list | None = None):
        self.program, self.xp = program, xp
        self.lowering = lowering  # lowers regions to native code (``runtime.lower``), or None
        # On a GPU: the loops replaying their iterations as a graph (``cuda_graphs``), or None
        self.loop_graphs = loop_graphs
        self.ns: dict = {"xp": xp, "_pred": control_flow.pred}
        self.functions: list[list[str]] = []
        self.line_ops: dict[int, str] = {}  # line number -> the op it runs
        self._names = itertools.count()
        self._buffers = itertools.count()
        self.scope_buffers: set[int] = set()  # buffers the scope holds: never written
        self.const_buffers: set[int] = set()  # plan constants' buffers: never written either
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
        return types.FunctionType(fn.__code__, {**self.ns, "_submit": worker.run_here},
                                  fn.__name__)

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
    values (plan constants excepted: read from the namespace). It returns the
    values named by ``outs`` (a tuple, or one value when ``single``).
    ``outer`` is the function whose block encloses this one; ``host`` names
    the ``args`` that are Python ints (loop counters).
    """

    def __init__(self, mod: Module, base: str, ops: list[Operator], blocks: list[Block],
                 args: list[str], outs: list[str], single: bool = False,
                 overlap_ops: bool = False, outer: Function | None = None, host=(),
                 lowers: bool = True):
        self.mod, self.blocks, self.single, self.outer = mod, blocks, single, outer
        self.lowers = lowers  # forms native regions (not inside a region's own code)
        self.name = mod.function_name(base)
        mod.ns[self.name] = None  # reserve the name
        self.env: dict[str, _Value] = {}
        self.values: list[_Value] = []
        self.params = [self._define(n, param=True) for n in args]
        for v in self.params:
            v.host = v.name in host
        self.free: list[str] = []
        order = worker.heavy_ops_early(ops) if overlap_ops else list(range(len(ops)))
        entered = [b.idx for b in blocks if b.idx not in mod.compiling]
        mod.compiling.update(entered)
        self.steps = self._steps(ops, order, outs)
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
            worker.choose_overlap(self.steps, self.joins)

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
            outer = self.outer._peek(name) if self.outer is not None else None
            if outer is not None and outer.const is not None:
                value = self._define(name)  # a plan constant: read from the namespace
                value.const, value.ref, value.buffers = outer.const, outer.ref, outer.buffers
                return value
            value = self._define(name, param=True)
            value.host = outer is not None and outer.host
            self.params.append(value)
            self.free.append(name)
        return value

    def _peek(self, name: str) -> _Value | None:
        """The value ``name`` has here (or in an enclosing function), defining nothing."""
        value = self.env.get(name)
        if value is None and self.outer is not None:
            return self.outer._peek(name)
        return value

    def _constant_in(self, block: Block, name: str):
        """The compile-time value of ``name`` read in ``block`` (this function's or a
        sub-block about to be compiled), or None."""
        if block is not self.blocks[0]:
            for op in block.ops:
                if name in op.output_names():
                    if op.input_names():
                        return None
                    values = constants.evaluate_step(self.mod.xp, op, block.vars.get,
                                                     lambda n: None)
                    return None if values is None else values[name]
            if name in block.vars:
                return None  # an argument of the block
        value = self._peek(name)
        return None if value is None else value.const

    def _steps(self, ops: list[Operator], order: list[int], outs) -> list[_Step]:
        """The steps running ``ops`` in ``order``: one per op, or one per region
        when the module lowers regions to native code."""
        lowering = self.mod.lowering if self.lowers else None
        ordered = [ops[k] for k in order]
        spans = dict(lowering.spans(self.mod.program, ordered, self.lookup)) if lowering else {}
        needed = _needed_after(self.mod.program, ordered, outs) if spans else []
        steps, p = [], 0
        while p < len(ordered):
            stop = spans.get(p)
            if stop is None:
                steps.append(self._step(len(steps), order[p], ordered[p]))
                p += 1
            else:
                steps.append(self._region_step(len(steps), order[p:stop], ordered[p:stop],
                                               needed[stop]))
                p = stop
        return steps

    def _region_step(self, index: int, numbers, ops, needed: set) -> _Step:
        """One step computing a region of ``ops``: native code, with the ops'
        interpreted code as its own function for arguments the native code was
        not compiled for (a view, another dtype)."""
        mod = self.mod
        outs = [n for n in dict.fromkeys(n for op in ops for n in op.output_names())
                if n in needed]
        fallback = Function(mod, "region", ops, self.blocks, [], outs, outer=self, lowers=False)
        fallback.emit(fresh_results=True)
        op = Operator(buffers.REGION, {"X": list(fallback.free)}, {"Out": outs}, {},
                      origin=ops[0].origin, scope=ops[0].scope)
        step = _Step(index, numbers[0], op, None, {})
        free_args = [self._read(n) for n in fallback.free]
        step.subs.append((fallback, free_args))
        step.reads += free_args
        step.ins.append(free_args)
        step.outs.append([self._define(n) for n in outs])
        params = [(v.name, v.var, v.host) for v in free_args]

        def constant_of(name):
            value = fallback._peek(name)
            return None if value is None else value.const

        compiled = mod.lowering.compile(mod.program, ops, self.lookup, params, outs, constant_of)
        if compiled is not None:
            dispatcher, arrays = compiled
            step.native = (mod.const(dispatcher, "native_"), [mod.const(a) for a in arrays])
        return step

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
            if op.type == "while" and self.mod.loop_graphs is not None and (
                    cuda_graphs.loop_accepts(self.mod.program, op)):
                step.replays = True  # its counters stay on the device, in the graph
            elif op.type == "while":
                counters = host_scalars.loop_counters(self.mod.program, op, self._constant_in)
                # a counter starts from a constant this function holds (a region's code
                # gets one defined before the region as an argument: an array)
                step.counters = {k for k in counters if step.ins[0][k].const is not None}
            for fn in self._sub_functions(where, op, attrs, step.counters):
                free_args = [self._read(n) for n in fn.free]
                step.subs.append((fn, free_args))
                step.reads += free_args
        for slot in opdef.outputs:
            step.outs.append([self._define(n) for n in op.outputs.get(slot.name, [])])
        if op.type in CONTROL_FLOW:
            step.rebound = [self._define(n) for n in
                            _scope_writes(self.mod.program, op, self.lookup)]
            if step.rebound:
                step.outs.append(step.rebound)
        else:
            self._evaluate(step)
        return step

    def _evaluate(self, step: _Step) -> None:
        """Make ``step``'s outputs plan constants when they are (see ``constants``),
        or mark its result a Python value when it reads a loop counter."""
        mod = self.mod
        if step.op.type in host_scalars.HOST_OPS and any(v.host for v in step.reads):
            step.outs[0][0].host = True  # a counter's comparison or step
            return
        values = constants.evaluate_step(mod.xp, step.op, self.lookup,
                                         lambda n: self.env[n].const)
        if values is None:
            return
        step.constant = True
        for v in _flat(step.outs):
            v.const = values[v.name]
            v.ref = mod.const(v.const)
            v.buffers = frozenset([mod.buffer()])
            mod.const_buffers |= v.buffers

    def _sub_functions(self, where: str, op: Operator, attrs: dict, counters) -> list[Function]:
        mod, blocks = self.mod, self.mod.program.blocks

        def block(key):
            idx = attrs[key]
            if not isinstance(idx, int) or not 0 < idx < len(blocks):
                raise ValueError(f"{where}: {key} {idx!r} is not a sub-block of the program")
            if idx in mod.compiling:
                raise ValueError(f"{where}: {key} {idx} contains this op (a cycle of blocks)")
            return blocks[idx]

        def sub(key, args, outs, single=False, ops=None, extra=(), host=()):
            b = block(key)
            fn = Function(mod, f"block_{b.idx}", list(b.ops) if ops is None else ops,
                          [b, *extra], list(args), list(outs), single, outer=self, host=host,
                          lowers=self.lowers)
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
            return [sub("cond_block", attrs["cond_args"], [attrs["cond_out"]], single=True,
                        host={attrs["cond_args"][k] for k in counters}),
                    sub("body_block", attrs["body_args"], list(attrs["body_outs"]) + saved,
                        host={attrs["body_args"][k] for k in counters})]
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
        ops = control_flow.needed_ops(mod.program, recompute + list(grad.ops), outs, grad)
        args = list(attrs["body_args"]) + list(attrs.get("saved", [])) + list(attrs["grad_args"])
        return [sub("grad_block", args, outs, ops=ops, extra=[body])]

    # -------------------------------------------------------------- codegen

    def emit(self, persistable_params=(), copy_scope_results=False,
             fresh_results=False) -> None:
        """Generate the function's source (after the caller has classified ``free``):
        results sharing the scope's buffers are copies with ``copy_scope_results``,
        results not allocated here are copies with ``fresh_results``."""
        mod = self.mod
        holders: dict[int, list[_Value]] = defaultdict(list)
        for k, v in enumerate(self.params):
            v.slot, v.ref = k, f"v{k}"
            v.buffers = frozenset([mod.buffer()])
            holders[next(iter(v.buffers))].append(v)
            if v.name in persistable_params:
                mod.scope_buffers |= v.buffers
        self.n_slots = len(self.params)
        free_slots: list[int] = []
        args = ", ".join(["S"] + [v.ref for v in self.params])
        lines = [(f"def {self.name}({args}):", None)]
        self.releases: list[list[str]] = []
        self.in_place: list[int] = []
        for step in self.steps:
            lines += self._joins(step.index)
            lines += self._emit_step(step, holders, free_slots)
        lines += self._joins(len(self.steps))
        results = []
        for v in self.results:
            text = v.ref
            if copy_scope_results and v.buffers & (mod.scope_buffers | mod.const_buffers):
                text += ".copy()"  # the caller must not be able to change the scope
            elif fresh_results and not v.fresh and not v.host:
                text += ".copy()"  # a region's outputs are new arrays, as its native code's
            results.append(text)
        if self.single:
            lines.append((f"    return {results[0]}", None))
        else:
            lines.append((f"    return {tuple_text(results)}", None))
        mod.functions.append(lines)
        # What the caller's values may share with the plan's constants.
        self.result_buffers = frozenset().union(*(v.buffers for v in self.results))

    def _joins(self, index: int) -> list:
        """Lines that wait for the worker's ops whose results op ``index`` reads."""
        lines = []
        for step in self.joins.get(index, ()):
            outs = ", ".join(v.ref for v in _flat(step.outs))
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
        dying = list({id(v): v for v in step.reads
                      if v.last_use == i and v.const is None}.values())
        code = [(f"    # {step.number}: {_comment(op)}", None)]
        if step.constant:
            self.releases.append([v.name for v in _flat(step.outs) if v.last_use < 0])
            names = ", ".join(v.ref for v in _flat(step.outs))
            return code + [(f"    # (a plan constant: {names})", None)]
        target = buffers.in_place_target(mod, step, holders)
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
                v.ref = f"v{v.slot}"
                taken.add(v.slot)
        buffers.track_buffers(mod, step, target, holders)
        desc = self._describe(step)
        code += [(line, desc) for line in self._code(step, target)]
        released, dels = [], []
        for v in _flat(step.outs):
            if v.var is not None and v.var.persistable:
                mod.scope_buffers |= v.buffers
                if v in step.rebound:
                    continue  # read from the scope: already there
                value = f"{v.ref}.copy()" if v.buffers & mod.const_buffers else v.ref
                code.append((f"    S[{mod.const(v.name, 'n')}] = {value}", desc))
            if v.last_use < 0:  # never read: released right away
                v.last_use = i
                released.append(v.name)
                dels.append(v.ref)
                free_slots.append(v.slot)
        for v in dying:
            released.append(v.name)
            if v.slot in taken:
                continue  # rebinding the slot to an output released it
            if not v.param:  # parameters are held by the caller: dropping them frees nothing
                dels.append(v.ref)
            free_slots.append(v.slot)
        if dels:
            code.append((f"    del {', '.join(dels)}", None))
        self.releases.append(released)
        if target is not None:
            self.in_place.append(step.number)
        return code

    def _scope_read(self, v: _Value) -> str:
        """How code reads persistable ``v`` as the scope holds it now."""
        return f"S[{self.mod.const(v.name, 'n')}]"

    def _rebind(self, step: _Step) -> list[str]:
        """Lines giving ``step.rebound`` the values its sub-blocks left in the scope."""
        return [f"    {v.ref} = {self._scope_read(v)}" for v in step.rebound]

    def _predicate(self, v: _Value) -> str:
        """A cond/while predicate: read as is when it holds one element, else checked."""
        return v.ref if v.one_element else f"_pred({v.ref})"

    def _code(self, step: _Step, target) -> list[str]:
        op, opdef, mod, t = step.op, step.opdef, self.mod, step.op.type
        ins = [[v.ref for v in group] for group in step.ins]
        outs = [[v.ref for v in group] for group in step.outs]
        out_kw = f", out={target.ref}" if target is not None else ""
        if t == buffers.REGION:
            ((fn, free),) = step.subs
            lhs = targets(outs[0])
            fallback = f"{lhs}{fn.name}({', '.join(['S'] + [v.ref for v in free])})"
            if step.native is None:
                return [f"    {fallback}"]
            name, constants = step.native
            args = [v.ref if v.host or (v.var is not None and v.var.shape) else f"{v.ref}[()]"
                    for v in free] + constants
            return ["    try:", f"        {lhs}{name}({', '.join(args)})",
                    "    except TypeError:  # an argument the native code was not compiled for",
                    f"        {fallback}"]
        if t == "cond":
            (fn_t, free_t), (fn_f, free_f) = step.subs
            call_t = f"{fn_t.name}({', '.join(['S'] + [v.ref for v in free_t])})"
            call_f = f"{fn_f.name}({', '.join(['S'] + [v.ref for v in free_f])})"
            return control_flow.cond_lines(self._predicate(step.ins[0][0]), outs[0], call_t,
                                           call_f) + self._rebind(step)
        if t == "while":
            (fn_c, free_c), (fn_b, free_b) = step.subs
            carried = outs[0]
            # What the body writes to the scope, each iteration reads from it afresh.
            written = {v.name for v in step.rebound}
            free_c = [self._scope_read(v) if v.name in written else v.ref for v in free_c]
            free_b = [self._scope_read(v) if v.name in written else v.ref for v in free_b]
            cond = f"{fn_c.name}({', '.join(['S', *carried, *free_c])})"
            body = f"{fn_b.name}({', '.join(['S', *carried, *free_b])})"
            stack = outs[1][0] if outs[1] else None
            if step.replays:
                loop = cuda_graphs.LoopGraphs(mod.xp, mod.ns, fn_c.name, fn_b.name)
                mod.loop_graphs.append(loop)
                call = ", ".join(["S", tuple_text(ins[0]), tuple_text(free_c),
                                  tuple_text(free_b)])
                return [f"    {targets(carried)}{mod.const(loop, 'loop_')}({call})"]
            initial = list(ins[0])
            for k in step.counters:  # a Python int for the whole loop
                initial[k] = mod.const(int(step.ins[0][k].const))
            predicate = cond if fn_c.results[0].one_element else f"_pred({cond})"
            lines = control_flow.while_lines(step.index, op, initial, carried, stack,
                                             predicate, body) + self._rebind(step)
            for k in sorted(step.counters):  # an array again once the loop ends
                v = step.outs[0][k]
                if v.last_use >= 0:
                    lines.append(f"    {v.ref} = xp.asarray({v.ref}, dtype=xp.int64)")
            return lines
        if t == "while_grad":
            ((fn, free),) = step.subs
            sources = control_flow.dinput_sources(op, self.lookup)
            runner = mod.const(control_flow.while_grad_runner(
                mod.ns, fn.name, len(op.attrs["body_args"]) + len(op.attrs.get("saved", [])),
                len(step.ins[2]),
                [v.var.dtype if v.var is not None else None for v in step.outs[1]], mod.xp),
                "while_grad_")
            inputs = tuple_text([ins[1][k] for k in sources])
            call = ", ".join(["S", ins[0][0], inputs, tuple_text(ins[2])]
                             + [v.ref for v in free])
            # The body's ops it recomputes may write the scope (running statistics):
            # later readers of those names read them from there, as after a while.
            return [f"    {targets(outs[0] + outs[1])}{runner}({call})"] + self._rebind(step)
        if step.outs and step.outs[0] and step.outs[0][0].host:
            return [f"    {outs[0][0]} = {self._host_expression(step)}"]
        fast = None if step.join >= 0 else calls.fast_call(mod, step, ins, out_kw)
        if fast is not None:
            return [f"    {outs[0][0]} = {fast}"]
        kernel = mod.const(calls.bind(opdef.kernel, step.attrs), "k")
        args = []
        for slot, group in zip(opdef.inputs, ins):
            if slot.variadic:
                args.append(f"[{', '.join(group)}]")
            else:
                args.append(group[0] if group else "None")
        if step.join >= 0:  # overlapped: _joins assigns the outputs
            mod.ns.setdefault("_submit", worker.run_on_worker)
            return [f"    _f{step.index} = _submit({', '.join([kernel, 'xp', *args])})"]
        call = f"{kernel}({', '.join(['xp', *args])})"
        lhs = []
        for slot, group in zip(opdef.outputs, outs):
            if slot.variadic:
                lhs.append(tuple_text(group) if group else "_")
            else:
                lhs.append(group[0] if group else "_")
        if all(x == "_" for x in lhs):
            return [f"    {call}"]
        return [f"    {', '.join(lhs)} = {call}"]

    def _host_expression(self, step: _Step) -> str:
        """A loop counter's comparison or step, on Python ints."""
        sign = host_scalars.COMPARE.get(step.op.type) or host_scalars.STEP[step.op.type]
        x, y = (v.ref if v.const is None else self.mod.const(int(v.const))
                for v in (step.ins[0][0], step.ins[1][0]))
        return f"{x} {sign} {y}"


def _scope_writes(program: Program, op: Operator, lookup) -> list[str]:
    """The persistable names the ops of ``op``'s sub-blocks (nested ones too) write."""
    names: dict[str, None] = {}
    for idx in op.sub_blocks():
        if not (isinstance(idx, int) and 0 < idx < len(program.blocks)):
            continue
        for inner in program.blocks[idx].ops:
            for n in inner.output_names():
                var = lookup(n) or program.blocks[idx].find_var(n)
                if var is not None and var.persistable:
                    names[n] = None
            names.update(dict.fromkeys(_scope_writes(program, inner, lookup)))
    return list(names)


def _flat(groups):
    return [v for group in groups for v in group]


def _needed_after(program: Program, ops: list[Operator], outs) -> list[set]:
    """For each position p of ``ops``, the names read at or after it (sub-blocks
    and control-flow attrs included) or returned."""
    needed = [set(outs)]
    for op in reversed(ops):
        names = set(needed[-1]) | set(op.input_names()) | attr_names(op)
        for idx in op.sub_blocks():
            names |= _reads_below(program, idx)
        needed.append(names)
    return needed[::-1]


def _reads_below(program: Program, idx: int) -> set:
    names = set()
    for op in program.blocks[idx].ops:
        names.update(op.input_names())
        names |= attr_names(op)
        for sub in op.sub_blocks():
            names |= _reads_below(program, sub)
    return names


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


