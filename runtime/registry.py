"""The op registry: one record per op type.

An ``OpDef`` holds everything about an op in one place: its input and output
slots, attrs with defaults, dtype/shape inference, the kernel it runs and its
gradient rule.

Slots are named; a name ending in ``*`` holds a list of values (``concat``'s
inputs, ``split``'s outputs) and a name ending in ``?`` may be empty (``None``).

Kernels are called as ``kernel(xp, *inputs, **attrs)`` with inputs in slot
order (a ``*`` slot passes a list, an empty ``?`` slot passes ``None``). They
return one array for a single output slot, else a tuple in slot order.

Attrs are declared with defaults; their types (``AttrType``) follow from the
defaults (a bool default takes a bool, an int an int, a float any number, a
str a str) unless ``attr_types`` declares them: what a saved program may hold
in each attr is checked against these by the IR verifier.

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


@dataclass(frozen=True)
class AttrType:
    """The values an attr takes: ``accepts(value)``, said in words as ``what``
    (error messages read "expected {what}"). ``axes_of`` names an input slot
    when the value is an axis (or axes) of that input: each in range of its
    rank, none twice."""

    what: str
    accepts: Callable[[Any], bool]
    axes_of: str | None = None

    def __or__(self, other: AttrType) -> AttrType:
        return AttrType(f"{self.what} or {other.what}",
                        lambda v: self.accepts(v) or other.accepts(v))

    def of_input(self, slot: str) -> AttrType:
        """This type, for axes of the input ``slot``."""
        return AttrType(self.what, self.accepts, slot)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


def int_at_least(low: int) -> AttrType:
    return AttrType(f"an integer >= {low}", lambda v: _is_int(v) and v >= low)


def ints(low: int | None = None, length: int | None = None) -> AttrType:
    """A list (or tuple) of ints, each ``>= low``, of ``length`` items."""
    what = "a list of " + (f"{length} " if length is not None else "") + "ints" + (
        f" >= {low}" if low is not None else "")

    def accepts(value):
        return (isinstance(value, (list, tuple)) and (length is None or len(value) == length)
                and all(_is_int(v) and (low is None or v >= low) for v in value))

    return AttrType(what, accepts)


def number_in(low: float, high: float) -> AttrType:
    return AttrType(f"a number from {low} to {high}",
                    lambda v: _is_number(v) and low <= v <= high)


def one_of(*choices: str) -> AttrType:
    return AttrType(f"one of {', '.join(map(repr, choices))}", lambda v: v in choices
                    and isinstance(v, str))


BOOL = AttrType("true or false", lambda v: isinstance(v, (bool, np.bool_)))
INT = AttrType("an integer", _is_int)
NUMBER = AttrType("a number", _is_number)
STR = AttrType("a string", lambda v: isinstance(v, str))
NONE = AttrType("null", lambda v: v is None)
_DTYPE_NAMES = frozenset(str(d) for d in dtypes.ALL)
DTYPE = AttrType(f"a dtype name ({dtypes.names(dtypes.ALL)})",
                 lambda v: (isinstance(v, str) and v in _DTYPE_NAMES)
                 or (isinstance(v, np.dtype) and v in dtypes.ALL))
# an axis, a list of axes, or none (all axes); the range is checked by inference
AXES = NONE | INT | ints()
NAMES = AttrType("a list of variable names",
                 lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v))
# anything: the op's inference checks it (an index, a fused expression ...)
CHECKED_BY_INFER = AttrType("a value its inference accepts", lambda v: True)

_DEFAULT_TYPES = ((bool, BOOL), (int, INT), (float, NUMBER), (str, STR))


def attr_type_of(default) -> AttrType | None:
    """The type an attr's default implies (None for a None or list default)."""
    for kind, attr_type in _DEFAULT_TYPES:
        if isinstance(default, kind):
            return attr_type
    return None


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
    # attr name -> AttrType (every attr whose type its default does not imply)
    attr_types: dict = field(default_factory=dict)

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

    def attr_type(self, name: str) -> AttrType | None:
        """The declared type of attr ``name`` (None: undeclared, any value)."""
        return self.attr_types.get(name) or attr_type_of(self.attrs[name])

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
    attr_types=None,
) -> OpDef:
    """Declare an op; every op is declared exactly once."""
    if type in OPS:
        raise ValueError(f"op {type!r} is declared twice")
    unknown = set(attr_types or {}) - set(attrs or {})
    if unknown:
        raise ValueError(f"op {type!r}: attr_types names attrs it does not have: {unknown}")
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
        attr_types=dict(attr_types or {}),
    )
    OPS[type] = op
    return op


def get_op(type: str) -> OpDef:
    try:
        return OPS[type]
    except KeyError:
        raise ValueError(f"unknown op type {type!r}") from None
