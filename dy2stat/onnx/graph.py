"""Building ONNX graphs: value names, constants, nodes, and the few helpers whose ONNX
form depends on the opset (reductions, splits).

A ``Model`` holds what the graphs of one ONNX model share: the opset, the names
already used (every value name is unique across the model, sub-graphs included,
so a sub-graph never shadows a value of the graph around it) and the constants,
which are initializers of the main graph that sub-graphs read from there.
A ``Graph`` is one graph (the main one, or an ``If`` branch or ``Loop`` body) as
a list of nodes; ``Graph.op`` appends a node and returns its output names.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dy2stat.runtime import dtypes

ONNX_DTYPES = {
    dtypes.float16: TensorProto.FLOAT16,
    dtypes.float32: TensorProto.FLOAT,
    dtypes.float64: TensorProto.DOUBLE,
    dtypes.int8: TensorProto.INT8,
    dtypes.int16: TensorProto.INT16,
    dtypes.int32: TensorProto.INT32,
    dtypes.int64: TensorProto.INT64,
    dtypes.uint8: TensorProto.UINT8,
    dtypes.bool_: TensorProto.BOOL,
}

# what a Where of these dtypes selects in (ONNX Runtime has no kernel for them)
_WHERE_AS = {dtypes.bool_: dtypes.uint8, dtypes.int16: dtypes.int32}

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def onnx_dtype(dtype) -> int:
    return ONNX_DTYPES[np.dtype(dtype)]


def value_info(name: str, dtype, shape) -> onnx.ValueInfoProto:
    """A typed value; ``shape`` None gives no shape, and a dim that is a string or
    ``None`` (or -1) is symbolic or unknown."""
    dims = None if shape is None else [None if d == -1 else d for d in shape]
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


class Model:
    """The opset, the names and the constants that the graphs of one model share."""

    def __init__(self, opset: int):
        self.opset = opset
        self._used: set[str] = set()
        self.initializers: list[TensorProto] = []
        self._constants: dict = {}

    def reserve(self, name: str) -> str:
        """Claim ``name`` as it is (a graph input or output); it must be free."""
        if name in self._used:
            raise ValueError(f"the value name {name!r} is used twice")
        self._used.add(name)
        return name

    def fresh(self, base: str) -> str:
        """A name starting with ``base`` that no graph of the model uses yet."""
        name, k = base, 0
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        return name

    def initializer(self, name: str, array: np.ndarray) -> str:
        """A named initializer (a parameter) of the main graph."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"),
                                                         self.reserve(name)))
        return name

    def constant(self, array: np.ndarray) -> str:
        """The name of a constant holding ``array`` (one initializer per distinct value)."""
        array = np.asarray(array, order="C")
        key = (array.dtype.str, array.shape, array.tobytes())
        name = self._constants.get(key)
        if name is None:
            name = self._constants[key] = self.fresh("const")
            self.initializers.append(numpy_helper.from_array(array, name))
        return name


