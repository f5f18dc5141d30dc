"""Running a static program from eager code as one node on the autograd tape.

``ProgramRunner`` owns a traced program: its inputs (data variables), its
outputs, and the eager tensors it captured (parameters, buffers). Calling it
runs the compiled forward plan. When an input or parameter needs a gradient,
the call records one tape node; its backward runs the program's gradient ops
on the forward's kept intermediates. A parameter whose gradient someone waits
for (``gradient_hooks``: data-parallel training) is handed out by a
``hand_out`` op of the backward plan as soon as the plan has computed it. A
training step's program (one that made its own backward and updates) records
nothing: its ``prologue`` gives the host inputs fed after the call's own.
"""

from __future__ import annotations

import contextlib
import copy

import numpy

from dy2stat import device, gradient_hooks
from dy2stat.dispatch import Node
from dy2stat.kernels import backend
from dy2stat.mode import state
from dy2stat.runtime import backward as runtime_backward
from dy2stat.runtime import batch_split, dtypes, passes
from dy2stat.runtime import executor as runtime_executor
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.ops import debug
from dy2stat.runtime.passes import layout
from dy2stat.runtime.registry import OpDef, Slot
from dy2stat.tensor import Tensor


class ProgramRunner:
    """A program with named feeds and fetches, run eagerly and differentiably."""

    def __init__(self, program: Program, feed_names, fetch_names, captured: dict,
                 prologue=None):
        self.program = program
        # A training step's: () -> the arrays of its host inputs, the last feeds.
        self.prologue = prologue
        self.feed_names = list(feed_names)
        self.fetch_names = list(fetch_names)
        self.captured = captured  # name -> eager Tensor read at every run
        # The captured tensors the program writes (running statistics, counters): after
        # every run their tensors take the values the run left in the scope.
        self.written = sorted(_written_names(program) & set(captured))
        # What runs: the program rewritten by the passes that change no result.
        self._optimized = passes.pool_before_relu(program, self.fetch_names)
        self._plans: dict = {}
        self._forward_plans: dict = {}  # xp -> the forward plan (run_arrays' fast path)
        # (host forward plan, the captured tensors it reads): run_arrays' fastest path
        self._host_forward = None
        self._split_forward: dict = {}  # xp -> _Split (forward only) or None
        # (xp, inputs needing grad, trainable names, streamed names) -> _Plans
        self._backward: dict = {}

    # ---------------------------------------------------------------- forward
    def run_arrays(self, arrays: list) -> list:
        """Forward only: arrays in, arrays out (no tape)."""
        if backend.cupy is None:  # every array is on the host: nothing to move or enter
            if self._host_forward is not None:
                plan, tensors, split = self._host_forward
                if split is None or not batch_split.split_point(arrays, split.work):
                    return plan.run_in_order(arrays, [t._data for t in tensors], {})
            values = {n: t._data for n, t in self.captured.items()}
            scope, xp, where = values, numpy, _HERE
            feeds = dict(zip(self.feed_names, arrays))
        else:
            scope, where = self._scope()
            values, xp = scope._values, scope.xp
            feeds = self._feeds(arrays, xp)
        split = self._split_forward.get(xp, False)
        if split is False:
            split = self._forward_split(xp)
        if split is not None:
            at = batch_split.split_point(list(feeds.values()), split.work)
            if at:
                with where:
                    parts = batch_split.run_split(split.plan("forward"), feeds, split.kinds, at,
                                                  scope)
                    return batch_split.combine(split.fetch_kinds, *parts)
        plan = self._forward_plans.get(xp)
        if plan is None:
            plan = self._forward_plans[xp] = self._plan(
                "forward", self._optimized, self.feed_names, self.fetch_names, xp)
        if where is _HERE:
            outs = plan.run(feeds, scope)
            if not self.written and all(n in self.captured for n in plan.persistables):
                # From the next call on, when it runs whole: the plan fed directly (no
                # scope to build, nothing to write back).
                self._host_forward = (plan, [self.captured[n] for n in plan.persistables],
                                      split)
        else:
            with where:
                outs = plan.run(feeds, scope)
        if self.written:
            _write_back(self.captured, values, self.written)
        return outs

    def host_plan(self, arrays: list):
        """(the forward plan, the captured tensors it reads) when a forward without tape
        fed arrays of the shapes of ``arrays`` runs that plan directly on the host
        (``run_arrays``' fastest path, never split), else None."""
        if backend.cupy is not None or self.prologue is not None:
            return None
        host = self._host_forward
        if host is None:
            return None
        plan, tensors, split = host
        if split is not None and not batch_split.never_splits(arrays, split.work):
            return None
        return plan, tensors

    def __call__(self, inputs: list) -> list:
        """Run on eager tensors; returns output tensors (recorded on the tape if needed)."""
        arrays = [t._data for t in inputs]
        if self.prologue is not None:
            arrays += self.prologue()
            return [Tensor(a) for a in self.run_arrays(arrays)]
        if not state.grad_enabled:
            return [Tensor(a) for a in self.run_arrays(arrays)]
        trainable = self._trainable()
        if not trainable and all(t.stop_gradient for t in inputs):
            return [Tensor(a) for a in self.run_arrays(arrays)]
        scope, where = self._scope()
        needs = tuple(not t.stop_gradient for t in inputs)
        streamed = ()
        if gradient_hooks.watching():
            streamed = tuple(n for n in trainable if gradient_hooks.watched(self.captured[n]))
        plans = self._backward_plans(scope.xp, needs, tuple(trainable), streamed)
        feeds = self._feeds(arrays, scope.xp)
        split, n_out = plans.split, len(self.fetch_names)
        at = split and batch_split.split_point(list(feeds.values()), split.work)
        taken = _LoopChoices() if plans.loop_choices else None  # (see _LoopChoices)
        with where:
            if at:  # the halves' saved values stay apart for their backward
                parts = batch_split.run_split(split.plan("forward"), feeds, split.kinds, at,
                                              scope)
                outs = batch_split.combine(split.fetch_kinds, *(p[:n_out] for p in parts))
            elif plans.loop_choices:
                with debug.listening(taken.hand_out):
                    parts = [plans.forward.run(feeds, scope)]
                outs = parts[0][:n_out]
            else:
                parts = [plans.forward.run(feeds, scope)]
                outs = parts[0][:n_out]
        scope.write_back(self.written)
        n_saved = len(plans.saved_names)
        saved = [dict(zip(plans.saved_names, p[n_out:n_out + n_saved])) for p in parts]
        # As eager: an output needs a gradient when one can flow to it from an input or
        # parameter that needs one (not when no_grad computed it, say), along the
        # branches this call took.
        # The sources a gradient reaches too: a parameter of a branch that did not run
        # gets none (None: every source the program's gradient reaches).
        differentiable, reached = plans.differentiable, None
        if plans.branch_preds:
            ran = [{**part, **dict(zip(plans.pred_fetches, p[n_out + n_saved:]))}
                   for part, p in zip(saved, parts)]
            found = [plans.when(tuple(taken.of(pred) if isinstance(pred, int) else
                                      bool(values[pred])
                                      for pred in plans.branch_preds.values()))
                     for values in ran]
            differentiable = set().union(*(names for names, _ in found))
            reached = set().union(*(sources for _, sources in found))
        results = [Tensor(a, stop_gradient=name not in differentiable)
                   for a, name in zip(outs, self.fetch_names)]
        params = [self.captured[n] for n in trainable]
        node_inputs = [list(inputs), params]
        op = _program_op(self, saved, plans, at, reached)
        node = Node(op, node_inputs, results, {}, [
            any(not t.stop_gradient for t in inputs), bool(params)])
        for i, t in enumerate(results):
            t._node, t._index = node, i
        return results

    # --------------------------------------------------------------- backward
    def _trainable(self) -> list[str]:
        return [n for n, t in self.captured.items()
                if not t.stop_gradient and t.dtype in dtypes.FLOATS]

    def _backward_plans(self, xp, needs=None, trainable=None, streamed=()) -> _Plans:
        """Plans for the gradients w.r.t. the feeds flagged in ``needs`` (default: all)
        and the ``trainable`` parameters (default: those needing grad now), the
        ``streamed`` ones handed out as they are computed; one set of plans per
        combination, so a frozen input costs no gradient computation."""
        if needs is None:
            needs = (True,) * len(self.feed_names)
        if trainable is None:
            trainable = tuple(self._trainable())
        key = (xp, needs, trainable, streamed)
        if key in self._backward:
            return self._backward[key]
        full = copy.deepcopy(self._optimized)
        block = full.global_block()
        n_forward = len(block.ops)
        float_feeds = [n for n, need in zip(self.feed_names, needs)
                       if need and block.var(n).dtype in dtypes.FLOATS]
        wrt = float_feeds + list(trainable)
        differentiable = runtime_backward.requires_grad(full, wrt)
        # One seed per fetched name: a name fetched twice (``return y, y``) sums its
        # outputs' gradients (run_backward).
        targets = list(dict.fromkeys(n for n in self.fetch_names
                                     if block.var(n).dtype in dtypes.FLOATS))
        seeds = []
        for name in targets:
            var = block.var(name)
            seeds.append(block.create_var(var.shape, var.dtype, name=f"{name}@SEED",
                                          is_data=True))
        grads = runtime_backward.gradients(full, targets, wrt, seeds)
        backward_ops = block.ops[n_forward:]
        defined_later = {n for op in backward_ops for n in op.output_names()}
        read = {n for op in backward_ops for n in op.input_names()}
        for op in backward_ops:
            for idx in op.sub_blocks():
                read |= _free_names(full, idx)
        seed_names = {s.name for s in seeds}
        saved_names = sorted(
            n for n in read - defined_later - seed_names
            if n in block.vars and not block.vars[n].persistable)
        grad_names = [None if g is None else g.name for g in grads]
        plans = _Plans(wrt, targets, grad_names, [s.name for s in seeds], list(trainable),
                       saved_names)
        hand_outs = {grad_names[wrt.index(n)]: plans.trainable.index(n) for n in streamed
                     if grad_names[wrt.index(n)] is not None}
        forward_program = _with_block0_ops(full, block.ops[:n_forward])
        if hand_outs:
            backward_ops = _with_hand_outs(backward_ops, hand_outs)
            plans.hands_out = True
        backward_program = _with_block0_ops(full, backward_ops, data=saved_names)
        plans.differentiable = differentiable
        plans.forward_program = forward_program
        # The conds whose branch (and the loops whose running at all) decides what needs
        # a gradient: fetched (a nested one's through the conds around it) to say so.
        plans.branch_preds = runtime_backward.expose_predicates(
            forward_program, runtime_backward.gradient_deciding_ops(forward_program, wrt))
        plans.pred_fetches = sorted({p for p in plans.branch_preds.values()
                                     if isinstance(p, str)} - set(saved_names))
        plans.loop_choices = any(isinstance(p, int) for p in plans.branch_preds.values())
        plans.forward = self._plan(("train_forward", needs, trainable), forward_program,
                                   self.feed_names,
                                   self.fetch_names + saved_names + plans.pred_fetches, xp)
        plans.backward = self._plan(("backward", needs, trainable, streamed), backward_program,
                                    saved_names + plans.seed_names, plans.grad_fetches, xp)
        if xp is numpy:
            plans.split = self._training_split(full, n_forward, plans, forward_program,
                                               backward_program)
        self._backward[key] = plans
        return plans

    def run_backward(self, saved: list, douts: list, plans=None, at=None,
                     reached=None) -> tuple[list, list]:
        """Gradients for (inputs, trainable parameters) from output gradients;
        ``saved`` holds the forward's kept values, per half when it ran split at ``at``;
        a source outside ``reached`` (when given: the branches the call took did not
        reach it) gets None, as eagerly, not the zeros the program computes for it."""
        scope, where = self._scope()
        if plans is None:
            plans = self._backward_plans(scope.xp)
        dout_by_name: dict = {}  # arrays; a name fetched twice: the sum of both
        for name, dout in zip(self.fetch_names, douts):
            previous = dout_by_name.get(name)
            dout_by_name[name] = dout._data if previous is None else previous + dout._data
        seeds = {seed: dout_by_name[target]
                 for target, seed in zip(plans.targets, plans.seed_names)}
        delivered: set[int] = set()  # indices in plans.trainable of gradients handed out
        with where:
            if len(saved) == 2:
                split = plans.split
                first, second = batch_split.halves(seeds, split.kinds, at)
                parts = batch_split.run_halves(split.plan("backward"), {**saved[0], **first},
                                               {**saved[1], **second}, scope)
                values = iter(batch_split.combine(split.grad_kinds, *parts))
            elif plans.hands_out:
                def hand_out(index, values):
                    if reached is not None and plans.trainable[index] not in reached:
                        return  # a parameter the call's branches did not reach: None
                    tensor = self.captured[plans.trainable[index]]
                    if gradient_hooks.deliver(tensor, Tensor(values[0])):
                        delivered.add(index)

                with debug.listening(hand_out):
                    values = iter(plans.backward.run({**saved[0], **seeds}, scope))
            else:
                values = iter(plans.backward.run({**saved[0], **seeds}, scope))
        grads = {}
        for name, g in zip(plans.wrt, plans.grad_names):
            grads[name] = next(values) if g is not None else None
            if reached is not None and name not in reached:
                grads[name] = None
        input_grads = []
        for name in self.feed_names:
            g = grads.get(name)
            input_grads.append(None if g is None else Tensor(g))
        param_grads = [None if grads.get(n) is None or k in delivered else Tensor(grads[n])
                       for k, n in enumerate(plans.trainable)]
        return input_grads, param_grads

    # ------------------------------------------------------------ splitting
    def _forward_split(self, xp) -> _Split | None:
        """The split form of the forward-only plan, when the program is row-separable."""
        if xp not in self._split_forward:
            program, split = self._optimized, None
            block = program.global_block()
            kinds = dict.fromkeys(self.feed_names, batch_split.ROWS)
            if xp is numpy and batch_split.infer_kinds(block, block.ops, kinds):
                split = _Split(kinds, batch_split.work_per_row(block, block.ops))
                split.fetch_kinds = [kinds[n] for n in self.fetch_names]
                split.sources["forward"] = (program, self.feed_names, self.fetch_names)
            self._split_forward[xp] = split
        return self._split_forward[xp]

    def _training_split(self, full, n_forward, plans, forward_program,
                        backward_program) -> _Split | None:
        """The split forms of the training plans, when forward and backward are
        both row-separable."""
        block = full.global_block()
        kinds = dict.fromkeys(self.feed_names, batch_split.ROWS)
        if not batch_split.infer_kinds(block, block.ops[:n_forward], kinds):
            return None
        for target, seed in zip(plans.targets, plans.seed_names):
            # A target's gradient: cut with its rows, or (the whole's gradient
            # of a sum or of a shared value) the same for both halves.
            rows = kinds[target] == batch_split.ROWS
            kinds[seed] = batch_split.ROWS if rows else batch_split.SHARED
        if not batch_split.infer_kinds(block, block.ops[n_forward:], kinds):
            return None
        split = _Split(kinds, batch_split.work_per_row(block, block.ops))
        split.fetch_kinds = [kinds[n] for n in self.fetch_names]
        split.grad_kinds = [kinds[n] for n in plans.grad_fetches]
        split.sources["forward"] = (forward_program, self.feed_names,
                                    self.fetch_names + plans.saved_names + plans.pred_fetches)
        split.sources["backward"] = (backward_program, plans.saved_names + plans.seed_names,
                                     plans.grad_fetches)
        return split

    # ---------------------------------------------------------------- helpers
    def _plan(self, kind, program, feeds, fetches, xp):
        key = (kind, xp)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _compile(program, feeds, fetches, xp)
        return plan

    def _feeds(self, arrays, xp) -> dict:
        """Feeds by name; a GPU array fed to a program on the host is copied there
        (host arrays fed to a GPU program are copied by ``Plan.run``)."""
        if xp is numpy and backend.cupy is not None:
            arrays = [backend.to_host(a) for a in arrays]
        return dict(zip(self.feed_names, arrays))

    def _scope(self):
        """The captured values as a scope, and a context for the device they run on."""
        return _TensorScope.build(self.captured)


