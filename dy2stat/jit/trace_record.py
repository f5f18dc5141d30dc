"""``TraceRecord``: what one trace reads and writes outside its arguments.

While a converted function is traced, the record is ``dy2stat.mode.state.recorder``:

- converted code reads attributes through ``_jst.read_attr`` and a converted function
  entered reports the globals and closure variables it may read; Layers it calls are
  recorded whole (their attributes, parameters, sublayers and buffers). What was read
  becomes the trace's ``Guards``.
- ``Layer.__setattr__`` reports every attribute the trace sets, and a converted function
  entered reports the globals and closure variables it declares ``global``/``nonlocal``.
  When the trace ends these locations get their old values back (no static Variable is
  left behind) and the new values become the program's ``Effects``: after every run
  they are set again, with the run's tensors in place of the Variables. So a forward that
  keeps state (``self.steps = self.steps + 1`` on a buffer, ``self.cache = h``, a global
  counter) leaves the same state as the eager forward.

A tensor written where a tensor was before (a buffer, a tensor attribute or global the
program read) takes the new value in place: the tensor stays the one the program reads.

A training step in the trace -- ``backward()``, gradients, optimizer updates, scheduler
steps -- is recorded by the record's ``steps`` (``dy2stat.jit.step_record``); the gradients
it leaves are effects too (``.grad`` set to a new tensor after each run).
"""

from __future__ import annotations

import inspect
import types

from dy2stat.dy2static import convert_call_func
from dy2stat.dy2static.errors import Dy2StaticError
from dy2stat.jit.guards import Entry, Guards
from dy2stat.jit.step_record import StepRecord
from dy2stat.mode import state
from dy2stat.nn.layer import Layer
from dy2stat.static import nest
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

MISSING = object()  # a location that had no value

# Layer.__dict__ entries that are bookkeeping, not state a forward reads.
_BOOKKEEPING = frozenset({
    "_parameters", "_sub_layers", "_buffers", "_non_persistable_buffer_names",
    "_forward_pre_hooks", "_forward_post_hooks", "_full_name", "_dtype", "_created",
    "forward",
})
_STORES = ("_parameters", "_sub_layers", "_buffers")


class SideEffectError(Dy2StaticError, TypeError):
    """Converted code left a traced value where it cannot be replayed after each run."""


class _Location:
    """An attribute, a global (an item of a module's dict) or a closure cell."""

    __slots__ = ("holder", "access", "name", "label", "old")

    def __init__(self, holder, access: str, name, label: str, old):
        self.holder, self.access, self.name, self.label, self.old = (
            holder, access, name, label, old)

    def read(self):
        try:
            if self.access == "grad":
                return self.holder._grad
            if self.access == "attr":
                return _layer_value(self.holder, self.name) \
                    if isinstance(self.holder, Layer) else getattr(self.holder, self.name)
            if self.access == "item":
                return self.holder[self.name]
            return self.holder.cell_contents
        except (AttributeError, KeyError, ValueError):
            return MISSING

    def assign(self, value) -> None:
        if self.access == "grad":
            self.holder._grad = None if value is MISSING else value
        elif self.access == "attr":
            if value is MISSING:
                if hasattr(self.holder, self.name):
                    delattr(self.holder, self.name)
            else:
                setattr(self.holder, self.name, value)
        elif self.access == "item":
            if value is MISSING:
                self.holder.pop(self.name, None)
            else:
                self.holder[self.name] = value
        elif value is MISSING:
            try:
                del self.holder.cell_contents
            except ValueError:
                pass
        else:
            self.holder.cell_contents = value


def _layer_value(layer: Layer, name: str):
    state_ = layer.__dict__
    if name in state_:
        return state_[name]
    for store in _STORES:
        if name in state_[store]:
            return state_[store][name]
    raise AttributeError(name)


def _layer_items(layer: Layer):
    """(name, value) for everything a Layer holds that a forward may read."""
    state_ = layer.__dict__
    for name, value in state_.items():
        if name not in _BOOKKEEPING:
            yield name, value
    for store in _STORES:
        yield from state_.get(store, {}).items()


