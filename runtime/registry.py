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
the op and the offending shapes or dtypes. The dtypes an input slot takes are
declared (``dtypes=``) rather than checked inside inference: ``OpDef.infer``
checks them first, and the eager dispatcher checks the same declaration
before it runs the kernel, so both modes refuse the same inputs. An op whose
dtype rules depend on its attrs or relate several inputs says
``eager_infer=True``: eager mode then runs its inference too (as it does for
every op without inputs, whose attrs decide everything).

The dtypes inference gives are the dtypes the kernel returns, for every
input dtype inference accepts (``tests/ops/test_dtypes.py`` walks the
registry to check it). Where NumPy would promote (a sum of uint8, a float16
value with float32 parameters), the kernel asks for the inferred dtype or
casts its result to it.

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


class InputDtypeError(TypeError):
    """An input whose dtype its slot does not take: input ``index`` of slot ``slot``."""

    def __init__(self, message: str, slot: str = "", index: int = 0):
        super().__init__(message)
        self.slot, self.index = slot, index

    def __reduce__(self):
        return type(self), (str(self), self.slot, self.index)


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
    infer: Callable  # checks input_dtypes, then runs the op's inference rule
    grad: Callable | None = None
    # Slots that never receive a gradient (indices, labels, shape references).
    no_grad: frozenset = field(default_factory=frozenset)
    # input slot name -> the dtypes its tensors may have (a slot not named: any)
    input_dtypes: dict = field(default_factory=dict)
    # Inference runs in eager mode too (dtype rules that depend on attrs or on
    # several inputs together, which input_dtypes cannot say).
    eager_infer: bool = False
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

    @property
    def dtypes(self) -> frozenset | None:
        """The dtypes the first input slot takes (None: any)."""
        return self.input_dtypes.get(self.inputs[0].name) if self.inputs else None

    def check_dtypes(self, values) -> None:
        """Raise InputDtypeError when a value (a Meta or an array, in slot order; lists
        for variadic slots) has a dtype its slot does not take. A Python number has
        the dtype it becomes in a program: a promoted one its tensors' (checked
        there), another its own (``dtypes.scalar_dtype``)."""
        for i, slot, variadic, promoted, allowed in self._dtype_checks:
            value = values[i] if i < len(values) else None
            for j, v in enumerate((value or ()) if variadic else (value,)):
                if type(v) in _PYTHON_NUMBERS:
                    dtype = None if promoted else dtypes.scalar_dtype(v)
                else:
                    dtype = getattr(v, "dtype", None)
                if dtype is not None and dtype not in allowed:
                    raise InputDtypeError(f"{self.type}: {slot} must be "
                                          f"{dtypes.describe(allowed)}, got {dtype}", slot, j)

    def __post_init__(self):
        self._dtype_checks = tuple((i, slot.name, slot.variadic, i in self.promote,
                                    self.input_dtypes[slot.name])
                                   for i, slot in enumerate(self.inputs)
                                   if slot.name in self.input_dtypes)
        rule = self.infer

        def infer(*metas, **attrs):
            self.check_dtypes(metas)
            return rule(*metas, **attrs)

        self.infer = infer

    def differentiable(self) -> bool:
        return self.grad is not None


_PYTHON_NUMBERS = (bool, int, float)
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
    eager_infer=False,
    promote=(),
    elementwise=False,
    random=False,
    doc="",
    attr_types=None,
) -> OpDef:
    """Declare an op; every op is declared exactly once.

    ``dtypes`` is what the input slots take: one set (for the first slot, and for
    every promoted slot: their common dtype) or a dict slot name -> set; a slot not
    named takes any dtype."""
    if type in OPS:
        raise ValueError(f"op {type!r} is declared twice")
    unknown = set(attr_types or {}) - set(attrs or {})
    if unknown:
        raise ValueError(f"op {type!r}: attr_types names attrs it does not have: {unknown}")
    slots = tuple(Slot.parse(s) for s in inputs)
    if dtypes is not None and not isinstance(dtypes, dict):
        dtypes = {slots[k].name: dtypes for k in (0, *promote)}
    unknown = set(dtypes or {}) - {s.name for s in slots}
    if unknown:
        raise ValueError(f"op {type!r}: dtypes names slots it does not have: {unknown}")
    op = OpDef(
        type=type,
        inputs=slots,
        outputs=tuple(Slot.parse(s) for s in outputs),
        attrs=dict(attrs or {}),
        kernel=kernel,
        infer=infer,
        grad=grad,
        no_grad=frozenset(no_grad),
        input_dtypes={k: frozenset(v) for k, v in (dtypes or {}).items()},
        # Without inputs only attrs decide, and checking them costs less than the array.
        eager_infer=eager_infer or not slots,
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
