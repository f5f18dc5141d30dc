"""Hooks that run when a backward pass has finished a leaf's gradient.

Data-parallel training sends each parameter's gradient to the other processes
as soon as backward has computed all of it, while backward goes on with the
layers below (``dy2stat.distributed.DataParallel``). ``watch(tensors,
on_ready, on_done)`` registers a group of leaf tensors: during every
``backward()`` that reaches one of them, ``on_ready(tensor)`` runs once for
each tensor of the group, right after its ``.grad`` holds all of this
backward's contribution (when the backward starts for those it does not
reach), and ``on_done()`` runs once when the backward ends.

A leaf's gradient is complete after the last tape node (in backward order)
that reads the leaf. A node whose rule computes many gradients at once (a
converted program's backward) may ``deliver`` some before it returns, as it
computes them; a leaf whose last node that is gets its hook then.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable

__all__ = ["Backward", "deliver", "running", "watch", "watched", "watching"]

_groups: dict[int, _Group] = {}  # handle id -> group
_watchers: dict[int, list[_Group]] = {}  # id(tensor) -> the groups watching it
_ids = itertools.count()
_current = threading.local()  # .backward: the Backward running in this thread


class _Group:
    """Tensors watched together, and their hooks (the handle ``watch`` returns)."""

    def __init__(self, tensors: list, on_ready: Callable, on_done: Callable):
        self.tensors, self.on_ready, self.on_done = tensors, on_ready, on_done
        self.id = next(_ids)

    def remove(self) -> None:
        """Stop watching these tensors."""
        if _groups.pop(self.id, None) is None:
            return
        for t in self.tensors:
            groups = _watchers[id(t)]
            groups.remove(self)
            if not groups:
                del _watchers[id(t)]


def watch(tensors: Iterable, on_ready: Callable, on_done: Callable) -> _Group:
    """Run ``on_ready(tensor)`` when a backward completes a tensor's ``.grad`` and
    ``on_done()`` when that backward ends; returns a handle with ``.remove()``."""
    group = _Group(list(tensors), on_ready, on_done)
    _groups[group.id] = group
    for t in group.tensors:
        _watchers.setdefault(id(t), []).append(group)
    return group


def watching() -> bool:
    """Whether any tensor is watched (the engine does nothing extra otherwise)."""
    return bool(_watchers)


def watched(tensor) -> bool:
    """Whether some group watches ``tensor``."""
    return id(tensor) in _watchers


def deliver(tensor, grad) -> bool:
    """From a node's gradient rule: add ``grad`` to ``tensor``'s gradient now instead of
    returning it; False (nothing done) when no watching backward runs the rule."""
    backward = getattr(_current, "backward", None)
    if backward is None or backward._node is None or not watched(tensor):
        return False
    backward.deliver(tensor, grad)
    return True


def running(backward: Backward | None):
    """Make ``backward`` the one rules deliver to (None: a backward that watches
    nothing); returns the one before, to ``running`` again when it ends."""
    previous = getattr(_current, "backward", None)
    _current.backward = backward
    return previous


class Backward:
    """One ``backward()``'s view of the watched leaves: the engine calls ``start``
    first, ``enter`` before a node's rule runs, ``leave`` after it, ``end`` at the
    end."""

    def __init__(self, nodes: list, inputs_of: Callable, send: Callable):
        self._send = send  # send(tensor, grad): what the engine does with a leaf's gradient
        self._last: dict[int, list] = {}  # id(node) -> the leaves it is the last reader of
        seen: set[int] = set()
        for node in reversed(nodes):  # oldest first: the first reader met is the last run
            for x in inputs_of(node):
                if id(x) in _watchers and id(x) not in seen:
                    seen.add(id(x))
                    self._last.setdefault(id(node), []).append(x)
        self._groups = {g.id: g for i in seen for g in _watchers[i]}
        self._unreached = [(g, t) for g in self._groups.values() for t in g.tensors
                           if id(t) not in seen]
        self._node = None

    def start(self) -> None:
        """The tensors this backward does not reach have their gradient already."""
        for group, tensor in self._unreached:
            group.on_ready(tensor)

    def enter(self, node) -> None:
        self._node = node

    def leave(self, node) -> None:
        self._node = None
        for x in self._last.pop(id(node), ()):
            _ready(x)

    def deliver(self, tensor, grad) -> None:
        self._send(tensor, grad)
        finished = self._last.get(id(self._node), [])
        for k, x in enumerate(finished):
            if x is tensor:
                del finished[k]
                _ready(x)
                return

    def end(self) -> None:
        for group in self._groups.values():
            group.on_done()


def _ready(tensor) -> None:
    for group in list(_watchers.get(id(tensor), ())):
        group.on_ready(tensor)
