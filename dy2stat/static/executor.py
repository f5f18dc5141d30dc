"""``static.Executor``: runs programs on the current device and returns NumPy arrays."""

from __future__ import annotations

import numpy as np

from dy2stat import device
from dy2stat.kernels import backend
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
    """Compiles each program once and runs it many times.

    ``place`` None runs on the current device (``set_device``); ``"cpu"``,
    ``"gpu"`` or ``"gpu:N"`` name one without changing the current device.
    Feeds are copied to the device once per run and fetches copied back to
    the host once (``return_numpy=False`` keeps them on the device).
    """

    def __init__(self, place=None):
        self.place = str(place or device.get_device())
        self.xp = device.module_for(self.place, "Executor")
        self._gpu = device.parse(self.place, "Executor")
        self._runtime = runtime_executor.Executor(xp=self.xp)

    def run(self, program: Program | None = None, feed: dict | None = None,
            fetch_list=None, scope=None, return_numpy: bool = True):
        """Run ``program`` (default: the default main program) with the ``feed`` values
        (name -> array) and return the values of ``fetch_list`` (variables or names), as
        NumPy arrays unless ``return_numpy=False``. Parameters come from the layers that
        made them or from ``scope``."""
        if self._gpu is None:
            return self._run(program, feed, fetch_list, scope, return_numpy)
        with self.xp.cuda.Device(self._gpu):
            return self._run(program, feed, fetch_list, scope, return_numpy)

    def _run(self, program, feed, fetch_list, scope, return_numpy):
        program = program if program is not None else framework.default_main_program()
        if not isinstance(program, Program):
            raise TypeError(f"Executor.run: program must be a static.Program, "
                            f"not {type(program).__name__}")
        scope = scope if scope is not None else _global_scope
        feeds = {name: self._array(value, name) for name, value in (feed or {}).items()}
        fetch_names = [_fetch_name(f) for f in (fetch_list or [])]
        captured = captured_tensors(program)
        given = {}
        for name, tensor in captured.items():
            # a tensor captured on another device is copied here for the run
            given[name] = scope[name] = self._on_device(tensor._data)
        outs = self._runtime.run(program, feeds, fetch_names, scope)
        # Ops that wrote a captured tensor's variable (updates, running stats) update it.
        for name, tensor in captured.items():
            value = scope[name]
            if value is not given[name]:
                tensor._data = value
        return [to_host(o) if return_numpy else o for o in outs]

    def close(self) -> None:
        """Nothing to release (kept for Paddle's API)."""
        pass

    def _on_device(self, array):
        if backend.array_module(array) is self.xp and (
                self._gpu is None or array.data.device_id == self._gpu):
            return array
        return device.move(array, self.place, "Executor")

    def _array(self, value, name):
        if isinstance(value, Tensor):
            value = value._data
        elif not hasattr(value, "dtype"):
            value = np.asarray(value)
        return self._on_device(value)


def _fetch_name(item) -> str:
    if isinstance(item, Variable):
        return item.name
    if isinstance(item, str):
        return item
    raise TypeError(f"Executor.run: fetch_list items must be Variables or names, "
                    f"not {type(item).__name__}")
