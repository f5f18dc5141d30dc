"""cuDNN convolution and pooling for CuPy arrays, where CuPy exposes cuDNN.

Each kernel takes the arguments of its generic twin in ``kernels.conv`` and
returns ``NotImplemented`` when cuDNN cannot take the call: this CuPy has no
cuDNN, a dtype cuDNN lacks (only float16/32/64), a ``ceil_mode`` window that
reaches past the padding, or cuDNN refusing the case (``CuDNNError``). The op
table in ``runtime/ops/conv.py`` then runs the generic kernel (im2col + a
cuBLAS batched matmul on CuPy).

CuPy up to v13 wraps cuDNN as ``cupy.cudnn`` (``convolution_forward``,
``convolution_backward_data``, ``convolution_backward_filter``,
``pooling_forward``, ``pooling_backward``), with the constants in
``cupy.cuda.cudnn``; CuPy 14 removed both, so there the generic kernels run.

Algorithm choice: by default cuDNN's heuristic picks a convolution algorithm
without timing anything. With ``settings.exhaustive_search`` (the
``cudnn_exhaustive_search`` flag) each call passes ``auto_tune=True``: the
first call for a shape times every algorithm (cudnnFind*AlgorithmEx) and
CuPy keeps the fastest per (device, shapes, conv params, workspace limit),
so later calls of that shape reuse it. ``searched()`` lists the shapes
searched so far in this process.
"""

from __future__ import annotations

import numpy

from dy2stat.kernels import backend
from dy2stat.kernels.conv import _conv_geometry, _pool_geometry

__all__ = [
    "available",
    "avg_pool2d",
    "avg_pool2d_grad",
    "conv2d",
    "conv2d_grad_filter",
    "conv2d_grad_input",
    "max_pool2d",
    "max_pool2d_grad",
    "searched",
    "settings",
]


class Settings:
    """What dy2stat's flags set: use cuDNN at all, search algorithms, stay deterministic."""

    __slots__ = ("enabled", "exhaustive_search", "deterministic")

    def __init__(self):
        self.enabled = True
        self.exhaustive_search = False
        self.deterministic = False


settings = Settings()

_FLOATS = frozenset(numpy.dtype(t) for t in ("float16", "float32", "float64"))
_api = None  # None: not looked up yet; False: none here; else (cupy.cudnn, cupy.cuda.cudnn)
_searched: set = set()  # (kind, device, shapes, params) searched with auto_tune


def _cudnn():
    """The CuPy cuDNN modules, or None (looked up once; CuPy is optional)."""
    global _api
    if _api is None:
        _api = False
        if backend.has_cupy():
            try:
                import cupy.cudnn as api
                from cupy.cuda import cudnn as lib

                _api = (api, lib)
            except Exception:  # CuPy >= 14, or no cuDNN library on this machine
                _api = False
    return _api or None


def available() -> bool:
    """True when this CuPy exposes cuDNN (whether or not it is enabled)."""
    return _cudnn() is not None


def searched() -> list:
    """The (kind, device, input shape, filter shape, dtype, pad, stride, dilation, groups)
    keys whose algorithm cuDNN has searched (exhaustive search only)."""
    return sorted(_searched, key=repr)


def _usable(xp, *arrays) -> bool:
    if not settings.enabled or xp is not backend.cupy or _cudnn() is None:
        return False
    dtype = arrays[0].dtype
    return dtype in _FLOATS and all(a.dtype == dtype for a in arrays)


def _run(function, *args, **kwargs):
    """Call a cupy.cudnn function; a case cuDNN refuses (CuDNNError) goes to the generic
    kernel instead."""
    _, lib = _cudnn()
    try:
        return function(*args, **kwargs)
    except getattr(lib, "CuDNNError", ()):
        return NotImplemented


def _auto_tune(kind, x_shape, w_shape, dtype, device, conv) -> bool:
    if not settings.exhaustive_search:
        return False
    _searched.add((kind, device, tuple(x_shape), tuple(w_shape), str(dtype), *conv))
    return True


# ---------------------------------------------------------------- convolution


def conv2d(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """conv2d through cudnnConvolutionForward."""
    if not _usable(xp, x, w):
        return NotImplemented
    api, _ = _cudnn()
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w.shape, stride, padding, dilation, groups
    )
    y = xp.empty((x.shape[0], w.shape[0], oh, ow), dtype=x.dtype)
    conv = (padding, stride, dilation, groups)
    tune = _auto_tune("forward", x.shape, w.shape, x.dtype, x.device.id, conv)
    done = _run(api.convolution_forward, x, w, None, y, *conv, auto_tune=tune,
                tensor_core="auto")
    return NotImplemented if done is NotImplemented else y


