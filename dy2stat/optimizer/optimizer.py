"""The optimizer base: accumulators, learning rate, clipping, decay, eager and static updates.

A subclass names its update op (``runtime/ops/optimizer.py``) and its
accumulators, or writes its update with ops (``_update``); the base runs it.
Eagerly, ``step()`` applies the update to each parameter that has a gradient
and writes the results back into the parameter tensor (the same object the
layers hold) and the accumulators. In a static program ``minimize(loss)``
appends the backward ops and, per parameter, the update op (or the update's
ops and ``assign`` ops) whose outputs *are* the persistable parameter and
accumulator variables, so every run of the program trains.

The learning rate reaches the op as a one-element tensor, so a scheduler
changes it without rebuilding anything.

Inside a converted function being traced, ``step()``, ``clear_grad()`` and
``minimize(loss)`` run the eager code on the program being built
(``dy2stat.jit.step_record``): the gradients are the program's, the updates are
its ops writing the parameters and this optimizer's own accumulators (copied
back after every run, so ``state_dict()`` sees them), and the learning rate is
read from this optimizer at every run, after the scheduler steps the trace made
before it. Eagerly the accumulators are updated in place (the same tensor
objects), so eager and converted steps can take turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dy2stat import device, ops
from dy2stat.autograd import no_grad
from dy2stat.creation import full
from dy2stat.dispatch import apply
from dy2stat.kernels.backend import to_host
from dy2stat.mode import state as mode
from dy2stat.optimizer.lr import LRScheduler
from dy2stat.regularizer import L2Decay
from dy2stat.runtime import dtypes
from dy2stat.runtime.ir import Operator, Var
from dy2stat.runtime.ops import optimizer as _update_ops  # noqa: F401  (registers the ops)
from dy2stat.runtime.registry import Meta, get_op
from dy2stat.static import append_backward
from dy2stat.static import framework as static_framework
from dy2stat.static.builder import capture, captured_tensors
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor

__all__ = ["Optimizer"]


@dataclass(frozen=True)
class Accumulator:
    """A per-parameter state of an optimizer: Paddle's name, its shape, its first value."""

    name: str  # e.g. "moment1": keys are "{param}_moment1_0"
    scalar: bool = False  # a [1] tensor (beta powers) instead of the parameter's shape
    init: str | float = 0.0  # a value, or the name of an optimizer attribute holding it


