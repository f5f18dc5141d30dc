"""The lowering table: one rule per (op, target), registered beside each other.

A rule says how one op becomes code of one target (``"cpu"``: loop code
compiled by Numba, see ``lower.cpu``; a ``"cuda"`` target registers its own
rules the same way). ``rule_for(op, target, rounding)`` looks one up; an op
without a rule for a target keeps a region of that target from forming around
it (it stays a kernel call of the interpreted plan), rather than being
lowered by special cases.

Kinds of rules:

- ``elementwise``: ``emit(args, step) -> str``, the scalar expression of one
  element from its operands' (``step`` holds the op's attrs and dtypes).
  The region's code generator places it in a loop over the broadcast
  shape, fusing chains of such ops into one loop;
- ``op``: ``emit(ctx, node)``, statements for a whole op (reductions,
  products, constants), written through the code generator ``ctx``;
- ``control``: a ``cond`` or ``while``, whose blocks ``ctx`` lowers in turn.

How a rule rounds (``rounding``):

- ``"exact"``: the interpreted plan's bits (elementwise IEEE arithmetic,
  comparisons and selections; sums in NumPy's pairwise order);
- ``"order"``: sums added in another order than NumPy's or BLAS's (small
  products, sums along leading axes), within the rounding of a different
  summation order. The tier uses them unless the flag ``native_exact`` is on
  (docs/performance.md);
- ``"library"``: transcendental functions from LLVM's math library, a few
  units in the last place from NumPy's. Used only when the tier is asked to
  be ``relaxed`` (the flag ``native_relaxed``), as elementwise results are
  otherwise bit for bit.

A lowering allows rules up to one of these (``"order"`` unless the flags
``native_exact`` or ``native_relaxed`` say otherwise); an ``accepts`` check
sees it too, for an op whose rounding depends on its use (a sum along the
last axis adds in NumPy's order, along the first in index order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LOWERINGS", "ROUNDINGS", "Rule", "allows", "register_lowering", "rule_for"]


@dataclass(frozen=True)
class Rule:
    op: str
    target: str
    kind: str  # "elementwise", "op" or "control"
    emit: Callable
    rounding: str = "exact"  # "exact", "order" or "library" (see above)
    accepts: Callable | None = None  # accepts(op, var_of, rounding) -> bool: this use lowers


ROUNDINGS = ("exact", "order", "library")
LOWERINGS: dict[tuple[str, str], Rule] = {}


def register_lowering(op: str, target: str, kind: str, rounding: str = "exact",
                      accepts=None):
    """Decorator: ``emit`` is how ``op`` lowers on ``target``."""

    def register(emit):
        key = (op, target)
        if rounding not in ROUNDINGS:
            raise ValueError(f"rounding {rounding!r} is not one of {ROUNDINGS}")
        if key in LOWERINGS:
            raise ValueError(f"op {op!r} has two lowerings for target {target!r}")
        LOWERINGS[key] = Rule(op, target, kind, emit, rounding, accepts)
        return emit

    return register


def allows(rounding: str, needed: str) -> bool:
    """Whether a lowering allowing ``rounding`` may use a rule that rounds as ``needed``."""
    return ROUNDINGS.index(needed) <= ROUNDINGS.index(rounding)


def rule_for(op: str, target: str, rounding: str = "order") -> Rule | None:
    """The rule lowering ``op`` on ``target`` within ``rounding`` (None: it does not
    lower there)."""
    rule = LOWERINGS.get((op, target))
    if rule is None or not allows(rounding, rule.rounding):
        return None
    return rule
