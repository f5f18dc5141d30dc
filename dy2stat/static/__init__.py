"""``dy2stat.static``: build static programs, differentiate, run and save them."""

from dy2stat import dispatch as _dispatch
from dy2stat import methods as _methods
from dy2stat import tensor as _tensor
from dy2stat.metric.metrics import accuracy
from dy2stat.runtime.ir import Program
from dy2stat.static import framework as _framework
from dy2stat.static import nn
from dy2stat.static.backward import append_backward, gradients
from dy2stat.static.builder import static_apply as _static_apply
from dy2stat.static.builder import write_tensor as _write_tensor
from dy2stat.static.executor import Executor, global_scope
from dy2stat.static.framework import (
    default_main_program,
    default_startup_program,
    disable_static,
    enable_static,
    in_static_mode,
    program_guard,
)
from dy2stat.static.input_spec import InputSpec
from dy2stat.static.io import load_inference_model, save_inference_model
from dy2stat.static.variable import Variable

_methods.install(Variable)
_dispatch.static_apply = _static_apply
_tensor.static_write = _write_tensor


def create_parameter(shape, dtype="float32", name=None, initializer=None) -> Variable:
    """A parameter of the default main program (initialized by the startup program).

    ``initializer`` is ``(op_type, attrs)`` of a creation op (``uniform``,
    ``normal``, ``full``); the default is Xavier-uniform. Returns a Variable
    with the Tensor surface (``x @ w`` works).
    """
    var = _framework.create_parameter(shape, dtype, name=name, initializer=initializer)
    return Variable(default_main_program().global_block(), var.name)


def data(name: str, shape, dtype="float32") -> Variable:
    """A feed of the default main program (``None``/-1 dims are unknown)."""
    spec = InputSpec(shape, dtype, name)
    block = default_main_program().global_block()
    var = block.create_var(spec.shape, spec.dtype, name=name, is_data=True, stop_gradient=True)
    return Variable(block, var.name)


__all__ = [
    "Executor", "InputSpec", "Program", "Variable", "accuracy", "append_backward",
    "create_parameter", "data", "default_main_program", "default_startup_program",
    "disable_static", "enable_static", "global_scope", "gradients", "in_static_mode",
    "load_inference_model", "nn", "program_guard", "save_inference_model",
]
