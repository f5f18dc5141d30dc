"""The arguments of a converted function's call: bound, described for the cache key, fed.

A call's arguments are bound to the function's parameters first, so that keywords given
in any order (`f(b=..., a=...)`) and defaults left out describe and feed the same way.
Each argument is then described, recursively through lists, tuples and dicts:

- a Tensor or a NumPy array is an input of the program: described by its shape and dtype
  (the ``InputSpec``'s, which the value must match), fed at every call;
- a hashable value (numbers, strings, None, tuples of them, Layers, functions) by its type
  and value: another value traces another program;
- any other object by its type only, the program then guarded by the object's identity
  (``Arguments.identities``): no key ever holds ``id()`` of a mutable object.
"""

from __future__ import annotations

import inspect

import numpy as np

from dy2stat.static.input_spec import InputSpec
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Signature:
    """A function's parameters, for binding calls fast (``inspect`` for the errors)."""

    def __init__(self, function, skip_first: bool):
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            signature = None
        params = list(signature.parameters.values()) if signature is not None else []
        if skip_first and params:
            params = params[1:]
        self.params = params
        self.names = [p.name for p in params]
        self._signature = signature.replace(parameters=params) if signature else None
        defaults = [p.default for p in params]
        # Positional parameters only: for each count of positional arguments that
        # binds (every later parameter has a default), the defaults that follow.
        self._tails = {}
        self.all_positional = signature is not None and all(p.kind in _POSITIONAL
                                                            for p in params)
        if self.all_positional:
            for n in range(len(params) + 1):
                if all(d is not inspect.Parameter.empty for d in defaults[n:]):
                    self._tails[n] = tuple(defaults[n:])

    def bind(self, args: tuple, kwargs: dict) -> list:
        """[(name, value)] for every parameter, in the signature's order."""
        if not kwargs:
            tail = self._tails.get(len(args))
            if tail is not None:
                return list(zip(self.names, args + tail if tail else args))
        if self._signature is None:  # no signature: by position, then keywords by name
            names = [f"arg{i}" for i in range(len(args))]
            return list(zip(names, args)) + sorted(kwargs.items())
        bound = self._signature.bind(*args, **kwargs)  # raises what Python raises
        bound.apply_defaults()
        return list(bound.arguments.items())

    def per_parameter(self, specs: list) -> list:
        """``input_spec`` (one item per positional argument) as one spec per parameter:
        a ``*args`` parameter takes the rest as a tuple."""
        if self._signature is None:
            return list(specs)
        out, i = [], 0
        for param in self.params:
            if param.kind in _POSITIONAL:
                out.append(specs[i] if i < len(specs) else None)
                i += 1
            elif param.kind == inspect.Parameter.VAR_POSITIONAL:
                out.append(tuple(specs[i:]))
                i = len(specs)
            else:
                out.append(None)
        return out

    def call_arguments(self, bound: list) -> tuple[list, dict]:
        """``(args, kwargs)`` that pass ``bound`` (values in signature order) to the
        function."""
        if self._signature is None:
            return [v for n, v in bound if n.startswith("arg")], \
                {n: v for n, v in bound if not n.startswith("arg")}
        args, kwargs = [], {}
        for param, (_, value) in zip(self.params, bound):
            if param.kind in _POSITIONAL:
                args.append(value)
            elif param.kind == inspect.Parameter.VAR_POSITIONAL:
                args.extend(value)
            elif param.kind == inspect.Parameter.KEYWORD_ONLY:
                kwargs[param.name] = value
            else:
                kwargs.update(value)
        return args, kwargs


class Arguments:
    """One call's arguments described: the key, the values to feed, the objects whose
    identity the program assumes."""

    __slots__ = ("key", "feeds", "identities")

    def __init__(self, where: str, bound: list, specs: list):
        self.feeds: list = []  # Tensors, in the order of the program's inputs
        self.identities: list = []  # objects keyed by type only
        describe = self._describe
        parts = []
        for i, (name, value) in enumerate(bound):
            spec = specs[i] if i < len(specs) else None
            parts.append(describe(where, name, value, spec))
        self.key = tuple(parts)

    def _describe(self, where, name, value, spec):
        kind = type(value)
        if kind is Tensor and spec is None:  # the common case, first
            self.feeds.append(value)
            data = value._data
            return ("tensor", data.shape, data.dtype)
        if kind is Tensor or kind is np.ndarray or isinstance(value, (Tensor, np.ndarray)):
            shape, dtype = value.shape, value.dtype
            if isinstance(spec, InputSpec):
                problem = spec.matches(shape, dtype)
                if problem:
                    raise ValueError(f"{where}: argument {name!r} contradicts its input_spec: "
                                     f"{problem}")
                shape = spec.shape
            self.feeds.append(value if isinstance(value, Tensor) else Tensor(value))
            return ("tensor", tuple(shape), dtype)
        if kind is list or kind is tuple or isinstance(value, (list, tuple)):
            sub = spec if isinstance(spec, (list, tuple)) else ()
            return (kind, tuple(
                self._describe(where, f"{name}[{i}]", v, sub[i] if i < len(sub) else None)
                for i, v in enumerate(value)))
        if isinstance(value, dict):
            sub = spec if isinstance(spec, dict) else {}
            return (dict, tuple((k, self._describe(where, f"{name}[{k!r}]", v, sub.get(k)))
                                for k, v in _items(value)))
        try:
            hash(value)
        except TypeError:
            self.identities.append(value)
            return ("object", kind)
        return (kind, value)