class Graph:
    """One graph being built: nodes, and its inputs and outputs as value infos."""

    def __init__(self, model: Model, name: str):
        self.model = model
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        # The dy2stat op being lowered: names the new values and nodes, and its line of
        # the user's code is each node's doc_string.
        self.label, self.doc = "v", ""

    @property
    def opset(self) -> int:
        return self.model.opset

    def subgraph(self, name: str) -> Graph:
        graph = Graph(self.model, self.model.fresh(name))
        graph.label, graph.doc = self.label, self.doc
        return graph

    def op(self, op_type: str, *inputs: str | None, outputs: int = 1, names=None, **attrs):
        """Append a node; its output name (or a tuple of ``outputs`` names; ``names``
        gives them). An input of None is an omitted optional input; a ``Graph`` attr
        becomes a sub-graph; an attr of None is left out."""
        names = list(names or [self.model.fresh(self.label) for _ in range(outputs)])
        outputs = len(names)
        attrs = {k: v.proto() if isinstance(v, Graph) else v for k, v in attrs.items()
                 if v is not None}
        self.nodes.append(helper.make_node(
            op_type, ["" if i is None else i for i in inputs], names,
            name=self.model.fresh(f"{self.label}/{op_type}"), doc_string=self.doc or None,
            **attrs))
        return names[0] if outputs == 1 else tuple(names)

    def proto(self) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, self.name, self.inputs, self.outputs)

    # ------------------------------------------------------------- constants

    def const(self, value, dtype=None) -> str:
        return self.model.constant(np.asarray(value, dtype=dtype))

    def ints(self, values) -> str:
        """A 1-D int64 constant."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def scalar(self, value, dtype) -> str:
        """A 0-D constant of ``dtype``, converted as the kernels convert Python numbers
        (``dtype.type(value)``)."""
        return self.const(np.asarray(np.dtype(dtype).type(value)))

    # ------------------------------------------------------------ conversions

    def cast(self, x: str, have, want) -> str:
        """``x`` (of dtype ``have``) as ``want``; no node when they agree."""
        if np.dtype(have) == np.dtype(want):
            return x
        return self.op("Cast", x, to=onnx_dtype(want))

    def cast_to(self, x: str, dtype) -> str:
        """A Cast node of ``x`` to ``dtype``."""
        return self.op("Cast", x, to=onnx_dtype(dtype))

    def where(self, cond: str, x: str, y: str, dtype) -> str:
        """``Where`` of values of ``dtype`` (ONNX Runtime has none for bool or int16:
        those select in uint8 or int32)."""
        work = _WHERE_AS.get(np.dtype(dtype))
        if work is None:
            return self.op("Where", cond, x, y)
        out = self.op("Where", cond, self.cast_to(x, work), self.cast_to(y, work))
        return self.cast_to(out, dtype)

    def is_inf(self, x: str, dtype) -> str:
        """``IsInf`` of ``x`` (of float ``dtype``); float16 is tested as float32, which
        holds every float16 value (IsInf takes no float16 before opset 20)."""
        if np.dtype(dtype) == dtypes.float16:
            x = self.cast_to(x, dtypes.float32)
        return self.op("IsInf", x)

    def fill(self, shape: str, value, dtype) -> str:
        """A tensor of the run-time ``shape`` (1-D int64) filled with ``value``."""
        array = np.asarray(np.dtype(dtype).type(value)).reshape(1)
        return self.op("ConstantOfShape", shape, value=numpy_helper.from_array(array))

    # ----------------------------------------------------------------- shapes

    def shape(self, x: str, start: int | None = None, end: int | None = None) -> str:
        """``Shape(x)[start:end]`` (1-D int64)."""
        return self.op("Shape", x, start=start, end=end)

    def dim(self, x: str, axis: int) -> str:
        """Dim ``axis`` of ``x`` as a 1-D int64 tensor of one element."""
        return self.shape(x, axis, axis + 1 if axis != -1 else None)

    def to_scalar(self, x: str) -> str:
        """A one-element tensor as a 0-D one."""
        return self.op("Reshape", x, self.ints([]))

    def reshape(self, x: str, shape, allowzero: bool = False) -> str:
        """Reshape to ``shape``: a list of ints, or a 1-D int64 value name."""
        target = self.ints(shape) if isinstance(shape, (list, tuple)) else shape
        return self.op("Reshape", x, target, allowzero=1 if allowzero else None)

    def concat_dims(self, parts) -> str:
        """One 1-D int64 shape from parts: ints, lists of ints, or 1-D int64 values."""
        names = [self.ints([p]) if isinstance(p, (int, np.integer))
                 else self.ints(p) if isinstance(p, (list, tuple)) else p for p in parts]
        return names[0] if len(names) == 1 else self.op("Concat", *names, axis=0)

    def unsqueeze(self, x: str, axes) -> str:
        return self.op("Unsqueeze", x, self.ints(axes))

    def squeeze(self, x: str, axes) -> str:
        return self.op("Squeeze", x, self.ints(axes)) if len(axes) else x

    # ------------------------------------------------------ opset-dependent forms

    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        """A Reduce* node over ``axes`` (None: all axes). ReduceSum takes its axes as an
        input from opset 13, the others from opset 18."""
        keep = int(bool(keepdims))
        if axes is None:
            return self.op(op_type, x, keepdims=keep)
        axes = list(axes)
        if not axes:
            return x
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, x, self.ints(axes), keepdims=keep)
        return self.op(op_type, x, axes=axes, keepdims=keep)

    def split(self, x: str, axis: int, count: int, sizes=None) -> tuple:
        """``count`` parts of ``x`` along ``axis``: of ``sizes`` (ints or a 1-D int64
        value), or equal parts when None."""
        if sizes is None:
            parts = (self.op("Split", x, axis=axis, outputs=count, num_outputs=count)
                     if self.opset >= 18 else self.op("Split", x, axis=axis, outputs=count))
        else:
            split = self.ints(sizes) if isinstance(sizes, (list, tuple)) else sizes
            parts = self.op("Split", x, split, axis=axis, outputs=count)
        return parts if count > 1 else (parts,)

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        """``Slice``; each of starts/ends/steps is a list of ints or a 1-D int64 value."""
        def operand(v):
            return None if v is None else self.ints(v) if isinstance(v, (list, tuple)) else v
        return self.op("Slice", x, operand(starts), operand(ends), self.ints(axes),
                       operand(steps))
