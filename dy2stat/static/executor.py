"""``static.Executor``: runs programs on the current device and returns NumPy arrays."""

from __future__ import annotations

import numpy as np

from dy2stat import device
from dy2stat.kernels.backend import to_host
from dy2stat.runtime import executor as runtime_executor
from dy2stat.runtime.ir import Program
from dy2stat.static import framework
from dy2stat.static.builder import captured_tensors
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

_global_scope = runtime_executor.Scope()


def global_scope() -> runtime_executor.Scope:
    """Where parameters of static programs live between runs."""
    return _global_scope


class Executor:
    """Compiles each program once and runs it many times."""

    def __init__(self, place=None):
        self.place = str(place or device.get_device())
        self.xp = device.current.xp if place is None else _module(self.place)
        self._runtime = runtime_executor.Executor(xp=self.xp)

    def run(self, program: Program | None = None, feed: dict | None = None,
            fetch_list=None, scope=None, return_numpy: bool = True):
        program = program if program is not None else framework.default_main_program()
        if not isinstance(program, Program):
            raise TypeError(f"Executor.run: program must be a static.Program, "
                            f"not {type(program).__name__}")
        scope = scope if scope is not None else _global_scope
        feeds = {name: self._array(value, name) for name, value in (feed or {}).items()}
        fetch_names = [_fetch_name(f) for f in (fetch_list or [])]
        captured = captured_tensors(program)
        for name, tensor in captured.items():
            scope[name] = tensor._data
        outs = self._runtime.run(program, feeds, fetch_names, scope)
        # Ops that wrote a captured tensor's variable (updates, running stats) update it.
        for name, tensor in captured.items():
            value = scope[name]
            if value is not tensor._data:
                tensor._data = value
        return [to_host(o) if return_numpy else o for o in outs]

    def close(self) -> None:
        pass

    def _array(self, value, name):
        if isinstance(value, Tensor):
            value = value._data
        elif not hasattr(value, "dtype"):
            value = np.asarray(value)
        return self.xp.asarray(value)


def _fetch_name(item) -> str:
    if isinstance(item, Variable):
        return item.name
    if isinstance(item, str):
        return item
    raise TypeError(f"Executor.run: fetch_list items must be Variables or names, "
                    f"not {type(item).__name__}")


def _module(place: str):
    if place.lower().startswith("gpu"):
        if device.current.name.startswith("gpu"):
            return device.current.xp
        device.set_device(place)
        return device.current.xp
    return np