class _Plans:
    """What training through one (device, inputs needing grad, trainable
    parameters) combination runs: the forward plan (its fetches, then the values
    its backward keeps), the backward plan (the seeds' gradients to ``wrt``), and
    their split forms (``split``) when the program is row-separable."""

    def __init__(self, wrt, targets, grad_names, seed_names, trainable, saved_names):
        self.wrt, self.targets, self.grad_names = wrt, targets, grad_names
        self.seed_names, self.trainable, self.saved_names = seed_names, trainable, saved_names
        self.grad_fetches = [g for g in grad_names if g is not None]
        self.differentiable: set[str] = set()  # the names a gradient flows through
        # (block, op index) of a cond or while whose run decides what needs a gradient
        # -> the name of block 0 its choice is fetched as, read after each forward, or
        # for a cond in a loop the index its choices are handed out with (see
        # expose_predicates); and the program they are ops of.
        self.branch_preds: dict[tuple[int, int], str | int] = {}
        self.pred_fetches: list[str] = []  # those of them not already saved for backward
        self.loop_choices = False  # whether the forward hands out choices of conds in loops
        self._by_choices: dict[tuple, tuple] = {}  # the choices -> see ``when``
        self.forward_program = None
        self.hands_out = False  # the backward plan has hand_out ops (see _with_hand_outs)
        self.forward = self.backward = self.split = None

    def when(self, choices: tuple) -> tuple[set[str], set[str]]:
        """The names a gradient flows through, and the sources of ``wrt`` it reaches from
        the fetched outputs, when the ops of ``branch_preds`` chose ``choices`` (in its
        order); kept for the next calls (a few combinations, as a rule: at most 256 are
        kept)."""
        found = self._by_choices.get(choices)
        if found is None:
            taken = dict(zip(self.branch_preds, choices))
            found = (runtime_backward.requires_grad(self.forward_program, self.wrt, taken),
                     runtime_backward.sources_reaching(self.forward_program, self.wrt,
                                                       self.targets, taken))
            if len(self._by_choices) < 256:
                self._by_choices[choices] = found
        return found


