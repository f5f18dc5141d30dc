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
"""

from __future__ import annotations

import numpy

__all__ = ["Captured", "NotCapturable", "capture", "settings"]

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
    kept = []
    pool = xp.get_default_memory_pool()

    def allocate(size):
        memory = pool.malloc(size)
        kept.append(memory)
        return memory

    stream = xp.cuda.Stream(non_blocking=True)
    shadow = dict(S)  # the capture's writes land here, not in the caller's scope
    graph = None
    try:
        with stream, xp.cuda.using_allocator(allocate):
            stream.begin_capture()
            try:
                results = list(fn(shadow, *feed_buffers, *state.views))
                written = [n for n, v in shadow.items() if v is not S.get(n)]
                for name in written:  # the next call reads what this one wrote
                    if name in names:
                        xp.copyto(state.views[names.index(name)], shadow[name])
                outs = results + [shadow[n] for n in written]
                arena = _Arena(xp, [(o.shape, o.dtype) for o in outs])
                for view, value in zip(arena.views, outs):
                    xp.copyto(view, value)
            finally:
                graph = stream.end_capture()
    except Exception as exc:  # noqa: BLE001 - any failure: the plan runs uncaptured
        raise NotCapturable(f"{type(exc).__name__}: {exc}") from exc
    last = dict(zip(names, params))
    writes = [(n, len(results) + k) for k, n in enumerate(written)]
    return Captured(xp, graph, feed_buffers, state, names, last, writes, arena, kept)
