"""The eager Tensor: an array, its autograd links and its flags.

The operator and method surface is shared with static Variables and lives in
``dy2stat.methods``; this module only holds the data.
"""

from __future__ import annotations

import numpy as np

from dy2stat import device as _device
from dy2stat.kernels import backend
from dy2stat.kernels.backend import to_host
from dy2stat.mode import state

# Filled in by dy2stat.static: ``write(tensor, variable)`` makes the program being built
# write ``variable``'s value into ``tensor`` when it runs (a traced forward updating a
# buffer in place: ``self.steps[0] += 1``, ``self.mean.set_value(m)``).
static_write = None


class Tensor:
    """An n-d array on the current device that can record gradients."""

    __slots__ = ("_data", "stop_gradient", "_grad", "_node", "_index", "_version", "name",
                 "__weakref__")
    # Distinguishes eager values from static Variables without an isinstance chain.
    is_static = False

    def __init__(self, data, stop_gradient: bool = True, name: str | None = None):
        self._data = data
        self.stop_gradient = stop_gradient
        self._grad = None
        self._node = None  # the tape node that produced this tensor (None: a leaf)
        self._index = 0  # which output of that node
        self._version = 0  # bumped by index assignment; checked by backward
        self.name = name

    # ------------------------------------------------------------- metadata
    @property
    def shape(self) -> list:
        """The dims, a list of ints."""
        return list(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements."""
        return self._data.dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return self._data.ndim

    @property
    def place(self) -> str:
        """The device the values live on: 'cpu' or 'gpu:N'."""
        return _device.device_of(self._data)

    @property
    def is_leaf(self) -> bool:
        """Whether no recorded op produced this tensor (a parameter or an input)."""
        return self._node is None

    # ---------------------------------------------------------- conversion
    def numpy(self) -> np.ndarray:
        """A NumPy array with the tensor's values (copied to the host if needed)."""
        return np.asarray(to_host(self._data))

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise ValueError(
                f"item(): only a tensor with one element converts to a Python scalar, "
                f"got shape {self.shape}"
            )
        return to_host(self._data).reshape(()).item()

    def tolist(self):
        """The values as (nested) Python lists."""
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array.astype(dtype) if dtype is not None else array

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="       ")
        grad = "" if self.stop_gradient else ", stop_gradient=False"
        head = f"Tensor(shape={self.shape}, dtype={self.dtype}, place={self.place}{grad},"
        return f"{head}\n       {body})"

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self._data.size} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self.item())

    # ------------------------------------------------------------- autograd
    @property
    def grad(self):
        """The gradient accumulated by ``backward()`` (None before any). Inside a
        converted function being traced it is the program's value of the gradient."""
        recorder = state.recorder
        if recorder is None:
            return self._grad
        return recorder.grad_of(self)

    @grad.setter
    def grad(self, value) -> None:
        recorder = state.recorder
        if recorder is None:
            self._grad = value
        else:
            recorder.set_grad(self, value)

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares memory)."""
        return Tensor(self._data)

    def clear_gradient(self) -> None:
        """Drop the accumulated gradient (``grad`` becomes None)."""
        self.grad = None

    clear_grad = clear_gradient

    def _assign(self, make) -> None:
        """Rebind this tensor to ``make(old)``: how ``x[i] = v`` stays functional."""
        if self._node is None and not self.stop_gradient and state.grad_enabled:
            raise RuntimeError(
                "cannot assign into a leaf tensor that requires a gradient "
                "(stop_gradient=False); assign into x.clone(), or under no_grad()"
            )
        old = Tensor(self._data, self.stop_gradient)
        old._node, old._index, old._version = self._node, self._index, self._version
        if state.static:  # traced: the program reads this tensor and writes it back
            static_write(self, make(self))
            return
        new = make(old)
        self._data, self._node, self._index = new._data, new._node, new._index
        self.stop_gradient = new.stop_gradient
        self._version += 1

    def set_value(self, value) -> None:
        """Overwrite the values in place (no gradient is recorded)."""
        if getattr(value, "is_static", False):
            static_write(self, value)
            return
        array = value._data if isinstance(value, Tensor) else value
        xp = backend.array_module(self._data)
        array = xp.asarray(array, dtype=self._data.dtype)
        if tuple(array.shape) != tuple(self._data.shape):
            raise ValueError(f"set_value: shape {list(array.shape)} does not match {self.shape}")
        self._data = array.copy()
        self._version += 1

    # --------------------------------------------------------------- device
    def to(self, device: str) -> Tensor:
        """A copy on ``"cpu"`` or ``"gpu"``/``"gpu:N"`` (the same tensor if already there)."""
        data = _device.move(self._data, device, "to")
        if data is self._data:
            return self
        return Tensor(data, self.stop_gradient)

    def cpu(self) -> Tensor:
        """A copy in host memory (the same tensor if already there)."""
        return self.to("cpu")

    def cuda(self, index: int | None = None) -> Tensor:
        """A copy on GPU ``index`` (default: the current GPU)."""
        return self.to("gpu" if index is None else f"gpu:{int(index)}")
