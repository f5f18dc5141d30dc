"""A stand-in for NVIDIA's cuDNN frontend (``import cudnn``) over the fake CuPy.

The part of the graph API dy2stat uses: ``pygraph`` with ``tensor``,
``conv_fprop``, ``conv_dgrad`` and ``conv_wgrad``; ``validate``,
``build_operation_graph``, ``create_execution_plans``, ``check_support``,
``build_plans``, ``get_workspace_size``, ``execute`` and
``execute_plan_at_index``; handles and their streams. The convolutions are
computed with dy2stat's generic kernels on the arrays' buffers, as one
recorded "kernel" of the fake CuPy (so stream capture records them). It is
strict where the real one fails: a tensor's dims and strides must match the
array given for it, a graph runs only once its plans are built, a workspace
must be large enough, the handle must run on the current stream, and a
dilated convolution is refused (``cudnnGraphNotSupportedError`` at
``check_support``), so dy2stat's fallback to the generic kernel runs too.
``calls`` records (op, heuristics policy, deterministic) per execution.
"""

from __future__ import annotations

import enum
import types

import numpy as np

from tests.gpu import fake_cupy

__version__ = "1.32.0+fake"
calls: list = []


class data_type(enum.Enum):  # noqa: N801  (the frontend's names)
    FLOAT = "float32"
    DOUBLE = "float64"
    HALF = "float16"
    BFLOAT16 = "bfloat16"
    INT32 = "int32"
    INT64 = "int64"
    NOT_SET = None


heur_mode = enum.Enum("heur_mode", "A B FALLBACK OPENSOURCE")
build_plan_policy = enum.Enum("build_plan_policy", "HEURISTICS_CHOICE ALL")
numerical_note = enum.Enum("numerical_note", "TENSOR_CORE DOWN_CONVERT_INPUTS NONDETERMINISTIC "
                           "REDUCED_PRECISION_REDUCTION FFT WINOGRAD")


class cudnnGraphNotSupportedError(RuntimeError):  # noqa: N801, N818
    pass


class Handle:
    def __init__(self):
        self.device = fake_cupy.S.device
        self.stream = 0


def create_handle():
    return Handle()


def set_stream(handle, stream):
    if not isinstance(handle, Handle) or not isinstance(stream, int):
        raise TypeError("fake cudnn set_stream(handle, stream pointer)")
    handle.stream = stream


def backend_version():
    return 92700


def backend_version_string():
    return "9.27.0 (fake)"


class Tensor:
    def __init__(self, graph, name, dim, stride, dtype):
        self.graph, self.name = graph, name
        self.dim = None if dim is None else _ints(dim, "dim")
        self.stride = None if stride is None else _ints(stride, "stride")
        self.data_type = dtype
        self.is_output = False

    def set_output(self, flag):
        self.is_output = bool(flag)
        return self

    def set_dim(self, dim):
        self.dim = _ints(dim, "dim")
        return self

    def set_stride(self, stride):
        self.stride = _ints(stride, "stride")
        return self

    def set_data_type(self, dtype):
        self.data_type = dtype
        return self

    def get_dim(self):
        return list(self.dim)

    def get_stride(self):
        return list(self.stride)


def _ints(values, what):
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) for v in values):
        raise TypeError(f"fake cudnn: {what} must be a list of ints, got {values!r}")
    return list(values)


