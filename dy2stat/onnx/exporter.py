"""Exporting to ONNX: a converted Layer or function, or a program saved by ``jit.save``.

The program exported is the one ``jit.save`` writes: traced in eval mode for the
input spec and pruned to the outputs. Its feeds are the model's inputs (a -1 dim
is a named symbolic dim) and its fetches the outputs, under the same names;
parameters are initializers.
"""

from __future__ import annotations

import os

import onnx
from onnx import helper

import dy2stat
from dy2stat.jit.save_load import inference_program
from dy2stat.onnx import onnx_path, rules  # noqa: F401  (rules fills the rule table)
from dy2stat.onnx.graph import Graph, Model, value_info
from dy2stat.onnx.lowering import Lowering, Scope, read_names
from dy2stat.runtime import atomic, serialize
from dy2stat.runtime.ir import Program

DEFAULT_OPSET = 17
MIN_OPSET = 17
# protobuf's limit on one message: an ONNX file with its parameters inside it
_PROTOBUF_LIMIT = 2**31


def opset_of(opset_version) -> int:
    """The opset to export with: ``opset_version``, checked, or the default."""
    newest = onnx.defs.onnx_opset_version()
    if opset_version is None:
        return DEFAULT_OPSET
    if (not isinstance(opset_version, int) or isinstance(opset_version, bool)
            or not MIN_OPSET <= opset_version <= newest):
        raise ValueError(f"opset_version must be an int from {MIN_OPSET} to {newest} (the "
                         f"installed onnx package's newest), got {opset_version!r}")
    return opset_version


def to_onnx(program: Program, feed_names, fetch_names, params: dict,
            opset_version: int | None = None) -> onnx.ModelProto:
    """The ONNX model of an inference ``program`` (pruned to ``fetch_names``) whose
    persistable variables have the values ``params`` (name -> array)."""
    model = Model(opset_of(opset_version))
    main = Graph(model, "dy2stat")
    block = program.global_block()
    scope = Scope()
    for name in feed_names:
        var = block.var(name)
        dims = [f"{name}_dim{i}" if d == -1 else d for i, d in enumerate(var.shape)]
        main.inputs.append(value_info(model.reserve(name), var.dtype, dims))
        scope.bind(name, name)
    for var in program.persistables():
        scope.bind(var.name, model.initializer(var.name, params[var.name]))
    # the outputs keep the fetch names (a fetch that is an input, a parameter or a repeat
    # gets a suffix): claimed before the ops name their values
    outputs = [model.fresh(name) for name in fetch_names]
    Lowering(program, read_names(program) | set(fetch_names)).block(main, 0, scope)
    main.label, main.doc = "output", ""
    for name, out in zip(fetch_names, outputs):
        var = block.var(name)
        main.op("Identity", scope[name], names=[out])
        main.outputs.append(value_info(out, var.dtype, var.shape))
    opsets = [helper.make_opsetid("", model.opset)]
    proto = helper.make_model(main.proto(), opset_imports=opsets, producer_name="dy2stat",
                              producer_version=dy2stat.__version__)
    proto.graph.initializer.extend(model.initializers)
    proto.ir_version = helper.find_min_ir_version_for(opsets)
    size = proto.ByteSize()
    if size >= _PROTOBUF_LIMIT:
        raise ValueError(f"the ONNX model would take {size / 2**30:.1f} GiB, more than the "
                         "2 GiB one ONNX file can hold")
    onnx.checker.check_model(proto)
    return proto


def write(path, proto: onnx.ModelProto) -> str:
    """Write ``proto`` to ``onnx_path(path)`` atomically; returns the path written."""
    path = onnx_path(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    atomic.write(path, proto.SerializeToString())
    return path


def export(layer_or_function, path, input_spec=None, opset_version=None) -> str:
    """Write the inference program of a Layer or function (converted if it is not yet)
    as an ONNX model to ``path`` (``.onnx`` added when missing); returns the path."""
    program, feeds, fetches, params = inference_program(layer_or_function, input_spec)
    return write(path, to_onnx(program, feeds, fetches, params, opset_version))


def export_saved(saved, path=None, opset_version=None) -> str:
    """Write the program saved by ``jit.save`` at ``saved`` (a prefix, its .json, or a
    folder holding one model) as an ONNX model to ``path`` (default: the prefix with
    .onnx); returns the path written."""
    prefix = serialize.model_prefix(saved, "onnx export")
    program, feeds, fetches, params = serialize.load_model(prefix)
    return write(prefix if path is None else path,
                 to_onnx(program, feeds, fetches, params, opset_version))
