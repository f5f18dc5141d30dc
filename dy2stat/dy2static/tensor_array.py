"""A Python list carried through a static loop: its elements stacked in one tensor.

`out = []; for ... : out.append(y)` in a tensor-dependent loop cannot keep a Python list:
the number of iterations is only known when the program runs. At the loop the list becomes a
TensorArray, whose `buffer` (shape [n, *element_shape]) is an ordinary carried value; append,
pop, indexing, len() and `d2s.stack`/`d2s.concat` of it work as they do on the list, and
`d2s.array_write`/`array_read` write and read it at a tensor index (the `array_write` op).
"""

from __future__ import annotations

from dy2stat import ops
from dy2stat.dispatch import apply
from dy2stat.dy2static.values import constant
from dy2stat.static.variable import Variable


class TensorArray:
    """A list of same-shaped tensors, held stacked; methods mirror list's."""

    __slots__ = ("buffer",)

    def __init__(self, buffer) -> None:
        self.buffer = buffer

    @classmethod
    def from_list(cls, items: list) -> TensorArray:
        """The array of `items` (tensors or numbers of one shape and dtype)."""
        return cls(ops.stack([_as_tensor(v) for v in items]))

    @classmethod
    def empty(cls, element_shape, dtype) -> TensorArray:
        """An empty array of elements with this shape and dtype. A dim unknown until the
        program runs is 1 in the empty buffer: the first write sets it (`array_write`)."""
        return cls(constant(0, dtype, [0, *(d if d >= 0 else 1 for d in element_shape)]))

    def snapshot(self) -> TensorArray:
        """A copy that later appends to this array do not change."""
        buffer = self.buffer
        if isinstance(buffer, Variable):
            buffer = Variable(buffer.block, buffer.name)
        return TensorArray(buffer)

    @property
    def dtype(self):
        return self.buffer.dtype

    def length(self):
        """The number of elements: a Python int when known, else a 0-D int64 tensor."""
        n = self.buffer.shape[0]
        return n if n >= 0 else ops.shape(self.buffer)[0]

    def append(self, value) -> None:
        value = ops.cast(_as_tensor(value), self.buffer.dtype)
        if -1 in [*self.buffer.shape[1:], *value.shape]:  # element dims known at run time
            self.write(self.length(), value)
            return
        self.buffer = ops.concat([self.buffer, ops.unsqueeze(value, 0)])

    def write(self, index, value) -> None:
        """Set element `index` (a Python int or a one-element int tensor), growing the
        array when `index` is at or past its end."""
        self.buffer = apply("array_write", self.buffer, _as_tensor(value), index)

    def read(self, index):
        """Element `index` (a Python int or a one-element int tensor)."""
        if isinstance(index, int):
            return self.buffer[index]
        return self.buffer[ops.reshape(index, [])]

    def pop(self, index: int = -1):
        if index not in (0, -1):
            raise ValueError("a tensor array can only pop its first or last element")
        value = self.buffer[index]
        self.buffer = self.buffer[1:] if index == 0 else self.buffer[:-1]
        return value

    def __getitem__(self, index):
        return self.buffer[index]

    def __bool__(self):
        raise TypeError("the truth of a tensor array is known only when the program runs; "
                        "test len(array) > 0 in converted code")

    def __len__(self):
        n = self.buffer.shape[0]
        if n < 0:
            raise TypeError("the length of this tensor array is known only when the program "
                            "runs; len() in converted code gives it as a tensor")
        return n

    def extend(self, items) -> None:
        """Append each of `items` (a list or another tensor array)."""
        if isinstance(items, TensorArray):
            self.buffer = ops.concat([self.buffer, ops.cast(items.buffer, self.buffer.dtype)])
            return
        for item in items:
            self.append(item)

    def __add__(self, other):
        """`array + [v, ...]` (or another array): a new array, as list concatenation."""
        if not isinstance(other, (list, tuple, TensorArray)):
            return NotImplemented
        out = self.snapshot()
        out.extend(other)
        return out

    def __radd__(self, other):
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        if not other:
            return self.snapshot()
        out = TensorArray.from_list(list(other))
        out.extend(self)
        return out

    def __iadd__(self, other):
        if not isinstance(other, (list, tuple, TensorArray)):
            return NotImplemented
        self.extend(other)
        return self

    def __iter__(self):
        # Indexing never runs out (the length is only known at run time): no implicit
        # iteration. A `for` loop in converted code walks the array with a while op.
        raise TypeError("a tensor array cannot be iterated in Python; use it in a for loop "
                        "of converted code, or d2s.stack it")

    def __setitem__(self, index, value) -> None:
        self.buffer[index] = value

    def stack(self, axis: int = 0):
        """`d2s.stack(list, axis)` of the elements."""
        if axis == 0:
            return self.buffer
        ndim = self.buffer.ndim
        axis = axis % ndim
        perm = list(range(1, ndim))
        perm.insert(axis, 0)
        return ops.transpose(self.buffer, perm)

    def concat(self, axis: int = 0):
        """`d2s.concat(list, axis)` of the elements: the array's own dim moved next to
        `axis` and merged with it."""
        element = list(self.buffer.shape[1:])
        if not element:
            raise ValueError("d2s.concat needs elements of at least one dim")
        axis = axis % len(element)
        if any(d < 0 for i, d in enumerate(element) if i != axis):
            raise ValueError("d2s.concat of a tensor array needs the element dims other "
                             "than the concatenated one known before the program runs")
        buffer = self.buffer
        if axis:
            perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(element) + 1))
            buffer = ops.transpose(buffer, perm)
        return ops.reshape(buffer, [*element[:axis], -1, *element[axis + 1:]])

    def __repr__(self) -> str:
        return f"TensorArray({self.buffer!r})"


def truth(value):
    """`value` as the condition of an `if`, `while` or `not`: a tensor array is true when
    it has elements (a bool Variable when its length is known only when the program runs);
    anything else is itself."""
    if isinstance(value, TensorArray):
        return value.length() > 0
    return value


def _as_tensor(value):
    return constant(value) if isinstance(value, (bool, int, float)) else value


# d2s functions that take a list and accept a tensor array in its place.
LIST_FUNCTIONS = {ops.stack: TensorArray.stack, ops.concat: TensorArray.concat}
