"""The op registry: one record per op type.

An ``OpDef`` holds everything about an op in one place: its input and output
slots, attrs with defaults, dtype/shape inference, the kernel it runs and its
gradient rule.

Slots are named; a name ending in ``*`` holds a list of values (``concat``'s
inputs, ``split``'s outputs) and a name ending in ``?`` may be empty (``None``).

Kernels are called as ``kernel(xp, *inputs, **attrs)`` with inputs in slot
order (a ``*`` slot passes a list, an empty ``?`` slot passes ``None``). They
return one array for a single output slot, else a tuple in slot order.

Inference is ``infer(*metas, **attrs) -> Meta | tuple`` in the same shape,
with ``-1`` for unknown dims. It raises ``ValueError``/``TypeError`` naming
the op and the offending shapes or dtypes.

Gradient rules are ``grad(e, ins, outs, douts, attrs, need) -> list`` with one
entry per input slot (``None`` where ``need`` is False or the input has no
gradient). ``e(type, *inputs, **attrs)`` emits an op and returns its
output(s); values are opaque (eager Tensors or static variables), and Python
scalars may stand for constant inputs. Because rules only talk to the
emitter, one rule serves eager backward, double grad and static backward.
A missing output gradient in ``douts`` is passed as zeros by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from dy2stat.runtime import dtypes


class Meta(NamedTuple):
    """What inference knows of a value: a shape (``-1`` unknown) and a dtype."""

    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class Slot:
    name: str
    variadic: bool = False
    optional: bool = False

    @staticmethod
    def parse(spec: str) -> Slot:
        if spec.endswith("*"):
            return Slot(spec[:-1], variadic=True)
        if spec.endswith("?"):
            return Slot(spec[:-1], optional=True)
        return Slot(spec)


@dataclass
class OpDef:
    type: str
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    attrs: dict[str, Any]
    kernel: Callable
    infer: Callable
    grad: Callable | None = None
    # Slots that never receive a gradient (indices, labels, shape references).
    no_grad: frozenset = field(default_factory=frozenset)
    # dtypes the first input may have (None: any).
    dtypes: frozenset | None = None
    # Input slots whose dtypes are promoted to one common dtype first.
    promote: tuple = ()
    # Elementwise ops (with broadcasting) may be fused by the fusion pass.
    elementwise: bool = False
    # Random ops draw from the global generator: never folded or deduplicated.
    random: bool = False
    doc: str = ""

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.outputs)

    def full_attrs(self, attrs: dict) -> dict:
        """Defaults overlaid with ``attrs``; an unknown attr is an error."""
        for name in attrs:
            if name not in self.attrs:
                known = ", ".join(self.attrs) or "none"
                raise TypeError(f"{self.type}: unknown attr {name!r} (known: {known})")
        return {**self.attrs, **attrs}

    def check_dtype(self, dtype) -> None:
        if self.dtypes is not None and dtype not in self.dtypes:
            raise TypeError(
                f"{self.type}: unsupported dtype {dtype} (supported: {dtypes.names(self.dtypes)})"
            )

    def differentiable(self) -> bool:
        return self.grad is not None


OPS: dict[str, OpDef] = {}


def defop(
    type: str,
    *,
    inputs=("X",),
    outputs=("Out",),
    attrs=None,
    kernel: Callable,
    infer: Callable,
    grad: Callable | None = None,
    no_grad=(),
    dtypes=None,
    promote=(),
    elementwise=False,
    random=False,
    doc="",
) -> OpDef:
    """Declare an op; every op is declared exactly once."""
    if type in OPS:
        raise ValueError(f"op {type!r} is declared twice")
    op = OpDef(
        type=type,
        inputs=tuple(Slot.parse(s) for s in inputs),
        outputs=tuple(Slot.parse(s) for s in outputs),
        attrs=dict(attrs or {}),
        kernel=kernel,
        infer=infer,
        grad=grad,
        no_grad=frozenset(no_grad),
        dtypes=frozenset(dtypes) if dtypes is not None else None,
        promote=tuple(promote),
        elementwise=elementwise,
        random=random,
        doc=doc,
    )
    OPS[type] = op
    return op


def get_op(type: str) -> OpDef:
    try:
        return OPS[type]
    except KeyError:
        raise ValueError(f"unknown op type {type!r}") from None
