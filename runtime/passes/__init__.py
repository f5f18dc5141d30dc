"""Graph passes: each is ``pass(program, keep) -> Program``, a new program.

``keep`` names the values that must stay visible (what callers fetch). The
input program is never changed. ``PASSES`` lists them by name;
``run_passes`` applies several in order; ``optimize`` applies the ones every
plan's program goes through (``pipeline``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dy2stat.runtime.ir import Program
from dy2stat.runtime.passes.constant_folding import fold_constants
from dy2stat.runtime.passes.cse import eliminate_common_subexpressions
from dy2stat.runtime.passes.dead_code import eliminate_dead_code
from dy2stat.runtime.passes.forward_assigns import forward_assigns
from dy2stat.runtime.passes.fusion import fuse_elementwise
from dy2stat.runtime.passes.layout import batch_minor_layout
from dy2stat.runtime.passes.loop_invariants import hoist_loop_invariants
from dy2stat.runtime.passes.multi_tensor_adam import multi_tensor_adam
from dy2stat.runtime.passes.pipeline import optimize
from dy2stat.runtime.passes.pool_before_relu import pool_before_relu, pool_before_relu_in_place
from dy2stat.runtime.passes.share_conv_columns import share_conv_columns
from dy2stat.runtime.prune import dead_code_elimination

__all__ = ["PASSES", "batch_minor_layout", "dead_code_elimination",
           "eliminate_common_subexpressions", "eliminate_dead_code", "fold_constants",
           "forward_assigns", "fuse_elementwise", "hoist_loop_invariants",
           "multi_tensor_adam", "optimize",
           "pool_before_relu", "pool_before_relu_in_place", "run_passes", "share_conv_columns"]

PASSES: dict[str, Callable[..., Program]] = {
    "fold_constants": fold_constants,
    "eliminate_common_subexpressions": eliminate_common_subexpressions,
    "dead_code_elimination": dead_code_elimination,
    "eliminate_dead_code": eliminate_dead_code,
    "hoist_loop_invariants": hoist_loop_invariants,
    "forward_assigns": forward_assigns,
    "multi_tensor_adam": multi_tensor_adam,
    "fuse_elementwise": fuse_elementwise,
    "pool_before_relu": pool_before_relu,
    "batch_minor_layout": batch_minor_layout,
    "share_conv_columns": share_conv_columns,
}


def run_passes(program: Program, names: Iterable[str], keep=()) -> Program:
    """``program`` after the passes ``names``, in order."""
    keep = list(keep)
    for name in names:
        try:
            fn = PASSES[name]
        except KeyError:
            raise ValueError(f"unknown pass {name!r} (known: {', '.join(PASSES)})") from None
        program = fn(program, keep)
    return program