class Optimizer:
    """Base of the optimizers.

    ``parameters``: the tensors to update (required eagerly; in a static
    program ``None`` means every trainable parameter). ``learning_rate``: a
    float or an ``LRScheduler``. ``weight_decay``: a float (an L2 coefficient)
    or a regularizer (``d2s.regularizer.L1Decay``/``L2Decay``) whose term is
    added to the gradients; a parameter made with ``ParamAttr(regularizer=...)``
    uses its own instead. ``grad_clip``: e.g. ``ClipGradByGlobalNorm``, applied
    first (to the parameters whose ``need_clip`` is True).
    """

    # The update op, or "" when the subclass writes its update with ops (_update).
    _op_type: str = ""
    _accumulators: tuple[Accumulator, ...] = ()
    # AdamW decays inside its op: the base must not add an L2 term as well.
    _l2_decay: bool = True

    def __init__(self, learning_rate: float | LRScheduler = 0.001, parameters=None,
                 weight_decay=None, grad_clip=None, name: str | None = None):
        if mode.recorder is not None:
            raise RuntimeError(
                f"{type(self).__name__} is created inside converted code: the program would "
                "keep the state of the one made while tracing, where eager code starts a "
                "new one at every call. Create the optimizer outside the converted function")
        if not isinstance(learning_rate, (int, float, LRScheduler)) or isinstance(
                learning_rate, bool):
            raise TypeError(
                f"{type(self).__name__}: learning_rate must be a float or an LRScheduler, "
                f"not {type(learning_rate).__name__}"
            )
        if isinstance(parameters, Tensor):
            raise TypeError(
                f"{type(self).__name__}: parameters must be a list of tensors "
                "(e.g. model.parameters()), not one Tensor"
            )
        if isinstance(parameters, Iterable) and not isinstance(parameters, list):
            parameters = list(parameters)
        if parameters is not None and any(isinstance(p, dict) for p in parameters):
            raise TypeError(f"{type(self).__name__}: parameter groups (dicts) are not supported")
        self._parameter_list = parameters
        self._learning_rate = learning_rate
        self._regularizer = _regularizer(weight_decay, type(self).__name__)
        self._grad_clip = grad_clip
        self._name = name
        # accumulator name -> id(param) -> Tensor (eager state)
        self._state: dict[str, dict[int, Tensor]] = {a.name: {} for a in self._accumulators}
        # Built directly (not with ``full``), so creating an optimizer in static mode
        # appends nothing; static programs capture it and read it on every run.
        self._lr_tensor = Tensor(device.current.xp.full([1], self.get_lr(), dtype=np.float32),
                                 name="learning_rate")
        if isinstance(learning_rate, LRScheduler):
            learning_rate._subscribe(self._on_lr_change)

    # ------------------------------------------------------- learning rate
    def get_lr(self) -> float:
        """The current learning rate (the scheduler's ``last_lr`` when there is one).
        In converted code: the rate as a 0-D tensor, read when the program runs."""
        if mode.recorder is not None:
            return ops.reshape(self._traced_rate(), [])
        if isinstance(self._learning_rate, LRScheduler):
            return float(self._learning_rate())
        return float(self._learning_rate)

    def set_lr(self, value: float) -> None:
        """Set a float learning rate (not allowed when a scheduler drives it)."""
        if isinstance(self._learning_rate, LRScheduler):
            raise RuntimeError(
                f"{type(self).__name__}.set_lr: the learning rate is driven by "
                f"{type(self._learning_rate).__name__}; step the scheduler instead"
            )
        if not isinstance(value, (int, float)):
            raise TypeError(f"set_lr: value must be a float, not {type(value).__name__}")
        if mode.recorder is not None:  # made before every run of the program
            mode.recorder.steps.host_call(lambda: self.set_lr(value), "optimizer.set_lr()")
            return
        self._learning_rate = float(value)
        self._on_lr_change(float(value))

    def _on_lr_change(self, value: float) -> None:
        # Rewritten in place: a static program that captured this tensor reads it every run.
        self._lr_tensor.set_value(np.full([1], value, dtype=np.float32))

    def _traced_rate(self) -> Variable:
        """The learning rate in a trace: fed at every run, read in trace order (after the
        scheduler steps made before it)."""
        rate = self._lr_tensor
        return mode.recorder.steps.host_input(lambda: rate._data, rate.shape, rate.dtype,
                                              "learning_rate")

    # ------------------------------------------------------------- eager
    def step(self) -> None:
        """Update every parameter that has a gradient (eager mode)."""
        params = self._eager_parameters("step")
        if mode.recorder is not None:  # the program assumes which ones are frozen
            mode.recorder.steps.guard_trainable(params)
        with no_grad():
            pairs = [(p, p.grad) for p in params if not p.stop_gradient and p.grad is not None]
            if mode.recorder is not None and not self._keeps_parameters_on_zero_gradients():
                mode.recorder.steps.refuse_branch_gradients([p for p, _ in pairs],
                                                            type(self).__name__)
            self._update_eager(pairs)

    def _keeps_parameters_on_zero_gradients(self) -> bool:
        """Whether a zero gradient leaves every parameter as it is (plain SGD: no state,
        no decay), so that a program may update where eager mode has no gradient."""
        return type(self).__name__ == "SGD" and self._regularizer is None

    def _update_eager(self, pairs) -> None:
        pairs = self._preprocess(pairs)
        traced = mode.recorder is not None
        if traced and pairs:  # one read of the rate per step, where eager reads it
            lr = self._traced_rate()
        lr_by_place = {self._lr_tensor.place: self._lr_tensor}
        attrs = self._attrs()
        for param, grad in pairs:
            if not traced:
                # A model moved to another device after the optimizer was built: the
                # rate and the state follow each parameter.
                place = param.place
                lr = lr_by_place.get(place)
                if lr is None:
                    lr = lr_by_place[place] = self._lr_tensor.to(place)
            state = [self._eager_state(param, acc) for acc in self._accumulators]
            rate = _scaled(lr, _lr_multiplier(param))
            out = self._run_update(param, grad, state, rate, attrs)
            for tensor, value in zip([param, *state], out):
                _store(tensor, value)

    def _eager_state(self, param: Tensor, acc: Accumulator) -> Tensor:
        """The accumulator ``acc`` of ``param``: an eager tensor, made on first use (also
        when a trace first uses it: the program reads and writes this same tensor)."""
        per_param = self._state[acc.name]
        value = per_param.get(id(param))
        if value is None:
            shape = [1] if acc.scalar else param.shape
            with static_framework.static_guard(False):
                value = per_param[id(param)] = full(shape, self._init_value(acc),
                                                    _state_dtype(param.dtype))
        if value.place != param.place:
            value = per_param[id(param)] = value.to(param.place)
        return value

    def clear_grad(self, set_to_zero: bool = False) -> None:
        """Drop (or zero) the gradients of the parameters."""
        for p in self._eager_parameters("clear_grad"):
            if set_to_zero and p.grad is not None:
                p.grad = full(p.grad.shape, 0.0, p.grad.dtype)
            else:
                p.grad = None

    clear_gradients = clear_grad

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Eagerly: backward (unless already run on ``loss``), then ``step()``.
        On a static Variable: append backward and update ops to its program.

        Returns ``(update ops, [(param, grad)])`` as Paddle does.
        """
        if mode.recorder is not None:  # converted code: the eager step, traced
            return self._minimize_traced(loss, parameters, no_grad_set)
        if getattr(loss, "is_static", False):
            return self._minimize_static(loss, startup_program, parameters, no_grad_set)
        if not isinstance(loss, Tensor):
            raise TypeError(f"minimize: loss must be a Tensor, not {type(loss).__name__}")
        node = loss._node
        if node is not None and not node.freed:
            loss.backward()
        params = parameters if parameters is not None else self._eager_parameters("minimize")
        skip = {id(p) for p in (no_grad_set or ())}
        with no_grad():
            pairs = [(p, p.grad) for p in params
                     if not p.stop_gradient and p.grad is not None and id(p) not in skip]
            self._update_eager(pairs)
        return [], pairs

    def _minimize_traced(self, loss, parameters, no_grad_set):
        """``minimize`` in a trace: as eagerly, backward unless one already went through
        ``loss``, then the update of every parameter with a gradient."""
        if not getattr(loss, "is_static", False):
            raise TypeError(f"minimize: loss must be a Tensor, not {type(loss).__name__}")
        if not mode.recorder.steps.backpropagated(loss):
            loss.backward()
        params = parameters if parameters is not None else self._eager_parameters("minimize")
        mode.recorder.steps.guard_trainable(params)
        skip = {id(p) for p in (no_grad_set or ())}
        with no_grad():
            pairs = [(p, p.grad) for p in params
                     if not p.stop_gradient and p.grad is not None and id(p) not in skip]
            self._update_eager(pairs)
        return [], pairs

    def _eager_parameters(self, where: str) -> list:
        if self._parameter_list is None:
            raise ValueError(
                f"{type(self).__name__}.{where}: the optimizer has no parameters; pass "
                "parameters=model.parameters() when creating it"
            )
        return self._parameter_list

    # ------------------------------------------------------------ static
    def _minimize_static(self, loss: Variable, startup_program, parameters, no_grad_set):
        program = loss.block.program
        startup = startup_program or static_framework.default_startup_program()
        with static_framework.program_guard(program, startup):
            names = self._static_parameter_names(program, parameters)
            if no_grad_set:
                skip = {getattr(v, "name", v) for v in no_grad_set}
                names = None if names is None else [n for n in names if n not in skip]
            pairs = append_backward(loss, names)
            if no_grad_set and names is None:
                pairs = [(p, g) for p, g in pairs if p.name not in skip]
            lr = Variable(program.global_block(), capture(self._lr_tensor).name)
            owners = self._static_owners(program, parameters)
            update_ops = [
                self._append_update(program, p, g,
                                    _scaled(lr, _lr_multiplier(owners.get(p.name))))
                for p, g in self._preprocess(pairs, owners)
            ]
        return update_ops, pairs

    def _static_owners(self, program, parameters) -> dict:
        """Variable name -> eager Parameter, for the parameters a program read (their
        learning-rate factors, regularizers and clip flags)."""
        params = parameters if parameters is not None else self._parameter_list
        captured = {id(t): name for name, t in captured_tensors(program).items()}
        return {captured[id(p)]: p for p in params or ()
                if isinstance(p, Tensor) and id(p) in captured}

    def _static_parameter_names(self, program, parameters):
        """Names in ``program`` of the parameters to train (None: all trainable ones)."""
        params = parameters if parameters is not None else self._parameter_list
        if params is None:
            return None
        captured = {id(t): name for name, t in captured_tensors(program).items()}
        names = []
        for p in params:
            if isinstance(p, (Variable, Var)):
                names.append(p.name)
            elif isinstance(p, str):
                names.append(p)
            elif isinstance(p, Tensor):
                if id(p) in captured:  # a tensor the program never read is not trained by it
                    names.append(captured[id(p)])
            else:
                raise TypeError(f"minimize: cannot train a {type(p).__name__} in a static program")
        return names

    def _append_update(self, program, param: Variable, grad: Variable,
                       lr: Variable) -> Operator:
        block = program.global_block()
        state = [self._static_state(program, param, acc) for acc in self._accumulators]
        if not self._op_type:
            return self._append_update_ops(block, param, grad, state, lr)
        op = get_op(self._op_type)
        ins = [param.desc, grad.desc, *state, lr.desc]
        attrs = op.full_attrs(self._attrs())
        op.infer(*[Meta(v.shape, v.dtype) for v in ins], **attrs)  # check before appending
        outs = [param.desc, *state]
        update = Operator(
            op.type,
            {slot: [v.name] for slot, v in zip(op.input_names, ins)},
            {slot: [v.name] for slot, v in zip(op.output_names, outs)},
            attrs,
        )
        block.append_op(update)
        return update

    def _append_update_ops(self, block, param: Variable, grad: Variable, state: list,
                           lr: Variable) -> Operator:
        """The update's ops, then ``assign`` ops writing the results into the parameter
        and accumulator variables; returns the parameter's ``assign``."""
        with static_framework.block_guard(block), static_framework.static_guard():
            outs = self._run_update(param, grad, [Variable(block, s.name) for s in state], lr,
                                    self._attrs())
        writes = []
        for target, value in zip([param.desc, *state], outs):
            writes.append(Operator("assign", {"X": [value.name]}, {"Out": [target.name]}, {}))
            block.append_op(writes[-1])
        return writes[0]

    def _run_update(self, param, grad, state: list, lr, attrs: dict) -> tuple:
        """(new parameter, *new accumulators), each in the dtype of what it replaces."""
        if self._op_type:
            out = apply(self._op_type, param, grad, *state, lr, **attrs)
            return out if isinstance(out, tuple) else (out,)
        outs = self._update(param, grad, state, ops.reshape(lr, []))
        return tuple(o if o.dtype == old.dtype else ops.cast(o, old.dtype)
                     for o, old in zip(outs, [param, *state]))

    def _update(self, param, grad, state: list, lr) -> tuple:
        """The update of one parameter with ops, for an optimizer without an update op:
        ``lr`` is 0-D; returns (new parameter, *new accumulators)."""
        raise NotImplementedError(f"{type(self).__name__} has neither an update op nor _update")

    def _static_state(self, program, param: Variable, acc: Accumulator) -> Var:
        block = program.global_block()
        name = _fresh_name(block, f"{param.name}_{acc.name}")
        shape = [1] if acc.scalar else list(param.shape)
        return static_framework.create_parameter(
            shape, str(_state_dtype(param.dtype)), name=name,
            initializer=("full", {"value": self._init_value(acc)}),
        )

    # ------------------------------------------------------------ shared
    def _preprocess(self, pairs, owners=None):
        """Paddle's order: clip the gradients, then add the weight decay term (the
        parameter's own regularizer, else the optimizer's). ``owners`` maps a static
        parameter's name to the eager Parameter it stands for (its attributes)."""
        owner = (lambda p: p) if owners is None else (lambda p: owners.get(p.name, p))
        if self._grad_clip is not None:
            clipped = [i for i, (p, _) in enumerate(pairs)
                       if getattr(owner(p), "need_clip", True)]
            if clipped:
                new = self._grad_clip([pairs[i] for i in clipped])
                pairs = list(pairs)
                for i, pair in zip(clipped, new):
                    pairs[i] = pair
        result = []
        for p, g in pairs:
            decay = getattr(owner(p), "regularizer", None) or (
                self._regularizer if self._l2_decay else None)
            result.append((p, g if decay is None else decay(p, g)))
        return result

    def _attrs(self) -> dict:
        """The update op's attrs (subclasses)."""
        return {}

    def _init_value(self, acc: Accumulator) -> float:
        return float(getattr(self, acc.init) if isinstance(acc.init, str) else acc.init)

    # ------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """Accumulators keyed ``"{param name}_{accumulator}_0"``, and the scheduler's state."""
        state = {}
        for index, p in enumerate(self._parameter_list or ()):
            for acc in self._accumulators:
                value = self._state[acc.name].get(id(p))
                if value is not None:
                    state[_state_key(p, index, acc)] = value
        if isinstance(self._learning_rate, LRScheduler):
            state["LR_Scheduler"] = self._learning_rate.state_dict()
        return state

    def set_state_dict(self, state_dict: dict) -> None:
        """Load what ``state_dict()`` returned (values may be Tensors or arrays)."""
        if "LR_Scheduler" in state_dict and isinstance(self._learning_rate, LRScheduler):
            self._learning_rate.set_state_dict(state_dict["LR_Scheduler"])
        for index, p in enumerate(self._eager_parameters("set_state_dict")):
            for acc in self._accumulators:
                key = _state_key(p, index, acc)
                if key not in state_dict:
                    continue
                value = state_dict[key]
                array = value.numpy() if isinstance(value, Tensor) else to_host(value)
                expected = [1] if acc.scalar else p.shape
                if list(array.shape) != list(expected) and array.size != 1:
                    raise ValueError(
                        f"set_state_dict: {key} has shape {list(array.shape)}, "
                        f"expected {expected}"
                    )
                target = self._eager_state(p, acc)
                target.set_value(array.reshape(target.shape))
        self._on_lr_change(self.get_lr())

    set_dict = set_state_dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self._learning_rate!r})"


