"""Running a static program from eager code as one node on the autograd tape.

``ProgramRunner`` owns a traced program: its inputs (data variables), its
outputs, and the eager tensors it captured (parameters, buffers). Calling it
runs the compiled forward plan. When an input or parameter needs a gradient,
the call records one tape node; its backward runs the program's gradient ops
on the forward's kept intermediates.
"""

from __future__ import annotations

import copy

from dy2stat import device
from dy2stat.dispatch import Node
from dy2stat.mode import state
from dy2stat.runtime import backward as runtime_backward
from dy2stat.runtime import dtypes
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
        self._plans: dict = {}
        self._backward = None  # (forward plan, backward plan, saved names, grad names)

    # ---------------------------------------------------------------- forward
    def run_arrays(self, arrays: list) -> list:
        """Forward only: arrays in, arrays out (no tape)."""
        plan = self._plan("forward", self.program, self.feed_names, self.fetch_names)
        return plan.run(dict(zip(self.feed_names, arrays)), self._scope())

    def __call__(self, inputs: list) -> list:
        """Run on eager tensors; returns output tensors (recorded on the tape if needed)."""
        arrays = [t._data for t in inputs]
        trainable = self._trainable()
        wants_grad = state.grad_enabled and (
            trainable or any(not t.stop_gradient for t in inputs))
        if not wants_grad:
            return [Tensor(a) for a in self.run_arrays(arrays)]
        forward, _, saved_names, _ = self._backward_plans()
        values = forward.run(dict(zip(self.feed_names, arrays)), self._scope())
        outs = values[:len(self.fetch_names)]
        saved = dict(zip(saved_names, values[len(self.fetch_names):]))
        results = [Tensor(a, stop_gradient=not _is_float(a)) for a in outs]
        params = [self.captured[n] for n in trainable]
        node_inputs = [list(inputs), params]
        op = _program_op(self, saved)
        node = Node(op, node_inputs, results, {}, [
            any(not t.stop_gradient for t in inputs), bool(params)])
        for i, t in enumerate(results):
            t._node, t._index = node, i
        return results

    # --------------------------------------------------------------- backward
    def _trainable(self) -> list[str]:
        return [n for n, t in self.captured.items()
                if not t.stop_gradient and t.dtype in dtypes.FLOATS]

    def _backward_plans(self):
        if self._backward is not None:
            return self._backward
        full = copy.deepcopy(self.program)
        block = full.global_block()
        n_forward = len(block.ops)
        float_feeds = [n for n in self.feed_names if block.var(n).dtype in dtypes.FLOATS]
        wrt = float_feeds + self._trainable()
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
        forward = self._plan("train_forward", forward_program, self.feed_names,
                             self.fetch_names + saved_names)
        backward = self._plan("backward", backward_program,
                              saved_names + [s.name for s in seeds],
                              [g for g in grad_names if g is not None])
        self._backward = (forward, backward, saved_names,
                          (wrt, targets, grad_names, [s.name for s in seeds], len(float_feeds)))
        return self._backward

    def run_backward(self, saved: dict, douts: list) -> tuple[list, list]:
        """Gradients for (inputs, trainable parameters) from output gradients."""
        _, backward, saved_names, (wrt, targets, grad_names, seed_names, n_feeds) = \
            self._backward_plans()
        dout_by_name = dict(zip(self.fetch_names, douts))
        feeds = {n: saved[n] for n in saved_names}
        for target, seed in zip(targets, seed_names):
            feeds[seed] = dout_by_name[target]._data
        values = iter(backward.run(feeds, self._scope()))
        grads = {}
        for name, g in zip(wrt, grad_names):
            grads[name] = next(values) if g is not None else None
        input_grads = []
        for name in self.feed_names:
            g = grads.get(name)
            input_grads.append(None if g is None else Tensor(g))
        param_grads = [None if grads.get(n) is None else Tensor(grads[n])
                       for n in self._trainable()]
        return input_grads, param_grads

    # ---------------------------------------------------------------- helpers
    def _plan(self, kind, program, feeds, fetches):
        key = (kind, device.current.xp)
        plan = self._plans.get(key)
        if plan is None:
            plan = runtime_executor.compile(program, feeds, fetches, xp=device.current.xp)
            self._plans[key] = plan
        return plan

    def _scope(self) -> _TensorScope:
        return _TensorScope(self.captured)


class _TensorScope(runtime_executor.Scope):
    """A scope whose values are the captured tensors' arrays; writes go back to them."""

    def __init__(self, captured: dict):
        super().__init__({n: t._data for n, t in captured.items()})
        self._captured = captured

    def __setitem__(self, name, value) -> None:
        super().__setitem__(name, value)
        tensor = self._captured.get(name)
        if tensor is not None:
            tensor._data = value


def _program_op(runner: ProgramRunner, saved: dict) -> OpDef:
    """The tape record of one program call: its backward runs the program's gradient."""

    def grad(e, ins, outs, douts, attrs, need):
        (douts,) = douts
        input_grads, param_grads = runner.run_backward(saved, douts)
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
