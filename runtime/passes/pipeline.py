"""What every plan's program goes through before it is compiled: ``optimize``.

The passes, in order (each is a pass of this package, with its own tests):

1. ``eliminate_dead_code``: the ops no fetch needs (the transpiler's first
   test of a ``while`` condition, say), in every block;
2. ``fold_constants``: computations on constants done now, sub-blocks
   included (what stays is folded again by the plan: see ``codegen.constants``);
3. ``eliminate_common_subexpressions``: an op computed twice in a block, once;
4. ``hoist_loop_invariants``: what a loop computes the same in every
   iteration, once before it;
5. ``eliminate_dead_code`` again: what folding and merging left unread;
6. ``forward_assigns``: a copy of a value nothing else reads (a gradient's
   ``@GRAD`` name, an update written into a parameter) becomes the value itself;
7. ``multi_tensor_adam``: consecutive Adam updates of many parameters, one op
   over flat arrays (after 6, which makes them consecutive).

Each keeps what the program computes bit for bit (each pass's tests check
it). ``optimize`` returns a new program; the input is not changed.

Elementwise fusion is not among them: on NumPy the plan's in-place ufunc
calls already touch each buffer once, so a fused chain's evaluation would
only add a call; the native tier fuses chains into one loop where it
compiles a region (``runtime.lower``). On GPU arrays one kernel per chain
would pay, and ``fuse_elementwise`` can be run for that (deployment does).
"""

from __future__ import annotations

from dy2stat.runtime.ir import Program
from dy2stat.runtime.passes.constant_folding import fold_constants
from dy2stat.runtime.passes.cse import eliminate_common_subexpressions
from dy2stat.runtime.passes.dead_code import eliminate_dead_code
from dy2stat.runtime.passes.forward_assigns import forward_assigns
from dy2stat.runtime.passes.loop_invariants import hoist_loop_invariants
from dy2stat.runtime.passes.multi_tensor_adam import multi_tensor_adam

__all__ = ["PLAN_PASSES", "optimize"]

PLAN_PASSES = (eliminate_dead_code, fold_constants, eliminate_common_subexpressions,
               hoist_loop_invariants, eliminate_dead_code, forward_assigns, multi_tensor_adam)


def optimize(program: Program, fetch_names) -> Program:
    """``program`` rewritten by the plan passes for ``fetch_names`` (see the module doc)."""
    keep = list(fetch_names)
    for run in PLAN_PASSES:
        program = run(program, keep)
    return program