class Effects:
    """The writes of a trace, made again after every run of its program."""

    def __init__(self, items: list):
        self.items = items  # (location, new value with Variables, tensor to update or None)
        self.fetches = [leaf.name for _, new, _ in items for leaf in nest.flatten(new)
                        if isinstance(leaf, Variable)]

    def __bool__(self) -> bool:
        return bool(self.items)

    def apply(self, values: list) -> None:
        """Set every written location, the run's tensors (``values``, one per fetch) in
        place of the trace's Variables."""
        it = iter(values)
        for location, new, in_place in self.items:
            value = nest.replace_leaves(new, _is_variable, it)
            if in_place is not None:
                _become(in_place, value)
            elif not _same(location.read(), value):
                location.assign(value)


def _become(tensor: Tensor, value: Tensor) -> None:
    """``tensor`` takes ``value``'s array and autograd link (the object stays)."""
    tensor._data, tensor._node, tensor._index = value._data, value._node, value._index
    tensor.stop_gradient = value.stop_gradient
    tensor._version += 1


def _same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, (Tensor, Variable)) or isinstance(b, (Tensor, Variable)):
        return False
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


class TraceRecord:
    """The reads (guards) and writes (effects) of one trace; see the module docstring."""

    def __init__(self, instance=None, arguments: list = ()):
        self.instance = instance
        self.always: dict = {}  # (holder id, access, name) -> Entry, checked every call
        self.layer_reads: dict = {}  # the same for Layer state, checked after Layer changes
        self.layers: dict = {}  # id -> Layer whose state was recorded
        self.read_first: set = set()  # Layer state keys read before the trace set them
        self.labels: dict = {}  # id(object) -> how messages name it
        self.writes: dict = {}  # key -> _Location (with the value before the trace)
        self.objects: dict = {}  # id -> non-Layer objects whose attributes were read
        self.entered: set = set()  # ids of the converted functions already recorded
        self.originals: dict = {}  # (holder id, "attr", name) -> the object first seen there
        self.grad_mode = state.grad_enabled  # the caller's, when the trace starts
        self.steps = StepRecord(self._guard_tensor, self._tensor_label)
        for name, value in arguments:
            self._label(value, name)
        if instance is not None:
            self._label(instance, "self")
            self.touch(instance)

    # --------------------------------------------------------------- labels
    def _label(self, value, label: str) -> None:
        if isinstance(value, Layer):
            for path, sub in value.named_sublayers(include_self=True):
                self.labels.setdefault(id(sub), f"{label}.{path}" if path else label)
        elif not isinstance(value, (int, float, str, bool, type(None))):
            self.labels.setdefault(id(value), label)

    def _name(self, obj, name: str) -> str:
        base = self.labels.get(id(obj))
        if base is None:
            base = obj.__name__ if isinstance(obj, types.ModuleType) \
                else f"<{type(obj).__name__} object>"
        return f"{base}.{name}"

    def _tensor_label(self, tensor: Tensor) -> str:
        return self.labels.get(id(tensor)) or tensor.name or "a tensor"

    def _guard_tensor(self, entry: Entry) -> None:
        self.always.setdefault((id(entry.holder), entry.access, None), entry)

    # ---------------------------------------------------- training steps
    def grad_of(self, tensor: Tensor):
        """``tensor.grad`` read by the trace (``Tensor.grad``)."""
        return self.steps.grad_of(tensor)

    def set_grad(self, tensor: Tensor, value) -> None:
        """``tensor.grad = value`` in the trace."""
        self.steps.set_grad(tensor, value)

    def backward(self, roots: list, seeds: list, retain_graph: bool) -> None:
        """``backward()`` of static values (``dy2stat.autograd.backward``)."""
        self.steps.backward(roots, seeds, retain_graph)

    # ---------------------------------------------------------------- reads
    def touch(self, layer: Layer) -> None:
        """Record all of a Layer's state (and, for the framework's own Layers, whose
        forward runs unconverted, that of their sublayers)."""
        if id(layer) in self.layers or "_parameters" not in layer.__dict__:
            return
        self.layers[id(layer)] = layer
        for name, value in _layer_items(layer):
            key = (id(layer), "attr", name)
            if key in self.writes:
                value = self.writes[key].old
            self.originals.setdefault(key, value)
            if value is not MISSING and not isinstance(value, Variable):
                self.layer_reads[key] = Entry(layer, "attr", name, value, self._name(layer, name))
        if layer is not self.instance:  # its own hooks run outside the program
            for name in ("_forward_pre_hooks", "_forward_post_hooks"):
                hooks = layer.__dict__.get(name)
                if hooks is not None:
                    self.layer_reads[(id(layer), "keys", name)] = Entry(
                        layer, "keys", name, tuple(hooks), self._name(layer, name))
        if convert_call_func.is_library(type(layer)):
            for sub in layer._sub_layers.values():
                if sub is not None:
                    self.touch(sub)

    def read_attr(self, obj, name: str, value) -> None:
        """``obj.name`` gave ``value`` (from ``_jst.read_attr``)."""
        if isinstance(obj, (Tensor, Variable)) or isinstance(value, Variable):
            return  # a tensor's metadata is fixed by the program; Variables are the trace's
        key = (id(obj), "attr", name)
        label = self._name(obj, name)
        if isinstance(obj, Layer):
            self.touch(obj)
            if key in self.layer_reads:
                if key not in self.writes:
                    self.read_first.add(key)
                self._label(value, label)
                return
            if _is_method_or_property(obj, name):
                return
        elif isinstance(obj, types.ModuleType) and convert_call_func.is_library(obj):
            return
        elif not isinstance(obj, types.ModuleType):
            self.objects[id(obj)] = obj
            self.originals.setdefault(key, value)
        if key not in self.writes and key not in self.always:
            self.always[key] = Entry(obj, "attr", name, value, label)
        self._label(value, label)

    def enter(self, fn, globals_read, globals_written, cells_written) -> None:
        """Converted ``fn`` starts: record the globals and closure variables it may read,
        and the values of those it may assign."""
        if id(fn) in self.entered:
            return
        self.entered.add(id(fn))
        scope = fn.__globals__
        for name in globals_written:
            key = (id(scope), "item", name)
            if key not in self.writes:
                self.writes[key] = _Location(scope, "item", name, name, scope.get(name, MISSING))
        for name in globals_read:
            if name not in scope:
                continue  # a builtin
            value = scope[name]
            if isinstance(value, (types.ModuleType, Variable)):
                continue
            key = (id(scope), "item", name)
            if key not in self.always and (key not in self.writes
                                           or self.writes[key].old is value):
                self.always[key] = Entry(scope, "item", name, value, name)
                self._label(value, name)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                value = MISSING
            key = (id(cell), "cell", None)
            if name in cells_written and key not in self.writes:
                self.writes[key] = _Location(cell, "cell", None, name, value)
            if value is MISSING or isinstance(value, (types.ModuleType, Variable)):
                continue
            if key not in self.always:
                self.always[key] = Entry(cell, "cell", None, value, name)
                self._label(value, name)

    def read_grad_mode(self) -> None:
        """The trace asked whether gradients are recorded: the caller's mode is guarded."""
        key = (id(state), "attr", "grad_enabled")
        if key not in self.always:
            self.always[key] = Entry(state, "attr", "grad_enabled", self.grad_mode,
                                     "d2s.is_grad_enabled()")

    # --------------------------------------------------------------- writes
    def wrote_attr(self, layer: Layer, name: str) -> None:
        """``layer.name`` is about to be set by the trace."""
        self.touch(layer)
        key = (id(layer), "attr", name)
        if key not in self.writes:
            try:
                old = _layer_value(layer, name)
            except AttributeError:
                old = MISSING
            self.writes[key] = _Location(layer, "attr", name, self._name(layer, name), old)

    # --------------------------------------------------------------- ending
    def undo(self) -> list:
        """Put every written location back as it was; the values the trace left there.

        Runs with no recorder set (the restoring assignments are not the trace's)."""
        self._find_leaks()
        written = []
        for location in self.writes.values():
            new = location.read()
            location.assign(location.old)
            written.append((location, new))
        return written

    def _find_leaks(self) -> None:
        """Attributes of the objects read that the trace set to Variables without going
        through ``Layer.__setattr__`` (plain objects' attributes): writes too. (A list or
        dict changed in place is not: ``_check_containers`` refuses it.)"""
        for obj in list(self.objects.values()) + list(self.layers.values()):
            items = _layer_items(obj) if isinstance(obj, Layer) else \
                list(getattr(obj, "__dict__", {}).items())
            for name, value in items:
                key = (id(obj), "attr", name)
                original = self.originals.get(key, MISSING)
                if key not in self.writes and value is not original and _holds_variable(value):
                    self.writes[key] = _Location(obj, "attr", name, self._name(obj, name),
                                                 original)

    def conclude(self, written: list) -> tuple[Guards, Effects]:
        """The guards of the trace and its effects (from ``undo``'s result)."""
        items = [(_Location(tensor, "grad", None, label, old), new, None)
                 for tensor, label, old, new in self.steps.effects()]
        for location, new in written:
            if new is location.old:
                continue
            _check_replayable(location, new)
            in_place = None
            if isinstance(new, Variable) and isinstance(location.old, Tensor):
                in_place = location.old
                self._guard_layout(location.old, new)
            items.append((location, new, in_place))
        self._check_containers()
        layer_reads = [e for k, e in self.layer_reads.items()
                       if k not in self.writes or k in self.read_first]
        for entry in list(self.always.values()) + layer_reads:
            entry.settle()
        return Guards(list(self.always.values()), layer_reads), Effects(items)

    def _guard_layout(self, tensor: Tensor, new: Variable) -> None:
        """A tensor updated in place with values of another shape or dtype would not fit
        the program that reads it: guard its shape and dtype."""
        if list(new.shape) == tensor.shape and new.dtype == tensor.dtype:
            return
        label = self.labels.get(id(tensor), "a written tensor")
        for attr in ("shape", "dtype"):
            key = (id(tensor), "attr", attr)
            self.always.setdefault(key, Entry(tensor, "attr", attr, getattr(tensor, attr),
                                              f"{label}.{attr}"))

    def _check_containers(self) -> None:
        """Lists and dicts read (not written) must not have been given Variables."""
        for entry in list(self.always.values()) + list(self.layer_reads.values()):
            try:
                value = entry.read()
            except Exception:
                continue
            if isinstance(value, (list, dict)) and _holds_variable(value):
                raise SideEffectError(
                    f"converted code put a traced tensor into {entry.label} (a "
                    f"{type(value).__name__} kept across calls); its contents cannot be "
                    "kept up to date after each run. Assign a new list or dict to it "
                    "instead of changing it in place, or return the values")


