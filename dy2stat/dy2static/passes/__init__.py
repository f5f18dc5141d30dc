"""The transpiler's passes and THE order they run in.

Each pass is a module with one entry point, `transform(node, ctx) -> node`, over the gast
tree of one function. Canonicalize first, then turn control flow into helper calls, then
calls; the fence runs before anything changes.
"""

from dy2stat.dy2static.passes import (
    attribute_reads,
    break_continue,
    builtin_calls,
    call_trees,
    conditional_expressions,
    control_flow,
    fence,
    logical_expressions,
    nonlocal_bindings,
    return_statements,
    subscripts,
)

PASSES = (
    # Reject unsupported syntax (yield, async, return in finally, ...) up front.
    fence,
    # break/continue -> flags folded into the loop tests; a loop's else moves after it.
    break_continue,
    # Early returns -> do_return/retval flags and one `return` at the end.
    return_statements,
    # and/or/not, chained comparisons -> lazy helper calls (short-circuit kept).
    logical_expressions,
    # a if p else b -> convert_ifelse(p, lambda: a, lambda: b).
    conditional_expressions,
    # print/assert/len/int/float/bool/x.shape/range/enumerate/zip/super() -> helpers.
    builtin_calls,
    # if/while/for -> convert_ifelse/convert_while_loop/convert_for_loop with closures;
    # reads the liveness and reaching-definitions annotations (it runs the analyses).
    control_flow,
    # scales[i] -> convert_getitem(scales, i): a Python list indexed by a traced tensor.
    subscripts,
    # self.threshold -> read_attr(self, 'threshold'): what a trace reads is recorded;
    # private names mangled as in the class body.
    attribute_reads,
    # f(x) -> convert_call(f)(x): user functions and Layers are converted when called.
    call_trees,
    # Bind every name a generated body declares nonlocal.
    nonlocal_bindings,
)

__all__ = ["PASSES"]
