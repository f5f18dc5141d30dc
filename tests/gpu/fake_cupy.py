"""A stand-in for CuPy on a machine without a GPU, to exercise the GPU code paths.

``install()`` puts modules named ``cupy`` and ``cupyx`` in ``sys.modules``
(call it before dy2stat is imported). Their arrays are NumPy arrays of a
subclass marked as living on ``gpu:0``; like CuPy's, they never mix with
NumPy arrays: a ufunc or array function given a plain ``numpy.ndarray``
beside them raises ``TypeError``, and only ``asarray``/``array``/``asnumpy``
cross between host and "device". There is no ``cupy.cudnn`` (as in CuPy 14)
unless ``install(cudnn=True)``: then ``cupy.cudnn`` has CuPy 13's convolution
and pooling functions (same signatures, computed with dy2stat's generic
kernels), ``calls`` records each call, and a dilated forward convolution
raises ``CuDNNError`` (as cuDNN does for a case it does not support), so the
fallback to the generic kernel runs too.

It checks dy2stat's device plumbing (placement, copies, errors, executors,
the arguments given to cuDNN), not CuPy or cuDNN themselves: run the ``gpu``
tests on a real GPU for that.

    D2S_FAKE_CUPY=1 python -m pytest -m gpu tests        # like CuPy 14
    D2S_FAKE_CUPY=cudnn python -m pytest -m gpu tests    # like CuPy 13 with cuDNN
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np

__version__ = "0.0+fake"


class Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise RuntimeError(f"fake cupy: no device {self.id} (there is one GPU)")

    def use(self):
        pass

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class _Pointer:
    device_id = 0


class ndarray(np.ndarray):  # noqa: N801  (CuPy's name)
    """A host array that says it lives on GPU 0."""

    @property
    def device(self):
        return Device(0)

    @property
    def data(self):
        return _Pointer()

    def get(self):
        return _host(self)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out", ())
        _refuse_host(ufunc.__name__, inputs + tuple(out))
        if out:
            kwargs["out"] = tuple(_base(o) for o in out)
        result = getattr(ufunc, method)(*[_base(i) for i in inputs], **kwargs)
        if out:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        _refuse_host(func.__name__, args, kwargs)
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    def __bool__(self):  # CuPy: one element reads back to the host
        return bool(_base(self))


def _base(a):
    return a.view(np.ndarray) if isinstance(a, ndarray) else a


def _host(a):
    return np.array(_base(a), copy=True)


def _unwrap(value):
    if isinstance(value, ndarray):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _wrap(value):
    if type(value) is np.ndarray:
        return value.view(ndarray)
    if isinstance(value, np.generic):  # CuPy gives 0-d arrays, never NumPy scalars
        return np.asarray(value).view(ndarray)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _refuse_host(name, *values):
    for value in values:
        if type(value) is np.ndarray:
            raise TypeError(f"fake cupy {name}: unsupported type <class 'numpy.ndarray'> "
                            "(a host array given to a device function)")
        if isinstance(value, (list, tuple)):
            _refuse_host(name, *value)
        elif isinstance(value, dict):
            _refuse_host(name, *value.values())


def _function(name, fn, host_ok=False):
    def call(*args, **kwargs):
        if not host_ok:
            _refuse_host(name, args, kwargs)
        return _wrap(fn(*_unwrap(args), **_unwrap(kwargs)))

    call.__name__ = name
    return call


def asnumpy(a, stream=None):
    return _host(a)


def asarray(a, dtype=None, order=None):
    """Like CuPy: a device array of the right dtype is returned as it is."""
    if isinstance(a, ndarray) and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    return _wrap(np.array(_base(a), dtype=dtype, order=order or "K", copy=True))


class _Generator:
    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def __getattr__(self, name):
        return _function(name, getattr(self._rng, name))


class _Stream:
    def synchronize(self):
        pass


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _numpy_attr(name):
    """Any other name: NumPy's, with functions wrapped to work on device arrays."""
    try:
        obj = getattr(np, name)
    except AttributeError:
        raise AttributeError(f"module 'cupy' (fake) has no attribute {name!r}") from None
    if isinstance(obj, np.ufunc) or isinstance(obj, type) or not callable(obj):
        return obj
    return _function(name, obj, host_ok=name in ("asarray", "array", "asanyarray"))


# ------------------------------------------------------- cuDNN, as CuPy 13 has it
calls: list = []  # (function name, auto_tune or mode) per cuDNN call
_MAX, _AVG_INCLUDE, _AVG_EXCLUDE, _MAX_DETERMINISTIC = 0, 1, 2, 3


class CuDNNError(RuntimeError):
    pass


def _check_conv_args(name, arrays, out, params):
    for a in arrays:
        if not isinstance(a, ndarray) or a.dtype.char not in "efd":
            raise TypeError(f"fake cudnn {name}: needs float device arrays")
    if not out.flags.c_contiguous:
        raise ValueError(f"fake cudnn {name}: the output must be C-contiguous")
    for p in params[:3]:
        if type(p) is not tuple:  # Cython-typed ``tuple`` arguments
            raise TypeError(f"fake cudnn {name}: pad, stride and dilation must be tuples")


def convolution_forward(x, W, b, y, pad, stride, dilation, groups, *, auto_tune, tensor_core,
                        d_layout=0, w_layout=0):
    from dy2stat.kernels import conv

    _check_conv_args("convolution_forward", (x, W), y, (pad, stride, dilation))
    if dilation != (1, 1):
        raise CuDNNError("CUDNN_STATUS_NOT_SUPPORTED (the fake refuses dilation)")
    calls.append(("convolution_forward", auto_tune))
    _base(y)[...] = conv.conv2d(np, _base(x), _base(W), stride, pad, dilation, groups)


