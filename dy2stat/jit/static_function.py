"""``StaticFunction``: a converted function, traced once per input signature.

Each call builds a cache key from its inputs (tensor shapes and dtypes under
the ``input_spec``, Python argument values, the layer's train/eval mode);
the first call with a key converts the function's source, traces it into a
static program and compiles it; every call then runs the compiled program.
"""

from __future__ import annotations

import functools
import inspect
import logging
import types
import weakref

import numpy as np

from dy2stat.jit import settings
from dy2stat.jit.program_runner import ProgramRunner
from dy2stat.mode import state
from dy2stat.runtime.ir import Program
from dy2stat.static import framework, nest
from dy2stat.static.builder import captured_tensors
from dy2stat.static.input_spec import InputSpec
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

log = logging.getLogger("dy2stat")


class ConcreteProgram:
    """One traced program: its inputs, outputs and the runner that executes it."""

    def __init__(self, program: Program, inputs: list, outputs, runner: ProgramRunner):
        self.main_program = program
        self.inputs = inputs  # data Variables, in flattened-argument order
        self.outputs = outputs  # the output structure with Variables (or Python values)
        self.runner = runner

    @property
    def parameters(self) -> list:
        return list(self.runner.captured.values())


class StaticFunction:
    """What ``to_static`` returns for a function or method."""

    def __init__(self, function, input_spec=None, instance=None, convert_source=True):
        self._function = function
        self._convert_source = convert_source
        self._instance = instance
        self._input_spec = _as_specs(input_spec)
        self._cache: dict = {}
        self._last_key = None
        self._bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._param_names = None  # the function's parameter names (computed once)
        functools.update_wrapper(self, function)

    # ---------------------------------------------------------- descriptor
    def __get__(self, instance, owner=None):
        """Methods: one StaticFunction per instance, sharing nothing but the function."""
        if instance is None:
            return self
        bound = self._bound.get(instance)
        if bound is None:
            bound = StaticFunction(self._function, self._input_spec, instance,
                                   self._convert_source)
            self._bound[instance] = bound
        return bound

    # ---------------------------------------------------------------- call
    def __call__(self, *args, **kwargs):
        if not settings.state.enabled:
            return self._call_eagerly(args, kwargs)
        if state.static:
            # Called while another program is being built: trace inline into it.
            function = (settings.convert(self._function) if self._convert_source
                        else self._function)
            if self._instance is not None:
                return function(self._instance, *args, **kwargs)
            return function(*args, **kwargs)
        key, tensors = self._key(args, kwargs)
        concrete = self._cache.get(key)
        if concrete is None:
            if self._last_key is not None:
                settings.log_retrace(self.__name__, self._last_key, key)
            concrete = self._trace(args, kwargs)
            self._cache[key] = concrete
        self._last_key = key
        settings.state.last_function = self
        outs = concrete.runner([t if isinstance(t, Tensor) else t for t in tensors])
        leaves = iter(outs)
        return nest.pack_as(concrete.outputs, [
            next(leaves) if isinstance(v, Variable) else v for v in nest.flatten(concrete.outputs)])

    def _call_eagerly(self, args, kwargs):
        if self._instance is not None:
            return self._function(self._instance, *args, **kwargs)
        return self._function(*args, **kwargs)

    # -------------------------------------------------------------- caching
    def _key(self, args, kwargs):
        """(key, flat tensors): specs of the tensors, values of everything else."""
        names = self._argument_names(len(args))
        parts, tensors = [], []
        for i, (name, value) in enumerate(zip(names, args)):
            spec = self._input_spec[i] if i < len(self._input_spec) else None
            parts.append((name, self._describe(name, value, spec, tensors)))
        for name in sorted(kwargs):
            parts.append((name, self._describe(name, kwargs[name], None, tensors)))
        training = getattr(self._instance, "training", None)
        return (tuple(parts), training, _hook_ids(self._instance)), tensors

    def _describe(self, name, value, spec, tensors):
        if isinstance(value, Tensor):
            if spec is not None:
                problem = spec.matches(value.shape, value.dtype)
                if problem:
                    raise ValueError(
                        f"{self.__name__}: argument {name!r} contradicts its input_spec: {problem}")
                tensors.append(value)
                return ("tensor", spec.shape, spec.dtype)
            tensors.append(value)
            data = value._data
            return ("tensor", data.shape, data.dtype)
        if isinstance(value, (list, tuple)):
            return (type(value).__name__, tuple(
                self._describe(f"{name}[{i}]", v, None, tensors) for i, v in enumerate(value)))
        if isinstance(value, dict):
            return ("dict", tuple((k, self._describe(f"{name}[{k!r}]", value[k], None, tensors))
                                  for k in sorted(value)))
        try:
            hash(value)
            return ("value", value)
        except TypeError:
            return ("object", id(value))

    def _argument_names(self, count):
        params = self._param_names
        if params is None:
            try:
                params = list(inspect.signature(self._function).parameters)
            except (TypeError, ValueError):
                params = []
            if self._instance is not None and params:
                params = params[1:]
            self._param_names = params
        if count <= len(params):
            return params[:count]
        return params + [f"arg{i}" for i in range(len(params), count)]

    # -------------------------------------------------------------- tracing
    def _trace(self, args, kwargs) -> ConcreteProgram:
        converted = (settings.convert(self._function) if self._convert_source
                     else self._function)
        program = Program()
        names = self._argument_names(len(args))
        inputs: list = []
        with framework.program_guard(program, Program()), framework.static_guard(True):
            static_args = [self._placeholder(program, n, a, inputs, i)
                           for i, (n, a) in enumerate(zip(names, args))]
            static_kwargs = {k: self._placeholder(program, k, v, inputs, None)
                             for k, v in kwargs.items()}
            if self._instance is not None:
                outputs = converted(self._instance, *static_args, **static_kwargs)
            else:
                outputs = converted(*static_args, **static_kwargs)
        fetches = [v.name for v in nest.flatten(outputs) if isinstance(v, Variable)]
        runner = ProgramRunner(program, [v.name for v in inputs], fetches,
                               dict(captured_tensors(program)))
        settings.dump_program(self.__name__, program)
        return ConcreteProgram(program, inputs, outputs, runner)

    def _placeholder(self, program, name, value, inputs, index):
        if isinstance(value, Tensor):
            spec = None
            if index is not None and index < len(self._input_spec):
                spec = self._input_spec[index]
            shape = spec.shape if spec is not None else value.shape
            block = program.global_block()
            wanted = spec.name if spec is not None and spec.name else name
            var = block.create_var(
                shape, value.dtype,
                name=wanted if wanted not in block.vars else program.unique_name(wanted),
                is_data=True, stop_gradient=value.stop_gradient)
            placeholder = Variable(program.global_block(), var.name)
            inputs.append(placeholder)
            return placeholder
        if isinstance(value, (list, tuple)):
            items = [self._placeholder(program, f"{name}_{i}", v, inputs, None)
                     for i, v in enumerate(value)]
            return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
        if isinstance(value, dict):
            return {k: self._placeholder(program, f"{name}_{k}", v, inputs, None)
                    for k, v in value.items()}
        return value

    # ------------------------------------------------------------ inspection
    @property
    def dygraph_function(self):
        """The original (eager) function."""
        return self._function

    @property
    def code(self) -> str:
        """The converted source code."""
        return settings.converted_code(self._function)

    @property
    def concrete_program(self) -> ConcreteProgram:
        if self._last_key is None:
            if not self._input_spec:
                raise RuntimeError(
                    f"{self.__name__} has not been called yet and has no input_spec: "
                    "call it once, or pass input_spec to to_static")
            self._trace_from_specs()
        return self._cache[self._last_key]

    @property
    def main_program(self) -> Program:
        return self.concrete_program.main_program

    def concrete_program_for_specs(self, input_spec=None) -> ConcreteProgram:
        """Trace (or reuse) the program for ``input_spec`` without running it."""
        specs = _as_specs(input_spec) or self._input_spec
        if not specs:
            return self.concrete_program
        saved, self._input_spec = self._input_spec, specs
        try:
            return self._trace_from_specs()
        finally:
            self._input_spec = saved

    def _trace_from_specs(self) -> ConcreteProgram:
        dummies = [Tensor(_zeros(spec)) for spec in self._input_spec]
        key, _ = self._key(dummies, {})
        if key not in self._cache:
            self._cache[key] = self._trace(dummies, {})
        self._last_key = key
        return self._cache[key]

    def rollback(self):
        """Back to the eager function: undo to_static and return the original."""
        if self._instance is None:
            return self._function
        original = types.MethodType(self._function, self._instance)
        self._instance.__dict__[self._function.__name__] = original
        return original

    def __repr__(self) -> str:
        return f"<StaticFunction {self.__name__}>"


