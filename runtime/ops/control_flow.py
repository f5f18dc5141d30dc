"""The functional control-flow ops: ``cond`` and ``while`` (and ``while_grad``).

They own sub-blocks (attrs ending in ``_block``). Values a sub-block reads
from outside are explicit inputs (slot ``Input``); the names a sub-block
binds on entry (its arguments) are listed in attrs and declared as vars of
that sub-block without a defining op.

cond
    inputs  Cond=[pred (bool, one element)], Input=[captured outer names]
    outputs Out=[one per value live after the branch]
    attrs   true_block, false_block: block indices
            true_outs, false_outs: names (visible in each branch) yielded as Out
while
    inputs  X=[initial carried values], Input=[captured outer names]
    outputs Out=[final carried values], Carries=[] or [stack] (see below)
    attrs   cond_block: reads cond_args (carried), yields cond_out (bool)
            body_block: reads body_args (carried), yields body_outs
            cond_args, cond_out, body_args, body_outs
    When the Carries output is present the loop pushes each iteration's
    carried values onto it (a stack the backward loop pops), followed by the
    body values named in ``saved`` (those the gradient reads), so the
    backward loop need not recompute them.
while_grad
    inputs  Carries=[stack], Input=[captured], DOut=[grads of Out]
    outputs DX=[grads of X], DInput=[grads of the float captured inputs]
    attrs   body_block, body_args, saved (as in the forward while: each stack
            entry binds body_args then saved; the body ops that define saved
            values are not run again), grad_block (runs after body_block in
            the same scope; reads grad_args bound to the output gradients of
            one iteration, yields grad_outs for the carried inputs and
            grad_inputs for the captured ones).

Executors run these ops themselves (the kernels here are never called);
inference of their outputs is done when the op is built, from the branches.
"""

from dy2stat.runtime.registry import NAMES, defop


def _built_by_frontend(*_, **__):
    raise RuntimeError("control-flow ops are inferred when built and run by the executor")


defop(
    "cond",
    inputs=("Cond", "Input*"),
    outputs=("Out*",),
    attrs={"true_block": -1, "false_block": -1, "true_outs": [], "false_outs": []},
    attr_types={"true_outs": NAMES, "false_outs": NAMES},
    kernel=_built_by_frontend,
    infer=_built_by_frontend,
    no_grad=("Cond",),
    doc="if Cond: run true_block else false_block; Out = the branch's outs.",
)
defop(
    "while",
    inputs=("X*", "Input*"),
    outputs=("Out*", "Carries*"),
    attrs={"cond_block": -1, "body_block": -1, "cond_args": [], "cond_out": "",
           "body_args": [], "body_outs": [], "saved": []},
    attr_types={"cond_args": NAMES, "body_args": NAMES, "body_outs": NAMES, "saved": NAMES},
    kernel=_built_by_frontend,
    infer=_built_by_frontend,
    doc="while cond_block(carried): carried = body_block(carried).",
)
defop(
    "while_grad",
    inputs=("Carries*", "Input*", "DOut*"),
    outputs=("DX*", "DInput*"),
    attrs={"body_block": -1, "body_args": [], "saved": [], "grad_block": -1,
           "grad_args": [], "grad_outs": [], "grad_inputs": []},
    attr_types={"body_args": NAMES, "saved": NAMES, "grad_args": NAMES, "grad_outs": NAMES,
                "grad_inputs": NAMES},
    kernel=_built_by_frontend,
    infer=_built_by_frontend,
    doc="Reverse pass of a while loop over its saved carries.",
)
CONTROL_FLOW = frozenset({"cond", "while", "while_grad"})


def attr_names(op) -> set:
    """Variable names a control-flow op refers to in its attrs (outs, args, saved ...)."""
    if op.type not in CONTROL_FLOW:
        return set()
    names = set()
    for key, value in op.attrs.items():
        if key.endswith("_block"):
            continue
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, (list, tuple)):
            names.update(v for v in value if isinstance(v, str))
    return names
