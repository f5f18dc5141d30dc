"""What a `for` loop iterates over on the static path: sequences addressed by a tensor index.

`range`, `enumerate` and `zip` in converted code go through `convert_range` and friends: with
Python (or eager) arguments they are the builtins; with a static Variable among them they
are the Static* sequences here, which a static `while` walks with a 0-D int64 index.
"""

from __future__ import annotations

import builtins

from dy2stat import ops
from dy2stat.dy2static import values
from dy2stat.dy2static.tensor_array import TensorArray
from dy2stat.runtime import shapes
from dy2stat.static import nest


class StaticSequence:
    """A sequence whose length and items are computed from a (tensor) index."""

    def length(self):
        """A Python int when known, else a 0-D int64 tensor."""
        raise NotImplementedError

    def item(self, index):
        raise NotImplementedError


class StaticRange(StaticSequence):
    """`range(start, stop, step)` where a bound is a static Variable (step a Python int)."""

    def __init__(self, start, stop, step) -> None:
        if values.is_static(step) or step == 0:
            raise ValueError("range() in a tensor-dependent loop needs a non-zero Python int "
                             "step")
        self.start, self.stop, self.step = start, stop, int(step)

    def length(self):
        step = self.step
        # ceil((stop - start) / step) in integer arithmetic; negative means empty.
        return (self.stop - self.start + (step - 1 if step > 0 else step + 1)) // step

    def item(self, index):
        value = index if self.step == 1 else index * self.step
        return value if _is_zero(self.start) else value + self.start


class StaticTensorRows(StaticSequence):
    """The rows (first-dimension slices) of a static tensor or a tensor array."""

    def __init__(self, tensor) -> None:
        self.tensor = tensor.buffer if isinstance(tensor, TensorArray) else tensor

    def length(self):
        n = self.tensor.shape[0]
        return n if n >= 0 else ops.shape(self.tensor)[0]

    def item(self, index):
        return self.tensor[index]


class StaticEnumerate(StaticSequence):
    def __init__(self, iterable, start: int = 0) -> None:
        self.seq, self.start = as_sequence(iterable), start

    def length(self):
        return self.seq.length()

    def item(self, index):
        position = index if _is_zero(self.start) else index + self.start
        return position, self.seq.item(index)


class StaticZip(StaticSequence):
    def __init__(self, *iterables) -> None:
        self.seqs = [as_sequence(it) for it in iterables]

    def length(self):
        lengths = [s.length() for s in self.seqs]
        known = [n for n in lengths if not values.is_static(n)]
        unknown = [n for n in lengths if values.is_static(n)]
        result = min(known) if known else None
        for n in unknown:
            result = n if result is None else ops.minimum(n, result)
        return result

    def item(self, index):
        return tuple(s.item(index) for s in self.seqs)


class StackedItems(StaticSequence):
    """Python items (tensors or numbers, possibly in tuples) stacked leaf by leaf."""

    def __init__(self, items: list) -> None:
        self.structure = items[0]
        for item in items[1:]:
            if not nest.same_structure(self.structure, item):
                raise TypeError("the items left to iterate have different structures")
        columns = zip(*(nest.flatten(item) for item in items))
        self.leaves = [ops.stack([_as_tensor(v) for v in column]) for column in columns]
        self.n = len(items)

    def length(self):
        return self.n

    def item(self, index):
        return nest.pack_as(self.structure, [leaf[index] for leaf in self.leaves])


def is_static_iterable(value) -> bool:
    return isinstance(value, (StaticSequence, TensorArray)) or values.is_static(value)


def as_sequence(value) -> StaticSequence:
    if isinstance(value, StaticSequence):
        return value
    if isinstance(value, TensorArray) or values.is_static(value):
        return StaticTensorRows(value)
    if isinstance(value, builtins.range):
        return StaticRange(value.start, value.stop, value.step)
    items = list(value)
    if not items:
        raise ValueError("a tensor-dependent loop cannot iterate an empty sequence")
    return StackedItems(items)


def rest_of(iterable, consumed: int, iterator):
    """The items a Python `for` has not reached yet: a static sequence, or a list of them
    where they cannot be stacked into tensors (layers, tensors of different shapes); None
    if none are left."""
    if isinstance(iterable, builtins.range):
        rest = iterable[consumed:]
        return StaticRange(rest.start, rest.stop, rest.step) if len(rest) else None
    items = list(iterator)
    if not items:
        return None
    return StackedItems(items) if _stackable(items) else items


def _stackable(items: list) -> bool:
    """Tensor-like items of one structure whose leaves agree in shape and dtype."""
    first = items[0]
    if not all(values.is_tensor_like(item) and nest.same_structure(first, item)
               for item in items):
        return False
    columns = zip(*(nest.flatten(item) for item in items))
    return all(len({(tuple(values.shape_of(v)), values.dtype_of(v)) for v in column}) == 1
               for column in columns)


def convert_range(*args):
    """`range(...)`: the builtin, or a StaticRange when a bound is a static Variable."""
    if not any(values.is_static(a) for a in args):
        return builtins.range(*args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    return StaticRange(_index(start), _index(stop), step)


def _index(bound):
    """A static bound of `range` as a 0-D integer tensor, refused as eagerly: there a
    tensor bound converts through `__index__` (integers only) to one Python int."""
    if not values.is_static(bound):
        return bound
    dtype, shape = values.dtype_of(bound), values.shape_of(bound)
    if dtype.kind not in "iub":
        raise TypeError(f"only integer tensors can be used as an index, not {dtype}")
    if shapes.numel(shape) not in (1, -1):
        raise ValueError(f"range(): a tensor bound must hold one element, got shape {shape}")
    return ops.reshape(bound, []) if shape else bound


def convert_enumerate(iterable, start: int = 0):
    if is_static_iterable(iterable):
        return StaticEnumerate(iterable, start)
    return builtins.enumerate(iterable, start)


def convert_zip(*iterables):
    if any(is_static_iterable(it) for it in iterables):
        return StaticZip(*iterables)
    return builtins.zip(*iterables)


def _is_zero(value) -> bool:
    return not values.is_static(value) and value == 0


def _as_tensor(value):
    return values.constant(value) if values.is_number(value) else value
