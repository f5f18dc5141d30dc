"""The operator and method surface shared by eager Tensors and static Variables.

Both classes get exactly the same methods from here, so code written against
one runs against the other.
"""

from __future__ import annotations

import numpy as np

from dy2stat import autograd, ops
from dy2stat.dispatch import apply, binary, unary
from dy2stat.mode import state
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.indexing import encode_index
from dy2stat.tensor import Tensor


def _is_bool(x) -> bool:
    return getattr(x, "dtype", None) == dtypes.bool_


_OPERANDS = (Tensor, int, float, bool, complex, np.ndarray, np.generic, list, tuple)


def foreign(value) -> bool:
    """True for an operand that is no tensor (eager or static), number, array or sequence:
    an operator given one returns NotImplemented, so Python asks the operand's own
    reflected method (an unassigned name raises its error there) or raises TypeError."""
    if isinstance(value, _OPERANDS) or value is None:
        return False
    cls = type(value)
    return getattr(cls, "__add__", None) is not SURFACE["__add__"] and not (
        cls.__module__.startswith("cupy"))


def _binary(op_type, reflected=False):
    if reflected:
        def method(self, other):
            if foreign(other):
                return NotImplemented
            return apply(op_type, other, self)

        return method
    return binary(op_type, defer=foreign)


def _compare(op_type):
    def method(self, other):
        if other is None:
            return op_type == "not_equal"
        if foreign(other):
            return NotImplemented
        return apply(op_type, self, other)

    return method


def _logical(bool_op, int_op, reflected=False):
    def method(self, other):
        if foreign(other):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return apply(bool_op if _is_bool(self) else int_op, a, b)

    return method


def _invert(self):
    return apply("logical_not" if _is_bool(self) else "bitwise_not", self)


def _getitem(self, index):
    encoded, tensors = encode_index(index)
    return apply("getitem", self, tensors, index=encoded)


def _setitem(self, index, value):
    encoded, tensors = encode_index(index)
    self._assign(lambda old: apply("setitem", old, value, tensors, index=encoded))


def _reshape(self, *shape):
    """The tensor with a new shape (``x.reshape(2, 3)`` or ``x.reshape([2, 3])``), as
    ``d2s.reshape``."""
    return ops.reshape(self, ops._shape_list(shape))


def _transpose(self, *perm):
    """The tensor with its dims permuted (``x.transpose([1, 0])``); with no argument, all
    dims reversed."""
    return ops.transpose(self, ops._shape_list(perm) if perm else list(range(self.ndim))[::-1])


def _permute(self, *dims):
    """The tensor with its dims permuted: ``x.permute(2, 0, 1)``."""
    return ops.transpose(self, ops._shape_list(dims))


def _view(self, *shape):
    """The tensor with a new shape, as ``reshape`` (``x.view(2, -1)``)."""
    if len(shape) == 1 and isinstance(shape[0], (str, type, np.dtype)):
        raise TypeError(f"view: expected a shape, got {shape[0]!r}; to change the dtype "
                        "use astype")
    return ops.reshape(self, ops._shape_list(shape))


def _t(self):
    """The transpose of a matrix (a 0-D or 1-D tensor is returned as it is)."""
    if len(self.shape) > 2:
        raise ValueError(f"t(): the tensor must be at most 2-D, got shape {list(self.shape)}; "
                         "use transpose or permute")
    return self if len(self.shape) < 2 else ops.transpose(self, [1, 0])


def _value(name):
    """``Tensor.item``/``tolist``. In converted code a static value stands for its
    value: ``x.item()`` is the one element as a 0-D tensor, ``x.tolist()`` the tensor
    (so arithmetic and comparisons on them stay in the program), detached from the
    gradient as a Python number is; in a program built by hand they are an error."""
    eager = getattr(Tensor, name)  # (taken before install puts this method in its place)

    def method(self):
        if self.is_static:
            if state.recorder is None:
                raise TypeError(
                    f"{name}() needs the tensor's value, which a static program has only "
                    f"when it runs ({self.name}); fetch it with Executor.run")
            if name == "tolist":
                return self.detach()
            size = shapes.numel(self.shape)
            if size not in (1, -1):
                raise ValueError(f"item(): only a tensor with one element converts to a "
                                 f"Python scalar, got shape {list(self.shape)}")
            return ops.reshape(self.detach(), [])
        return eager(self)

    method.__name__, method.__doc__ = name, eager.__doc__
    return method


def _backward(self, grad_tensor=None, retain_graph=False):
    """Compute the gradients of this tensor (a scalar, or with ``grad_tensor``) with respect
    to the tensors it depends on, accumulating them in their ``grad``."""
    autograd.backward([self], None if grad_tensor is None else [grad_tensor], retain_graph)


def _len(self):
    shape = self.shape
    if not shape:
        raise TypeError("len() of a 0-D tensor")
    return shape[0]