def _holds_variable(value) -> bool:
    if isinstance(value, Variable):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_variable(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_variable(v) for v in value.values())
    return False


def _check_replayable(location: _Location, new) -> None:
    for leaf in nest.flatten(new) if isinstance(new, (list, tuple, dict)) else [new]:
        if isinstance(leaf, Variable) and leaf.block.idx != 0:
            raise SideEffectError(
                f"{location.label} is given a value computed inside a tensor-dependent "
                "`if` or loop body, and keeps it after that statement ends; assign it "
                "after the statement (or in every branch, from values defined before it)")
    if not isinstance(new, (Variable, list, tuple, dict)) and _holds_variable(
            getattr(new, "__dict__", {})):
        raise SideEffectError(
            f"{location.label} is given a {type(new).__name__} holding traced tensors; "
            "only tensors and lists, tuples and dicts of them can be kept across calls")


def _is_method_or_property(obj, name: str) -> bool:
    """Class-level functions and descriptors: not state of the instance."""
    found = inspect.getattr_static(type(obj), name, MISSING)
    return found is not MISSING and (
        isinstance(found, (types.FunctionType, property, staticmethod, classmethod))
        or hasattr(found, "__get__"))


def recording(record: TraceRecord):
    """Context: ``record`` is the current thread's recorder inside the block."""
    return _Recording(record)


class _Recording:
    def __init__(self, record):
        self.record = record

    def __enter__(self):
        self.previous, state.recorder = state.recorder, self.record
        return self.record

    def __exit__(self, *exc):
        state.recorder = self.previous
        return False


def _is_variable(value) -> bool:
    return isinstance(value, Variable)
