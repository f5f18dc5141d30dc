"""Running a static program from eager code as one node on the autograd tape.

``ProgramRunner`` owns a traced program: its inputs (data variables), its
outputs, and the eager tensors it captured (parameters, buffers). Calling it
runs the compiled forward plan. When an input or parameter needs a gradient,
the call records one tape node; its backward runs the program's gradient ops
on the forward's kept intermediates.
"""

from __future__ import annotations

import contextlib
import copy

import numpy

from dy2stat import device
from dy2stat.dispatch import Node
from dy2stat.kernels import backend
from dy2stat.mode import state
from dy2stat.runtime import backward as runtime_backward
from dy2stat.runtime import dtypes, passes
from dy2stat.runtime import executor as runtime_executor
from dy2stat.runtime.ir import Program
from dy2stat.runtime.registry import OpDef, Slot
from dy2stat.tensor import Tensor


class ProgramRunner:
    """A program with named feeds and fetches, run eagerly and differentiably."""

    def __init__(self, program: Program, feed_names, fetch_names, captured: dict):
        self.program = program
        self.feed_names = list(feed_names)
        self.fetch_names = list(fetch_names)
        self.captured = captured  # name -> eager Tensor read at every run
        # What runs: the program rewritten by the passes that change no result.
        self._optimized = passes.pool_before_relu(program, self.fetch_names)
        self._plans: dict = {}
        # (xp, inputs needing grad, trainable names) ->
        #     (forward plan, backward plan, saved names, grad names)
        self._backward: dict = {}

    # ---------------------------------------------------------------- forward
    def run_arrays(self, arrays: list) -> list:
        """Forward only: arrays in, arrays out (no tape)."""
        scope, where = self._scope()
        plan = self._plan("forward", self._optimized, self.feed_names, self.fetch_names,
                          scope.xp)
        with where:
            return plan.run(self._feeds(arrays, scope.xp), scope)

    def __call__(self, inputs: list) -> list:
        """Run on eager tensors; returns output tensors (recorded on the tape if needed)."""
        arrays = [t._data for t in inputs]
        trainable = self._trainable()
        wants_grad = state.grad_enabled and (
            trainable or any(not t.stop_gradient for t in inputs))
        if not wants_grad:
            return [Tensor(a) for a in self.run_arrays(arrays)]
        scope, where = self._scope()
        needs = tuple(not t.stop_gradient for t in inputs)
        plans = self._backward_plans(scope.xp, needs, tuple(trainable))
        forward, _, saved_names, _ = plans
        with where:
            values = forward.run(self._feeds(arrays, scope.xp), scope)
        outs = values[:len(self.fetch_names)]
        saved = dict(zip(saved_names, values[len(self.fetch_names):]))
        results = [Tensor(a, stop_gradient=not _is_float(a)) for a in outs]
        params = [self.captured[n] for n in trainable]
        node_inputs = [list(inputs), params]
        op = _program_op(self, saved, plans)
        node = Node(op, node_inputs, results, {}, [
            any(not t.stop_gradient for t in inputs), bool(params)])
        for i, t in enumerate(results):
            t._node, t._index = node, i
        return results

    # --------------------------------------------------------------- backward
    def _trainable(self) -> list[str]:
        return [n for n, t in self.captured.items()
                if not t.stop_gradient and t.dtype in dtypes.FLOATS]

    def _backward_plans(self, xp, needs=None, trainable=None):
        """Plans for the gradients w.r.t. the feeds flagged in ``needs`` (default: all)
        and the ``trainable`` parameters (default: those needing grad now); one set of
        plans per combination, so a frozen input costs no gradient computation."""
        if needs is None:
            needs = (True,) * len(self.feed_names)
        if trainable is None:
            trainable = tuple(self._trainable())
        key = (xp, needs, trainable)
        if key in self._backward:
            return self._backward[key]
        full = copy.deepcopy(self._optimized)
        block = full.global_block()
        n_forward = len(block.ops)
        float_feeds = [n for n, need in zip(self.feed_names, needs)
                       if need and block.var(n).dtype in dtypes.FLOATS]
        wrt = float_feeds + list(trainable)
        targets = [n for n in self.fetch_names if block.var(n).dtype in dtypes.FLOATS]
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
        forward_program = _with_block0_ops(full, block.ops[:n_forward])
        backward_program = _with_block0_ops(full, backward_ops, data=saved_names)
        grad_names = [None if g is None else g.name for g in grads]
        forward = self._plan(("train_forward", needs, trainable), forward_program,
                             self.feed_names, self.fetch_names + saved_names, xp)
        backward = self._plan(("backward", needs, trainable), backward_program,
                              saved_names + [s.name for s in seeds],
                              [g for g in grad_names if g is not None], xp)
        plans = (forward, backward, saved_names,
                 (wrt, targets, grad_names, [s.name for s in seeds], list(trainable)))
        self._backward[key] = plans
        return plans

    def run_backward(self, saved: dict, douts: list, plans=None) -> tuple[list, list]:
        """Gradients for (inputs, trainable parameters) from output gradients."""
        scope, where = self._scope()
        if plans is None:
            plans = self._backward_plans(scope.xp)
        _, backward, saved_names, (wrt, targets, grad_names, seed_names, trainable) = plans
        dout_by_name = dict(zip(self.fetch_names, douts))
        feeds = {n: saved[n] for n in saved_names}
        for target, seed in zip(targets, seed_names):
            feeds[seed] = dout_by_name[target]._data
        with where:
            values = iter(backward.run(feeds, scope))
        grads = {}
        for name, g in zip(wrt, grad_names):
            grads[name] = next(values) if g is not None else None
        input_grads = []
        for name in self.feed_names:
            g = grads.get(name)
            input_grads.append(None if g is None else Tensor(g))
        param_grads = [None if grads.get(n) is None else Tensor(grads[n])
                       for n in trainable]
        return input_grads, param_grads

    # ---------------------------------------------------------------- helpers
    def _plan(self, kind, program, feeds, fetches, xp):
        key = (kind, xp)
        plan = self._plans.get(key)
        if plan is None:
            plan = runtime_executor.compile(program, feeds, fetches, xp=xp)
            self._plans[key] = plan
        return plan

    def _feeds(self, arrays, xp) -> dict:
        """Feeds by name; a GPU array fed to a program on the host is copied there
        (host arrays fed to a GPU program are copied by ``Plan.run``)."""
        if xp is numpy:
            arrays = [backend.to_host(a) for a in arrays]
        return dict(zip(self.feed_names, arrays))

    def _scope(self):
        """The captured values as a scope, and a context for the device they run on."""
        return _TensorScope.build(self.captured)