class _LoopChoices:
    """The branches each cond in a loop took during one forward run, from the
    ``hand_out`` of its predicate that each iteration runs (see expose_predicates)."""

    def __init__(self):
        self.taken: dict[int, set] = {}

    def hand_out(self, index: int, values) -> None:
        self.taken.setdefault(index, set()).add(bool(backend.to_host(values[0])))

    def of(self, index: int) -> bool | None:
        return runtime_backward.loop_choice(self.taken.get(index, set()))


class _Split:
    """A program run on two halves of a batch (``batch_split``): every value's
    kind, the work per row, how fetches combine, and its plans — compiled from
    ``sources`` (program, feeds, fetches) with the batch dim relaxed, when
    first needed."""

    def __init__(self, kinds: dict, work: float):
        self.kinds, self.work = kinds, work
        self.fetch_kinds: list = []
        self.grad_kinds: list = []
        self.sources: dict = {}  # "forward" / "backward" -> (program, feeds, fetches)
        self._plans: dict = {}

    def plan(self, which: str):
        plan = self._plans.get(which)
        if plan is None:
            program, feeds, fetches = self.sources[which]
            plan = self._plans[which] = _compile(
                batch_split.relaxed(program, self.kinds), feeds, fetches, numpy, overlap=False)
        return plan