def conv2d_grad_input(
    xp, x_shape_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """The input gradient through cudnnConvolutionBackwardData."""
    if not _usable(xp, w, dy):
        return NotImplemented
    api, _ = _cudnn()
    x_shape = tuple(x_shape_ref.shape)
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x_shape, w.shape, stride, padding, dilation, groups
    )
    if tuple(dy.shape) != (x_shape[0], w.shape[0], oh, ow):
        return NotImplemented  # the generic kernel explains the mismatch
    dx = xp.empty(x_shape, dtype=dy.dtype)
    conv = (padding, stride, dilation, groups)
    tune = _auto_tune("backward_data", x_shape, w.shape, dy.dtype, dy.device.id, conv)
    done = _run(api.convolution_backward_data, w, dy, None, dx, *conv,
                deterministic=settings.deterministic, auto_tune=tune, tensor_core="auto")
    return NotImplemented if done is NotImplemented else dx


def conv2d_grad_filter(
    xp, x, dy, w_shape_ref, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """The filter gradient through cudnnConvolutionBackwardFilter."""
    if not _usable(xp, x, dy):
        return NotImplemented
    api, _ = _cudnn()
    w_shape = tuple(w_shape_ref.shape)
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w_shape, stride, padding, dilation, groups
    )
    if tuple(dy.shape) != (x.shape[0], w_shape[0], oh, ow):
        return NotImplemented
    dw = xp.empty(w_shape, dtype=x.dtype)
    conv = (padding, stride, dilation, groups)
    tune = _auto_tune("backward_filter", x.shape, w_shape, x.dtype, x.device.id, conv)
    done = _run(api.convolution_backward_filter, x, dy, dw, *conv,
                deterministic=settings.deterministic, auto_tune=tune, tensor_core="auto")
    return NotImplemented if done is NotImplemented else dw


# -------------------------------------------------------------------- pooling


def _pool_args(x, kernel_size, stride, padding, ceil_mode):
    """(window, stride, pad, output shape) for cuDNN, or None when it cannot pool this."""
    k, s, (oh, ow), pads = _pool_geometry(x.shape, kernel_size, stride, padding, ceil_mode)
    (ph, ph_end), (pw, pw_end) = pads[2], pads[3]
    if ph_end != ph or pw_end != pw:  # ceil_mode: cuDNN pads both sides alike
        return None
    # cuDNN's output size is the floor form; ceil_mode without extra padding agrees
    floor_h = (x.shape[2] + 2 * ph - k[0]) // s[0] + 1
    floor_w = (x.shape[3] + 2 * pw - k[1]) // s[1] + 1
    if (floor_h, floor_w) != (oh, ow):
        return None
    return k, s, (ph, pw), (x.shape[0], x.shape[1], oh, ow)


def _pool_forward(xp, x, mode, kernel_size, stride, padding, ceil_mode):
    args = _pool_args(x, kernel_size, stride, padding, ceil_mode)
    if args is None:
        return NotImplemented
    api, _ = _cudnn()
    k, s, pad, out_shape = args
    y = xp.empty(out_shape, dtype=x.dtype)
    return _run(api.pooling_forward, x, y, k, s, pad, mode)


def _max_mode(lib):
    # deterministic: each window's gradient goes to one maximum, without atomics
    return getattr(lib, "CUDNN_POOLING_MAX_DETERMINISTIC", lib.CUDNN_POOLING_MAX)


def _avg_mode(lib, exclusive):
    if exclusive:
        return lib.CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
    return lib.CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING


def max_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """Max pooling through cudnnPoolingForward (padding counts as -inf)."""
    if not _usable(xp, x):
        return NotImplemented
    return _pool_forward(xp, x, _max_mode(_cudnn()[1]), kernel_size, stride, padding, ceil_mode)


def max_pool2d_grad(xp, x, y, dy, kernel_size, stride=None, padding=0, ceil_mode=False):
    """The gradient of max pooling through cudnnPoolingBackward."""
    if not _usable(xp, x, y, dy):
        return NotImplemented
    args = _pool_args(x, kernel_size, stride, padding, ceil_mode)
    if args is None or tuple(y.shape) != args[3] or tuple(dy.shape) != args[3]:
        return NotImplemented
    api, lib = _cudnn()
    k, s, pad, _ = args
    return _run(api.pooling_backward, x, y, dy, k, s, pad, _max_mode(lib))


def avg_pool2d(xp, x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True):
    """Average pooling through cudnnPoolingForward."""
    if not _usable(xp, x):
        return NotImplemented
    mode = _avg_mode(_cudnn()[1], exclusive)
    return _pool_forward(xp, x, mode, kernel_size, stride, padding, ceil_mode)


def avg_pool2d_grad(
    xp, x, dy, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True
):
    """The gradient of average pooling through cudnnPoolingBackward.

    cudnnPoolingBackward takes the forward output too; it is recomputed here
    (one cheap pooling) since the op does not keep it.
    """
    if not _usable(xp, x, dy):
        return NotImplemented
    mode = _avg_mode(_cudnn()[1], exclusive)
    args = _pool_args(x, kernel_size, stride, padding, ceil_mode)
    if args is None or tuple(dy.shape) != args[3]:
        return NotImplemented
    api, _ = _cudnn()
    k, s, pad, out_shape = args
    y = _run(api.pooling_forward, x, xp.empty(out_shape, dtype=x.dtype), k, s, pad, mode)
    if y is NotImplemented:
        return NotImplemented
    return _run(api.pooling_backward, x, y, dy, k, s, pad, mode)
