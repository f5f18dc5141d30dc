"""``Layer``: the base class of every model piece.

A Layer owns parameters, buffers and sublayers, registered by plain
attribute assignment, and runs forward pre-/post-hooks around ``forward``.
The same layer code builds a static program when static mode is on: its
parameters and buffers are then persistable variables of the main program.
"""

from __future__ import annotations

import collections
import itertools
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator

import numpy as np

from dy2stat import device
from dy2stat.autograd import no_grad
from dy2stat.default_dtype import default_float
from dy2stat.mode import state as _mode
from dy2stat.nn import static_mode
from dy2stat.nn.initializer import Constant, XavierUniform
from dy2stat.nn.parameter import ParamAttr, Parameter
from dy2stat.runtime import dtypes
from dy2stat.static import framework
from dy2stat.tensor import Tensor

_name_counts: collections.Counter = collections.Counter()


class _Changes:
    """How many times any Layer's attributes, parameters, sublayers or buffers were set:
    the guards of converted code check Layer attributes again only after this moved."""

    count = 0


changes = _Changes()


def unique_name(prefix: str) -> str:
    """``prefix_0``, ``prefix_1``, ... (one counter per prefix, for the process)."""
    index = _name_counts[prefix]
    _name_counts[prefix] += 1
    return f"{prefix}_{index}"


def _snake(name: str) -> str:
    """``BatchNorm2D`` -> ``batch_norm2d``, ``LSTMCell`` -> ``lstm_cell``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])",
                  "_", name).lower()


def _is_static(value) -> bool:
    return getattr(value, "is_static", False)


def _is_state(value) -> bool:
    """What a buffer may hold: an eager Tensor or a static Variable."""
    return isinstance(value, Tensor) or _is_static(value)


def create_parameter(shape, dtype=None, name: str | None = None, attr=None,
                     is_bias: bool = False, default_initializer=None,
                     default_name: str | None = None):
    """A new trainable parameter (``d2s.create_parameter``; Layers make theirs with it).

    ``attr`` is a ParamAttr, an initializer, a name, None or False (then no parameter:
    returns None). The initializer is the attr's, else ``default_initializer``, else
    zeros for a bias and Xavier-uniform otherwise; ``dtype`` defaults to the default
    dtype. In static mode this is a persistable variable of the main program,
    initialized by the startup program.
    """
    attr = ParamAttr.of(attr)
    if attr is None:
        return None
    shape = [int(d) for d in shape]
    dtype = dtypes.as_dtype(default_float() if dtype is None else dtype,
                           where="create_parameter")
    init = attr.initializer or default_initializer or (
        Constant(0.0) if is_bias else XavierUniform())
    given = attr.name or name
    name = given or default_name or unique_name("create_parameter")
    if static_mode.in_static_mode():
        return static_mode.create_parameter(shape, dtype, name, init, attr.trainable)
    param = Parameter(init(shape, dtype, device.current.xp), name=name,
                      trainable=attr.trainable, learning_rate=attr.learning_rate,
                      regularizer=attr.regularizer, need_clip=attr.need_clip)
    param._auto_name = given is None
    return param


class HookRemoveHelper:
    """The handle a hook registration returns; ``remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self._id = next(HookRemoveHelper._ids)

    def remove(self) -> None:
        """Unregister the hook."""
        changes.count += 1
        self._hooks.pop(self._id, None)