_HERE = contextlib.nullcontext()  # where a host program runs: no device to enter


class _TensorScope(runtime_executor.Scope):
    """A scope whose values are the captured tensors' arrays; writes go back to them.

    The program runs where its captured tensors (parameters) live: on their
    GPU when any is there, else on the current device. A captured value on
    another device is copied for the call; feeds go through ``Plan.run``,
    which copies host arrays to the plan's device once.
    """

    def __init__(self, captured: dict, values: dict, xp):
        self._values = values  # made for this scope: not copied again
        self._captured = captured
        self.xp = xp

    @classmethod
    def build(cls, captured: dict):
        values, gpu = {}, None
        for name, tensor in captured.items():
            a = values[name] = tensor._data
            if gpu is None and backend.array_module(a) is not numpy:
                gpu = a.device
        if gpu is not None:
            xp, where, target = backend.cupy, gpu, f"gpu:{gpu.id}"
        elif device.current.xp is numpy:
            return cls(captured, values, numpy), _HERE
        else:
            xp, target = device.current.xp, device.get_device()
            where = xp.cuda.Device(device.gpu_index())
        for name, a in values.items():
            if backend.array_module(a) is numpy or a.device != where:
                values[name] = device.move(a, target, "run_program")
        return cls(captured, values, xp), where

    def write_back(self, names) -> None:
        """Give the captured tensors ``names`` the values a run left for them (plans
        store persistable outputs into the scope's dict directly)."""
        _write_back(self._captured, self._values, names)