def _as_specs(input_spec) -> list:
    if input_spec is None:
        return []
    specs = []
    for s in input_spec:
        if isinstance(s, InputSpec):
            specs.append(s)
        elif isinstance(s, Tensor):
            specs.append(InputSpec.from_tensor(s))
        else:
            raise TypeError(f"input_spec items must be InputSpec or Tensor, not {type(s).__name__}")
    return specs


def _hook_ids(layer) -> tuple:
    """The ids of the forward hooks registered on the sublayers of ``layer``.

    Hooks of sublayers run inside the traced program, so registering or removing
    one must retrace. (The layer's own hooks run around the call, outside it.)
    """
    sub_layers = getattr(layer, "_sub_layers", None)
    if not sub_layers:
        return ()
    ids, seen, stack = [], set(), list(sub_layers.values())
    while stack:
        sub = stack.pop()
        if sub is None or id(sub) in seen:
            continue
        seen.add(id(sub))
        if sub._forward_pre_hooks:
            ids.extend(sub._forward_pre_hooks)
        if sub._forward_post_hooks:
            ids.extend(-1 - i for i in sub._forward_post_hooks)
        stack.extend(sub._sub_layers.values())
    return tuple(ids)


def _zeros(spec: InputSpec):
    return np.zeros([1 if d == -1 else d for d in spec.shape], dtype=spec.dtype)
