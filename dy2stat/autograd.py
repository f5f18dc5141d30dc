"""Reverse-mode autograd over the eager tape: backward, grad and no_grad; and custom
autograd functions (``PyLayer``, defined in ``autograd_function``)."""

from __future__ import annotations

import functools

from dy2stat import gradient_hooks
from dy2stat.dispatch import Node, apply
from dy2stat.dy2static import markers
from dy2stat.dy2static.errors import UnsupportedInBranchError
from dy2stat.mode import state
from dy2stat.runtime import dtypes
from dy2stat.static import backward as static_backward
from dy2stat.static import builder, framework
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor


class no_grad:
    """Context manager and decorator that stops gradient recording.

    Entered while a program is being built (inside converted code), it stops the
    program's gradients too: the ops appended inside compute ``stop_gradient`` values.
    """

    _grad = False  # what recording is inside

    def __enter__(self):
        self._previous = state.grad_enabled, builder.recording.grad
        state.grad_enabled = self._grad
        if state.static:
            builder.recording.grad = self._grad
        return self

    def __exit__(self, *exc):
        state.grad_enabled, builder.recording.grad = self._previous
        return False

    def __call__(self, fn):
        make = type(self)  # no_grad or enable_grad

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with make():
                return fn(*args, **kwargs)

        setattr(wrapper, markers.REAPPLY, self)  # converted code converts fn, keeps the mode
        return wrapper


class enable_grad(no_grad):
    """Turns gradient recording back on inside a ``no_grad`` region."""

    _grad = True


def is_grad_enabled() -> bool:
    """Whether ops record gradients now (False inside ``no_grad``)."""
    if state.recorder is not None:  # a trace that branches on it depends on it
        state.recorder.read_grad_mode()
    return state.grad_enabled


