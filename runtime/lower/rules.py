"""The lowering table: one rule per (op, target), registered beside each other.

A rule says how one op becomes code of one target (``"cpu"``: loop code
compiled by Numba, see ``lower.cpu``; a ``"cuda"`` target registers its own
rules the same way). ``rule_for(op, target, relaxed)`` looks one up; an op
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

``exact`` rules give the interpreted plan's bits (elementwise IEEE
arithmetic, comparisons and selections; sums in NumPy's pairwise order).
The others (transcendental functions from LLVM's math library, products
and sums in another order) are used only when the tier is asked to be
``relaxed`` (the flag ``native_relaxed``): they round differently, within a
few units in the last place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LOWERINGS", "Rule", "register_lowering", "rule_for"]


@dataclass(frozen=True)
class Rule:
    op: str
    target: str
    kind: str  # "elementwise", "op" or "control"
    emit: Callable
    exact: bool = True  # the interpreted plan's bits
    accepts: Callable | None = None  # accepts(op, var_of) -> bool: this use of the op lowers


LOWERINGS: dict[tuple[str, str], Rule] = {}


def register_lowering(op: str, target: str, kind: str, exact: bool = True, accepts=None):
    """Decorator: ``emit`` is how ``op`` lowers on ``target``."""

    def register(emit):
        key = (op, target)
        if key in LOWERINGS:
            raise ValueError(f"op {op!r} has two lowerings for target {target!r}")
        LOWERINGS[key] = Rule(op, target, kind, emit, exact, accepts)
        return emit

    return register


def rule_for(op: str, target: str, relaxed: bool = False) -> Rule | None:
    """The rule lowering ``op`` on ``target`` (None: it does not lower there)."""
    rule = LOWERINGS.get((op, target))
    if rule is None or (not rule.exact and not relaxed):
        return None
    return rule
