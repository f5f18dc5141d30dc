"""dy2stat: write models eagerly; one decorator turns them into static programs."""

from dy2stat import (
    distributed,
    io,
    jit,
    metric,
    nn,
    onnx,
    optimizer,
    regularizer,
    static,
    vision,
)
from dy2stat import methods as _methods
from dy2stat.array import array_length, array_read, array_write, create_array
from dy2stat.autograd import enable_grad, grad, is_grad_enabled, no_grad
from dy2stat.creation import (
    arange,
    eye,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    seed,
    to_tensor,
    uniform,
    zeros,
    zeros_like,
)
from dy2stat.default_dtype import get_default_dtype, set_default_dtype
from dy2stat.device import get_device, is_compiled_with_cuda, set_device
from dy2stat.distributed import DataParallel
from dy2stat.flags import get_flags, set_flags
from dy2stat.hapi import Model
from dy2stat.jit import ProgramTranslator, TracedLayer, declarative, to_static
from dy2stat.kernels import host_memory as _host_memory
from dy2stat.nn.layer import create_parameter
from dy2stat.nn.parameter import ParamAttr
from dy2stat.ops import *  # noqa: F403
from dy2stat.ops import abs, all, any, max, min, pow, round, sum  # noqa: F401,A004
from dy2stat.runtime.dtypes import (
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from dy2stat.state_io import load, save
from dy2stat.static import disable_static, enable_static, in_static_mode
from dy2stat.tensor import Tensor

__version__ = "0.1.0"

_host_memory.keep_freed_memory()

_methods.install(Tensor)

bool = bool_  # noqa: A001  (d2s.bool, as in Paddle)