def backward(tensors, grad_tensors=None, retain_graph: bool = False) -> None:
    """Accumulate d(tensors)/d(leaf) into every leaf's ``.grad``.

    Inside converted code the gradient becomes ops of the program being built, and the
    parameters' ``.grad`` are its values (``dy2stat.jit.step_record``): a whole training
    step -- forward, backward, ``opt.step()``, ``opt.clear_grad()`` -- is one program."""
    roots = _as_list(tensors)
    if any(isinstance(r, Variable) for r in roots):
        _static_backward(roots, grad_tensors, retain_graph)
        return
    seeds = _seeds(roots, grad_tensors, "backward")
    _run(roots, seeds, retain_graph=retain_graph, create_graph=False, targets=None)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
):
    """Gradients of ``outputs`` with respect to ``inputs`` (a list of Tensors).

    With ``create_graph=True`` the gradients are themselves recorded, so they
    can be differentiated again (double grad). ``.grad`` is left untouched.
    Inside converted code the gradient becomes ops of the program being built.
    """
    roots = _as_list(outputs)
    wrt = _as_list(inputs)
    if any(isinstance(v, Variable) for v in roots + wrt):
        return _static_grad(roots, wrt, grad_outputs, create_graph, allow_unused)
    for i, x in enumerate(wrt):
        if not isinstance(x, Tensor):
            raise TypeError(f"grad: inputs[{i}] is a {type(x).__name__}, not a Tensor")
        if x.stop_gradient:
            raise ValueError(
                f"grad: inputs[{i}] has stop_gradient=True; set x.stop_gradient = False "
                "before computing with it"
            )
    seeds = _seeds(roots, grad_outputs, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    found = _run(roots, seeds, retain_graph, create_graph, targets=wrt)
    results = []
    for i, x in enumerate(wrt):
        g = found.get(id(x))
        if g is None and not allow_unused:
            raise ValueError(
                f"grad: inputs[{i}] is not used to compute the outputs; "
                "pass allow_unused=True to get None for it"
            )
        results.append(g)
    return results


def _static_backward(roots, grad_tensors, retain_graph) -> None:
    if state.recorder is None:
        raise TypeError(
            "backward() of a static Variable works inside converted code only; in a static "
            "program built by hand use d2s.static.append_backward or optimizer.minimize")
    seeds = _as_list(grad_tensors) if grad_tensors is not None else [None] * len(roots)
    if len(seeds) != len(roots):
        raise ValueError(f"backward: got {len(roots)} outputs but {len(seeds)} output gradients")
    state.recorder.backward(roots, seeds, retain_graph)


def _static_grad(roots, wrt, grad_outputs, create_graph, allow_unused):
    """``grad`` of static values: gradient ops appended to the program being built, so
    its own backward differentiates through them (a gradient penalty trains)."""
    if framework.current_block().idx != 0:
        raise UnsupportedInBranchError(
            "grad: computing a gradient inside a tensor-dependent branch or loop of "
            "converted code is not supported; compute it before or after that if/while")
    block = framework.current_block()

    def static(values):  # eager tensors the code reads are captured by the program
        return [v if v is None or isinstance(v, Variable)
                else Variable(block, builder.capture(v).name) for v in values]

    seeds = None if grad_outputs is None else static(_as_list(grad_outputs))
    grads = static_backward.gradients(static(roots), static(wrt), seeds)
    for i, g in enumerate(grads):
        if g is None and not allow_unused:
            raise ValueError(f"grad: inputs[{i}] is not used to compute the outputs; "
                             "pass allow_unused=True to get None for it")
    # Without create_graph a gradient is a constant to the rest of the program.
    return [g if g is None or create_graph else g.detach() for g in grads]


# --------------------------------------------------------------- the engine


def _as_list(values):
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _seeds(roots, grads, where):
    grads = _as_list(grads) if grads is not None else [None] * len(roots)
    if len(grads) != len(roots):
        raise ValueError(f"{where}: got {len(roots)} outputs but {len(grads)} output gradients")
    seeds = []
    for i, (root, g) in enumerate(zip(roots, grads)):
        if not isinstance(root, Tensor):
            raise TypeError(f"{where}: outputs[{i}] is a {type(root).__name__}, not a Tensor")
        if root.stop_gradient:
            raise RuntimeError(
                f"{where}: outputs[{i}] does not require a gradient (stop_gradient=True): "
                "no input it was computed from has stop_gradient=False"
            )
        if g is None:
            g = Tensor(root._data.dtype.type(1) + 0 * root._data)
        elif not isinstance(g, Tensor):
            raise TypeError(f"{where}: the gradient for outputs[{i}] must be a Tensor")
        elif g.shape != root.shape:
            raise ValueError(
                f"{where}: the gradient for outputs[{i}] has shape {g.shape}, "
                f"but the output has shape {root.shape}"
            )
        seeds.append(g)
    return seeds


def _key(t: Tensor):
    """Where a tensor's gradient is collected: its producing node, or itself."""
    return (id(t._node), t._index) if t._node is not None else id(t)


def _order(roots):
    """Nodes reachable from the roots, newest first (each after every node that consumes
    it: a node is made after its inputs' nodes). Gradients then add up in the order a
    static program's backward adds them, last step first."""
    nodes, stack = {}, [r._node for r in roots if r._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        if node.freed:
            continue
        for x in _tensor_inputs(node):
            if x._node is not None and id(x._node) not in nodes:
                stack.append(x._node)
    return sorted(nodes.values(), key=lambda n: n.seq, reverse=True)


def _tensor_inputs(node):
    for x in node.inputs:
        if isinstance(x, Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from (v for v in x if isinstance(v, Tensor))


def _accumulate(grads, key, g):
    previous = grads.get(key)
    grads[key] = g if previous is None else apply("add", previous, g)


def _run(roots, seeds, retain_graph, create_graph, targets):
    grads: dict = {}
    for root, seed in zip(roots, seeds):
        _accumulate(grads, _key(root), seed)
    target_keys = {_key(t): t for t in targets} if targets is not None else {}
    found = {}
    order = _order(roots)
    # backward() into watched leaves (data-parallel training): their hooks run as each
    # leaf's gradient is complete, not when the whole backward is.
    watch = None
    if targets is None and gradient_hooks.watching():
        watch = gradient_hooks.Backward(order, _tensor_inputs,
                                        lambda x, g: _send(grads, x, g, None))
    outer = gradient_hooks.running(watch)
    previous_mode = state.grad_enabled
    state.grad_enabled = create_graph
    try:
        if watch is not None:
            watch.start()
        for node in order:
            if node.freed:
                raise RuntimeError(
                    f"backward through the {node.op.type} op a second time: its saved values "
                    "were freed by the first backward. Pass retain_graph=True to the first "
                    "backward (or grad) call to keep them"
                )
            if watch is not None:
                watch.enter(node)
            ran = _apply_rule(node, grads, target_keys, found, targets)
            if watch is not None:
                watch.leave(node)
            if ran and not retain_graph:
                node.freed = True
                node.inputs = node.outputs = ()
        # Leaves (and targets that are leaves) collect what reached them.
        for key, g in grads.items():
            if key in target_keys:
                found[id(target_keys[key])] = g
        if watch is not None:
            watch.end()
    finally:
        state.grad_enabled = previous_mode
        gradient_hooks.running(outer)
    return found


def _apply_rule(node, grads, target_keys, found, targets) -> bool:
    """Run ``node``'s gradient rule on the gradients of its outputs and send the results
    to its inputs; False when no gradient reached the node (nothing ran)."""
    douts = [grads.pop((id(node), i), None) for i in range(len(node.outputs))]
    for key in [(id(node), i) for i in range(len(node.outputs))]:
        if key in target_keys:
            found[id(target_keys[key])] = douts[key[1]]
    if all(g is None for g in douts):
        return False
    _check_versions(node)
    douts = [
        g if g is not None else Tensor(out._data * 0) for g, out in zip(douts, node.outputs)
    ]
    douts = _group(node, douts)
    in_grads = node.op.grad(apply, node.inputs, node.outputs, douts,
                            node.op.full_attrs(node.attrs), node.need)
    for x, g, needed in zip(node.inputs, in_grads, node.need):
        if not needed or g is None:
            continue
        if isinstance(x, (list, tuple)):
            for xi, gi in zip(x, g):
                _send(grads, xi, gi, targets)
        else:
            _send(grads, x, g, targets)
    return True


def _group(node, flat):
    """Output gradients in the rule's slot layout (a variadic slot gets a list)."""
    slots = node.op.outputs
    if len(slots) == 1 and slots[0].variadic:
        return [flat]
    return flat


def _send(grads, x, g, targets):
    # g is None where no gradient reaches x (a program's parameter used only under no_grad)
    if g is None or not isinstance(x, Tensor) or x.stop_gradient or x.dtype not in dtypes.FLOATS:
        return
    if x._node is not None:
        _accumulate(grads, _key(x), g)
        return
    if targets is not None:
        _accumulate(grads, id(x), g)
        return
    # backward(): a leaf accumulates into .grad, keeping the leaf's dtype.
    if g.dtype != x.dtype:
        g = apply("cast", g, dtype=str(x.dtype))
    if not state.grad_enabled:
        g = Tensor(g._data)
    x.grad = g if x.grad is None else apply("add", x.grad, g)


def _check_versions(node: Node):
    for x, version in zip(node.inputs, node.versions):
        if isinstance(x, Tensor) and x._version != version:
            raise RuntimeError(
                f"a tensor used by the {node.op.type} op was changed by an index assignment "
                "(x[...] = ...) before backward; assign into x.clone() instead"
            )


# Custom functions are built on no_grad and the dispatcher above.
from dy2stat.autograd_function import PyLayer, PyLayerContext  # noqa: E402,F401
