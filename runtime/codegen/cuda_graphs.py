"""A GPU plan's function captured once as a CUDA graph, then replayed: one launch a call.

A plan that runs straight through (no ``cond`` or ``while`` left on the host,
no random draws, nothing read back to the host) issues the same kernels with
the same shapes on every call. ``capture(xp, fn, feeds, params, scope)`` runs
it once under CuPy's stream capture, which records the kernels instead of
running them; ``Captured.replay`` then launches the whole recording at once.
A graph reads and writes fixed addresses, so a capture owns its buffers:

- *feeds* are copied into the capture's feed buffers on every call;
- *persistables* (parameters, optimizer state, running statistics) live in
  one arena of the capture (``state``): a value the scope holds is copied in
  when it is not the one the capture saw last (the first call, or after
  ``set_value``), and a persistable the plan writes is copied back into the
  arena at the end of the graph, so the next call reads it from there;
- *results* (the fetches and the persistables written) are copied, inside the
  graph, into a second arena that a call copies out once (one copy kernel):
  each result is a view of that new copy, so what a call returned never
  changes under a later call, as with the interpreted plan.

Every allocation made while capturing stays held by the capture (the graph
reuses those addresses), so nothing the graph touches returns to CuPy's pool
while it lives. A capture that fails (an op that reads a value on the host, a
kernel that cannot be captured) raises ``NotCapturable``; the plan then keeps
running uncaptured.

A plan with a ``while`` left on the host (one that does not lower to a
kernel) is not captured whole: its predicate is read on the host each
iteration, and CuPy 14 has no conditional graph nodes. Such a loop's body and
cond instead replay as one captured graph per iteration (``LoopGraphs``, what
the plan's code calls for the loop), when ``loop_accepts`` says nothing in them
leaves the device: per iteration, one graph launch and one read of the
predicate.
"""

from __future__ import annotations

import numpy

from dy2stat.runtime.codegen.control_flow import pred
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.registry import OPS

__all__ = ["Captured", "LoopGraphs", "NotCapturable", "capture", "leaves_the_device",
           "loop_accepts", "settings"]

_ALIGN = 256  # bytes: every arena entry starts at a multiple (cuBLAS, cuDNN alignment)


class Settings:
    """The ``cuda_graphs`` flag: GPU plans compiled from then on may be captured."""

    __slots__ = ("enabled",)

    def __init__(self):
        self.enabled = True


settings = Settings()


class NotCapturable(Exception):
    """The plan cannot be captured (why is the message)."""


class _Arena:
    """One device buffer holding several arrays, each a view at an aligned offset."""

    def __init__(self, xp, specs):
        self.offsets, size = [], 0
        for shape, dtype in specs:
            self.offsets.append(size)
            nbytes = int(numpy.prod(shape, dtype=numpy.int64)) * numpy.dtype(dtype).itemsize
            size += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
        self.specs = list(specs)
        self.buffer = xp.empty((max(size, _ALIGN),), dtype=xp.uint8)
        self.views = self.views_of(self.buffer)

    def views_of(self, buffer) -> list:
        views = []
        for (shape, dtype), offset in zip(self.specs, self.offsets):
            dtype = numpy.dtype(dtype)
            count = int(numpy.prod(shape, dtype=numpy.int64))
            raw = buffer[offset:offset + count * dtype.itemsize]
            views.append(raw.view(dtype).reshape(shape))
        return views


class Captured:
    """One capture of a plan's function for one signature of its feeds."""

    def __init__(self, xp, graph, feed_buffers, state, state_names, last, writes, results,
                 kept):
        self.xp, self.graph = xp, graph
        self.feed_buffers = feed_buffers
        self.state, self.state_names = state, state_names  # the persistables' arena
        self.last = last  # name -> the scope's array whose value the arena holds
        self.writes = writes  # (name, index into the results arena) of written persistables
        self.results = results  # the results arena (fetches, then written persistables)
        self._kept = kept  # every allocation made while capturing

    def replay(self, args, params, S) -> list:
        """One call: ``args`` are the checked feeds, ``params`` the scope's persistables."""
        xp = self.xp
        for buffer, a in zip(self.feed_buffers, args):
            xp.copyto(buffer, a)
        last, views = self.last, self.state.views
        for k, (name, value) in enumerate(zip(self.state_names, params)):
            if value is not last[name]:
                xp.copyto(views[k], value)
                last[name] = value
        self.graph.launch()
        out = self.results.views_of(self.results.buffer.copy())
        n_fetch = len(out) - len(self.writes)
        for name, k in self.writes:
            S[name] = out[k]
            if name in last:
                last[name] = out[k]  # its value is the arena's now
        return out[:n_fetch]


