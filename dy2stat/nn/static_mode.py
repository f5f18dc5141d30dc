"""How layers make and update their state when static mode is on.

In static mode a layer's parameters and buffers are persistable variables of
the default main program, initialized by ops of the default startup program;
a buffer that the forward updates (batch norm's running statistics) is
written back by an ``assign`` op whose output is the buffer's own variable.
"""

from __future__ import annotations

from dy2stat import device
from dy2stat.mode import state
from dy2stat.runtime.ir import Operator
from dy2stat.static import framework
from dy2stat.static.builder import captured_tensors, write_tensor
from dy2stat.static.executor import global_scope
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor


def in_static_mode() -> bool:
    return state.static


def create_parameter(shape, dtype, name: str, initializer, trainable: bool = True):
    """A persistable parameter variable of the main program, wrapped as a Variable.

    The startup program draws its value with the initializer's creation op; for an
    initializer that has none (given values, a truncated normal) it assigns the values
    drawn now, which it holds as a captured tensor.
    """
    main = framework.default_main_program()
    block = main.global_block()
    if name in block.vars:
        name = main.unique_name(name)
    op = initializer.static_op(shape)
    if op is not None:
        var = framework.create_parameter(shape, dtype, name=name, initializer=op)
    else:
        var = block.create_var([int(d) for d in shape], dtype, name=name, persistable=True)
        _assign_in_startup(var, initializer(shape, dtype, device.current.xp))
    var.stop_gradient = not trainable
    return Variable(block, var.name)


def _assign_in_startup(var, values) -> None:
    startup = framework.default_startup_program()
    block = startup.global_block()
    if var.name in block.vars:
        return
    block.create_var(var.shape, var.dtype, name=var.name, persistable=True)
    source = block.create_var(var.shape, var.dtype, name=startup.unique_name(var.name + "@init"),
                              persistable=True, stop_gradient=True)
    captured_tensors(startup)[source.name] = Tensor(values)
    block.append_op(Operator("assign", {"X": [source.name]}, {"Out": [var.name]}, {}))


def create_buffer(shape, dtype, name: str, initializer):
    """A persistable, non-trainable variable (running statistics and the like)."""
    return create_parameter(shape, dtype, name, initializer, trainable=False)


def assign_to(target, value) -> None:
    """Write static ``value`` into ``target``'s variable when the program runs.

    ``target`` is a static Variable (a layer built in static mode) or an eager
    Tensor read by the program being built (a layer converted by to_static);
    the latter is captured as a persistable variable of the same name, and the
    runner of the converted program copies that variable back into the tensor.
    """
    if not getattr(target, "is_static", False):
        write_tensor(target, value)
        return
    block = framework.current_block()
    block.append_op(framework.scoped(
        Operator("assign", {"X": [value.name]}, {"Out": [target.name]}, {})))


def set_value(target, value) -> None:
    """Put ``value`` (an array) into the global scope as ``target``'s variable
    (on the current device)."""
    global_scope()[target.name] = device.current.xp.array(value, dtype=target.dtype)
