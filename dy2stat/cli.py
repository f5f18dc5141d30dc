"""The ``dy2stat`` command line: demo, transpile, export, convert, inspect, run, launch.

No command prints a traceback. Every failure is one line on stderr,
``dy2stat COMMAND: error: ...``, and the exit status says what failed: 2 for
the command's input (arguments, files, a model file that fails to import or
convert), 1 for a run-time error of the program (an op that fails, an
``assert``), 130 for Ctrl-C. ``DY2STAT_TRACEBACK=1`` shows the traceback too.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import io
import os
import re
import sys
import textwrap
import traceback
import types

import gast
import numpy as np

import dy2stat
from dy2stat import demo, picture, program_view
from dy2stat.distributed import launch
from dy2stat.dy2static import convert, origin, parser, transformer
from dy2stat.dy2static.errors import Dy2StaticError
from dy2stat.hapi import checkpoint
from dy2stat.jit import save_load
from dy2stat.runtime import atomic, dtypes, serialize
from dy2stat.runtime.quoting import printable
from dy2stat.static import InputSpec

# The longest error line the command prints.
_LINE_LIMIT = 600


class UserError(Exception):
    """A mistake in the command's input: one line, exit status 2."""


class ProgramError(Exception):
    """A run-time error of the program: one line, exit status 1."""


def _demo(args) -> int:
    return demo.main(args)


# ------------------------------------------------------------------- transpile
# Decorators that mark a function for conversion: `@to_static`, `@declarative`, with or
# without a module path (`@d2s.jit.to_static`) or arguments (`@to_static(input_spec=...)`).
_MARKERS = ("to_static", "declarative")
# The module the generated code reaches as `_jst` (what convert.py binds it to).
_HELPERS_MODULE = "dy2stat.dy2static.convert_operators"


def _transpile(args) -> int:
    path = args.model
    source = _read_source(path)
    try:
        tree = gast.parse(source, filename=path)
    except SyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    chosen = _choose_functions(tree, path, args.function)
    lines = source.splitlines(keepends=True)
    scope = types.SimpleNamespace(__globals__=dict.fromkeys(_module_names(tree)))
    converted = [(qualname, node, *_convert(node, path, lines, scope))
                 for qualname, node in chosen]
    if args.output is None:
        for qualname, node, code, _ in converted:
            print(f"# {path}:{node.lineno}  {qualname}\n{code}")
        return 0
    _check_output(args.output)
    atomic.write(args.output, _standalone_module(tree, source, lines, converted, path).encode())
    print(f"wrote {args.output} ({len(converted)} converted: "
          f"{', '.join(q for q, *_ in converted)})", file=sys.stderr)
    return 0


def _read_source(path: str) -> str:
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            return importlib.util.decode_source(f.read())
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise UserError(f"{path}: cannot read it as Python source ({exc})") from None


def _is_marker(decorator: gast.expr) -> bool:
    target = decorator.func if isinstance(decorator, gast.Call) else decorator
    name = target.attr if isinstance(target, gast.Attribute) else getattr(target, "id", None)
    return name in _MARKERS


def _definitions(body, prefix: str = ""):
    """(qualified name, def) of the module's functions and of its classes' methods."""
    for node in body:
        if isinstance(node, gast.FunctionDef):
            yield prefix + node.name, node
        elif isinstance(node, gast.ClassDef):
            yield from _definitions(node.body, f"{prefix}{node.name}.")


def _choose_functions(tree, path: str, name: str | None) -> list:
    defs = list(_definitions(tree.body))
    if name is None:
        marked = [(q, n) for q, n in defs if any(map(_is_marker, n.decorator_list))]
        if not marked:
            raise UserError(f"{path}: no function marked with @to_static or @declarative "
                            "(name one with --function NAME)")
        return marked
    chosen = [(q, n) for q, n in defs if q in (name, f"{name}.forward")]
    if not chosen:
        known = ", ".join(q for q, _ in defs[:8]) + (", ..." if len(defs) > 8 else "")
        raise UserError(f"{path}: no function, method or Layer class named {name!r} "
                        f"(defined here: {known or 'none'})")
    return chosen[:1]


