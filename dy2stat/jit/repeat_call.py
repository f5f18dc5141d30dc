"""The shortest path of a cached call: the same program run again on the host.

A model's inference loop calls its converted forward with Tensors of the same
shapes and dtypes, under ``no_grad``, again and again. ``StaticFunction`` keeps
the program of such a call's key as a ``RepeatCall``; the next call whose
Tensors have exactly those shapes and dtypes (and whose layer is in the same
train/eval mode, and whose trace's guards still hold) runs its forward plan
directly: no key to build and look up, no feed checks (feeds of the very dtype
and shape a plan accepted pass them again), no tape. Anything else takes the
general path, which gives the same results.
"""

from __future__ import annotations

import numpy

from dy2stat.tensor import Tensor


class RepeatCall:
    """A ConcreteProgram whose calls run its host forward plan directly."""

    __slots__ = ("key", "concrete", "training", "specs", "plan", "tensors")

    def __init__(self, key, concrete, arrays, plan, tensors):
        self.key = key  # the call's cache key: (its arguments' part, training)
        self.concrete = concrete
        self.specs = [(a.shape, a.dtype) for a in arrays]  # each argument's, exactly
        self.training = key[1]
        self.plan, self.tensors = plan, tensors  # the plan, the captured tensors it reads

    @classmethod
    def of(cls, key, concrete, args: tuple, feeds: list) -> RepeatCall | None:
        """The repeat path of a program called with the positional ``args`` under
        ``key``, when its calls can take it: the arguments are the Tensors fed, in
        order; nothing to write after a run, no argument a training step's backward
        reaches, its forward plan run directly (``host_plan``)."""
        if (concrete.effects or concrete.reaching or len(feeds) != len(args)
                or any(type(a) is not Tensor or a is not f for a, f in zip(args, feeds))):
            return None
        arrays = [t._data for t in args]
        host = concrete.runner.host_plan(arrays)
        return None if host is None else cls(key, concrete, arrays, *host)

    def run(self, args: tuple, training):
        """The call's outputs, or None when it is not a repeat of this one."""
        if (training != self.training or len(args) != len(self.specs)
                or not self.concrete.valid_for(())):
            return None
        arrays = []
        for tensor, (shape, dtype) in zip(args, self.specs):
            if type(tensor) is not Tensor:
                return None
            a = tensor._data
            if type(a) is not numpy.ndarray or a.dtype is not dtype or a.shape != shape:
                return None
            arrays.append(a)
        outs = self.plan.run_checked(arrays, [t._data for t in self.tensors], {})
        return self.concrete.pack([Tensor(a) for a in outs])