def _store(tensor: Tensor, value) -> None:
    """``tensor`` (a parameter or an accumulator) takes an update's result and stays the
    same object: programs that captured it read and write it. In a trace the program
    writes it when it runs."""
    if getattr(value, "is_static", False):
        tensor.set_value(value)
    else:  # the update's own new array: nothing else holds it
        tensor._data = value._data
        tensor._version += 1


def _regularizer(weight_decay, owner: str):
    """The optimizer's regularizer: None, L2Decay(float), or the regularizer given."""
    if weight_decay is None:
        return None
    if isinstance(weight_decay, (int, float)) and not isinstance(weight_decay, bool):
        return L2Decay(float(weight_decay)) if weight_decay else None
    if not callable(weight_decay) or not hasattr(weight_decay, "coeff"):
        raise TypeError(
            f"{owner}: weight_decay must be a float or a regularizer (L1Decay, L2Decay), "
            f"not {type(weight_decay).__name__}"
        )
    return weight_decay


def _lr_multiplier(param) -> float:
    # param: a Parameter (or None: a static parameter with no eager owner)
    """A Parameter's own learning-rate factor (``ParamAttr(learning_rate=...)``)."""
    attr = getattr(param, "optimize_attr", None)
    return float(attr.get("learning_rate", 1.0)) if attr else 1.0


def _scaled(lr, factor: float):
    return lr if factor == 1.0 else apply("scale", lr, scale=factor)


def _state_dtype(dtype) -> np.dtype:
    """Accumulators keep at least float32 precision (float16 parameters included)."""
    return dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


def _state_key(param, index: int, acc: Accumulator) -> str:
    return f"{param.name or f'param_{index}'}_{acc.name}_0"


def _fresh_name(block, base: str) -> str:
    index = 0
    while f"{base}_{index}" in block.vars:
        index += 1
    return f"{base}_{index}"
