"""Custom autograd functions: ``PyLayer`` (``d2s.autograd.PyLayer``).

A subclass defines ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` as static
methods and is called as ``MyFn.apply(*args)``. The forward runs without recording
gradients; its outputs then go through one ``py_layer`` op whose gradient rule is the
user's backward. The op is what the tape records eagerly, and what a static program
holds after the forward's own ops, so the one mechanism serves eager backward, double
grad (the backward's ops are recorded when ``create_graph=True``) and converted code:
tracing runs the forward into the program, and the program's backward calls the
user's backward with the program's values (its ops become the gradient ops).

The op's inputs are the tensor arguments (``X``), the forward's outputs (``Y``: the op
passes them through) and the tensors saved for backward (``Saved``, so that a program
keeps them); only ``X`` receives gradients.
"""

from __future__ import annotations

import copy
import itertools

from dy2stat.autograd import no_grad
from dy2stat.dispatch import apply
from dy2stat.dy2static import convert_call_func
from dy2stat.mode import state
from dy2stat.runtime.registry import INT, NONE, Meta, defop
from dy2stat.static import framework
from dy2stat.static.builder import captured_tensors
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

__all__ = ["PyLayer", "PyLayerContext"]


class PyLayerContext:
    """What ``forward`` hands to ``backward``: tensors (``save_for_backward``) and any
    attribute set on it."""

    def __init__(self):
        self._saved = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` for backward (read them with ``saved_tensor()``)."""
        self._saved = tensors

    def saved_tensor(self) -> tuple:
        """The tensors given to ``save_for_backward``."""
        return self._saved


class PyLayer:
    """Base of custom autograd functions (as Paddle's ``PyLayer`` and
    ``torch.autograd.Function``).

    ``forward(ctx, *args, **kwargs)`` returns a tensor or a tuple of tensors;
    ``backward(ctx, *grads)`` gets one gradient per output and returns one gradient
    (or None) per tensor argument of ``forward``, in order (positional ones, then
    keyword ones). Both are static methods. In converted code the backward computes
    from its arguments and the tensors saved with ``ctx.save_for_backward``.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """The computation: ``forward(ctx, *args, **kwargs)`` returns a tensor or a tuple of
        tensors (subclasses define it)."""
        raise NotImplementedError("a PyLayer must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        """The gradient: ``backward(ctx, *grads)`` returns one gradient (or None) per tensor
        argument of ``forward`` (subclasses define it)."""
        raise NotImplementedError("a PyLayer must define backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on ``args`` and return its outputs, whose gradient is
        ``backward`` (eagerly, and in converted code and static programs)."""
        ctx = PyLayerContext()
        static = state.static or any(getattr(a, "is_static", False) for a in args)
        forward = convert_call_func.convert_call(cls.forward) if static else cls.forward
        with no_grad():
            result = forward(ctx, *args, **kwargs)
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        for i, out in enumerate(outputs):
            if not _is_tensor(out):
                raise TypeError(f"{cls.__name__}.forward must return tensors; output {i} is "
                                f"a {type(out).__name__}")
        inputs = [a for a in (*args, *kwargs.values()) if _is_tensor(a)]
        saved = [t for t in ctx.saved_tensor() if _is_tensor(t)]
        context = _remember(cls, ctx) if static else (cls, ctx)
        outs = apply("py_layer", inputs, outputs, saved, function=cls.__qualname__,
                     context=context)
        return tuple(outs) if isinstance(result, (tuple, list)) else outs[0]


def _is_tensor(value) -> bool:
    return isinstance(value, Tensor) or getattr(value, "is_static", False)


# Static programs refer to their PyLayer call by a number (attrs are plain data); the
# class and the context of each traced call are kept for the program's backward.
_traced: dict[int, tuple] = {}
_keys = itertools.count()


def _remember(cls, ctx) -> int:
    key = next(_keys)
    _traced[key] = (cls, ctx)
    return key


def _grad(e, ins, outs, douts, attrs, need):
    """The user's backward, on eager tensors or on the program's variables."""
    xs, _, saved = ins
    context = attrs["context"]
    if isinstance(context, int):
        if context not in _traced:
            raise RuntimeError(
                f"the program's {attrs['function']} (a PyLayer) has no backward in this "
                "process: it was traced in another one. Differentiate it where it was "
                "converted, or use the program for inference only")
        return _static_grad(e, xs, saved, douts[0], attrs, *_traced[context])
    cls, ctx = context
    grads = cls.backward(ctx, *douts[0])
    return [_checked(cls, grads, xs, need[0]), None, None]


def _static_grad(e, xs, saved, douts, attrs, cls, ctx):
    """Run the backward as code appending to the gradient's block: the program's
    values become Variables, the saved tensors are those the op holds."""
    block = e.block
    wrap = [Variable(block, v.name) for v in xs]
    ctx = copy.copy(ctx)
    ctx._saved = tuple(Variable(block, v.name) for v in saved)
    captured = captured_tensors(block.program)
    before = set(captured)
    with framework.program_guard(block.program), framework.block_guard(block), \
            framework.static_guard():
        backward = convert_call_func.convert_call(cls.backward)
        grads = backward(ctx, *[Variable(block, g.name) for g in douts])
        grads = _checked(cls, grads, wrap, True)
    if set(captured) - before:
        raise RuntimeError(
            f"{cls.__name__}.backward reads a tensor that is neither one of its arguments "
            "nor saved for it; in converted code the backward can only compute from those. "
            "Save the tensor in forward with ctx.save_for_backward(...)")
    return [[None if g is None else g.read().desc for g in grads], None, None]


def _checked(cls, grads, xs, needed: bool):
    """One gradient (or None) per tensor input, with that input's shape."""
    grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
    if len(grads) != len(xs):
        raise ValueError(f"{cls.__name__}.backward returned {len(grads)} gradients for "
                         f"{len(xs)} tensor inputs of forward")
    for i, (g, x) in enumerate(zip(grads, xs)):
        if g is None:
            continue
        if not _is_tensor(g):
            raise TypeError(f"{cls.__name__}.backward: gradient {i} is a "
                            f"{type(g).__name__}, not a tensor")
        if -1 not in (*g.shape, *x.shape) and list(g.shape) != list(x.shape):
            raise ValueError(f"{cls.__name__}.backward: gradient {i} has shape "
                             f"{list(g.shape)} but input {i} has {list(x.shape)}")
    return grads if needed else [None] * len(xs)


def _infer(xs, ys, saved, function="", context=None):
    return [Meta(y.shape, y.dtype) for y in ys]


defop(
    "py_layer",
    inputs=("X*", "Y*", "Saved*"),
    outputs=("Out*",),
    attrs={"function": "", "context": None},
    # in a program: the key of the traced call's context in this process (or none)
    attr_types={"context": NONE | INT},
    kernel=lambda xp, xs, ys, saved, function="", context=None: list(ys),
    infer=_infer,
    grad=_grad,
    no_grad=("Y", "Saved"),
    doc="A PyLayer call: passes Y (the forward's outputs) through; its gradient rule is "
        "the PyLayer's backward, giving gradients to X (the tensor arguments).",
)
