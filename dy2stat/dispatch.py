"""The one dispatcher every op goes through.

Eager inputs: run the kernel now and, when an input needs a gradient, record
a node on the autograd tape. A static Variable among the inputs (or static
mode): append an operator to the current block instead.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np

from dy2stat import device
from dy2stat.kernels import backend
from dy2stat.mode import state
from dy2stat.runtime import dtypes
from dy2stat.runtime import ops as _all_ops  # noqa: F401  (registers every op)
from dy2stat.runtime.registry import OPS, Meta, get_op
from dy2stat.tensor import Tensor
from dy2stat.unassigned import Unassigned

_SCALARS = (int, float, bool)
_NO_CUPY = not backend.has_cupy()


class Node:
    """One recorded op on the tape: what backward needs to apply its rule."""

    __slots__ = ("op", "inputs", "versions", "outputs", "attrs", "need", "freed", "seq")

    def __init__(self, op, inputs, outputs, attrs, need):
        self.seq = next(_sequence)  # creation order: backward runs the newest first
        self.op = op
        self.inputs = inputs
        self.versions = [x._version if isinstance(x, Tensor) else None for x in inputs]
        self.outputs = outputs
        self.attrs = attrs
        self.need = need
        self.freed = False


_sequence = itertools.count()

# Filled in by dy2stat.static: appends an op to the current block.
static_apply = None


def apply(op_type: str, *inputs, **attrs):
    """Run (or, for static values, append) op ``op_type`` on ``inputs``."""
    op = OPS.get(op_type) or get_op(op_type)
    if state.static:
        return static_apply(op, inputs, attrs)
    arrays = []
    requires_grad = False
    numpy_scalars = None  # slots holding a NumPy scalar: they go where the tensors are
    for x in inputs:
        if type(x) is Tensor:
            arrays.append(x._data)
            if not x.stop_gradient:
                requires_grad = True
        elif x is None or type(x) in _SCALARS:
            arrays.append(x)
        elif isinstance(x, Tensor):
            arrays.append(x._data)
            if not x.stop_gradient:
                requires_grad = True
        elif getattr(x, "is_static", False):
            return static_apply(op, inputs, attrs)
        elif isinstance(x, (list, tuple)):
            if any(getattr(v, "is_static", False) for v in x):
                return static_apply(op, inputs, attrs)
            arrays.append([_array_of(v, op) for v in x])
            requires_grad = requires_grad or any(
                isinstance(v, Tensor) and not v.stop_gradient for v in x
            )
        else:
            if isinstance(x, np.generic):
                numpy_scalars = (numpy_scalars or []) + [len(arrays)]
            arrays.append(_array_of(x, op))
    if op.promote:
        _promote(op, arrays)
    if op.input_dtypes:
        op.check_dtypes(arrays)  # what static inference refuses, eager refuses too
    if op.eager_infer:
        op.infer(*[_meta(a) for a in arrays], **op.full_attrs(attrs))
    if _NO_CUPY:
        xp = np
    elif numpy_scalars is None:
        xp = _array_module(op, arrays)
    else:
        xp = _with_numpy_scalars(op, arrays, numpy_scalars)
    try:
        if xp is np:
            out = op.kernel(xp, *arrays, **attrs)
        else:
            with _device_of_inputs(xp, arrays):
                out = op.kernel(xp, *arrays, **attrs)
    except Exception as exc:
        raise _explain(op, arrays, attrs, exc) from exc
    if not op.outputs:  # effects only (print, assert)
        return ()
    record = requires_grad and state.grad_enabled and op.grad is not None
    if len(op.outputs) == 1 and not op.outputs[0].variadic:
        result = Tensor(out, stop_gradient=not record)
        if record:
            result._node = Node(op, inputs, [result], attrs, _need(op, inputs))
        return result
    results = _wrap_outputs(op, out, record)
    if record:
        flat = [t for t in _flatten(results)]
        node = Node(op, inputs, flat, attrs, _need(op, inputs))
        for i, t in enumerate(flat):
            t._node, t._index = node, i
    return results


def binary(op_type: str, defer=None):
    """A fast entry for a binary op called through an operator (``x + 1``).

    It handles the common eager case inline: host arrays of one dtype (or a
    Python scalar that keeps the tensor's dtype) and no gradient to record.
    Anything else goes through ``apply``, except an operand for which ``defer``
    is true: the operator returns NotImplemented, so Python asks that operand.
    """
    op = get_op(op_type)
    kernel, allowed = op.kernel, op.dtypes

    def run(x, y):
        if type(x) is Tensor and not state.static:
            a = x._data
            ty = type(y)
            if ty is Tensor:
                b = y._data
                fast = (a.dtype is b.dtype and type(b) is np.ndarray
                        and (y.stop_gradient or not state.grad_enabled))
            elif ty is float:
                b, fast = y, a.dtype.kind == "f"
            elif ty is int:
                b, fast = y, a.dtype.kind in "fiu"
            else:
                fast = False
            if (
                fast
                and (x.stop_gradient or not state.grad_enabled)
                and (allowed is None or a.dtype in allowed)
                and type(a) is np.ndarray
            ):
                try:
                    return Tensor(kernel(np, a, b))
                except Exception:
                    pass  # apply() explains the failure
        if defer is not None and defer(y):
            return NotImplemented
        return apply(op_type, x, y)

    run.__name__ = run.__qualname__ = op_type  # what docs and reprs call it
    return run


def unary(op_type: str):
    """A fast entry for a unary op on an eager host tensor with no gradient to record."""
    op = get_op(op_type)
    kernel, allowed = op.kernel, op.dtypes

    def run(x):
        if (
            type(x) is Tensor
            and not state.static
            and (x.stop_gradient or not state.grad_enabled)
            and type(x._data) is np.ndarray
            and (allowed is None or x._data.dtype in allowed)
        ):
            return Tensor(kernel(np, x._data))
        return apply(op_type, x)

    run.__name__ = run.__qualname__ = op_type  # what docs and reprs call it
    return run


def _array_of(value, op):
    """An input that is not a Tensor: a scalar, an array or nested data."""
    if isinstance(value, Tensor):
        return value._data
    if value is None or type(value) in _SCALARS:
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, np.ndarray) or (
        not _NO_CUPY and isinstance(value, backend.cupy.ndarray)
    ):
        return value
    if isinstance(value, Unassigned):
        raise value.error()
    raise TypeError(f"{op.type}: cannot use a {type(value).__name__} as a tensor input")


def _promote(op, arrays):
    """Cast the promoted slots to one dtype (DESIGN.md's rules).

    Python scalars stay scalars beside tensors (NumPy keeps the tensor's dtype
    for them); alone, they become arrays of that dtype.
    """
    target = dtypes.common_dtype([arrays[i] for i in op.promote])
    only_scalars = all(arrays[i] is None or type(arrays[i]) in _SCALARS for i in op.promote)
    for i in op.promote:
        a = arrays[i]
        if a is None:
            continue
        if type(a) in _SCALARS:
            if only_scalars:
                arrays[i] = np.asarray(a, dtype=target)
        elif a.dtype != target:
            arrays[i] = a.astype(target)


def _array_module(op, arrays):
    """The module of the array inputs (numpy or cupy); inputs on two devices are an error."""
    found = None
    for a in _arrays_in(arrays):
        xp = backend.array_module(a)
        if found is None:
            found, first = xp, a
        elif xp is not found or (xp is not np and a.data.device_id != first.data.device_id):
            raise device.mixed_devices_error(
                op.type, [device.device_of(v) for v in _arrays_in(arrays)])
    return found if found is not None else device.current.xp


def _with_numpy_scalars(op, arrays, slots):
    """The arrays' module, the NumPy scalars in ``slots`` (0-d host arrays by now)
    placed on the device of the other arrays: a NumPy scalar is a scalar, on every
    device, as a Python one is."""
    others = [a for i, a in enumerate(arrays) if i not in slots]
    xp = _array_module(op, others)
    if xp is not np:
        first = next(_arrays_in(others), None)
        with xp.cuda.Device(first.data.device_id if first is not None else None):
            for i in slots:
                arrays[i] = xp.asarray(arrays[i])
    return xp


def _device_of_inputs(xp, arrays):
    """Where an op on GPU arrays runs: on their GPU (CuPy computes on the current
    device only), made current for the call when it is not already."""
    first = next(_arrays_in(arrays), None)
    if first is None or first.data.device_id == device.gpu_index():
        return _HERE
    return xp.cuda.Device(first.data.device_id)


_HERE = contextlib.nullcontext()


def _arrays_in(arrays):
    for a in arrays:
        if isinstance(a, list):
            yield from (v for v in a if hasattr(v, "dtype"))
        elif hasattr(a, "dtype"):
            yield a


def _meta(a):
    if a is None:
        return None
    if isinstance(a, list):
        return [_meta(v) for v in a]
    if type(a) in _SCALARS:
        return Meta((), dtypes.scalar_dtype(a))
    return Meta(tuple(a.shape), a.dtype)


def _explain(op, arrays, attrs, exc):
    """Turn a kernel failure into an error naming the op and the shapes."""
    try:
        op.infer(*[_meta(a) for a in arrays], **op.full_attrs(attrs))
    except (ValueError, TypeError) as reason:
        return type(reason)(str(reason))
    shapes_text = ", ".join(
        str(list(a.shape)) for a in arrays if a is not None and hasattr(a, "shape")
    )
    return type(exc)(f"{op.type}: {exc} (input shapes {shapes_text})") if isinstance(
        exc, (ValueError, TypeError, IndexError)
    ) else exc


def _need(op, inputs):
    """Which input slots need a gradient (float tensors that record one)."""
    need = []
    for slot, x in zip(op.inputs, inputs):
        if slot.name in op.no_grad:
            need.append(False)
        elif slot.variadic:
            need.append(any(_wants_grad(v) for v in x))
        else:
            need.append(_wants_grad(x))
    return need


def _wants_grad(x):
    return isinstance(x, Tensor) and not x.stop_gradient and x.dtype in dtypes.FLOATS


def _wrap_outputs(op, out, record):
    if len(op.outputs) == 1:  # a single variadic slot (split)
        return [Tensor(a, stop_gradient=not record) for a in out]
    results = []
    for slot, value in zip(op.outputs, out):
        if slot.variadic:
            results.append([Tensor(a, stop_gradient=not record) for a in value])
        else:
            results.append(Tensor(value, stop_gradient=not record))
    return tuple(results)


def _flatten(results):
    for r in results:
        if isinstance(r, list):
            yield from r
        else:
            yield r