def _iter(self):
    for i in range(_len(self)):
        yield self[i]


def _size(self):
    """The number of elements, a Python int (for a static value with dims known only
    when the program runs: a 0-D int64 tensor)."""
    if not self.is_static:
        return int(self._data.size)
    shape = self.shape
    if any(d < 0 for d in shape):
        return ops.numel(self)
    return int(np.prod(shape, dtype=np.int64))


def _T(self):
    """The transpose (all axes reversed)."""
    return ops.transpose(self, list(range(len(self.shape)))[::-1])


# NumPy ufuncs whose operands may be a tensor and scalars: the op of the same meaning.
_UFUNC_OPS = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "equal": "equal", "not_equal": "not_equal",
    "less": "less_than", "less_equal": "less_equal", "greater": "greater_than",
    "greater_equal": "greater_equal",
}


def _is_value(x) -> bool:
    return isinstance(x, Tensor) or getattr(x, "is_static", False)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """A NumPy scalar left of an operator (``np.float32(2) * x``) calls its ufunc, which
    comes here: the op runs as ``x``'s, on ``x``'s device (a NumPy scalar is a scalar,
    as a Python one is). Other ufunc calls (``np.exp(x)``, a host array beside a
    tensor) get the tensors' values on the host, as ``np.asarray`` would."""
    op = _UFUNC_OPS.get(ufunc.__name__)
    # NumPy hands a scalar on the left of a comparison over as a 0-d array
    inputs = tuple(x[()] if type(x) is np.ndarray and x.ndim == 0 else x for x in inputs)
    if op is not None and method == "__call__" and not kwargs and all(
            _is_value(x) or isinstance(x, (np.generic, int, float, bool)) for x in inputs):
        return apply(op, *inputs)
    for x in inputs:
        if getattr(x, "is_static", False):  # NumPy cannot compute it: the error says so
            return x.__array_function__(ufunc, (), inputs, kwargs)
    host = [x.__array__() if isinstance(x, Tensor) else x for x in inputs]
    return getattr(ufunc, method)(*host, **kwargs)


SURFACE = {
    "T": property(_T),
    "size": property(_size),
    "__array_ufunc__": _array_ufunc,
    "__add__": _binary("add"),
    "__radd__": _binary("add", True),
    "__sub__": _binary("subtract"),
    "__rsub__": _binary("subtract", True),
    "__mul__": _binary("multiply"),
    "__rmul__": _binary("multiply", True),
    "__truediv__": lambda self, other: (NotImplemented if foreign(other)
                                        else ops.divide(self, other)),
    "__rtruediv__": lambda self, other: (NotImplemented if foreign(other)
                                         else ops.divide(other, self)),
    "__floordiv__": _binary("floor_divide"),
    "__rfloordiv__": _binary("floor_divide", True),
    "__mod__": _binary("remainder"),
    "__rmod__": _binary("remainder", True),
    "__pow__": _binary("pow"),
    "__rpow__": _binary("pow", True),
    "__matmul__": _binary("matmul"),
    "__rmatmul__": _binary("matmul", True),
    "__neg__": unary("neg"),
    "__pos__": lambda self: self,
    "__abs__": lambda self: apply("abs", self),
    "__invert__": _invert,
    "__and__": _logical("logical_and", "bitwise_and"),
    "__rand__": _logical("logical_and", "bitwise_and", True),
    "__or__": _logical("logical_or", "bitwise_or"),
    "__ror__": _logical("logical_or", "bitwise_or", True),
    "__xor__": _logical("logical_xor", "bitwise_xor"),
    "__rxor__": _logical("logical_xor", "bitwise_xor", True),
    "__eq__": _compare("equal"),
    "__ne__": _compare("not_equal"),
    "__lt__": _compare("less_than"),
    "__le__": _compare("less_equal"),
    "__gt__": _compare("greater_than"),
    "__ge__": _compare("greater_equal"),
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "__len__": _len,
    "__iter__": _iter,
    "reshape": _reshape,
    "view": _view,
    "permute": _permute,
    "t": _t,
    "item": _value("item"),
    "tolist": _value("tolist"),
    "transpose": _transpose,
    "backward": _backward,
    "astype": ops.cast,
    "numel": ops.numel,
    "clone": ops.clone,
}

# Methods that are the functional API with the tensor as the first argument.
for _name in (
    "add subtract multiply divide floor_divide remainder mod pow maximum minimum scale "
    "neg exp log sqrt square tanh sigmoid abs sign sin cos floor ceil round relu clip cast "
    "equal not_equal less_than less_equal greater_than greater_equal "
    "logical_and logical_or logical_xor logical_not "
    "sum mean max min prod any all argmax argmin cumsum matmul mm "
    "concat split squeeze unsqueeze flatten expand expand_as broadcast_to tile flip gather "
    "one_hot "
    "rsqrt isnan isinf isfinite masked_fill allclose var std logsumexp norm cumprod "
    "argsort sort topk bmm outer tril triu diag chunk unbind roll repeat_interleave "
    "gather_nd index_select scatter masked_select nonzero strided_slice slice"
).split():
    SURFACE.setdefault(_name, getattr(ops, _name))