def convolution_backward_data(W, x, b, y, pad, stride, dilation, groups, *, deterministic,
                              auto_tune, tensor_core, d_layout=0, w_layout=0):
    from dy2stat.kernels import conv

    _check_conv_args("convolution_backward_data", (W, x), y, (pad, stride, dilation))
    calls.append(("convolution_backward_data", auto_tune))
    _base(y)[...] = conv.conv2d_grad_input(np, _base(y), _base(W), _base(x), stride, pad,
                                           dilation, groups)


def convolution_backward_filter(x, gy, gW, pad, stride, dilation, groups, *, deterministic,
                                auto_tune, tensor_core, d_layout=0, w_layout=0):
    from dy2stat.kernels import conv

    _check_conv_args("convolution_backward_filter", (x, gy), gW, (pad, stride, dilation))
    calls.append(("convolution_backward_filter", auto_tune))
    _base(gW)[...] = conv.conv2d_grad_filter(np, _base(x), _base(gy), _base(gW), stride, pad,
                                             dilation, groups)


def _pool_attrs(ksize, stride, pad, mode):
    if not all(type(v) is tuple for v in (ksize, stride, pad)):
        raise TypeError("fake cudnn pooling: ksize, stride and pad must be tuples")
    return dict(kernel_size=ksize, stride=stride, padding=pad, ceil_mode=False)


def pooling_forward(x, y, ksize, stride, pad, mode):
    from dy2stat.kernels import conv

    attrs = _pool_attrs(ksize, stride, pad, mode)
    calls.append(("pooling_forward", mode))
    if mode in (_MAX, _MAX_DETERMINISTIC):
        _base(y)[...] = conv.max_pool2d(np, _base(x), **attrs)
    else:
        _base(y)[...] = conv.avg_pool2d(np, _base(x), exclusive=mode == _AVG_EXCLUDE, **attrs)
    return y


def pooling_backward(x, y, gy, ksize, stride, pad, mode):
    from dy2stat.kernels import conv

    attrs = _pool_attrs(ksize, stride, pad, mode)
    calls.append(("pooling_backward", mode))
    if mode in (_MAX, _MAX_DETERMINISTIC):
        return _wrap(conv.max_pool2d_grad(np, _base(x), _base(y), _base(gy), **attrs).copy())
    return _wrap(conv.avg_pool2d_grad(np, _base(x), _base(gy), exclusive=mode == _AVG_EXCLUDE,
                                      **attrs).copy())


def _cudnn_modules():
    api = _module("cupy.cudnn", **{f.__name__: f for f in (
        convolution_forward, convolution_backward_data, convolution_backward_filter,
        pooling_forward, pooling_backward)})
    lib = _module("cupy.cuda.cudnn", CUDNN_POOLING_MAX=_MAX,
                  CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING=_AVG_INCLUDE,
                  CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING=_AVG_EXCLUDE,
                  CUDNN_POOLING_MAX_DETERMINISTIC=_MAX_DETERMINISTIC, CuDNNError=CuDNNError)
    return api, lib


# ------------------------------------------------------------------ the modules
def build(cudnn=False):
    """(cupy, cupyx) modules."""
    runtime = _module("cupy.cuda.runtime", getDeviceCount=lambda: 1, getDevice=lambda: 0,
                      getDeviceProperties=lambda i: {"name": b"fake GPU (NumPy)"})
    cuda = _module("cupy.cuda", Device=Device, runtime=runtime,
                   get_current_stream=lambda: _Stream())
    stride_tricks = _module("cupy.lib.stride_tricks", as_strided=_function(
        "as_strided", np.lib.stride_tricks.as_strided))
    cupy = _module("cupy", __version__=__version__, ndarray=ndarray, asnumpy=asnumpy,
                   asarray=asarray,
                   cuda=cuda, lib=_module("cupy.lib", stride_tricks=stride_tricks),
                   random=_module("cupy.random", default_rng=_Generator))
    cupy.__getattr__ = _numpy_attr
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    special = _module("cupyx.scipy.special", erfc=lambda x: _wrap(
        erfc(_base(x)).astype(x.dtype)))
    cupyx = _module("cupyx", scatter_add=lambda a, idx, v: np.add.at(
        _base(a), _unwrap(idx), _unwrap(v)), scipy=_module("cupyx.scipy", special=special))
    if cudnn:
        cupy.cudnn, cupy.cuda.cudnn = _cudnn_modules()
    return cupy, cupyx


def install(cudnn=False) -> None:
    if "dy2stat" in sys.modules:
        raise RuntimeError("install the fake CuPy before importing dy2stat")
    cupy, cupyx = build(cudnn)
    if cudnn:
        sys.modules.update({"cupy.cudnn": cupy.cudnn, "cupy.cuda.cudnn": cupy.cuda.cudnn})
    sys.modules.update({
        "cupy": cupy, "cupy.cuda": cupy.cuda, "cupy.cuda.runtime": cupy.cuda.runtime,
        "cupy.lib": cupy.lib, "cupy.lib.stride_tricks": cupy.lib.stride_tricks,
        "cupy.random": cupy.random, "cupyx": cupyx, "cupyx.scipy": cupyx.scipy,
        "cupyx.scipy.special": cupyx.scipy.special,
    })