class Layer:
    """Base class of layers: subclass it, create state in ``__init__``, define ``forward``."""

    training: bool

    def __init__(self, name_scope: str | None = None, dtype=None):
        state = self.__dict__
        state["training"] = True
        state["_parameters"] = OrderedDict()
        state["_sub_layers"] = OrderedDict()
        state["_buffers"] = OrderedDict()
        state["_non_persistable_buffer_names"] = set()
        state["_forward_pre_hooks"] = OrderedDict()
        state["_forward_post_hooks"] = OrderedDict()
        state["_full_name"] = unique_name(name_scope or _snake(type(self).__name__))
        state["_dtype"] = dtypes.as_dtype(default_float() if dtype is None else dtype,
                                          where=type(self).__name__)
        state["_created"] = {"w": 0, "b": 0}  # counts for placeholder parameter names

    # ------------------------------------------------------------------ call
    def forward(self, *inputs, **kwargs):
        """The layer's computation; calling the layer runs it between its forward pre- and
        post-hooks (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *inputs, **kwargs):
        if _mode.static:  # building a program: its ops record this layer's scope
            with framework.layer_scope(self):
                return self._call(inputs, kwargs)
        if not (self._forward_pre_hooks or self._forward_post_hooks):
            return self.forward(*inputs, **kwargs)
        return self._call(inputs, kwargs)

    def _call(self, inputs, kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, inputs)
            if result is not None:
                inputs = result if isinstance(result, tuple) else (result,)
        outputs = self.forward(*inputs, **kwargs)
        for hook in list(self._forward_post_hooks.values()):
            result = hook(self, inputs, outputs)
            if result is not None:
                outputs = result
        return outputs

    def register_forward_pre_hook(self, hook: Callable) -> HookRemoveHelper:
        """``hook(layer, inputs)`` runs before forward; a non-None result replaces the
        inputs (a single value is taken as the only input)."""
        changes.count += 1
        handle = HookRemoveHelper(self._forward_pre_hooks)
        self._forward_pre_hooks[handle._id] = hook
        return handle

    def register_forward_post_hook(self, hook: Callable) -> HookRemoveHelper:
        """``hook(layer, inputs, outputs)`` runs after forward; a non-None result
        replaces the outputs."""
        changes.count += 1
        handle = HookRemoveHelper(self._forward_post_hooks)
        self._forward_post_hooks[handle._id] = hook
        return handle

    # ------------------------------------------------------------- creation
    def full_name(self) -> str:
        """The layer's unique name (``linear_0``); its parameters' names start with it."""
        return self._full_name

    def create_parameter(self, shape, attr=None, dtype=None, is_bias: bool = False,
                         default_initializer=None):
        """A new parameter (not yet registered: assign it to an attribute).

        ``attr`` is a ParamAttr, an initializer, a name, None or False (then
        no parameter: returns None). The initializer is the attr's, else
        ``default_initializer``, else zeros for a bias and Xavier-uniform
        otherwise. In static mode this is a persistable variable of the main
        program, initialized by the startup program.
        """
        if ParamAttr.of(attr) is None:
            return None
        kind = "b" if is_bias else "w"
        name = f"{self._full_name}.{kind}_{self._created[kind]}"
        self._created[kind] += 1
        return create_parameter(shape, dtype if dtype is not None else self._dtype, attr=attr,
                                is_bias=is_bias, default_initializer=default_initializer,
                                default_name=name)

    def create_buffer(self, name: str, shape, dtype=None, fill_value: float = 0.0):
        """A tensor for ``register_buffer(name, ...)`` filled with ``fill_value`` (a
        persistable variable of the main program in static mode)."""
        shape = [int(d) for d in shape]
        dtype = dtypes.as_dtype(dtype if dtype is not None else self._dtype,
                               where="create_buffer")
        full = f"{self._full_name}.{name}"
        if static_mode.in_static_mode():
            return static_mode.create_buffer(shape, dtype, full, Constant(fill_value))
        return Tensor(device.current.xp.full(tuple(shape), fill_value, dtype=dtype), name=full)

    # --------------------------------------------------------- registration
    def _require_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before assigning {what}"
            )

    def _forget(self, name: str) -> None:
        changes.count += 1
        self.__dict__.pop(name, None)
        for store in (self._parameters, self._sub_layers, self._buffers):
            store.pop(name, None)
        self._non_persistable_buffer_names.discard(name)

    @staticmethod
    def _check_name(name, what: str) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{what} name must be a non-empty string without '.', got {name!r}")

    def add_parameter(self, name: str, parameter):
        """Register ``parameter`` (a Parameter, a static parameter variable or None)."""
        self._require_init(f"parameter {name!r}")
        self._check_name(name, "parameter")
        if parameter is not None and not (
            isinstance(parameter, Parameter) or _is_static(parameter)
        ):
            raise TypeError(f"add_parameter({name!r}): expected a Parameter or None, "
                            f"got {type(parameter).__name__}")
        self._forget(name)
        if isinstance(parameter, Parameter) and parameter._auto_name:
            parameter.name = f"{self._full_name}.{name}"
            parameter._auto_name = False
        self._parameters[name] = parameter
        return parameter

    def add_sublayer(self, name: str, sublayer):
        """Register ``sublayer`` (a Layer or None) under ``name``; returns it."""
        self._require_init(f"sublayer {name!r}")
        self._check_name(name, "sublayer")
        if sublayer is not None and not isinstance(sublayer, Layer):
            raise TypeError(f"add_sublayer({name!r}): expected a Layer, "
                            f"got {type(sublayer).__name__}")
        self._forget(name)
        self._sub_layers[name] = sublayer
        return sublayer

    def register_buffer(self, name: str, tensor, persistable: bool = True) -> None:
        """Register state that is not trained (running statistics, masks).

        Persistable buffers are part of ``state_dict``.
        """
        self._require_init(f"buffer {name!r}")
        self._check_name(name, "buffer")
        if tensor is not None and not _is_state(tensor):
            raise TypeError(f"register_buffer({name!r}): expected a Tensor or None, "
                            f"got {type(tensor).__name__}")
        if name in self._parameters or name in self._sub_layers:
            raise KeyError(f"register_buffer: {name!r} is already a parameter or sublayer of "
                           f"{self._full_name}")
        self._forget(name)
        if isinstance(tensor, Tensor) and tensor.name is None:
            tensor.name = f"{self._full_name}.{name}"
        self._buffers[name] = tensor
        if not persistable:
            self._non_persistable_buffer_names.add(name)

    def __setattr__(self, name: str, value) -> None:
        changes.count += 1
        recorder = _mode.recorder
        if recorder is not None:  # a converted forward sets it: a write of the trace
            recorder.wrote_attr(self, name)
        state = self.__dict__
        params = state.get("_parameters")
        buffers = state.get("_buffers", {})
        if isinstance(value, Parameter) or (
            _is_static(value) and value.persistable and name not in buffers
        ):
            self.add_parameter(name, value)
        elif isinstance(value, Layer):
            self.add_sublayer(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to parameter "
                                f"{name!r} of {self._full_name} (a Parameter or None is expected)")
            params[name] = None
        elif params is not None and name in self._sub_layers:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to sublayer "
                                f"{name!r} of {self._full_name} (a Layer or None is expected)")
            self._sub_layers[name] = None
        elif name in buffers:
            if value is not None and not _is_state(value):
                raise TypeError(f"cannot assign a {type(value).__name__} to buffer "
                                f"{name!r} of {self._full_name} (a Tensor or None is expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        state = self.__dict__
        if "_parameters" in state:
            for store in ("_parameters", "_sub_layers", "_buffers"):
                if name in state[store]:
                    return state[store][name]
        elif not name.startswith("__"):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} "
                                 "(did its __init__ call super().__init__()?)")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        changes.count += 1
        if name in self._parameters or name in self._sub_layers or name in self._buffers:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._sub_layers)
                      | set(self._buffers))

    # ------------------------------------------------------------ traversal
    def named_sublayers(self, prefix: str = "", include_self: bool = False,
                        layers_set: set | None = None) -> Iterator[tuple[str, Layer]]:
        """(dotted name, layer) for every layer below (each once), depth first."""
        seen = set() if layers_set is None else layers_set
        if id(self) in seen:
            return
        seen.add(id(self))
        if include_self:
            yield prefix, self
        for name, layer in self._sub_layers.items():
            if layer is None:
                continue
            path = f"{prefix}.{name}" if prefix else name
            yield from layer.named_sublayers(path, include_self=True, layers_set=seen)

    def sublayers(self, include_self: bool = False) -> list[Layer]:
        """All sublayers, recursively (each once), with this layer first when
        ``include_self``."""
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_children(self) -> Iterator[tuple[str, Layer]]:
        """(name, layer) pairs of the direct sublayers."""
        seen = set()
        for name, layer in self._sub_layers.items():
            if layer is not None and id(layer) not in seen:
                seen.add(id(layer))
                yield name, layer

    def children(self) -> Iterator[Layer]:
        """The direct sublayers."""
        for _, layer in self.named_children():
            yield layer

    def _named_members(self, store: str, prefix: str, include_sublayers: bool):
        layers = (self.named_sublayers(prefix, include_self=True) if include_sublayers
                  else [(prefix, self)])
        seen = set()
        for path, layer in layers:
            for name, value in getattr(layer, store).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{path}.{name}" if path else name), value

    def named_parameters(self, prefix: str = "", include_sublayers: bool = True):
        """(dotted name, parameter) pairs; a shared parameter appears once."""
        yield from self._named_members("_parameters", prefix, include_sublayers)

    def parameters(self, include_sublayers: bool = True) -> list:
        """The parameters of this layer and (``include_sublayers``) its sublayers; a shared
        one appears once."""
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_buffers(self, prefix: str = "", include_sublayers: bool = True):
        """(dotted name, buffer) pairs: running statistics and other state that is not
        trained."""
        yield from self._named_members("_buffers", prefix, include_sublayers)

    def buffers(self, include_sublayers: bool = True) -> list:
        """The buffers of this layer and (``include_sublayers``) its sublayers."""
        return [b for _, b in self.named_buffers(include_sublayers=include_sublayers)]

    def apply(self, fn: Callable[[Layer], None]) -> Layer:
        """Call ``fn`` on every sublayer, then on this layer; returns self."""
        for layer in self.children():
            layer.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Layer:
        """Training mode for this layer and all its sublayers (dropout, batch norm)."""
        for layer in self.sublayers(include_self=True):
            layer.training = bool(mode)
        return self

    def eval(self) -> Layer:
        """Inference mode: only dropout and batch norm behave differently."""
        return self.train(False)

    def clear_gradients(self) -> None:
        """Drop the gradients of all parameters."""
        for p in self.parameters():
            if isinstance(p, Tensor):
                p.clear_gradient()

    # -------------------------------------------------------------- state
    def state_dict(self, destination=None, include_sublayers: bool = True,
                   structured_name_prefix: str = "") -> OrderedDict:
        """Dotted name -> Tensor for the parameters and persistable buffers."""
        dest = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                dest[structured_name_prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistable_buffer_names:
                dest[structured_name_prefix + name] = b
        if include_sublayers:
            for name, layer in self._sub_layers.items():
                if layer is not None:
                    layer.state_dict(dest, True, f"{structured_name_prefix}{name}.")
        return dest

    def set_state_dict(self, state_dict, strict: bool = True):
        """Copy values (Tensors or arrays) into the parameters and buffers in place.

        Returns ``(missing_keys, unexpected_keys)``; with ``strict`` either is
        an error. A shape mismatch is always an error naming the key; nothing
        is written unless every value fits.
        """
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise KeyError(f"set_state_dict for {type(self).__name__}: " + "; ".join(parts))
        updates = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            value = value._data if isinstance(value, Tensor) else value
            if _is_static(value):
                raise TypeError(f"set_state_dict: {key!r} is a static Variable, which has no "
                                "value; pass Tensors or arrays")
            shape = list(np.shape(value))
            if shape != list(target.shape):
                raise ValueError(f"set_state_dict: {key!r} has shape {shape} but the layer "
                                 f"expects {list(target.shape)}")
            updates.append((target, value))
        with no_grad():
            for target, value in updates:
                if _is_static(target):
                    static_mode.set_value(target, value)
                else:
                    target.set_value(value)
        return missing, unexpected

    load_dict = set_state_dict

    def to(self, device=None, dtype=None, blocking=None) -> Layer:
        """Move (``"cpu"``, ``"gpu"``, ``"gpu:N"``) and/or cast (float state only) every
        parameter and buffer in place, keeping the same Tensor objects; returns self."""
        if device is not None and str(device) in ("float16", "float32", "float64"):
            device, dtype = None, device
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype, where="Layer.to")
            if dtype not in dtypes.FLOATS:
                raise TypeError(f"Layer.to: dtype must be a float dtype, got {dtype}")
        state = [t for t in self.parameters() + self.buffers() if isinstance(t, Tensor)]
        for t in state:
            for attr in ("_data", "grad"):
                value = getattr(t, attr)
                if value is None:
                    continue
                moved = value if attr == "_data" else value._data
                if dtype is not None and moved.dtype in dtypes.FLOATS:
                    moved = moved.astype(dtype)
                if device is not None:
                    moved = Tensor(moved).to(device)._data
                if attr == "_data":
                    t._data = moved
                else:
                    t.grad = Tensor(moved)
            t._version += 1
        if dtype is not None:
            for layer in self.sublayers(include_self=True):
                layer.__dict__["_dtype"] = dtype
        return self

    # --------------------------------------------------------------- text
    def extra_repr(self) -> str:
        """What ``repr`` shows between the parentheses (override in subclasses)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        children = [(n, layer) for n, layer in self._sub_layers.items() if layer is not None]
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = [f"  {extra}"] if extra else []
        for name, layer in children:
            body = repr(layer).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"