def _module_names(tree) -> set[str]:
    """The names the module binds at its top level: what its functions see as globals."""
    names = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            names.add(node.name)
            names.update(n for s in gast.walk(node) if isinstance(s, gast.Global)
                         for n in s.names)
            continue
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            names.add(node.id)
        elif isinstance(node, gast.alias):
            names.add((node.asname or node.name).split(".")[0])
        if not isinstance(node, gast.Lambda):
            todo.extend(gast.iter_child_nodes(node))
    return names


def _convert(node, path: str, lines: list[str], scope) -> tuple[str, str]:
    """(converted source, the name it gives the helpers module) of one def, from the AST:
    the passes of `convert.translate`, run on the def as the file has it."""
    node = copy.deepcopy(node)
    node.decorator_list = []
    origin.resolve(node, path, 0, lines, node.name)
    info = parser.SourceInfo(path, node.lineno, "".join(lines[node.lineno - 1:node.end_lineno]),
                             lines, node.name)
    ctx = transformer.Context.for_function(node, scope, info)
    try:
        node = convert.run_passes(node, ctx, node.name, info)
    except Dy2StaticError as exc:
        where = f"{exc.filename or path}:{exc.lineno}" if exc.lineno else path
        problem = " ".join(exc.problem.split()).rstrip(".")
        advice = f". {exc.advice}" if exc.advice else ""
        raise UserError(f"{where}: {problem}{advice}") from None
    return parser.unparse(node), ctx.helpers


def _standalone_module(tree, source: str, lines: list[str], converted, path: str) -> str:
    """The module's source with each converted def in place of the original (marking
    decorators dropped, others kept) and the import of the helpers the code calls."""
    lines = list(lines)
    for _, node, code, _ in sorted(converted, key=lambda c: -c[1].lineno):
        indent = lines[node.lineno - 1][:node.col_offset]
        kept = [f"@{ast.get_source_segment(source, d)}\n" for d in node.decorator_list
                if not _is_marker(d)]
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        new = textwrap.indent("".join(kept) + code, indent)
        if not lines[node.end_lineno - 1].endswith("\n"):  # the def ends the file
            new = new.rstrip("\n")
        lines[first - 1:node.end_lineno] = [new]
    helpers = sorted({name for *_, name in converted})
    header = [f"# Written by `dy2stat transpile {os.path.basename(path)}`: the marked functions "
              "are replaced by their converted code.\n"]
    package, _, module = _HELPERS_MODULE.rpartition(".")
    header += [f"from {package} import {module} as {name}\n" for name in helpers]
    at = _import_position(tree, lines)
    lines[at:at] = header
    return "".join(lines)


_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]")


def _import_position(tree, lines: list[str]) -> int:
    """The line after the module docstring and `from __future__` imports, or after a `#!`
    line and an encoding declaration (0-based index)."""
    at = 0
    while at < min(2, len(lines)) and (lines[at].startswith("#!") or _CODING.match(lines[at])):
        at += 1
    for index, stmt in enumerate(tree.body):
        docstring = (index == 0 and isinstance(stmt, gast.Expr)
                     and isinstance(stmt.value, gast.Constant)
                     and isinstance(stmt.value.value, str))
        if docstring or (isinstance(stmt, gast.ImportFrom) and stmt.module == "__future__"):
            at = stmt.end_lineno
        else:
            break
    return at


# ---------------------------------------------------------------------- export
_SPEC = re.compile(r"^(?P<name>[A-Za-z_]\w*):(?P<dtype>\w+)\[(?P<dims>[^\]]*)\]$")


def parse_input_spec(text: str) -> InputSpec:
    """``name:dtype[d0,d1,...]`` (a dim may be -1 or None) into an InputSpec."""
    match = _SPEC.match(text.replace(" ", ""))
    if match is None:
        raise UserError(f"--input-spec {text!r}: expected NAME:DTYPE[DIMS], "
                        "e.g. x:float32[-1,784]")
    dims = []
    for d in filter(None, match["dims"].split(",")):
        if d.lower() == "none":
            dims.append(-1)
        elif re.fullmatch(r"-?\d+", d) and int(d) >= -1:
            dims.append(int(d))
        else:
            raise UserError(f"--input-spec {text!r}: bad dim {d!r} (use ints, -1 or None)")
    try:
        return InputSpec(dims, match["dtype"], match["name"])
    except (TypeError, ValueError) as exc:
        raise UserError(f"--input-spec {text!r}: {exc}") from None


