"""A stand-in for CuPy 14 on a machine without a GPU, as strict as CuPy 14 where dy2stat
could trip.

``install()`` puts modules named ``cupy`` and ``cupyx`` in ``sys.modules`` (call
it before dy2stat is imported). Their arrays hold NumPy arrays but are no NumPy
arrays; what CuPy 14.2 refuses, they refuse:

- a host array never mixes in: ``np.asarray(device_array)`` raises (CuPy's
  "Implicit conversion to a NumPy array is not allowed"), a ufunc or function
  given a ``numpy.ndarray`` raises ``TypeError``; only ``asarray``/``array``
  copy in, ``asnumpy``/``.get()`` copy out. NumPy *scalars* are scalars.
- names CuPy 14.2 lacks are missing (``cupy.cudnn``, ``cupy.errstate``,
  ``Generator.normal``, ``ndarray.__index__`` ...: the lists in ``cupy14_api``);
- an array lives on one of ``gpus`` devices (2 by default): an op whose arrays
  live elsewhere than the current device raises, as CuPy's kernel launch does;
- reductions give 0-d arrays, never NumPy scalars; object, string, datetime
  and long double dtypes are refused;
- stream capture records every op and ``Graph.launch`` replays them into the
  same buffers (what a CUDA graph does); while a stream captures, reading a
  value on the host, copying host data in, drawing random numbers, or
  working on another stream raises, as CUDA does;
- ``RawKernel(source, name)`` runs the kernel's NumPy reference, which dy2stat
  registers with each kernel it generates (``dy2stat.kernels.cuda_kernels``);
  ``compile()`` checks the name is one dy2stat made. Inside ``running_sources()``
  it runs the CUDA source itself instead: compiled as C++ by g++ with a few
  lines standing in for CUDA's built-ins (one block of one thread: a grid-stride
  loop covers every element, a barrier is a no-op). ``D2S_FAKE_NVCC=1`` also
  compiles every kernel's source with ``nvcc`` for sm_90.

It checks dy2stat's device plumbing, not CuPy or CUDA: run the ``gpu`` tests on
a real GPU for that. ``tests/gpu/fake_cudnn.py`` is the cuDNN frontend's double.

    D2S_FAKE_CUPY=1 python -m pytest -m gpu tests          # CuPy 14, no cuDNN
    D2S_FAKE_CUPY=cudnn python -m pytest -m gpu tests      # with the cuDNN frontend
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import operator
import os
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

from tests.gpu import cupy14_api as API

__version__ = API.VERSION + "+fake"

_REFUSED_KINDS = frozenset("OUSMmV")


def _refused(dtype) -> bool:
    """Dtypes CuPy has no arrays of: objects, strings, datetimes, structs, long doubles."""
    return dtype.kind in _REFUSED_KINDS or (dtype.kind == "f" and dtype.itemsize > 8) or (
        dtype.kind == "c" and dtype.itemsize > 16)


class CUDARuntimeError(RuntimeError):
    """What CuPy raises for a failing CUDA call."""


class _State:
    gpus = 2
    device = 0
    stream = None  # the current stream (None: the null stream)
    capturing = None  # the stream that captures, or None
    tape = None  # the ops recorded while capturing
    allocators: list = []  # using_allocator's, innermost last
    transfers = 0  # device-to-host reads (tests count them)
    launches = 0  # kernels run (every op, and each replayed op)
    run_sources = False  # RawKernels run their CUDA source on the host (running_sources)
    log = None  # a list: the name of every op run is appended (counting(log=True))
    made: list = []  # arrays allocated while capturing (their values are undefined after)
    saved: dict = {}  # id -> (array, its values before the capture wrote it)


S = _State()


def _capture_error(what: str):
    return CUDARuntimeError(f"cudaErrorStreamCaptureUnsupported: {what} while a stream "
                            "captures (fake cupy)")


def _host_read(what: str) -> None:
    if S.capturing is not None:
        raise _capture_error(what)
    S.transfers += 1


# ------------------------------------------------------------------ devices
class Device:
    def __init__(self, device=None):
        self.id = S.device if device is None else int(device)
        if not 0 <= self.id < S.gpus:
            raise CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {self.id}")
        self._previous = []

    def use(self):
        S.device = self.id

    def synchronize(self):
        _host_read("Device.synchronize")

    @property
    def compute_capability(self):
        return "90"

    @property
    def mem_info(self):
        return (140 << 30, 141 << 30)

    def __enter__(self):
        self._previous.append(S.device)
        S.device = self.id
        return self

    def __exit__(self, *exc):
        S.device = self._previous.pop()
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class MemoryPointer:
    def __init__(self, owner, device_id):
        self._owner, self.device_id = owner, device_id

    @property
    def ptr(self):
        return id(self._owner)

    @property
    def device(self):
        return Device(self.device_id)


# ------------------------------------------------------------------- arrays
class ndarray:  # noqa: N801  (CuPy's name)
    """A device array: a NumPy array that only device functions may touch."""

    __slots__ = ("_a", "_dev", "_mem", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, *, _array=None):
        a = np.empty(shape, dtype) if _array is None else _array
        if _refused(a.dtype):
            raise TypeError(f"fake cupy: dtype {a.dtype} is not supported (CuPy has no "
                            "object, string, datetime or long double arrays)")
        self._a, self._dev = a, S.device
        self._mem = [alloc(a.nbytes) for alloc in S.allocators[-1:]]
        if S.capturing is not None:
            S.made.append(self)

    # CuPy refuses every implicit trip to the host
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fake = UFUNCS.get(ufunc.__name__)
        if fake is None:
            return NotImplemented
        return getattr(fake, method)(*inputs, **kwargs) if method != "__call__" else fake(
            *inputs, **kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        if func.__name__ not in API.CUPY:  # CuPy has no such function: NumPy's TypeError
            return NotImplemented
        return _module_attr(func.__name__)(*args, **kwargs)

    # attributes that are plain data
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    flags = property(lambda self: self._a.flags)
    device = property(lambda self: Device(self._dev))
    data = property(lambda self: MemoryPointer(self._a, self._dev))
    T = property(lambda self: _call("transpose", np.transpose, (self,), {}))
    base = property(lambda self: None)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (id(self._a), False), "strides": self.strides}

    # crossing to the host, explicitly
    def get(self, stream=None, order="C", out=None):
        _host_read("ndarray.get")
        host = np.array(self._a, order=order, copy=True)
        if out is not None:
            out[...] = host
            return out
        return host

    def set(self, arr, stream=None):
        if S.capturing is not None:
            raise _capture_error("ndarray.set")
        self._a[...] = arr

    def item(self, *args):
        _host_read("ndarray.item")
        return self._a.item(*args)

    def tolist(self):
        _host_read("ndarray.tolist")
        return self._a.tolist()

    def __bool__(self):
        _host_read("bool(ndarray)")
        return bool(self._a)

    def __float__(self):
        _host_read("float(ndarray)")
        return float(self._a)

    def __int__(self):
        _host_read("int(ndarray)")
        return int(self._a)

    def __complex__(self):
        _host_read("complex(ndarray)")
        return complex(self._a)

    def __repr__(self):
        _host_read("repr(ndarray)")
        return repr(self._a)

    def __str__(self):
        _host_read("str(ndarray)")
        return str(self._a)

    def __format__(self, spec):
        _host_read("format(ndarray)")
        return format(self._a, spec) if self.ndim == 0 else format(str(self._a), spec)

    def __reduce__(self):
        return (array, (self.get(),))

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    __hash__ = None

    # copies and views
    def copy(self, order="C"):
        """A copy on the current device (also from another GPU, as CuPy's)."""
        _check_stream("copy")
        result = _new(np.array(self._a, order=order, copy=True))
        _record(lambda a: np.array(a, order=order, copy=True), (self,), {}, result)
        return result

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if casting is not None or subok is not None:
            raise TypeError("fake cupy: astype takes no casting or subok")
        return _call("astype", lambda a: a.astype(dtype, order=order, copy=copy), (self,), {})

    def __getitem__(self, key):
        return _call("getitem", operator.getitem, (self, _index(key)), {})

    def __setitem__(self, key, value):
        _call("setitem", _setitem, (self, _index(key), value), {}, host_ok=True)

    def __getattr__(self, name):
        if name not in API.NDARRAY or not hasattr(np.ndarray, name):
            raise AttributeError(f"'cupy.ndarray' (fake) object has no attribute {name!r}")
        method = getattr(np.ndarray, name)
        return lambda *args, **kwargs: _call(name, method, (self, *args), kwargs)


def _setitem(a, key, value):
    a[key] = value


def _index(key):
    """Indices may be device arrays (or host ones, which CuPy copies in)."""
    return key


def _base(value):
    return value._a if isinstance(value, ndarray) else value


def _unwrap(value):
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _new(a) -> ndarray:
    return ndarray(None, _array=a)


def _wrap(value):
    if type(value) is np.ndarray:
        return _new(value)
    if isinstance(value, np.generic):  # CuPy gives 0-d arrays, never NumPy scalars
        return _new(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _arrays(value):
    if isinstance(value, ndarray):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _arrays(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays(v)


def _refuse_host(name, value) -> None:
    if type(value) is np.ndarray:
        raise TypeError(f"Unsupported type <class 'numpy.ndarray'> (fake cupy {name}: a host "
                        "array given to a device function)")
    if isinstance(value, (list, tuple)):
        for v in value:
            _refuse_host(name, v)
    elif isinstance(value, dict):
        for v in value.values():
            _refuse_host(name, v)


def _check_device(name, args, kwargs) -> None:
    for a in _arrays((args, kwargs)):
        if a._dev != S.device:
            raise ValueError(f"Array device must be same as the current device: array device "
                             f"= {a._dev} while current = {S.device} (fake cupy {name})")


def _check_stream(name) -> None:
    if S.capturing is not None and S.stream is not S.capturing:
        raise _capture_error(f"{name} on another stream")


def _record(fn, args, kwargs, result) -> None:
    S.launches += 1
    if S.log is not None:
        S.log.append(getattr(fn, "__name__", repr(fn)))
    if S.tape is not None:
        S.tape.append((fn, args, kwargs, result))


def _call(name, fn, args, kwargs, host_ok=False, writes=None):
    """Run ``fn`` on the arrays' NumPy buffers; record it while a stream captures.

    ``writes`` are the arrays ``fn`` may write (default: ``out``, or the first argument
    of an in-place function): while capturing, their values are saved first and put
    back when the capture ends, since a captured op does not run (it runs at launch)."""
    if not host_ok:
        _refuse_host(name, (args, kwargs))
    _check_device(name, args, kwargs)
    _check_stream(name)
    if S.capturing is not None:
        if writes is None:
            writes = list(_arrays(kwargs.get("out"))) if "out" in kwargs else (
                list(_arrays(args[:1])) if name in _IN_PLACE else [])
        for a in writes:
            if id(a) not in S.saved and not any(a is m for m in S.made):
                S.saved[id(a)] = (a, a._a.copy())
    with np.errstate(all="ignore"):  # a GPU computes inf and nan without a warning
        result = _wrap(fn(*_unwrap(args), **_unwrap(kwargs)))
    if not _is_view(result, args, kwargs):  # a view is no kernel (and needs no replay)
        _record(fn, args, kwargs, result)
    return result


_IN_PLACE = frozenset({"setitem", "copyto", "scatter_add", "put", "place", "putmask",
                       "fill_diagonal", "fill", "sort"})


def _is_view(result, args, kwargs) -> bool:
    if not isinstance(result, ndarray) or "out" in kwargs:
        return False
    inputs = list(_arrays(args))
    if any(result._a is a._a for a in inputs):
        return True
    return result._a.base is not None and any(np.shares_memory(result._a, a._a)
                                              for a in inputs)


def _store(result, value) -> None:
    """Write a replayed op's value into the buffer the captured op produced."""
    if isinstance(result, ndarray):
        np.copyto(result._a, value)
    elif isinstance(result, (tuple, list)):
        for r, v in zip(result, value):
            _store(r, v)


# ------------------------------------------------------------------- ufuncs
class ufunc:  # noqa: N801  (CuPy's name)
    """A device ufunc: operands are device arrays or scalars, never host arrays or lists."""

    def __init__(self, np_ufunc):
        self._u = np_ufunc
        self.__name__ = self.name = np_ufunc.__name__
        self.nin, self.nout, self.nargs = np_ufunc.nin, np_ufunc.nout, np_ufunc.nargs

    def _check(self, inputs, kwargs):
        for x in inputs:
            if isinstance(x, (list, tuple)) or type(x) is np.ndarray:
                raise TypeError(f"Unsupported type {type(x)} (fake cupy {self.name})")
        out = kwargs.get("out")
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if not all(isinstance(o, ndarray) for o in outs):
                raise TypeError(f"fake cupy {self.name}: out must be a device array")
            kwargs["out"] = outs[0] if len(outs) == 1 else outs

    def __call__(self, *inputs, **kwargs):
        self._check(inputs, kwargs)
        out = kwargs.get("out")
        result = _call(self.name, self._u, inputs, kwargs)
        return out if out is not None else result

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False):
        self._check((a,), {})
        return _call(f"{self.name}.reduce", self._u.reduce, (a,),
                     dict(axis=axis, dtype=dtype, out=out, keepdims=keepdims))

    def accumulate(self, a, axis=0, dtype=None, out=None):
        self._check((a,), {})
        return _call(f"{self.name}.accumulate", self._u.accumulate, (a,),
                     dict(axis=axis, dtype=dtype, out=out))

    def at(self, a, indices, b=None):
        args = (a, indices) if b is None else (a, indices, b)
        _call(f"{self.name}.at", self._u.at, args, {}, writes=[a])

    def outer(self, a, b, **kwargs):
        self._check((a, b), kwargs)
        return _call(f"{self.name}.outer", self._u.outer, (a, b), kwargs)

    def __repr__(self):
        return f"<ufunc 'cupy_{self.name}'>"


UFUNCS: dict[str, ufunc] = {}


def _ufunc(name):
    np_name = {"abs": "absolute", "acos": "arccos", "acosh": "arccosh", "asin": "arcsin",
               "asinh": "arcsinh", "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh",
               "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
               "bitwise_right_shift": "right_shift", "pow": "power",
               "conj": "conjugate"}.get(name, name)
    u = getattr(np, np_name, None)
    if not isinstance(u, np.ufunc):
        return None
    fake = ufunc(u)
    UFUNCS[u.__name__] = UFUNCS.get(u.__name__) or fake
    return fake


for _name in sorted(API.UFUNCS):
    _ufunc(_name)


def _named(name) -> ufunc:
    return UFUNCS[getattr(np, name).__name__]


def _binary(name, reflected=False):
    u = _named(name)
    if reflected:
        return lambda self, other: u(other, self)
    return lambda self, other: u(self, other)


def _inplace(name):
    u = _named(name)

    def method(self, other):
        u(self, other, out=self)
        return self

    return method


for _dunder, _name in {"add": "add", "sub": "subtract", "mul": "multiply",
                       "truediv": "true_divide", "floordiv": "floor_divide",
                       "mod": "remainder", "pow": "power",
                       "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
                       "lshift": "left_shift", "rshift": "right_shift"}.items():
    setattr(ndarray, f"__{_dunder}__", _binary(_name))
    setattr(ndarray, f"__r{_dunder}__", _binary(_name, reflected=True))
    setattr(ndarray, f"__i{_dunder}__", _inplace(_name))
for _dunder, _name in {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                       "gt": "greater", "ge": "greater_equal"}.items():
    setattr(ndarray, f"__{_dunder}__", _binary(_name))
ndarray.__matmul__ = lambda self, other: _module_attr("matmul")(self, other)
ndarray.__rmatmul__ = lambda self, other: _module_attr("matmul")(other, self)
ndarray.__neg__ = lambda self: UFUNCS["negative"](self)
ndarray.__pos__ = lambda self: UFUNCS["positive"](self)
ndarray.__abs__ = lambda self: UFUNCS["absolute"](self)
ndarray.__invert__ = lambda self: UFUNCS["invert"](self)
ndarray.__divmod__ = lambda self, other: UFUNCS["divmod"](self, other)


# ---------------------------------------------------------------- functions
def asnumpy(a, stream=None, order="C", out=None):
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return np.asarray(a, order=order)


def asarray(a, dtype=None, order=None, *, blocking=False):
    """A device array of ``a``: itself when it is one of the right dtype, else a copy
    (host data is copied in: not while a stream captures)."""
    if isinstance(a, ndarray):
        if dtype is None or a.dtype == np.dtype(dtype):
            return a
        return a.astype(dtype)
    return array(a, dtype=dtype, order=order or "K")


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if isinstance(obj, ndarray):
        return _call("array", lambda a: np.array(a, dtype=dtype, order=order, ndmin=ndmin),
                     (obj,), {})
    if any(True for _ in _arrays(obj)):  # a list of device arrays: stacked on the device
        return _call("array", lambda o: np.array(o, dtype=dtype, ndmin=ndmin), (obj,), {})
    if S.capturing is not None:
        raise _capture_error("copying host data to the device")
    host = np.array(obj, dtype=dtype, order=order, ndmin=ndmin, copy=True)
    if _refused(host.dtype):
        raise ValueError(f"Unsupported dtype {host.dtype} (fake cupy array)")
    return _new(host)


def _function(name):
    fn = getattr(np, name)
    if name in _NO_KERNEL:
        return functools.wraps(fn)(lambda *args, **kwargs: _new(fn(*_unwrap(args),
                                                                     **_unwrap(kwargs))))
    return functools.wraps(fn)(lambda *args, **kwargs: _call(name, fn, args, kwargs))


_NO_KERNEL = frozenset({"empty", "empty_like"})  # memory only: nothing runs on the device


_FUNCTIONS: dict = {"asarray": asarray, "array": array, "asanyarray": asarray,
                    "asnumpy": asnumpy}


def _module_attr(name):
    """Any other CuPy 14.2 name: NumPy's, with functions wrapped to work on device arrays."""
    if name not in API.CUPY:
        raise AttributeError(f"module 'cupy' has no attribute {name!r} (CuPy {API.VERSION} "
                             "lacks it; fake cupy)")
    if name in _FUNCTIONS:
        return _FUNCTIONS[name]
    fake = UFUNCS.get(name) or (_ufunc(name) if name in API.UFUNCS else None)
    if fake is not None:
        return fake
    obj = getattr(np, name, None)
    if obj is None:
        raise AttributeError(f"fake cupy: {name!r} (a CuPy name) is not faked")
    if isinstance(obj, type) or not callable(obj):
        return obj
    _FUNCTIONS[name] = _function(name)
    return _FUNCTIONS[name]


class broadcast:  # noqa: N801  (CuPy's name)
    """The broadcast of device arrays: its shape, size and rank (no host conversion)."""

    def __init__(self, *arrays):
        _refuse_host("broadcast", arrays)
        self.shape = np.broadcast_shapes(*(np.shape(_base(a)) for a in arrays))
        self.size, self.nd = math.prod(self.shape), len(self.shape)


_FUNCTIONS["broadcast"] = broadcast


def copyto(dst, src, casting="same_kind", where=True):
    """CuPy's copy kernel reads and writes in no set order: a source that overlaps the
    destination other than element for element gives undefined results (refused here)."""
    if isinstance(src, ndarray) and isinstance(dst, ndarray) and src._a is not dst._a:
        a, b = dst._a, np.broadcast_to(src._a, dst.shape)
        same = (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
                and a.strides == b.strides)
        if not same and np.shares_memory(a, src._a):
            raise ValueError("fake cupy copyto: the source overlaps the destination (CuPy "
                             "gives undefined results); copy the source first")
    _call("copyto", np.copyto, (dst, src), {"casting": casting, "where": where},
          writes=[dst])


_FUNCTIONS["copyto"] = copyto
_FUNCTIONS["may_share_memory"] = lambda a, b, max_work=None: np.may_share_memory(
    _base(a), _base(b))  # pointers compared on the host: no kernel


def _as_strided(x, shape=None, strides=None):
    return _call("as_strided", lambda a: np.lib.stride_tricks.as_strided(a, shape, strides),
                 (x,), {})


def _sliding_window_view(x, window_shape, axis=None):
    return _call("sliding_window_view", lambda a: np.lib.stride_tricks.sliding_window_view(
        a, window_shape, axis), (x,), {})


# ------------------------------------------------------------------- random
class Generator:
    """CuPy's Generator has these draws only (no ``normal``, ``choice``, ``bernoulli``)."""

    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)
        self._dev = S.device

    def __getattr__(self, name):
        if name not in API.GENERATOR:
            raise AttributeError(f"'cupy.random.Generator' has no attribute {name!r} "
                                 "(fake cupy)")
        draw = getattr(self._rng, name)

        def call(*args, **kwargs):
            if S.capturing is not None:
                raise _capture_error("a random draw")
            if S.device != self._dev:
                raise ValueError(f"fake cupy: a generator of device {self._dev} drew on "
                                 f"device {S.device}")
            _refuse_host(name, (args, kwargs))
            return _wrap(np.asarray(draw(*args, **kwargs)))

        return call


# ------------------------------------------------------ streams and graphs
class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.time = None

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        _host_read("Event.synchronize")

    @property
    def done(self):
        return True


def get_elapsed_time(start, end):
    return (end.time - start.time) * 1e3


class Stream:
    null = None  # set below

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.is_null = null
        self.ptr = 0 if null else id(self)
        self._previous = []

    def use(self):
        S.stream = None if self.is_null else self
        return self

    def __enter__(self):
        self._previous.append(S.stream)
        S.stream = None if self.is_null else self
        return self

    def __exit__(self, *exc):
        S.stream = self._previous.pop()
        return False

    def synchronize(self):
        _host_read("Stream.synchronize")

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass

    def begin_capture(self, mode=None):
        if self.is_null:
            raise CUDARuntimeError("cudaErrorStreamCaptureUnsupported: the null stream "
                                   "cannot capture (fake cupy)")
        if S.capturing is not None:
            raise CUDARuntimeError("cudaErrorIllegalState: a stream already captures "
                                   "(fake cupy)")
        S.capturing, S.tape = self, []

    def end_capture(self):
        if S.capturing is not self:
            raise CUDARuntimeError("cudaErrorIllegalState: this stream does not capture "
                                   "(fake cupy)")
        graph = Graph(S.tape, S.device)
        for array, values in S.saved.values():  # captured writes did not happen
            array._a[...] = values
        for array in S.made:  # new memory holds no values before a launch
            if array._a.base is None:
                _poison(array._a)
        S.capturing = S.tape = None
        S.made, S.saved = [], {}
        return graph

    def is_capturing(self):
        return S.capturing is self


Stream.null = Stream(null=True)


def _poison(a) -> None:
    if a.dtype.kind == "f":
        a[...] = np.nan
    elif a.dtype.kind in "iu":
        a[...] = np.iinfo(a.dtype).max


class Graph:
    """A captured sequence of ops; ``launch`` runs them again into the same buffers."""

    def __init__(self, tape, device):
        self._tape, self._device = tape, device

    @property
    def ops(self) -> int:
        return len(self._tape)

    def upload(self, stream=None):
        pass

    def launch(self, stream=None):
        if S.capturing is not None:
            raise _capture_error("Graph.launch")
        if S.device != self._device:
            raise ValueError("fake cupy: a graph launched on another device")
        S.launches += 1
        if S.log is not None:
            S.log.append(f"graph of {len(self._tape)} ops")
        with np.errstate(all="ignore"):
            for fn, args, kwargs, result in self._tape:
                _store(result, fn(*_unwrap(args), **_unwrap(kwargs)))


def get_current_stream(device_id=None):
    return S.stream or Stream.null


# ------------------------------------------------------------ memory
class MemoryPool:
    def __init__(self):
        self._used = 0

    def malloc(self, size):
        self._used += size
        return MemoryPointer(bytearray(0), S.device)

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._used

    def free_all_blocks(self):
        pass


_POOL = MemoryPool()


@contextlib.contextmanager
def using_allocator(allocator=None):
    S.allocators.append(allocator or _POOL.malloc)
    try:
        yield
    finally:
        S.allocators.pop()


# ------------------------------------------------------------ raw kernels
class RawKernel:
    """A kernel dy2stat generated: its NumPy reference runs (see the module doc)."""

    _nvcc_checked: set = set()

    def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, jitify=False):
        if not isinstance(code, str) or not isinstance(name, str):
            raise TypeError("fake cupy RawKernel: code and name are strings")
        self.code, self.name, self.options = code, name, tuple(options)

    def _kernel(self):
        from dy2stat.kernels import cuda_kernels  # the registry dy2stat fills

        kernel = cuda_kernels.named(self.name)
        if kernel is None or kernel.source != self.code:
            raise CUDARuntimeError(f"fake cupy: no reference for kernel {self.name!r} (the "
                                   "fake runs only kernels dy2stat registered)")
        return kernel

    def compile(self, log_stream=None):
        self._kernel()
        if os.environ.get("D2S_FAKE_NVCC") and self.code not in self._nvcc_checked:
            nvcc_compile(self.code)
            self._nvcc_checked.add(self.code)

    def __call__(self, grid, block, args, *, shared_mem=0):
        kernel = self._kernel()
        for dims, what in ((grid, "grid"), (block, "block")):
            if not (isinstance(dims, tuple) and 1 <= len(dims) <= 3
                    and all(isinstance(d, int) and d >= 1 for d in dims)):
                raise ValueError(f"fake cupy RawKernel: {what} must be a tuple of 1-3 ints")
        if math.prod(block) > 1024:
            raise ValueError("fake cupy RawKernel: more than 1024 threads in a block")
        if not isinstance(args, tuple):
            raise TypeError("fake cupy RawKernel: args must be a tuple")
        for a in args:
            if not isinstance(a, (ndarray, np.generic)):
                raise TypeError(f"fake cupy RawKernel {self.name}: argument of type "
                                f"{type(a).__name__} (pass device arrays and NumPy scalars)")
        run = _host_function(self.code, self.name) if S.run_sources else kernel.reference
        _call(self.name, run, args, {}, writes=list(_arrays(args)))


