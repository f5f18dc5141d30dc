"""gather_tree: the full sequences of a beam search from its per-step choices."""

from __future__ import annotations

import numpy as np

from dy2stat import creation, ops
from dy2stat.nn.functional.common import constant_like
from dy2stat.static.control_flow import while_loop


def gather_tree(ids, parents):
    """Back-trace beam search: ``ids`` and ``parents`` are [max_time, batch, beam]
    (step ``t`` chose token ``ids[t, b, k]`` extending beam ``parents[t, b, k]`` of step
    ``t - 1``); returns, for each final beam, its tokens at every step.

    Works eagerly and in static programs; when the number of steps is known only at run
    time (a decoding loop that stops early) the walk back is a ``while`` op.
    """
    if len(ids.shape) != 3 or list(ids.shape) != list(parents.shape):
        raise ValueError(f"gather_tree: ids and parents must both be [max_time, batch, beam], "
                         f"got shapes {list(ids.shape)} and {list(parents.shape)}")
    beam = ids.shape[2]
    if beam < 0:
        raise ValueError("gather_tree: the beam size (the last dim) must be known")
    if ids.shape[0] >= 0:  # known: walk back in Python
        out = [ids[-1]]
        parent = parents[-1]
        for t in range(ids.shape[0] - 2, -1, -1):
            out.append(_pick(ids[t], parent, beam))
            parent = _pick(parents[t], parent, beam)
        return ops.stack(out[::-1])
    out = creation.zeros_like(ids)
    out[-1] = ids[-1]

    def more(t, parent, out):
        return ops.greater_equal(t, 0)

    def back(t, parent, out):
        out[t] = _pick(ids[t], parent, beam)
        return [ops.subtract(t, 1), _pick(parents[t], parent, beam), out]

    start = ops.subtract(ops.shape(ids)[0], 2)
    return while_loop(more, back, [start, parents[-1], out])[2]


def _pick(values, index, beam: int):
    """``values[b, index[b, k]]`` for [batch, beam] ``values`` and ``index``."""
    chosen = ops.equal(ops.unsqueeze(index, -1),
                       constant_like(np.arange(beam, dtype=index.dtype), index))
    zeros = creation.zeros_like(values)
    return ops.sum(ops.where(chosen, ops.unsqueeze(values, 1), ops.unsqueeze(zeros, 1)),
                   axis=-1)