def load_module(path: str, name: str = "dy2stat_user_model"):
    """Import a model file by path (it runs, as any import does)."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001  (whatever the model file raises)
        raise UserError(_in_user_code(exc, path, "importing it failed")) from None
    finally:
        sys.path.remove(directory)
    return module


def _in_user_code(exc: BaseException, path: str, what: str) -> str:
    """One line for an exception raised by the user's file: where (the deepest line
    of ``path`` in the traceback, or a converted function's line), what failed, why."""
    if isinstance(exc, Dy2StaticError):
        where = f"{exc.filename}:{exc.lineno}" if exc.filename and exc.lineno else path
        advice = f". {exc.advice}" if exc.advice else ""
        return f"{where}: {' '.join(exc.problem.split()).rstrip('.')}{advice}"
    where = path
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == os.path.abspath(path):
            where = f"{path}:{frame.lineno}"
    return f"{where}: {what}: {_describe(exc)}"


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _export(args) -> int:
    path, sep, object_name = args.target.rpartition(":")
    if not sep or not path or not object_name:
        raise UserError(f"{args.target!r}: expected MODEL.py:OBJECT")
    specs = [parse_input_spec(s) for s in args.input_spec or []] or None
    if args.opset is not None and args.format != "onnx":
        raise UserError("--opset applies to --format onnx only")
    output = _export_output(args)
    _check_output(output)
    exporter = _onnx_exporter(args.opset) if args.format == "onnx" else None
    module = load_module(path)
    obj = getattr(module, object_name, None)
    if obj is None:
        raise UserError(f"{path}: no object named {object_name!r}")
    try:
        model, own_specs = _instantiate(obj, path, object_name)
        _load_trained_state(model, args)
        program, feeds, fetches, params = _traced(model, specs or own_specs, path,
                                                  object_name)
    except (UserError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001  (the model's own code failed)
        raise UserError(_in_user_code(exc, path, f"saving {object_name} failed")) from None
    _check_spec_dtypes(program, feeds, params, object_name)
    if exporter is None:
        save_load.write_program(args.output, program, feeds, fetches, params)
        print(f"wrote {args.output}.json and {args.output}.safetensors")
        return 0
    try:
        proto = exporter.to_onnx(program, feeds, fetches, params, args.opset)
    except dy2stat.onnx.ExportError as exc:
        text = str(exc)
        if exc.filename and os.path.abspath(exc.filename) == os.path.abspath(path):
            text = text.replace(exc.filename, path, 1)  # the model file as the user named it
        raise UserError(text) from None
    print(f"wrote {exporter.write(output, proto)}")
    return 0


def _export_output(args) -> str:
    """The file ``export`` writes last (the one to check before anything runs)."""
    if args.format == "onnx":
        return dy2stat.onnx.onnx_path(args.output)
    return f"{args.output}.json"


def _onnx_exporter(opset):
    """The ONNX exporter, once the onnx package and the ``--opset`` are known good."""
    try:
        exporter = dy2stat.onnx.load_exporter()
    except ImportError as exc:
        raise UserError(str(exc)) from None
    try:
        exporter.opset_of(opset)
    except ValueError as exc:
        raise UserError(f"--opset: {str(exc).removeprefix('opset_version ')}") from None
    return exporter


def _traced(model, specs, path: str, object_name: str):
    """The inference program of ``model`` (as jit.save saves it) for ``specs``, or for
    the model's own input_spec when the command line gives none."""
    try:
        return save_load.inference_program(model, specs)
    except RuntimeError as exc:
        if specs is None and "has no input_spec" in str(exc):
            raise UserError(f"{path}: {object_name} has no input_spec of its own: give "
                            "--input-spec NAME:DTYPE[DIMS] for each input") from None
        raise


def _check_spec_dtypes(program, feeds, params, object_name: str) -> None:
    """A float input must have the float dtype of the model's parameters: a float64 spec
    for float32 weights would make a program that computes in float64."""
    floats = {np.dtype(a.dtype) for a in params.values() if np.dtype(a.dtype) in dtypes.FLOATS}
    block = program.global_block()
    for name in feeds:
        dtype = block.var(name).dtype
        if dtype in dtypes.FLOATS and floats and dtype not in floats:
            want = dtypes.names(floats)
            shape = ",".join(str(d) for d in block.var(name).shape)
            raise UserError(f"input {name!r} is {dtype} but {object_name}'s parameters are "
                            f"{want}: give --input-spec \"{name}:{want.split(', ')[0]}"
                            f"[{shape}]\"")


def _load_trained_state(model, args) -> None:
    """Load ``--params`` (a d2s.save'd state dict) or ``--checkpoint`` (Model.save's
    prefix) into ``model``; every key must match, in shape and kind of dtype."""
    if args.params is not None:
        what = f"--params {args.params}"
        if not os.path.isfile(args.params):
            raise UserError(f"{what}: no such file")
        try:
            state = dy2stat.load(args.params, return_numpy=True)
        except (ValueError, OSError) as exc:
            raise UserError(f"{what}: not a file d2s.save wrote ({_describe(exc)})") from None
    elif args.checkpoint is not None:
        prefix = args.checkpoint.removesuffix(".pdparams")
        what = f"--checkpoint {args.checkpoint}"
        if not os.path.isfile(f"{prefix}.pdparams"):
            raise UserError(f"{what}: no such checkpoint ({prefix}.pdparams does not exist)")
        try:
            state, _ = checkpoint.read(prefix, optimizer=False)
        except (ValueError, OSError) as exc:
            raise UserError(f"{what}: {_describe(exc)}") from None
    else:
        return
    if not isinstance(model, dy2stat.nn.Layer):
        raise UserError(f"{what}: {args.target} is a function, not a Layer: it has no "
                        "parameters to load")
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        held = (f"; this one holds the keys {_listed(list(state))}"
                if isinstance(state, dict) and state else "")
        raise UserError(f"{what}: not a state dict (a dict of tensors by parameter name, "
                        f"as d2s.save(layer.state_dict(), FILE) writes{held})")
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        parts = ([f"missing {_listed(missing)}"] if missing else []) + (
            [f"unexpected {_listed(unexpected)}"] if unexpected else [])
        raise UserError(f"{what}: the keys do not match {type(model).__name__}'s state dict "
                        f"({'; '.join(parts)})")
    for key, target in own.items():
        value = state[key]
        if list(value.shape) != list(target.shape):
            raise UserError(f"{what}: {key!r} has shape {list(value.shape)}, but the model "
                            f"expects {list(target.shape)}")
        if not np.can_cast(value.dtype, target.dtype, "same_kind"):
            raise UserError(f"{what}: {key!r} is {value.dtype}, but the model expects "
                            f"{target.dtype}")
    model.set_state_dict(state)


def _listed(keys: list) -> str:
    shown = ", ".join(repr(k) for k in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def _instantiate(obj, path, name):
    """``(model, its own input specs or None)`` from a Layer class (no required
    arguments), a factory function, a Layer instance, a converted function, or a
    ``d2s.Model`` (its network, and the specs of its ``inputs``)."""
    if isinstance(obj, dy2stat.jit.StaticFunction):
        return obj, None
    if isinstance(obj, type) and issubclass(obj, dy2stat.nn.Layer):
        try:
            obj = obj()
        except TypeError as exc:
            raise UserError(f"{path}: {name}() needs constructor arguments ({exc}); "
                            "export a factory function or an instance instead") from None
    elif callable(obj) and not isinstance(obj, (dy2stat.nn.Layer, dy2stat.Model)):
        obj = obj()
    if isinstance(obj, dy2stat.Model):
        return obj.network, obj.input_spec
    if isinstance(obj, dy2stat.nn.Layer) or callable(obj):
        return obj, None
    raise UserError(f"{path}: {name} is not a Layer class, a factory function or a Layer")


# --------------------------------------------------------------------- convert
def _convert_saved(args) -> int:
    prefix = _prefix(args.saved)
    output = dy2stat.onnx.onnx_path(args.output or prefix)
    _check_output(output)
    exporter = _onnx_exporter(args.opset)
    program, feeds, fetches, params = _load(prefix)
    try:
        proto = exporter.to_onnx(program, feeds, fetches, params, args.opset)
    except dy2stat.onnx.ExportError as exc:
        raise UserError(str(exc)) from None
    exporter.write(output, proto)
    print(f"wrote {output}")
    return 0


# --------------------------------------------------------------------- inspect
def _inspect(args) -> int:
    program, feeds, fetches, params = _load(args.path)
    if args.depth is not None and args.depth < 1:
        raise UserError(f"--depth: expected a number of levels, 1 or more, got {args.depth}")
    pictures = []  # drawn before anything is printed: a failure prints nothing
    if args.svg:
        _check_output(args.svg)
        pictures.append((args.svg, picture.svg(program, feeds, fetches, args.depth).encode()))
    if args.png:
        _check_output(args.png)
        try:
            pictures.append((args.png, picture.png(program, feeds, fetches, args.depth)))
        except picture.PngUnavailable as exc:
            raise UserError(f"--png: {exc}") from None
    if args.format == "json":
        print(program_view.json_text(program, feeds, fetches))
    elif args.format == "dot":
        print(picture.dot(program, feeds, fetches, args.depth))
    else:
        print(program_view.text(program, feeds, fetches, params))
    for path, data in pictures:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        atomic.write(path, data)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _load(path):
    return serialize.load_model(_prefix(path))


def _prefix(path) -> str:
    """The saved model at ``path``: a prefix, PREFIX.json or a folder holding one."""
    try:
        return serialize.model_prefix(path, "no saved model")
    except FileNotFoundError as exc:
        raise UserError(str(exc).removeprefix("no saved model: ")) from None


# ------------------------------------------------------------------------- run
def _run(args) -> int:
    if args.device != "cpu":
        dy2stat.set_device(args.device)
    layer = _load_layer(args.path)
    inputs = _read_inputs(args.input, layer.feed_names)
    output = None
    if args.output:
        output = _output_file(args.output, ".npy" if len(layer.fetch_names) == 1 else ".npz")
    try:
        outputs = layer(*[dy2stat.to_tensor(inputs[n]) for n in layer.feed_names])
    except Exception as exc:  # noqa: BLE001
        where = _failed_op(exc)
        if where is None:  # refused before any op ran: the inputs do not fit
            raise
        kind = "assertion failed" if isinstance(exc, AssertionError) else type(exc).__name__
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ProgramError(f"{where}: {kind}" + (f": {message}" if message else "")) from None
    outputs = outputs if isinstance(outputs, list) else [outputs]
    arrays = [o.numpy() for o in outputs]
    for name, array in zip(layer.fetch_names, arrays):
        summary = ""
        if array.size and array.dtype.kind in "fiu":
            summary = (f"  min {array.min():.6g}  max {array.max():.6g}  "
                       f"mean {array.mean():.6g}")
        print(f"{printable(name, 200)}: {array.dtype}{list(array.shape)}{summary}")
    if output:
        buffer = io.BytesIO()
        if len(arrays) == 1:
            np.save(buffer, arrays[0])
        else:
            np.savez(buffer, **dict(zip(layer.fetch_names, arrays)))
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        atomic.write(output, buffer.getvalue())
        print(f"wrote {output}", file=sys.stderr)
    return 0


_NOTE = re.compile(r"while running (.+?)(?:, built at\n(.*))? of the static program",
                   re.DOTALL)
_ORIGIN = re.compile(r'\s*File "(.*)", line (\d+)\n\s*(.*)', re.DOTALL)


def _failed_op(exc: BaseException) -> str | None:
    """The op the executor noted on a run-time error, on one line: ``block 0, op 6
    (gather)``, and where the program recorded it, ``at model.py:12 (`x[i]`)``."""
    for note in getattr(exc, "__notes__", ()):
        match = _NOTE.fullmatch(note)
        if match:
            where, origin = match[1], match[2]
            line = _ORIGIN.fullmatch(origin or "")
            if line:
                path, source = printable(line[1], 200), printable(line[3].strip(), 200)
                where += f" at {path}:{line[2]} (`{source}`)"
            return where
    return None


def _load_layer(path):
    return dy2stat.jit.load(_prefix(path))


def _check_output(path: str) -> None:
    """An output path whose folder exists (or can be made): not under a file."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise UserError(f"{path}: cannot write it: {folder} is a file, not a folder")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a folder; give a file name")


def _output_file(path: str, suffix: str) -> str:
    """The file ``-o`` writes: ``path``, with ``suffix`` added as NumPy would."""
    if not path.endswith(suffix):
        path += suffix
    _check_output(path)
    return path


def _read_inputs(items, feed_names) -> dict:
    inputs = {}
    for item in items or []:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UserError(f"--input {item!r}: expected NAME=FILE.npy")
        if name not in feed_names:
            raise UserError(f"--input {name!r}: the program has no input named {name!r} "
                            f"(its inputs: {', '.join(feed_names)})")
        inputs[name] = _read_npy(f"--input {name}: {file}", file)
    missing = [n for n in feed_names if n not in inputs]
    if missing:
        raise UserError(f"missing --input for {', '.join(missing)} (give NAME=FILE.npy)")
    return inputs


def _read_npy(what: str, file: str) -> np.ndarray:
    """A ``.npy`` array, its header checked against the file before it is read."""
    if os.path.isdir(file):
        raise UserError(f"{what}: is a folder, not a .npy file")
    if not os.path.exists(file):
        raise UserError(f"{what}: no such file")
    size = os.path.getsize(file)
    if size == 0:
        raise UserError(f"{what}: the file is empty, not a .npy array")
    try:
        with open(file, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, _, dtype = header(f)
            need = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if need > size - f.tell():
                raise UserError(f"{what}: the header declares {dtype}{list(shape)} "
                                f"({need:,} bytes) but the file holds {size - f.tell():,} "
                                "(truncated?)")
        array = np.load(file, allow_pickle=False)
    except UserError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise UserError(f"{what}: not a .npy array ({_describe(exc)})") from None
    if not isinstance(array, np.ndarray) or array.dtype not in dtypes.ALL:
        kind = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
        raise UserError(f"{what}: a {kind} array; dy2stat reads "
                        f"{dtypes.names(dtypes.ALL)}")
    return array


# ---------------------------------------------------------------------- launch
def _launch(args) -> int:
    try:
        status = launch.launch(args.nprocs, args.script, args.args)
    except launch.LaunchError as exc:
        raise UserError(str(exc)) from None
    if status != 0:  # the ranks printed why
        print(f"dy2stat launch: error: the job failed (exit status {status})", file=sys.stderr)
    return status


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dy2stat",
        description="Write models eagerly; dy2stat turns their control flow into static "
                    "programs.")
    parser.add_argument("--version", action="version", version=f"dy2stat {dy2stat.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo_cmd = commands.add_parser(
        "demo", help="the main job: convert, train, save and reload a small model on built-in data",
        description="Convert a small classifier with a data-dependent loop, train it on "
                    "built-in synthetic data beside the eager model, then save and reload it "
                    "(no download).")
    demo_cmd.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    demo_cmd.set_defaults(run=_demo)

    transpile_cmd = commands.add_parser(
        "transpile", help="show the converted code of a model file, or write it as a module",
        description="Convert the functions and Layer forwards of MODEL.py marked with "
                    "@to_static / @declarative (or the one named by --function) and print "
                    "the generated code; with -o, write a module that runs on its own and "
                    "gives the same results as MODEL.py. The file is parsed, not imported.")
    transpile_cmd.add_argument("model", metavar="MODEL.py")
    transpile_cmd.add_argument("-o", "--output", metavar="OUT.py",
                               help="write MODEL.py with the marked functions converted")
    transpile_cmd.add_argument("--function", metavar="NAME",
                               help="convert only NAME: a function, Class.method, or a Layer "
                                    "class (its forward), marked or not")
    transpile_cmd.set_defaults(run=_transpile)

    inspect_cmd = commands.add_parser(
        "inspect", help="show a saved program", description="Show a program saved by jit.save.")
    inspect_cmd.add_argument("path", help="the path prefix given to jit.save (no .json)")
    inspect_cmd.add_argument("--format", choices=["text", "json", "dot"], default="text")
    inspect_cmd.add_argument("--svg", metavar="OUT.svg",
                             help="also draw the program as SVG (hover for details)")
    inspect_cmd.add_argument("--png", metavar="OUT.png",
                             help="also draw it as PNG (needs Pillow: pip install "
                                  "'dy2stat[png]')")
    inspect_cmd.add_argument("--depth", type=int, metavar="N",
                             help="in the pictures and DOT, draw each Layer N levels down "
                                  "(LeNet is 1, LeNet/conv1 is 2) as one box")
    inspect_cmd.set_defaults(run=_inspect)

    run_cmd = commands.add_parser(
        "run", help="run a saved program on .npy inputs",
        description="Load a program saved by jit.save and run it.")
    run_cmd.add_argument("path", help="the path prefix given to jit.save (no .json)")
    run_cmd.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                         help="an input (repeat for several)")
    run_cmd.add_argument("--device", default="cpu", help="cpu, gpu or gpu:N (default cpu)")
    run_cmd.add_argument("-o", "--output", metavar="OUT.npy",
                         help="write the output (.npy; .npz when there are several)")
    run_cmd.set_defaults(run=_run)

    export_cmd = commands.add_parser(
        "export", help="save a model as a program (like jit.save) or as ONNX",
        description="Import MODEL.py, take OBJECT (a Layer class with no required arguments, "
                    "a factory function, a Layer instance, or a d2s.Model) and save it as "
                    "jit.save does (or as an ONNX model with --format onnx), with trained "
                    "weights from --params or --checkpoint.")
    export_cmd.add_argument("target", metavar="MODEL.py:OBJECT")
    export_cmd.add_argument("--input-spec", action="append", metavar="NAME:DTYPE[DIMS]",
                            help='an input, e.g. "x:float32[-1,784]" (repeat for several; '
                                 "default: the model's own input_spec)")
    export_cmd.add_argument("-o", "--output", required=True, metavar="PATH",
                            help="path prefix: writes PATH.json and PATH.safetensors "
                                 "(--format onnx: PATH.onnx, or PATH when it ends in .onnx)")
    export_cmd.add_argument("--format", choices=["dy2stat", "onnx"], default="dy2stat",
                            help="dy2stat: the saved program (default); onnx: an ONNX model")
    export_cmd.add_argument("--opset", type=int, metavar="N",
                            help="the ONNX opset (--format onnx; default 17)")
    weights = export_cmd.add_mutually_exclusive_group()
    weights.add_argument("--params", metavar="FILE",
                         help="trained weights: a state dict saved with d2s.save")
    weights.add_argument("--checkpoint", metavar="PREFIX",
                         help="trained weights: a checkpoint saved with Model.save(PREFIX)")
    export_cmd.set_defaults(run=_export)

    convert_cmd = commands.add_parser(
        "convert", help="convert a saved program to ONNX",
        description="Convert a program saved by jit.save (or dy2stat export) to an ONNX "
                    "model; the model's source is not needed.")
    convert_cmd.add_argument("saved", metavar="SAVED",
                             help="the path prefix given to jit.save (no .json)")
    convert_cmd.add_argument("--to", required=True, choices=["onnx"], help="the format")
    convert_cmd.add_argument("-o", "--output", metavar="OUT.onnx",
                             help="the file to write (default: SAVED.onnx)")
    convert_cmd.add_argument("--opset", type=int, metavar="N",
                             help="the ONNX opset (default 17)")
    convert_cmd.set_defaults(run=_convert_saved)

    launch_cmd = commands.add_parser(
        "launch", help="run a training script as N data-parallel processes (mpiexec)",
        description="Run SCRIPT with ARGS as N processes under mpiexec, the ranks of one "
                    "data-parallel job (see docs/distributed.md); the exit status is the "
                    "job's.")
    launch_cmd.add_argument("-n", "--nprocs", type=int, default=1, metavar="N",
                            help="the number of processes (default 1: no MPI)")
    launch_cmd.add_argument("script", metavar="SCRIPT.py")
    launch_cmd.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                            help="passed to the script")
    launch_cmd.set_defaults(run=_launch)

    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.run(args) or 0
    except BrokenPipeError:  # the output was piped into a program that stopped reading
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return _fail(args.command, "interrupted", 130)
    except ProgramError as exc:
        return _fail(args.command, str(exc), 1, exc)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(args.command, f"{where}{exc.strerror or _describe(exc)}", 2, exc)
    except (UserError, ValueError, TypeError, RuntimeError) as exc:  # FormatError too
        text = str(exc).strip()
        return _fail(args.command, text.splitlines()[0] if text else type(exc).__name__, 2, exc)
    except Exception as exc:  # noqa: BLE001  (a bug in dy2stat: still one line)
        return _fail(args.command, f"internal error: {_describe(exc)} (please report it; "
                                   "DY2STAT_TRACEBACK=1 shows where)", 1, exc)


def _fail(command: str, message: str, status: int, exc: BaseException | None = None) -> int:
    if exc is not None and os.environ.get("DY2STAT_TRACEBACK"):
        traceback.print_exception(exc)
    line = printable(" ".join(message.split()))
    if len(line) > _LINE_LIMIT:
        line = line[: _LINE_LIMIT - 30] + f"... ({len(line):,} characters)"
    print(f"dy2stat {command}: error: {line}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
