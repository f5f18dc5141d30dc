"""Static analyses: they only annotate nodes (see anno.Static); passes read the annotations."""

from __future__ import annotations

import gast

from dy2stat.dy2static import cfg
from dy2stat.dy2static.analysis import activity, liveness, reaching_definitions


def resolve(node: gast.AST) -> gast.AST:
    """Run every analysis on `node` (a function or module): activity, liveness, definitions."""
    activity.resolve(node)
    graphs = cfg.build_all(node)
    liveness.resolve(node, graphs)
    reaching_definitions.resolve(node, graphs)
    return node