class _TensorScope(runtime_executor.Scope):
    """A scope whose values are the captured tensors' arrays; writes go back to them.

    The program runs where its captured tensors (parameters) live: on their
    GPU when any is there, else on the current device. A captured value on
    another device is copied for the call; feeds go through ``Plan.run``,
    which copies host arrays to the plan's device once.
    """

    def __init__(self, captured: dict, values: dict, xp):
        super().__init__(values)
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
            return cls(captured, values, numpy), contextlib.nullcontext()
        else:
            xp, target = device.current.xp, device.get_device()
            where = xp.cuda.Device(device.gpu_index())
        for name, a in values.items():
            if backend.array_module(a) is numpy or a.device != where:
                values[name] = device.move(a, target, "run_program")
        return cls(captured, values, xp), where

    def __setitem__(self, name, value) -> None:
        super().__setitem__(name, value)
        tensor = self._captured.get(name)
        if tensor is not None:
            tensor._data = value


def _program_op(runner: ProgramRunner, saved: dict, plans) -> OpDef:
    """The tape record of one program call: its backward runs the program's gradient."""

    def grad(e, ins, outs, douts, attrs, need):
        (douts,) = douts
        input_grads, param_grads = runner.run_backward(saved, douts, plans)
        return [input_grads, param_grads]

    return OpDef(type="run_program", inputs=(Slot("X", variadic=True),
                                             Slot("Params", variadic=True)),
                 outputs=(Slot("Out", variadic=True),), attrs={}, kernel=None,
                 infer=None, grad=grad)


def _is_float(array) -> bool:
    return array.dtype in dtypes.FLOATS


def _free_names(program: Program, idx: int) -> set:
    block = program.blocks[idx]
    read = set()
    for op in block.ops:
        read.update(op.input_names())
        for sub in op.sub_blocks():
            read |= _free_names(program, sub)
    return read - set(block.vars)


def _with_block0_ops(program: Program, ops, data=()) -> Program:
    """A copy of ``program`` whose global block holds ``ops`` (``data`` names become feeds)."""
    result = copy.deepcopy(program)
    block = result.global_block()
    block.ops = copy.deepcopy(list(ops))
    for name in data:
        block.vars[name].is_data = True
    result.bump()
    return result
