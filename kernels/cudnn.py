"""Convolutions through NVIDIA's cuDNN frontend (``import cudnn``), for CuPy arrays.

CuPy 14 has no cuDNN of its own (``cupy.cudnn`` is gone); the frontend's
graph API (the ``nvidia-cudnn-frontend`` package, with the cuDNN library of
``nvidia-cudnn-cu13``/``-cu12``; the ``gpu`` extras install both) builds one
small graph per convolution: ``conv_fprop`` for ``conv2d``, ``conv_dgrad``
for its input gradient, ``conv_wgrad`` for its filter gradient. Each kernel
takes the arguments of its generic twin in ``kernels.conv`` and returns
``NotImplemented`` when cuDNN cannot take the call (no frontend here, a dtype
other than float16/32/64, a case no cuDNN engine supports): the op table in
``runtime/ops/conv.py`` then runs the generic kernel (im2col and one batched
product on CuPy).

Plans: a graph is built once per (kind, device, shapes, dtype, stride,
padding, dilation, the flags below) and kept with its workspace, so a call
after the first only binds pointers and executes. With
``settings.exhaustive_search`` (the ``cudnn_exhaustive_search`` flag) the
first call of a shape builds every plan the heuristics offer, times each on
the device and keeps the fastest (``searched()`` lists those shapes);
without it the heuristics' first choice that builds is used, timing
nothing. ``settings.deterministic`` (``cudnn_deterministic``) leaves out the
plans cuDNN marks non-deterministic. Each device has its own handle, set to
the current CuPy stream before every execution (so the work is ordered with
CuPy's, and captured with it into a CUDA graph).
"""

from __future__ import annotations

import numpy

from dy2stat.kernels import backend
from dy2stat.kernels.conv import _conv_geometry

__all__ = ["available", "conv2d", "conv2d_grad_filter", "conv2d_grad_input", "declined",
           "searched", "settings", "status"]


class Settings:
    """What dy2stat's flags set: use cuDNN at all, search plans, stay deterministic."""

    __slots__ = ("enabled", "exhaustive_search", "deterministic")

    def __init__(self):
        self.enabled = True
        self.exhaustive_search = False
        self.deterministic = False


settings = Settings()

_FLOATS = frozenset(numpy.dtype(t) for t in ("float16", "float32", "float64"))
_frontend = {"module": None, "why": None}  # looked up once
_handles: dict = {}  # device -> cuDNN handle
_plans: dict = {}  # key -> _Plan, or None when cuDNN declined the case
_declined: dict = {}  # key -> why
_SEARCH_RUNS = 3


def _cudnn():
    """The frontend module, or None (looked up once: CuPy and the frontend are optional)."""
    if _frontend["module"] is None and _frontend["why"] is None:
        if not backend.has_cupy():
            _frontend["why"] = "CuPy is not installed"
        else:
            try:
                import cudnn as module  # optional: the gpu extra installs it

                module.backend_version()  # raises when no cuDNN library loaded
                _frontend["module"] = module
            except Exception as exc:  # not installed, or no cuDNN library to load
                _frontend["why"] = (f"the cuDNN frontend or library does not load "
                                    f"({type(exc).__name__}: {exc}); pip install "
                                    "nvidia-cudnn-frontend nvidia-cudnn-cu13")
    return _frontend["module"]


def available() -> bool:
    """True when the cuDNN frontend imports (whether or not it is enabled)."""
    return _cudnn() is not None


def status() -> str:
    """Which convolution path a GPU uses, in words (``dy2stat.device.info``)."""
    module = _cudnn()
    if module is None:
        return f"generic (im2col and one batched product): {_frontend['why']}"
    if not settings.enabled:
        return "generic (im2col and one batched product): the use_cudnn flag is off"
    library = module.backend_version_string()
    search = "exhaustive search" if settings.exhaustive_search else "heuristics"
    return f"cuDNN frontend {module.__version__} (cuDNN {library}), plans by {search}"


def searched() -> list:
    """The keys whose plans were timed (exhaustive search): (kind, device, input shape,
    filter shape, dtype, stride, padding, dilation, deterministic)."""
    return sorted((k[:-1] for k, p in _plans.items() if p is not None and p.searched), key=repr)


def declined() -> dict:
    """key -> why cuDNN declined it (those calls ran the generic kernel)."""
    return dict(_declined)


def _usable(xp, *arrays) -> bool:
    if not settings.enabled or xp is not backend.cupy or _cudnn() is None:
        return False
    dtype = arrays[0].dtype
    return dtype in _FLOATS and all(a.dtype == dtype for a in arrays)


class _Plan:
    """One built graph: its tensors (by role), workspace and the plan index to run."""

    __slots__ = ("graph", "tensors", "workspace", "index", "searched")

    def __init__(self, graph, tensors, workspace, index, searched):
        self.graph, self.tensors, self.workspace = graph, tensors, workspace
        self.index, self.searched = index, searched


def _strides(shape) -> list:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def _handle(xp, module):
    device = xp.cuda.runtime.getDevice()
    handle = _handles.get(device)
    if handle is None:
        handle = _handles[device] = module.create_handle()
    module.set_stream(handle, xp.cuda.get_current_stream().ptr)
    return handle


def _data_types(module, dtype):
    io = {"float16": module.data_type.HALF, "float32": module.data_type.FLOAT,
          "float64": module.data_type.DOUBLE}[dtype.name]
    compute = module.data_type.DOUBLE if dtype.name == "float64" else module.data_type.FLOAT
    return io, compute