# Spellings PyTorch users write, each the same op as the Paddle-style method.
def _spelling(fn, doc: str):
    fn.__doc__ = doc
    return fn


def _cast_to(dtype):
    return _spelling(lambda self: ops.cast(self, dtype), f"The tensor cast to {dtype}.")


def _fill_(self, value):
    """Set every element to `value`, in place (as ``x[...] = value``); returns the tensor."""
    from dy2stat import creation  # (creation builds on the tensor types this module makes)

    self._assign(lambda old: creation.full_like(old, value))
    return self


def _swapaxes(self, a, b):
    """The tensor with dims `a` and `b` exchanged."""
    perm = list(range(self.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(self, perm)


def _new(fill):
    def method(self, *shape, dtype=None):
        from dy2stat import creation

        return creation.full(ops._shape_list(shape), fill, dtype or self.dtype)

    method.__doc__ = (f"A new tensor of `shape` (``x.new_{'zeros' if fill == 0 else 'ones'}"
                      f"(2, 3)``) filled with {fill}, of this tensor's dtype unless given.")
    return method


def _axis(axis, dim):
    return axis if dim is None else dim


SURFACE.update({
    "softmax": _spelling(lambda self, axis=-1, dim=None: ops.softmax(self, _axis(axis, dim)),
                         "Softmax over `axis` (or PyTorch's `dim`), as d2s.softmax."),
    "log_softmax": _spelling(
        lambda self, axis=-1, dim=None: ops.log_softmax(self, _axis(axis, dim)),
        "Log-softmax over `axis` (or `dim`)."),
    "clamp": _spelling(lambda self, min=None, max=None: ops.clip(self, min, max),
                       "The tensor clipped to [min, max], as ``clip``."),
    "mul": _spelling(lambda self, other: ops.multiply(self, other), "``multiply``."),
    "sub": _spelling(lambda self, other: ops.subtract(self, other), "``subtract``."),
    "div": _spelling(lambda self, other: ops.divide(self, other), "``divide``."),
    "true_divide": _spelling(lambda self, other: ops.divide(self, other), "``divide``."),
    "ne": _spelling(lambda self, other: ops.not_equal(self, other), "``not_equal``."),
    "reciprocal": _spelling(lambda self: ops.divide(1.0, self), "1 / the tensor."),
    "dim": _spelling(lambda self: self.ndim, "The number of dims, as ``ndim``."),
    "float": _cast_to("float32"),
    "double": _cast_to("float64"),
    "half": _cast_to("float16"),
    "int": _cast_to("int32"),
    "long": _cast_to("int64"),
    "bool": _cast_to("bool"),
    "type_as": _spelling(lambda self, other: ops.cast(self, other.dtype),
                         "The tensor cast to `other`'s dtype."),
    "where": _spelling(lambda self, condition, other: ops.where(condition, self, other),
                       "This tensor where `condition` holds, else `other` (d2s.where)."),
    "amax": _spelling(lambda self, axis=None, keepdim=False: ops.max(self, axis, keepdim),
                      "The maximum over `axis`, as ``max``."),
    "amin": _spelling(lambda self, axis=None, keepdim=False: ops.min(self, axis, keepdim),
                      "The minimum over `axis`, as ``min``."),
    "contiguous": _spelling(lambda self: self, "The tensor itself (tensors are contiguous)."),
    "swapaxes": _swapaxes,
    "zero_": _spelling(lambda self: _fill_(self, 0), "Set every element to 0, in place."),
    "fill_": _fill_,
    "new_zeros": _new(0),
    "new_ones": _new(1),
    "dot": _spelling(lambda self, other: ops.sum(ops.multiply(self, other)),
                     "The dot product of two 1-D tensors."),
})


def _in_place(name):
    def method(self, *args, **kwargs):
        self._assign(lambda old: SURFACE[name](old, *args, **kwargs))
        return self

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"``{name}``, written into this tensor (returns it)."
    return method


# In-place forms (`x.add_(y)`, `x.clamp_(0, 1)`), as Paddle and PyTorch spell them.
for _name in ("add subtract multiply divide mul sub div scale clip clamp pow exp sqrt abs "
              "neg sign tanh sigmoid relu floor ceil round square reciprocal").split():
    SURFACE.setdefault(f"{_name}_", _in_place(_name))


def install(cls) -> None:
    """Give ``cls`` the shared surface (called for Tensor and Variable)."""
    for name, fn in SURFACE.items():
        setattr(cls, name, fn)
    cls.__hash__ = object.__hash__
