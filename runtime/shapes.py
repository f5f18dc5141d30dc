"""Shape arithmetic for inference; ``-1`` is an unknown dim throughout."""

from __future__ import annotations


def fmt(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def broadcast(a, b, op: str) -> tuple:
    """NumPy broadcasting of two shapes that may hold -1."""
    n = max(len(a), len(b))
    padded_a = (1,) * (n - len(a)) + tuple(a)
    padded_b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(padded_a, padded_b):
        if x == y:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x == -1 or y == -1:
            out.append(max(x, y))
        else:
            raise ValueError(f"{op}: shapes {fmt(a)} and {fmt(b)} cannot be broadcast together")
    return tuple(out)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for a {ndim}-D input")
    return axis % max(ndim, 1)


def axes_tuple(axis, ndim: int, op: str) -> tuple:
    """The reduced axes, sorted and non-negative; None means all."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted({normalize_axis(a, ndim, op) for a in axis}))


def reduce(shape, axis, keepdim: bool, op: str) -> tuple:
    axes = axes_tuple(axis, len(shape), op)
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def numel(shape) -> int:
    """Element count, or -1 when a dim is unknown."""
    n = 1
    for d in shape:
        if d < 0:
            return -1
        n *= d
    return n


def reshape(shape, target, op: str = "reshape") -> tuple:
    """Resolve a reshape target (with one -1 and 0 meaning 'keep that dim')."""
    target = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target)]
    if target.count(-1) > 1:
        # Several unknown dims come from an unknown input; nothing to check.
        return tuple(target)
    total, known = numel(shape), numel([d for d in target if d != -1])
    if -1 in target:
        if total >= 0 and known > 0:
            if total % known:
                raise ValueError(f"{op}: cannot reshape {fmt(shape)} into {fmt(target)}")
            target[target.index(-1)] = total // known
        return tuple(target)
    if total >= 0 and total != known:
        raise ValueError(f"{op}: cannot reshape {fmt(shape)} ({total} elements) into {fmt(target)}")
    return tuple(target)


def same(a, b) -> bool:
    """Shapes agree where both dims are known."""
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def join(a, b) -> tuple:
    """The shape that covers both (a dim that differs becomes -1)."""
    return tuple(x if x == y else -1 for x, y in zip(a, b))