def _write_back(captured: dict, values: dict, names) -> None:
    """Give the tensors ``captured[name]`` the values ``values[name]`` a run left."""
    for name in names:
        tensor, value = captured[name], values[name]
        if value is not tensor._data:
            tensor._data = value
            tensor._version += 1


def _program_op(runner: ProgramRunner, saved: list, plans: _Plans, at,
                reached=None) -> OpDef:
    """The tape record of one program call: its backward runs the program's gradient
    (to the sources in ``reached``, when given)."""

    def grad(e, ins, outs, douts, attrs, need):
        (douts,) = douts
        input_grads, param_grads = runner.run_backward(saved, douts, plans, at, reached)
        return [input_grads, param_grads]

    return OpDef(type="run_program", inputs=(Slot("X", variadic=True),
                                             Slot("Params", variadic=True)),
                 outputs=(Slot("Out", variadic=True),), attrs={}, kernel=None,
                 infer=None, grad=grad)


def _compile(program: Program, feeds, fetches, xp, overlap=None):
    """A plan of ``program``; on NumPy its image ops run batch-minor with the flag on
    (``passes.layout``). (``passes.share_conv_columns`` is not applied: keeping the
    forward's im2col columns for the filter gradients made LeNet's step slower, their
    megabytes cold by then, than copying them again.)"""
    if xp is numpy and layout.settings.enabled:
        program = passes.batch_minor_layout(program, fetches)
    return runtime_executor.compile(program, feeds, fetches, xp=xp, overlap=overlap)


