"""The static ``Variable``: a symbolic value of a block with the Tensor surface."""

from __future__ import annotations

from dy2stat.mode import state
from dy2stat.runtime import build
from dy2stat.runtime.ir import Block, Var
from dy2stat.runtime.registry import OPS
from dy2stat.static import framework


class VariableBoolError(TypeError):
    """A static Variable used as a Python bool: its value is known only when the program runs."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name  # the Variable's


def _numpy_call_error(call: str, name: str, variable: str) -> str:
    """What to say when NumPy is called on a static value."""
    op = {"true_divide": "divide", "absolute": "abs", "negative": "neg", "power": "pow",
          "amax": "max", "amin": "min"}.get(name, name)
    instead = (f"use d2s.{op} instead" if op in OPS else
               "use the d2s operation that does it instead")
    return (f"{call} cannot compute a static Variable ({variable}): NumPy needs values, which "
            f"a program has only when it runs; {instead}")


class Variable:
    """A value of a static program; its operators append ops instead of computing."""

    __slots__ = ("block", "name", "__weakref__")
    is_static = True

    def __init__(self, block: Block, name: str):
        self.block = block
        self.name = name

    @property
    def desc(self) -> Var:
        """The variable's description in its block (name, shape, dtype, flags)."""
        return self.block.var(self.name)

    @property
    def shape(self) -> list:
        """The dims, a list of ints; -1 for a size known only when the program runs."""
        return list(self.desc.shape)

    @property
    def dtype(self):
        """The NumPy dtype of the elements."""
        return self.desc.dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.desc.shape)

    @property
    def persistable(self) -> bool:
        """Whether the value outlives a run (parameters and buffers)."""
        return self.desc.persistable

    @property
    def stop_gradient(self) -> bool:
        """Whether gradients stop here (settable)."""
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, value: bool) -> None:
        self.desc.stop_gradient = bool(value)

    def __bool__(self):
        raise VariableBoolError(
            f"a static Variable ({self.name}) cannot be used as a Python bool: its value is "
            "only known when the program runs. Convert the function with @d2s.jit.to_static, "
            "or use d2s.static.nn.cond / d2s.static.nn.while_loop", self.name
        )

    def __float__(self):
        raise TypeError(
            f"a static Variable ({self.name}) is used where Python needs its value (a Python "
            "number, a list index, a range bound): it has none until the program runs. Keep "
            "the computation in tensors (d2s ops, a tensor index), or leave this code "
            "unconverted (d2s.jit.not_to_static)")

    __int__ = __index__ = __float__

    def numpy(self):
        """In converted code: the value itself, detached as NumPy's value is from the
        gradient (``x.numpy() > 0`` stays a tensor comparison, as the eager code's NumPy
        value would compare). In a static program built by hand: an error (fetch the
        value with ``Executor.run``)."""
        if state.recorder is not None:
            return self.detach()
        raise TypeError(
            f"a static Variable ({self.name}) has no value; fetch it with Executor.run"
        )

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            f"a static Variable ({self.name}) cannot become a NumPy array: it has no value "
            "until the program runs; use d2s operations on it")

    # (NumPy ufuncs come here too, from the shared surface's ``__array_ufunc__``.)
    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(_numpy_call_error(f"np.{func.__name__}", func.__name__, self.name))

    def read(self) -> Variable:
        """This value as an op reads it: itself. (A value that a loop may have left
        unassigned first has the program check, when it runs, that it was assigned.)"""
        return self

    def _assign(self, make) -> None:
        """Rebind to ``make(old)``: how ``v[i] = x`` works on a symbolic value."""
        new = make(Variable(self.block, self.read().name))
        self.block, self.name = new.block, new.name

    def detach(self) -> Variable:
        """A copy that gradients do not flow through."""
        out = build.append(self.block, "assign", [self.read().desc], {})
        framework.scoped(self.block.ops[-1])
        out.stop_gradient = True
        return Variable(self.block, out.name)

    def __repr__(self) -> str:
        return f"Variable({self.desc})"