class pygraph:  # noqa: N801
    def __init__(self, io_data_type=None, intermediate_data_type=None, compute_data_type=None,
                 handle=None, name="", **kwargs):
        if not isinstance(handle, Handle):
            raise TypeError("fake cudnn pygraph: a handle from create_handle() is needed")
        self.handle, self.io = handle, io_data_type
        self.nodes, self.tensors = [], []
        self.state = "new"
        self.policy = None
        self.deterministic = False

    def tensor(self, dim, stride=None, data_type=None, name="", **kwargs):
        t = Tensor(self, name or f"t{len(self.tensors)}", dim, stride, data_type or self.io)
        self.tensors.append(t)
        return t

    def _node(self, op, inputs, params):
        for p in ("padding", "stride", "dilation"):
            _ints(params[p], p)
        out = Tensor(self, f"{op}_out", None, None, self.io)
        self.nodes.append((op, inputs, params, out))
        return out

    def conv_fprop(self, image, weight, padding, stride, dilation, compute_data_type=None,
                   name=""):
        out = self._node("conv_fprop", (image, weight), dict(padding=padding, stride=stride,
                                                              dilation=dilation))
        n, _, h, w = image.dim
        k, _, r, s = weight.dim
        oh = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
        ow = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
        out.dim, out.stride = [n, k, oh, ow], _contiguous([n, k, oh, ow])
        return out

    def conv_dgrad(self, loss, filter, padding, stride, dilation, compute_data_type=None,  # noqa: A002
                   name=""):
        return self._node("conv_dgrad", (loss, filter), dict(padding=padding, stride=stride,
                                                             dilation=dilation))

    def conv_wgrad(self, image, loss, padding, stride, dilation, compute_data_type=None,
                   name=""):
        return self._node("conv_wgrad", (image, loss), dict(padding=padding, stride=stride,
                                                            dilation=dilation))

    # the build steps, in their order
    def _step(self, before, after):
        if self.state != before:
            raise RuntimeError(f"fake cudnn: {after} called after {self.state} "
                               f"(expected after {before})")
        self.state = after

    def validate(self):
        for op, inputs, _params, out in self.nodes:
            if out.dim is None or out.stride is None or not out.is_output:
                raise RuntimeError(f"fake cudnn validate: {op}'s output needs dims, strides "
                                   "and set_output(True)")
            for t in inputs:
                if t.dim is None or t.stride is None:
                    raise RuntimeError(f"fake cudnn validate: {t.name} needs dims and strides")
        self._step("new", "validated")

    def build_operation_graph(self):
        self._step("validated", "operation graph")

    def create_execution_plans(self, heuristics=None):
        if not heuristics or not all(isinstance(h, heur_mode) for h in heuristics):
            raise TypeError("fake cudnn: create_execution_plans takes a list of heur_mode")
        self._step("operation graph", "plans created")

    def deselect_numeric_notes(self, notes):
        if numerical_note.NONDETERMINISTIC in notes:
            self.deterministic = True
        return self

    def check_support(self):
        for _, _, params, _ in self.nodes:
            if params["dilation"] != [1, 1]:
                raise cudnnGraphNotSupportedError("no engine supports this dilated "
                                                  "convolution (fake cudnn)")
        self._step("plans created", "supported")

    def build_plans(self, policy=None):
        if not isinstance(policy, build_plan_policy):
            raise TypeError("fake cudnn: build_plans takes a build_plan_policy")
        self.policy = policy
        self._step("supported", "built")

    def get_execution_plan_count(self):
        return 3 if self.policy is build_plan_policy.ALL else 1

    def get_workspace_size(self):
        return 256

    def get_workspace_size_plan_at_index(self, index):
        return 256 * (index + 1)

    def execute(self, tensor_dict, workspace=None, handle=None):
        self.execute_plan_at_index(tensor_dict, workspace, 0, handle)

    def execute_plan_at_index(self, tensor_dict, workspace=None, index=0, handle=None):
        if self.state != "built":
            raise RuntimeError("fake cudnn: execute before build_plans")
        if not 0 <= index < self.get_execution_plan_count():
            raise IndexError(f"fake cudnn: no plan {index}")
        handle = handle or self.handle
        current = fake_cupy.get_current_stream()
        if handle.stream != current.ptr:
            raise RuntimeError("fake cudnn: the handle runs on another stream than the "
                               "current one (its work would not be captured or ordered)")
        need = self.get_workspace_size_plan_at_index(index)
        if not isinstance(workspace, fake_cupy.ndarray) or workspace.nbytes < need:
            raise ValueError(f"fake cudnn: a device workspace of {need} bytes is needed")
        arrays = {}
        for t in self.tensors + [n[3] for n in self.nodes]:
            a = tensor_dict.get(t)
            if a is None:
                raise KeyError(f"fake cudnn: no array for tensor {t.name}")
            if not isinstance(a, fake_cupy.ndarray):
                raise TypeError(f"fake cudnn: {t.name} must be a device array")
            strides = [s // a.itemsize for s in a.strides]
            if list(a.shape) != t.dim or strides != t.stride:
                raise ValueError(f"fake cudnn: {t.name} is {list(a.shape)}/{strides}, the "
                                 f"graph says {t.dim}/{t.stride}")
            arrays[t] = a
        for op, inputs, params, out in self.nodes:
            calls.append((op, self.policy.name, self.deterministic))
            fake_cupy._call(f"cudnn {op}", _compute(op, params),
                            (*[arrays[t] for t in inputs], arrays[out]), {},
                            writes=[arrays[out]])


def _contiguous(dim):
    stride, step = [], 1
    for d in reversed(dim):
        stride.append(step)
        step *= d
    return stride[::-1]


def _compute(op, params):
    from dy2stat.kernels import conv  # the generic kernels compute what cuDNN would

    attrs = dict(stride=tuple(params["stride"]), padding=tuple(params["padding"]),
                 dilation=tuple(params["dilation"]))

    def run(a, b, out):
        groups = _groups(op, a, b, out)
        if op == "conv_fprop":
            out[...] = conv.conv2d(np, a, b, groups=groups, **attrs)
        elif op == "conv_dgrad":
            out[...] = conv.conv2d_grad_input(np, out, b, a, groups=groups, **attrs)
        else:
            out[...] = conv.conv2d_grad_filter(np, a, b, out, groups=groups, **attrs)

    return run


def _groups(op, a, b, out):
    if op == "conv_fprop":
        return a.shape[1] // b.shape[1]
    if op == "conv_dgrad":
        return out.shape[1] // b.shape[1]
    return a.shape[1] // out.shape[1]


def build():
    """The module ``cudnn``."""
    module = types.ModuleType("cudnn")
    for name in ("data_type", "heur_mode", "build_plan_policy", "numerical_note",
                 "cudnnGraphNotSupportedError", "create_handle", "set_stream", "pygraph",
                 "backend_version", "backend_version_string", "calls", "__version__"):
        setattr(module, name, globals()[name])
    return module