def _record(xp, work):
    """``work()`` run under stream capture: ``(graph, what work returned, allocations)``.

    Every allocation made while capturing is kept (the graph reuses those
    addresses); any failure raises ``NotCapturable``."""
    kept = []
    pool = xp.get_default_memory_pool()

    def allocate(size):
        memory = pool.malloc(size)
        kept.append(memory)
        return memory

    stream = xp.cuda.Stream(non_blocking=True)
    try:
        with stream, xp.cuda.using_allocator(allocate):
            stream.begin_capture()
            try:
                result = work()
            finally:
                graph = stream.end_capture()
    except Exception as exc:  # noqa: BLE001 - any failure: the work runs uncaptured
        raise NotCapturable(f"{type(exc).__name__}: {exc}") from exc
    return graph, result, kept


def capture(xp, fn, args, params, persistables, S) -> Captured:
    """Capture ``fn(S, *args, *params)`` (the plan's generated function) as a CUDA graph.

    ``args`` are one call's checked feeds (their shapes and dtypes are the
    capture's), ``params`` the values of ``persistables`` in the scope ``S``;
    the persistables the function writes are found by running it."""
    feed_buffers = [a.copy() for a in args]
    names = list(persistables)
    state = _Arena(xp, [(p.shape, p.dtype) for p in params])
    for view, value in zip(state.views, params):
        xp.copyto(view, value)
    shadow = dict(S)  # the capture's writes land here, not in the caller's scope

    def work():
        results = list(fn(shadow, *feed_buffers, *state.views))
        written = [n for n, v in shadow.items() if v is not S.get(n)]
        for name in written:  # the next call reads what this one wrote
            if name in names:
                xp.copyto(state.views[names.index(name)], shadow[name])
        outs = results + [shadow[n] for n in written]
        arena = _Arena(xp, [(o.shape, o.dtype) for o in outs])
        for view, value in zip(arena.views, outs):
            xp.copyto(view, value)
        return results, written, arena

    graph, (results, written, arena), kept = _record(xp, work)
    last = dict(zip(names, params))
    writes = [(n, len(results) + k) for k, n in enumerate(written)]
    return Captured(xp, graph, feed_buffers, state, names, last, writes, arena, kept)


# ------------------------------------------------------------ loops on the host


def leaves_the_device(ops, find_var=None) -> str | None:
    """Why running ``ops`` cannot be replayed from a graph (None: it can): a random
    draw (a replay repeats it), an effect on the host (print, assert), and with
    ``find_var`` a write of a persistable (a loop's replay keeps no scope)."""
    for op in ops:
        opdef = OPS.get(op.type)
        if opdef is not None and opdef.random:
            return f"it draws random numbers ({op.type}): a replay would repeat them"
        if opdef is not None and not opdef.outputs:
            return f"it has a {op.type} op (an effect on the host)"
        if find_var is not None and any((v := find_var(n)) is not None and v.persistable
                                        for n in op.output_names()):
            return f"its {op.type} op writes a persistable value"
    return None


def loop_accepts(program, op) -> bool:
    """Whether the ``while`` ``op`` may replay its body and cond as one graph per
    iteration: no saved iterations (a training loop keeps each one), nothing in its
    blocks that runs on the host (control flow, draws, effects, scope writes)."""
    if op.type != "while" or op.outputs.get("Carries") or not op.inputs.get("X"):
        return False
    ops, pending = [], [op.attrs["cond_block"], op.attrs["body_block"]]
    while pending:
        block = program.blocks[pending.pop()]
        ops += block.ops
        pending += [idx for inner in block.ops for idx in inner.sub_blocks()]
    if any(inner.type in CONTROL_FLOW for inner in ops):
        return False
    return leaves_the_device(ops, program.global_block().find_var) is None


