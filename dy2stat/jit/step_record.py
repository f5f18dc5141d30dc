"""A training step traced: gradients, updates and learning rates inside one program.

While a converted function is traced, what a training step does outside its tensors goes
through the trace's ``StepRecord`` (``TraceRecord.steps``), so that ``loss.backward()``,
``opt.step()`` and ``opt.clear_grad()`` written in the function become ops of its
program and every run leaves what the eager step leaves:

- **Gradients.** A tensor's ``.grad`` read in the trace is the program's value of it:
  what the trace assigned (an earlier ``backward()`` accumulated, ``clear_grad()`` set
  to None), else the gradient the tensor holds when the program runs -- fed at every
  call, the program guarded on whether there is one (and its shape and dtype) -- else
  None. ``backward()`` appends the gradient ops of its roots and accumulates them into
  the gradients of the parameters they reach, as eager backward does. Every gradient
  the trace assigned becomes an effect: after each run the tensor's ``.grad`` is the
  run's value (a new tensor, as eagerly), or None.
- **Host inputs.** Values the program reads from the host at every call, in trace
  order: a gradient kept from before the call, an optimizer's learning rate.
- **Host calls.** A scheduler's ``step()`` (or ``set_lr``) in the trace is not made while
  tracing but before every run, in its place among the host inputs: each run's updates
  read the rates the eager step would read.
- **Freed graphs.** ``backward()`` without ``retain_graph`` marks the forward ops it went
  through; a second backward through them fails as it does eagerly.
"""

from __future__ import annotations

from dy2stat.autograd import no_grad
from dy2stat.dy2static.errors import Dy2StaticError
from dy2stat.jit.guards import Entry, grad_layout
from dy2stat.runtime import backward as runtime_backward
from dy2stat.runtime import dtypes, passes
from dy2stat.static import framework
from dy2stat.static.builder import capture, captured_tensors, user_location
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor


class TrainingStepError(Dy2StaticError, NotImplementedError):
    """A training step written in converted code that its program cannot reproduce."""


class _Slot:
    """The gradient of one tensor in the trace: its value before, its value now."""

    __slots__ = ("tensor", "old", "value", "written", "read_as")

    def __init__(self, tensor: Tensor, old, value, written: bool):
        self.tensor, self.old, self.value, self.written = tensor, old, value, written
        # The name of the value read from before the call: an index assignment into the
        # gradient (``p.grad[0] = 0``) rebinds the Variable, and that is a write.
        self.read_as = value.name if isinstance(value, Variable) else None

    def changed(self) -> bool:
        if self.written:
            return self.value is not self.old
        return self.read_as is not None and self.value.name != self.read_as


