"""The static half of the dispatcher: append an op to the current block."""

from __future__ import annotations

import linecache
import os
import sys
import weakref

import numpy as np

from dy2stat.runtime import build
from dy2stat.runtime.ir import Block, Operator, Var
from dy2stat.static import framework
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor
from dy2stat.unassigned import Unassigned

_SCALARS = (int, float, bool)


class _Recording:
    """Whether the ops appended now take part in gradients.

    ``no_grad`` entered while a program is being built turns it off: what those ops
    compute is ``stop_gradient``, and the program's backward treats it as a constant.
    (``no_grad`` around the call of a converted function changes the eager tape only.)
    """

    grad = True


recording = _Recording()


def static_apply(op, inputs, attrs):
    """Append ``op`` to the block being built and return Variables for its outputs."""
    block = framework.current_block()
    values = [_value(block, x, op) for x in inputs]
    attrs = {k: _json(v) for k, v in attrs.items()}
    first = len(block.ops)
    result = build.append(block, op, values, attrs)
    block.ops[-1].origin = user_location()
    for appended in block.ops[first:]:  # the op and the casts its inputs needed
        framework.scoped(appended)
    if not recording.grad:
        for var in _vars_in(result):
            var.stop_gradient = True
    return _wrap(block, result)


def computes_no_gradient(var: Var) -> bool:
    """Whether ``var`` was computed by ops that take no part in gradients (under
    ``no_grad``, or ``detach``). Data and captured variables are never such: whether
    they need a gradient is known only when the program runs."""
    return var.stop_gradient and not (var.is_data or var.persistable)


def _vars_in(result):
    if isinstance(result, Var):
        yield result
    elif isinstance(result, (list, tuple)):
        for r in result:
            yield from _vars_in(r)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUNTIME = os.path.dirname(os.path.abspath(build.__file__))


def user_location() -> str:
    """``File "...", line N`` and the source line of the innermost user frame."""
    frame = sys._getframe(2)
    while frame is not None:
        if _is_users(frame.f_code.co_filename):
            return _location(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return ""


def error_location(error: BaseException) -> str:
    """``user_location`` of the innermost user frame ``error`` was raised through."""
    found, tb = "", error.__traceback__
    while tb is not None:
        if _is_users(tb.tb_frame.f_code.co_filename):
            found = _location(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _is_users(filename: str) -> bool:
    return not filename.startswith((_PACKAGE, _RUNTIME, "<"))


def _location(filename: str, lineno: int) -> str:
    line = linecache.getline(filename, lineno).strip()
    return f'  File "{filename}", line {lineno}\n    {line}'


def _value(block: Block, x, op):
    if isinstance(x, Variable):
        return x.read().desc
    if x is None or type(x) in _SCALARS:
        return x
    if isinstance(x, Tensor):
        return capture(x)
    if isinstance(x, (np.ndarray, np.generic)):
        # as in eager mode, a NumPy value is a tensor input: a constant of the program
        return capture(Tensor(np.asarray(x)))
    if isinstance(x, (list, tuple)):
        return [_value(block, v, op) for v in x]
    if isinstance(x, Unassigned):
        raise x.error()
    raise TypeError(f"{op.type}: cannot use a {type(x).__name__} as an input in a static program")


def capture(tensor: Tensor) -> Var:
    """An eager tensor read by a static program becomes a persistable variable.

    Its value is read from the tensor at every run (so parameters updated
    eagerly are seen by the next run).
    """
    program = framework.default_main_program()
    captured = captured_tensors(program)
    for name, t in captured.items():
        if t is tensor:
            return program.global_block().var(name)
    name = tensor.name if tensor.name and tensor.name not in program.global_block().vars \
        else program.unique_name("captured")
    var = program.global_block().create_var(
        tensor.shape, tensor.dtype, name=name, persistable=True,
        stop_gradient=tensor.stop_gradient,
    )
    captured[name] = tensor
    return var


def write_tensor(tensor: Tensor, value: Variable) -> None:
    """When the program runs, write ``value`` into the eager ``tensor`` (captured as a
    persistable variable: the runner of a converted program copies it back)."""
    name = capture(tensor).name
    block = framework.current_block()
    block.append_op(framework.scoped(Operator("assign", {"X": [value.name]}, {"Out": [name]}, {})))
    block.ops[-1].origin = user_location()


_CAPTURED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def captured_tensors(program) -> dict:
    """name -> eager Tensor for the tensors a program captured while being built."""
    return _CAPTURED.setdefault(program, {})


def _json(value):
    """Attrs are plain data: tuples become lists, dtypes become names."""
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _wrap(block, result):
    if isinstance(result, Var):
        return Variable(block, result.name)
    if isinstance(result, list):
        return [_wrap(block, r) for r in result]
    if isinstance(result, tuple):
        return tuple(_wrap(block, r) for r in result)
    return result