def _build(xp, kind, shapes, dtype, conv):
    """The graph of one convolution: ``shapes`` are (input, filter, output) of the op
    as cuDNN names them for ``kind``; returns a ``_Plan`` or raises."""
    module = _cudnn()
    stride, padding, dilation = (list(v) for v in conv)
    io, compute = _data_types(module, dtype)
    handle = _handle(xp, module)
    graph = module.pygraph(io_data_type=io, intermediate_data_type=compute,
                           compute_data_type=compute, handle=handle)
    a_shape, b_shape, out_shape = shapes
    a = graph.tensor(name="a", dim=list(a_shape), stride=_strides(a_shape), data_type=io)
    b = graph.tensor(name="b", dim=list(b_shape), stride=_strides(b_shape), data_type=io)
    attrs = dict(padding=padding, stride=stride, dilation=dilation, compute_data_type=compute)
    if kind == "forward":
        out = graph.conv_fprop(image=a, weight=b, **attrs)
    elif kind == "backward_data":
        out = graph.conv_dgrad(loss=a, filter=b, **attrs)
    else:
        out = graph.conv_wgrad(image=a, loss=b, **attrs)
    out.set_output(True).set_data_type(io).set_dim(list(out_shape)).set_stride(
        _strides(out_shape))
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([module.heur_mode.A, module.heur_mode.FALLBACK])
    if settings.deterministic:
        graph.deselect_numeric_notes([module.numerical_note.NONDETERMINISTIC])
    graph.check_support()
    search = settings.exhaustive_search and not xp.cuda.get_current_stream().is_capturing()
    policy = module.build_plan_policy.ALL if search else module.build_plan_policy.HEURISTICS_CHOICE
    graph.build_plans(policy)
    count = graph.get_execution_plan_count() if search else 1
    size = max(graph.get_workspace_size_plan_at_index(i) for i in range(count)) if search \
        else graph.get_workspace_size()
    workspace = xp.empty((max(int(size), 1),), dtype=xp.uint8)
    plan = _Plan(graph, (a, b, out), workspace, 0, search)
    if search and count > 1:
        plan.index = _fastest(xp, module, plan, shapes, dtype, count)
    return plan


def _fastest(xp, module, plan, shapes, dtype, count) -> int:
    """The index of the fastest of ``count`` built plans, timed on scratch arrays."""
    arrays = [xp.zeros(s, dtype=dtype) for s in shapes]
    tensors = dict(zip(plan.tensors, arrays))
    handle = _handle(xp, module)
    best, best_ms = 0, float("inf")
    for index in range(count):
        try:
            plan.graph.execute_plan_at_index(tensors, plan.workspace, index, handle=handle)
        except Exception:  # noqa: BLE001 - a plan that fails to run is not chosen
            continue
        start, end = xp.cuda.Event(), xp.cuda.Event()
        start.record()
        for _ in range(_SEARCH_RUNS):
            plan.graph.execute_plan_at_index(tensors, plan.workspace, index, handle=handle)
        end.record()
        end.synchronize()
        ms = xp.cuda.get_elapsed_time(start, end)
        if ms < best_ms:
            best, best_ms = index, ms
    return best


def _run(xp, kind, a, b, out_shape, conv):
    """``out`` of the convolution ``kind`` of ``a`` and ``b``, or NotImplemented."""
    dtype = a.dtype
    device = xp.cuda.runtime.getDevice()
    shapes = (tuple(a.shape), tuple(b.shape), tuple(out_shape))
    key = (kind, device, shapes[0], shapes[1], dtype.name, *conv, settings.deterministic,
           settings.exhaustive_search)
    plan = _plans.get(key, False)
    if plan is False:
        try:
            plan = _build(xp, kind, shapes, dtype, conv)
        except Exception as exc:  # noqa: BLE001 - cuDNN declines: the generic kernel runs
            _declined[key] = f"{type(exc).__name__}: {exc}"
            plan = None
        _plans[key] = plan
    if plan is None:
        return NotImplemented
    out = xp.empty(out_shape, dtype=dtype)
    module = _cudnn()
    tensors = dict(zip(plan.tensors, (xp.ascontiguousarray(a), xp.ascontiguousarray(b), out)))
    plan.graph.execute_plan_at_index(tensors, plan.workspace, plan.index,
                                     handle=_handle(xp, module))
    return out


# ---------------------------------------------------------------- convolution


def conv2d(xp, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """conv2d through cuDNN's conv_fprop."""
    if not _usable(xp, x, w):
        return NotImplemented
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w.shape, stride, padding, dilation, groups)
    return _run(xp, "forward", x, w, (x.shape[0], w.shape[0], oh, ow),
                (stride, padding, dilation))


def conv2d_grad_input(
    xp, x_shape_ref, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """The input gradient through cuDNN's conv_dgrad."""
    if not _usable(xp, w, dy):
        return NotImplemented
    x_shape = tuple(x_shape_ref.shape)
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x_shape, w.shape, stride, padding, dilation, groups)
    if tuple(dy.shape) != (x_shape[0], w.shape[0], oh, ow):
        return NotImplemented  # the generic kernel explains the mismatch
    return _run(xp, "backward_data", dy, w, x_shape, (stride, padding, dilation))


def conv2d_grad_filter(
    xp, x, dy, w_shape_ref, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1
):
    """The filter gradient through cuDNN's conv_wgrad."""
    if not _usable(xp, x, dy):
        return NotImplemented
    w_shape = tuple(w_shape_ref.shape)
    stride, padding, dilation, (oh, ow) = _conv_geometry(
        x.shape, w_shape, stride, padding, dilation, groups)
    if tuple(dy.shape) != (x.shape[0], w_shape[0], oh, ow):
        return NotImplemented
    return _run(xp, "backward_filter", x, dy, w_shape, (stride, padding, dilation))