_HOST_SHIM = r"""
#include <math.h>
#include <string.h>
struct fe_dim3 { unsigned x, y, z; };
static const fe_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static const fe_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
static inline void __syncthreads() {}
static inline float __int_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
"""
_HOST_LIBRARIES: dict = {}
_C_SCALARS = {"b": ctypes.c_bool, "i1": ctypes.c_int8, "u1": ctypes.c_uint8,
              "i2": ctypes.c_int16, "i4": ctypes.c_int32, "i8": ctypes.c_longlong,
              "f4": ctypes.c_float, "f8": ctypes.c_double}


def _host_function(source: str, name: str):
    """``name`` of ``source`` compiled for the host (one thread): a function of NumPy
    arrays and scalars, as the kernel's arguments."""
    fn = _HOST_LIBRARIES.get(source)
    if fn is None:
        folder = tempfile.mkdtemp(prefix="fake-cupy-kernel-")
        src, lib = os.path.join(folder, "k.cpp"), os.path.join(folder, "k.so")
        with open(src, "w") as f:
            f.write(_HOST_SHIM + source)
        result = subprocess.run(["g++", "-O1", "-w", "-shared", "-fPIC", "-o", lib, src],
                                capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise RuntimeError(f"g++ failed on kernel {name}:\n{result.stderr[-3000:]}")
        fn = getattr(ctypes.CDLL(lib), name)
        fn.restype = None
        _HOST_LIBRARIES[source] = fn

    def run(*args):
        c_args = []
        for a in args:
            if isinstance(a, np.ndarray):
                c_args.append(ctypes.c_void_p(a.ctypes.data))
            else:
                kind = "b" if a.dtype.kind == "b" else f"{a.dtype.kind}{a.dtype.itemsize}"
                c_args.append(_C_SCALARS[kind](a.item()))
        fn(*c_args)

    return run


@contextlib.contextmanager
def running_sources():
    """Run every RawKernel's CUDA source (compiled for the host by g++) in the block."""
    S.run_sources = True
    try:
        yield
    finally:
        S.run_sources = False


def nvcc_compile(source: str, arch: str = "sm_90") -> None:
    """Compile ``source`` to a cubin with nvcc (raises with its log when it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        result = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o",
                                 os.path.join(tmp, "kernel.cubin"), path],
                                capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise RuntimeError(f"nvcc failed:\n{result.stderr}\n{source}")


# ------------------------------------------------------------------ modules
def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _properties(device):
    Device(device)
    return {"name": b"fake GPU (NumPy)", "major": 9, "minor": 0,
            "multiProcessorCount": 132, "totalGlobalMem": 141 << 30}


def _set_device(device):
    Device(device).use()


def build():
    """(cupy, cupyx) modules."""
    runtime = _module(
        "cupy.cuda.runtime", getDeviceCount=lambda: S.gpus, getDevice=lambda: S.device,
        setDevice=_set_device, getDeviceProperties=_properties,
        runtimeGetVersion=lambda: 13000, driverGetVersion=lambda: 13000,
        deviceSynchronize=lambda: _host_read("deviceSynchronize"),
        CUDARuntimeError=CUDARuntimeError, streamCaptureModeRelaxed=2,
        streamCaptureModeGlobal=0, streamCaptureModeThreadLocal=1)
    graph = _module("cupy.cuda.graph", Graph=Graph)
    cuda = _module("cupy.cuda", Device=Device, runtime=runtime, Stream=Stream, Event=Event,
                   Graph=Graph, graph=graph, MemoryPool=MemoryPool, MemoryPointer=MemoryPointer,
                   get_current_stream=get_current_stream, get_elapsed_time=get_elapsed_time,
                   using_allocator=using_allocator, is_available=lambda: True,
                   get_local_runtime_version=lambda: 13000)
    stride_tricks = _module("cupy.lib.stride_tricks", as_strided=_as_strided,
                            sliding_window_view=_sliding_window_view)
    cupy = _module("cupy", __version__=__version__, ndarray=ndarray, ufunc=ufunc,
                   asnumpy=asnumpy, asarray=asarray, array=array, asanyarray=asarray,
                   RawKernel=RawKernel, cuda=cuda,
                   get_default_memory_pool=lambda: _POOL,
                   lib=_module("cupy.lib", stride_tricks=stride_tricks),
                   random=_module("cupy.random", default_rng=Generator, Generator=Generator))
    cupy.__getattr__ = _module_attr
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    special = _module("cupyx.scipy.special", erfc=lambda x: _call(
        "erfc", lambda a: erfc(a).astype(a.dtype), (x,), {}))
    cupyx = _module("cupyx", scatter_add=lambda a, idx, v: _call(
        "scatter_add", np.add.at, (a, idx, v), {}), scipy=_module("cupyx.scipy",
                                                                   special=special))
    return cupy, cupyx


def install(cudnn: bool = False, gpus: int = 2) -> None:
    """Put the fake ``cupy`` (and with ``cudnn`` the cuDNN frontend's double) in place."""
    if "dy2stat" in sys.modules:
        raise RuntimeError("install the fake CuPy before importing dy2stat")
    S.gpus = gpus
    cupy, cupyx = build()
    sys.modules.update({
        "cupy": cupy, "cupy.cuda": cupy.cuda, "cupy.cuda.runtime": cupy.cuda.runtime,
        "cupy.cuda.graph": cupy.cuda.graph, "cupy.lib": cupy.lib,
        "cupy.lib.stride_tricks": cupy.lib.stride_tricks, "cupy.random": cupy.random,
        "cupyx": cupyx, "cupyx.scipy": cupyx.scipy, "cupyx.scipy.special": cupyx.scipy.special,
    })
    sys.modules.pop("cudnn", None)
    if cudnn:
        from tests.gpu import fake_cudnn

        sys.modules["cudnn"] = fake_cudnn.build()
    else:  # the real frontend may be installed: CuPy 14 alone has no cuDNN
        sys.modules["cudnn"] = None


@contextlib.contextmanager
def counting():
    """Counts device-to-host reads and kernel launches inside the block (a replayed graph
    is one launch): ``with counting() as n: ...; n.transfers, n.launches, n.ops``
    (``ops``: the name of each launch)."""
    start = types.SimpleNamespace(transfers=S.transfers, launches=S.launches)
    result = types.SimpleNamespace(transfers=0, launches=0, ops=[])
    outer, S.log = S.log, result.ops
    try:
        yield result
    finally:
        S.log = outer
        result.transfers = S.transfers - start.transfers
        result.launches = S.launches - start.launches

