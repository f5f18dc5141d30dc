"""Static backward for Variables: ``append_backward`` and ``gradients``."""

from __future__ import annotations

from dy2stat.runtime import backward as runtime_backward
from dy2stat.static.variable import Variable


def append_backward(loss: Variable, parameter_list=None):
    """Append the gradient ops of ``loss``; return ``[(parameter, gradient)]``."""
    _check(loss, "append_backward")
    names = None if parameter_list is None else [
        p.name if isinstance(p, Variable) else str(p) for p in parameter_list]
    program = loss.block.program
    pairs = runtime_backward.append_backward(program, loss.desc, names)
    block = program.global_block()
    return [(Variable(block, p.name), Variable(block, g.name)) for p, g in pairs]


def gradients(targets, inputs, target_gradients=None):
    """Gradients of ``targets`` (summed) with respect to any ``inputs``."""
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    for t in targets + inputs:
        _check(t, "gradients")
    seeds = None
    if target_gradients is not None:
        seeds = [None if g is None else g.desc for g in
                 (target_gradients if isinstance(target_gradients, (list, tuple))
                  else [target_gradients])]
    program = targets[0].block.program
    grads = runtime_backward.gradients(program, [t.desc for t in targets],
                                       [x.desc for x in inputs], seeds)
    block = program.global_block()
    return [None if g is None else Variable(block, g.name) for g in grads]


def _check(value, where):
    if not isinstance(value, Variable):
        raise TypeError(f"{where}: expected a static Variable, got {type(value).__name__}")
