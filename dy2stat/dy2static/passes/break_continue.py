"""`break` and `continue` -> flags.

    while test:                     break_0 = False
        a                           while not break_0 and test:
        if c:                  ->       continue_0 = False
            continue                    a
        b                               if c:
        if d:                               continue_0 = True
            break                       if not continue_0:
        e                                   b
    else:                                   if d:
        f                                       break_0 = True
                                            if not break_0:
                                                e
                                    if not break_0:
                                        f

A `for` loop gets its break flag as an EXTRA_TEST annotation (the control-flow pass hands it
to the loop helper). A loop's `else` moves after the loop. Attaches LOOP_FLAGS to each loop
with a jump (and CARRIED, from the liveness of the loop as written), GUARD to each
`if not flag:` made inside it, and LEAVES to each `if` of the function a branch of which
always leaves (jumps.mark_leaving). Requires: nothing (it runs the analyses).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import analysis, anno, templates, transformer
from dy2stat.dy2static.analysis import liveness
from dy2stat.dy2static.passes import jumps


class _Loops(transformer.Base):
    def visit_While(self, node: gast.While | gast.For):
        carried = frozenset(str(qn) for qn in liveness.loop_carried(node))
        self.generic_visit(node)  # inner loops first: their jumps are theirs
        flags = []
        if jumps.contains_in_body(node, gast.Continue):
            flag = self.new_name("continue")
            body = jumps.rewrite(node.body, gast.Continue, flag, _setter(flag), False,
                                 _guard(flag))
            node.body = templates.replace("flag = False", flag=flag) + body
            flags.append(flag)
        before, after = [], node.orelse
        if jumps.contains_in_body(node, gast.Break):
            flag = self.new_name("break")
            node.body = jumps.rewrite(node.body, gast.Break, flag, _setter(flag), False,
                                      _guard(flag))
            jumps.add_loop_test(node, flag)
            flags.append(flag)
            before = templates.replace("flag = False", flag=flag)
            if node.orelse:
                after = templates.replace("if not flag:\n    orelse", flag=flag,
                                          orelse=node.orelse)
        node.orelse = []
        if flags:
            anno.setanno(node, anno.Transform.LOOP_FLAGS, tuple(flags))
            anno.setanno(node, anno.Transform.CARRIED, carried)
        return [*before, node, *after]

    visit_For = visit_While


def _guard(flag: str):
    return lambda guard: anno.setanno(guard, anno.Transform.GUARD, flag)


def _setter(flag: str):
    def replace(jump: gast.stmt) -> list:
        new = templates.replace("flag = True", flag=flag)
        transformer.stamp(new, jump)
        return new

    return replace


def transform(node: gast.AST, ctx) -> gast.AST:
    analysis.resolve(node)
    jumps.mark_leaving(node)  # while the jumps are statements (for the return pass too)
    return _Loops(ctx).visit(node)