class StepRecord:
    """Gradients, host inputs and host calls of one trace (see the module docstring)."""

    def __init__(self, guard, label):
        self._guard = guard  # adds an Entry to the trace's guards
        self._label = label  # a tensor -> how messages name it
        self.slots: dict[int, _Slot] = {}  # id(tensor) -> its gradient in the trace
        self.actions: list = []  # (callable, feeds): run before every run, in order
        self.input_names: list[str] = []  # the host inputs' variables, in order
        self.freed: set[int] = set()  # ids of forward ops a backward went through
        # Arguments a backward reaches: placeholder name -> where (the user's line).
        self.reaching: dict[str, str] = {}
        # ids of the tensors whose gradient only some branches of the program give
        self.sometimes_reached: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.slots or self.actions)

    # ------------------------------------------------------------ gradients
    def grad_of(self, tensor: Tensor):
        slot = self.slots.get(id(tensor))
        if slot is None:
            old = tensor._grad
            self._guard(Entry(tensor, "grad", None, grad_layout(tensor),
                              f"{self._label(tensor)}.grad"))
            value = None if old is None else self.host_input(
                lambda: tensor._grad._data, old.shape, old.dtype, "grad")
            slot = self.slots[id(tensor)] = _Slot(tensor, old, value, False)
        return slot.value

    def guard_trainable(self, tensors) -> None:
        """The program assumes which of ``tensors`` need a gradient (what a backward reaches,
        what an optimizer updates): guarded."""
        for t in tensors:
            self._guard(Entry(t, "stop_gradient", None, t.stop_gradient,
                              f"{self._label(t)}.stop_gradient"))

    def refuse_branch_gradients(self, tensors, optimizer: str) -> None:
        """Raise when an update of ``tensors`` would see a gradient that only some
        branches give: the program has zeros where eager mode has none, and
        ``optimizer`` (not plain SGD) moves a parameter on a zero gradient."""
        for t in tensors:
            if id(t) in self.sometimes_reached:
                raise TrainingStepError(
                    f"{optimizer}.step() in converted code updates {self._label(t)}, whose "
                    "gradient only some branches of a tensor-dependent `if` give: "
                    "eagerly a call taking the others leaves it without a gradient, and "
                    f"{optimizer} does not update it, but the program would update it with "
                    "a zero gradient, which moves it. Call the optimizer outside the "
                    "converted function (convert the Layer), or use SGD without weight "
                    "decay")

    def set_grad(self, tensor: Tensor, value) -> None:
        slot = self.slots.get(id(tensor))
        if slot is None:
            slot = self.slots[id(tensor)] = _Slot(tensor, tensor._grad, None, True)
        slot.value, slot.written = value, True

    # ---------------------------------------------------------- host values
    def host_input(self, read, shape, dtype, name: str) -> Variable:
        """A data variable fed ``read()`` at every call, read in trace order."""
        program = framework.default_main_program()
        block = program.global_block()
        var = block.create_var(list(shape), dtype, name=program.unique_name(name),
                               is_data=True, stop_gradient=True)
        self.actions.append((read, True))
        self.input_names.append(var.name)
        return Variable(block, var.name)

    def host_call(self, call, label: str) -> None:
        """Make ``call()`` before every run (not now), in trace order."""
        if framework.current_block().idx != 0:
            raise TrainingStepError(
                f"{label} inside a tensor-dependent `if` or loop of converted code cannot be "
                "made when the program runs; call it after that statement")
        self.actions.append((call, False))

    def prologue(self) -> list:
        """Make the host calls and read the host inputs, in trace order (before a run)."""
        arrays = []
        for action, feeds in self.actions:
            value = action()
            if feeds:
                arrays.append(value)
        return arrays

    # ------------------------------------------------------------- backward
    def backward(self, roots: list, seeds: list, retain_graph: bool) -> None:
        """``backward()`` of static ``roots``: gradient ops appended to the program, and
        accumulated into the ``.grad`` of the parameters (captured tensors) they reach."""
        block = framework.current_block()
        if block.idx != 0:
            raise TrainingStepError(
                "backward() inside a tensor-dependent `if` or loop of converted code is "
                "not supported; call it after that statement")
        program = block.program
        top = program.global_block()
        roots = [_static(top, r) for r in roots]
        seeds = [None if s is None else _static(top, s) for s in seeds]
        floats = [t for t in captured_tensors(program).values() if t.dtype in dtypes.FLOATS]
        self.guard_trainable(floats)
        leaves = {n: t for n, t in captured_tensors(program).items()
                  if not t.stop_gradient and t.dtype in dtypes.FLOATS}
        hosts = set(self.input_names)
        arguments = [n for n, v in top.vars.items()
                     if v.is_data and n not in hosts and dtypes.is_float(v.dtype)]
        live = list(leaves) + [n for n in arguments if not top.vars[n].stop_gradient]
        required = runtime_backward.requires_grad(program, live)
        for i, root in enumerate(roots):
            if root.name not in required:
                raise RuntimeError(
                    f"backward: outputs[{i}] does not require a gradient (stop_gradient="
                    "True): no input it was computed from has stop_gradient=False")
        # As a converted Layer's forward is before its backward is built: each ReLU
        # feeding a max pooling runs after it, on the smaller map (the same values and
        # gradients, bit for bit).
        passes.pool_before_relu_in_place(program)
        names = [r.name for r in roots]
        path, reached = runtime_backward.backward_path(program, names, list(leaves) + arguments)
        for i in path:
            if id(top.ops[i]) in self.freed:
                raise RuntimeError(
                    f"backward through the {top.ops[i].type} op a second time: its saved "
                    "values were freed by the first backward. Pass retain_graph=True to the "
                    "first backward (or grad) call to keep them")
        if not retain_graph:
            self.freed.update(id(top.ops[i]) for i in path)
        where = user_location()
        for name in arguments:
            if name in reached:
                self.reaching.setdefault(name, where)
                if not top.vars[name].stop_gradient:
                    raise argument_grad_error(name, where)
        wanted = [n for n in leaves if n in reached]
        self.sometimes_reached.update(
            id(leaves[n]) for n in runtime_backward.sources_some_branches_reach(
                program, wanted, names))
        grads = runtime_backward.gradients(program, [r.desc for r in roots], wanted,
                                           [None if s is None else s.desc for s in seeds])
        with no_grad():  # the gradients are constants to the rest of the program
            for name, grad in zip(wanted, grads):
                if grad is None:
                    continue
                grad.stop_gradient = True
                g = Variable(top, grad.name)
                tensor = leaves[name]
                old = self.grad_of(tensor)
                self.set_grad(tensor, g if old is None else old + g)

    def backpropagated(self, value: Variable) -> bool:
        """Whether a backward went through the op that computed ``value`` (eagerly: its
        node is freed)."""
        for op in reversed(value.block.ops):
            if value.name in op.output_names():
                return id(op) in self.freed
        return False

    # ----------------------------------------------------------------- end
    def effects(self) -> list:
        """(tensor, label, value before, value after) of every gradient the trace set."""
        items = []
        for slot in self.slots.values():
            if not slot.changed():
                continue
            label = f"{self._label(slot.tensor)}.grad"
            if isinstance(slot.value, Variable) and slot.value.block.idx != 0:
                raise TrainingStepError(
                    f"{label} is given a value computed inside a tensor-dependent `if` or "
                    "loop body; assign it after that statement")
            items.append((slot.tensor, label, slot.old, slot.value))
        return items


def argument_grad_error(name: str, where: str) -> TrainingStepError:
    return TrainingStepError(
        f"backward() in converted code reaches the argument {name!r}, which has "
        "stop_gradient=False: its gradient cannot be kept in the caller's tensor's .grad. "
        "Pass it with stop_gradient=True, or compute its gradient with d2s.grad(loss, x) "
        f"and return it\n{where}")


def _static(block, value):
    if isinstance(value, Variable):
        return value
    if isinstance(value, Tensor):  # an eager tensor the step reads: captured
        return Variable(block, capture(value).name)
    raise TypeError(f"backward: expected a Tensor, got {type(value).__name__}")
