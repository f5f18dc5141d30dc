"""``InputSpec``: the declared shape and dtype of a static input."""

from __future__ import annotations

from dy2stat.runtime import dtypes, shapes


class InputSpec:
    """Shape (``None``/-1 for unknown dims), dtype and optional name of an input.

    Without a dtype the spec says float32 (what a saved program declares) but a converted
    function called with another dtype is traced for that one: only a dtype given is
    checked."""

    def __init__(self, shape, dtype=None, name: str | None = None):
        if isinstance(shape, int):
            shape = [shape]
        try:
            self.shape = tuple(-1 if d is None else int(d) for d in shape)
        except (TypeError, ValueError):
            raise ValueError(f"InputSpec: bad shape {shape!r} (use ints, None or -1)") from None
        if any(d < -1 for d in self.shape):
            raise ValueError(f"InputSpec: bad shape {list(shape)} (dims must be >= -1)")
        self.dtype = dtypes.as_dtype("float32" if dtype is None else dtype, where="InputSpec")
        self.dtype_given = dtype is not None
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name: str | None = None) -> InputSpec:
        """The spec of ``tensor``'s shape and dtype."""
        return cls(tensor.shape, tensor.dtype, name)

    def matches(self, shape, dtype) -> str | None:
        """Why a value of ``shape``/``dtype`` contradicts this spec, or None."""
        if len(shape) != len(self.shape):
            return f"expected rank {len(self.shape)} {shapes.fmt(self.shape)}, got {list(shape)}"
        for want, got in zip(self.shape, shape):
            if want != -1 and want != got:
                return f"expected shape {shapes.fmt(self.shape)}, got {list(shape)}"
        if dtype != self.dtype and self.dtype_given:
            return f"expected dtype {self.dtype}, got {dtype}"
        return None

    def __eq__(self, other) -> bool:
        return isinstance(other, InputSpec) and (self.shape, self.dtype, self.name) == (
            other.shape, other.dtype, other.name)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self) -> str:
        return f"InputSpec(shape={list(self.shape)}, dtype={self.dtype}, name={self.name!r})"