def tensors_key(args: tuple) -> tuple | None:
    """The key Arguments gives arguments that are all Tensors (None if one is not)."""
    parts = []
    for value in args:
        if type(value) is not Tensor:
            return None
        data = value._data
        parts.append(("tensor", data.shape, data.dtype))
    return tuple(parts)


def _items(d: dict) -> list:
    try:
        return sorted(d.items())
    except TypeError:  # keys that do not sort: as inserted
        return list(d.items())


def as_specs(input_spec) -> list:
    """``input_spec`` as a list: InputSpecs (Tensors and arrays give theirs), nested lists,
    tuples and dicts of them, None and Python values as they are."""
    if input_spec is None:
        return []
    if not isinstance(input_spec, (list, tuple)):
        raise TypeError(f"input_spec must be a list or tuple, not {type(input_spec).__name__}")
    return [_as_spec(s) for s in input_spec]


def _as_spec(spec):
    if isinstance(spec, (Tensor, np.ndarray)):
        return InputSpec(list(spec.shape), spec.dtype)
    if isinstance(spec, (list, tuple)) and not hasattr(spec, "_fields"):
        return type(spec)(_as_spec(s) for s in spec)
    if isinstance(spec, dict):
        return {k: _as_spec(v) for k, v in spec.items()}
    return spec


def has_spec(value) -> bool:
    """Whether ``value`` is or holds an InputSpec."""
    if isinstance(value, InputSpec):
        return True
    if isinstance(value, (list, tuple)):
        return any(has_spec(v) for v in value)
    if isinstance(value, dict):
        return any(has_spec(v) for v in value.values())
    return False


def example_value(spec):
    """A value matching ``spec``: zeros for an InputSpec (unknown dims as 1), the same
    structure for containers, Python values as they are."""
    if isinstance(spec, InputSpec):
        return Tensor(np.zeros([1 if d == -1 else d for d in spec.shape], dtype=spec.dtype))
    if isinstance(spec, (list, tuple)):
        return type(spec)(example_value(s) for s in spec)
    if isinstance(spec, dict):
        return {k: example_value(v) for k, v in spec.items()}
    return spec


def placeholders(program, bound: list, specs: list) -> tuple[list, list]:
    """``bound`` with static data Variables in place of the tensors and arrays (one per
    feed of ``Arguments``, in its order), and those Variables."""
    inputs: list = []
    new = []
    for i, (name, value) in enumerate(bound):
        spec = specs[i] if i < len(specs) else None
        new.append((name, _placeholder(program, name, value, spec, inputs)))
    return new, inputs


def _placeholder(program, name, value, spec, inputs):
    if isinstance(value, (Tensor, np.ndarray)):
        spec = spec if isinstance(spec, InputSpec) else None
        block = program.global_block()
        wanted = spec.name if spec is not None and spec.name else name
        var = block.create_var(
            spec.shape if spec is not None else list(value.shape), value.dtype,
            name=wanted if wanted not in block.vars else program.unique_name(wanted),
            is_data=True,
            stop_gradient=value.stop_gradient if isinstance(value, Tensor) else True)
        placeholder = Variable(block, var.name)
        inputs.append(placeholder)
        return placeholder
    if isinstance(value, (list, tuple)):
        sub = spec if isinstance(spec, (list, tuple)) else ()
        items = [_placeholder(program, f"{name}_{i}", v, sub[i] if i < len(sub) else None,
                              inputs) for i, v in enumerate(value)]
        if hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        sub = spec if isinstance(spec, dict) else {}
        made = {k: _placeholder(program, f"{name}_{k}", v, sub.get(k), inputs)
                for k, v in _items(value)}
        ordered = {k: made[k] for k in value}  # the caller's order
        return ordered if type(value) is dict else type(value)(ordered)
    return value