def _is_float(array) -> bool:
    return array.dtype in dtypes.FLOATS


def _written_names(program: Program) -> set:
    """Every name an op of ``program`` (sub-blocks included) writes."""
    return {n for op in program.all_ops() for n in op.output_names()}


def _free_names(program: Program, idx: int) -> set:
    block = program.blocks[idx]
    read = set()
    for op in block.ops:
        read.update(op.input_names())
        for sub in op.sub_blocks():
            read |= _free_names(program, sub)
    return read - set(block.vars)


def _with_hand_outs(ops: list, hand_outs: dict) -> list:
    """``ops`` with a ``hand_out`` of each value named in ``hand_outs`` (name -> index)
    right after it is computed. A backward ends with the copies (and casts) of each
    gradient into its final name: each moves up to right after its source is final."""
    n = len(ops)
    while n and ops[n - 1].type in ("assign", "cast") and len(ops[n - 1].input_names()) == 1:
        n -= 1
    body, tail = list(ops[:n]), ops[n:]
    at = {name: k for k, op in enumerate(body) for name in op.output_names()}  # last writes
    after: dict[int, list] = {}  # body index (-1: before the first op) -> ops to follow it
    for op in tail:
        k = at.get(op.input_names()[0], -1)
        after.setdefault(k, []).append(op)
        for name in op.output_names():
            at[name] = k
    for name, index in hand_outs.items():
        after.setdefault(at.get(name, -1), []).append(
            Operator("hand_out", {"X": [name]}, {}, {"index": index}))
    result = list(after.get(-1, ()))
    for k, op in enumerate(body):
        result.append(op)
        result.extend(after.get(k, ()))
    return result


def _with_block0_ops(program: Program, ops, data=()) -> Program:
    """A copy of ``program`` whose global block holds ``ops`` (``data`` names become feeds)."""
    result = copy.deepcopy(program)
    block = result.global_block()
    block.ops = copy.deepcopy(list(ops))
    for name in data:
        block.vars[name].is_data = True
    result.bump()
    return result
