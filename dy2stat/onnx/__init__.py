"""``d2s.onnx``: export converted programs, control flow included, to ONNX.

``export(layer_or_function, path, input_spec=None, opset_version=None)`` writes
the program ``jit.save`` would save (eval mode, pruned to the outputs) as an
ONNX model: ``cond`` becomes ``If``, ``while`` becomes ``Loop``. It needs the
optional ``onnx`` package (``pip install "dy2stat[onnx]"``), imported only when
an export runs, so ``import dy2stat`` works without it.
"""

from __future__ import annotations

import importlib
import os

from dy2stat.onnx.errors import ExportError

__all__ = ["ExportError", "export", "export_saved"]


def onnx_path(path) -> str:
    """The file an export to ``path`` writes: ``path`` when it ends in .onnx, else
    ``path.onnx``."""
    path = os.fspath(path)
    return path if path.endswith(".onnx") else f"{path}.onnx"


def load_exporter():
    """The exporter module (``to_onnx``, ``write``); importing it needs the optional
    onnx package, and its absence is an ImportError that says how to install it."""
    try:
        importlib.import_module("onnx")
    except ImportError:
        raise ImportError("ONNX export needs the onnx package: "
                          'pip install "dy2stat[onnx]" (or pip install onnx)') from None
    return importlib.import_module("dy2stat.onnx.exporter")


def export(layer_or_function, path, input_spec=None, opset_version=None) -> str:
    """Write ``layer_or_function``'s inference program as an ONNX model to ``path``
    (``.onnx`` added when missing) and return the path written. ``input_spec`` as in
    ``jit.save`` (a Layer converted with an input_spec needs none); ``opset_version``
    from 17 (the default) to the installed onnx package's newest. An op with no ONNX
    form raises ``ExportError`` naming it and the line of your code that built it."""
    return load_exporter().export(layer_or_function, path, input_spec, opset_version)


def export_saved(saved, path=None, opset_version=None) -> str:
    """Write a program saved by ``jit.save`` or ``static.save_inference_model`` (its
    prefix, .json file, or folder) as an ONNX model to ``path`` (default: the prefix
    with .onnx); returns the path."""
    return load_exporter().export_saved(saved, path, opset_version)
