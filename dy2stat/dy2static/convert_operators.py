"""The runtime helpers generated code calls, in one namespace (`_jst` in converted code).

Each helper decides per call: Python values take the Python path (the converted function
behaves exactly as the original), static Variables build `cond`/`while` ops.
"""

from dy2stat.dy2static.builtin_functions import (
    convert_assert,
    convert_cast,
    convert_getitem,
    convert_isinstance,
    convert_len,
    convert_max,
    convert_min,
    convert_print,
    convert_shape,
)
from dy2stat.dy2static.convert_call_func import convert_call, not_to_static
from dy2stat.dy2static.ifelse import BranchMismatchError, convert_ifelse
from dy2stat.dy2static.logical import (
    convert_compare,
    convert_logical_and,
    convert_logical_not,
    convert_logical_or,
)
from dy2stat.dy2static.loops import LoopVariableError, convert_for_loop, convert_while_loop
from dy2stat.dy2static.reads import read_attr
from dy2stat.dy2static.sequences import convert_enumerate, convert_range, convert_zip
from dy2stat.dy2static.tensor_array import TensorArray
from dy2stat.dy2static.undefined import (
    Undefined,
    UndefinedReturnValue,
    UndefinedVariableError,
    is_undefined,
)

__all__ = [
    "BranchMismatchError",
    "LoopVariableError",
    "TensorArray",
    "Undefined",
    "UndefinedReturnValue",
    "UndefinedVariableError",
    "convert_assert",
    "convert_call",
    "convert_cast",
    "convert_compare",
    "convert_enumerate",
    "convert_for_loop",
    "convert_getitem",
    "convert_ifelse",
    "convert_isinstance",
    "convert_len",
    "convert_logical_and",
    "convert_logical_not",
    "convert_logical_or",
    "convert_max",
    "convert_min",
    "convert_print",
    "convert_range",
    "convert_shape",
    "convert_while_loop",
    "convert_zip",
    "is_undefined",
    "not_to_static",
    "read_attr",
]