class LoopGraphs:
    """A ``while`` left on the host whose body and cond replay as one captured graph per
    iteration; called by the plan's code as ``loop(S, carried, cond_free, body_free)``.

    The first iteration of a signature (the carried and free values' shapes and
    dtypes) runs uncaptured -- kernels compile, pools warm up -- and the second
    is captured: the graph runs the body, copies the new carried values into the
    capture's carried buffers and runs the cond. Each call copies its carried and
    free values into the capture's buffers once; each iteration is one launch and
    one read of the predicate; the results are copies of the carried buffers (the
    next call reuses them). A signature whose carried shapes change, values that
    are not device arrays, or a failed capture run the loop uncaptured
    (``not_captured`` says why a capture failed)."""

    def __init__(self, xp, ns: dict, cond_name: str, body_name: str):
        self.xp, self._ns, self._cond, self._body = xp, ns, cond_name, body_name
        self.graphs: dict = {}  # signature -> _LoopGraph, or None (runs uncaptured)
        self.not_captured: str | None = None

    def __call__(self, S, carried, cond_free, body_free):
        cond, body = self._ns[self._cond], self._ns[self._body]
        if not pred(cond(S, *carried, *cond_free)):
            return carried
        key = self._signature(carried, cond_free, body_free)
        graph = self.graphs.get(key)
        if graph is None and key is not None and key not in self.graphs:
            carried = body(S, *carried, *body_free)  # uncaptured: compiles, warms the pools
            if not pred(cond(S, *carried, *cond_free)):
                return carried
            graph = self._capture(key, S, cond, body, carried, cond_free, body_free)
        if graph is None:
            return _iterate(S, cond, body, carried, cond_free, body_free)
        return graph.iterate(carried, [*cond_free, *body_free])

    def _signature(self, carried, cond_free, body_free):
        values = [*carried, *cond_free, *body_free]
        if not all(isinstance(v, self.xp.ndarray) for v in values):
            return None
        return (self.xp.cuda.runtime.getDevice(), *[(v.shape, v.dtype) for v in values])

    def _capture(self, key, S, cond, body, carried, cond_free, body_free):
        graph = None
        if self.not_captured is None and self._signature(carried, cond_free, body_free) == key:
            try:
                graph = _LoopGraph(self.xp, S, cond, body, carried, cond_free, body_free)
            except NotCapturable as exc:
                self.not_captured = f"its capture failed ({exc})"
        self.graphs[key] = graph
        return graph


def _iterate(S, cond, body, carried, cond_free, body_free):
    """The loop, uncaptured, from a predicate that held."""
    while True:
        carried = body(S, *carried, *body_free)
        if not pred(cond(S, *carried, *cond_free)):
            return carried


class _LoopGraph:
    """One capture of a loop's iteration (body, then cond) for one signature."""

    def __init__(self, xp, S, cond, body, carried, cond_free, body_free):
        self.xp = xp
        self.carried = [a.copy() for a in carried]
        self.free = [a.copy() for a in [*cond_free, *body_free]]
        n_cond = len(cond_free)
        shadow = dict(S)  # nothing is written there (``loop_accepts``), but never the scope

        def work():
            news = body(shadow, *self.carried, *self.free[n_cond:])
            # A new value that is (a view of) a carried buffer -- a swap, a transpose --
            # is copied aside first: the writes below must not change what it reads.
            news = [v if v is b or not any(xp.may_share_memory(v, c) for c in self.carried)
                    else v.copy() for b, v in zip(self.carried, news)]
            for buffer, value in zip(self.carried, news):
                if value is not buffer:
                    xp.copyto(buffer, value)
            return cond(shadow, *self.carried, *self.free[:n_cond])

        self.graph, self.predicate, self._kept = _record(xp, work)

    def iterate(self, carried, free):
        """The loop from ``carried`` (whose predicate held) to its end: fresh results."""
        xp = self.xp
        for buffer, value in zip([*self.carried, *self.free], [*carried, *free]):
            xp.copyto(buffer, value)
        while True:
            self.graph.launch()
            if not pred(self.predicate):
                return tuple(buffer.copy() for buffer in self.carried)
