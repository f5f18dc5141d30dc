"""The ``dy2stat`` command line: demo, transpile, export, inspect, run."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

import dy2stat
from dy2stat import demo, program_view
from dy2stat.runtime import serialize
from dy2stat.static import InputSpec


class UserError(Exception):
    """A mistake in the command's input: reported as one line, no traceback."""


def _demo(args) -> int:
    return demo.main(args)


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
    finally:
        sys.path.remove(directory)
    return module


def _export(args) -> int:
    path, sep, object_name = args.target.rpartition(":")
    if not sep or not path or not object_name:
        raise UserError(f"{args.target!r}: expected MODEL.py:OBJECT")
    specs = [parse_input_spec(s) for s in args.input_spec or []]
    if not specs:
        raise UserError("give at least one --input-spec NAME:DTYPE[DIMS]")
    module = load_module(path)
    obj = getattr(module, object_name, None)
    if obj is None:
        raise UserError(f"{path}: no object named {object_name!r}")
    model = _instantiate(obj, path, object_name)
    dy2stat.jit.save(model, args.output, input_spec=specs)
    print(f"wrote {args.output}.json and {args.output}.safetensors")
    return 0


def _instantiate(obj, path, name):
    """A Layer class (no required arguments), a factory function, or a Layer instance."""
    if isinstance(obj, dy2stat.nn.Layer):
        return obj
    if isinstance(obj, type) and issubclass(obj, dy2stat.nn.Layer):
        try:
            return obj()
        except TypeError as exc:
            raise UserError(f"{path}: {name}() needs constructor arguments ({exc}); "
                            "export a factory function or an instance instead") from None
    if callable(obj):
        made = obj()
        if isinstance(made, dy2stat.nn.Layer) or callable(made):
            return made
    raise UserError(f"{path}: {name} is not a Layer class, a factory function or a Layer")


# --------------------------------------------------------------------- inspect
def _inspect(args) -> int:
    program, feeds, fetches, params = _load(args.path)
    if args.format == "json":
        print(serialize.program_to_json(program, feeds, fetches))
    elif args.format == "dot":
        print(program_view.dot(program, feeds, fetches))
    else:
        print(program_view.text(program, feeds, fetches, params))
    if args.svg:
        dot_program = shutil.which("dot")
        if dot_program is None:
            raise UserError(
                "--svg needs the Graphviz 'dot' program, which is not installed "
                "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)")
        result = subprocess.run([dot_program, "-Tsvg", "-o", args.svg],
                                input=program_view.dot(program, feeds, fetches),
                                text=True, capture_output=True)
        if result.returncode != 0:
            raise UserError(f"dot failed: {result.stderr.strip()}")
        print(f"wrote {args.svg}", file=sys.stderr)
    return 0


def _load(path):
    for suffix in (".json", ".safetensors"):
        if not os.path.exists(path + suffix):
            raise UserError(f"{path + suffix}: no such file (PATH is the prefix given to "
                            "jit.save, without .json)")
    return serialize.load_model(path)


# ------------------------------------------------------------------------- run
def _run(args) -> int:
    if args.device != "cpu":
        dy2stat.set_device(args.device)
    layer = _load_layer(args.path)
    inputs = _read_inputs(args.input, layer.feed_names)
    outputs = layer(*[dy2stat.to_tensor(inputs[n]) for n in layer.feed_names])
    outputs = outputs if isinstance(outputs, list) else [outputs]
    arrays = [o.numpy() for o in outputs]
    for name, array in zip(layer.fetch_names, arrays):
        summary = ""
        if array.size and array.dtype.kind in "fiu":
            summary = (f"  min {array.min():.6g}  max {array.max():.6g}  "
                       f"mean {array.mean():.6g}")
        print(f"{name}: {array.dtype}{list(array.shape)}{summary}")
    if args.output:
        if len(arrays) == 1:
            np.save(args.output, arrays[0])
        else:
            np.savez(args.output, **dict(zip(layer.fetch_names, arrays)))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _load_layer(path):
    _load(path)  # file checks with a friendly message first
    return dy2stat.jit.load(path)


def _read_inputs(items, feed_names) -> dict:
    inputs = {}
    for item in items or []:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UserError(f"--input {item!r}: expected NAME=FILE.npy")
        if name not in feed_names:
            raise UserError(f"--input {name!r}: the program has no input named {name!r} "
                            f"(its inputs: {', '.join(feed_names)})")
        if not os.path.exists(file):
            raise UserError(f"--input {name}: {file}: no such file")
        try:
            inputs[name] = np.load(file, allow_pickle=False)
        except ValueError as exc:
            raise UserError(f"--input {name}: {file}: not a .npy array ({exc})") from None
    missing = [n for n in feed_names if n not in inputs]
    if missing:
        raise UserError(f"missing --input for {', '.join(missing)} (give NAME=FILE.npy)")
    return inputs


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dy2stat",
        description="Write models eagerly; dy2stat turns their control flow into static "
                    "programs.")
    parser.add_argument("--version", action="version", version=f"dy2stat {dy2stat.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo_cmd = commands.add_parser(
        "demo", help="train a small model on built-in synthetic data and report what happened",
        description="Train a small model on built-in synthetic data (no download).")
    demo_cmd.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    demo_cmd.set_defaults(run=_demo)

    inspect_cmd = commands.add_parser(
        "inspect", help="show a saved program", description="Show a program saved by jit.save.")
    inspect_cmd.add_argument("path", help="the path prefix given to jit.save (no .json)")
    inspect_cmd.add_argument("--format", choices=["text", "json", "dot"], default="text")
    inspect_cmd.add_argument("--svg", metavar="OUT.svg",
                             help="also render the graph with Graphviz 'dot'")
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
        "export", help="save a model as a program (like jit.save)",
        description="Import MODEL.py, take OBJECT (a Layer class with no required arguments, "
                    "a factory function, or a Layer instance) and save it as jit.save does.")
    export_cmd.add_argument("target", metavar="MODEL.py:OBJECT")
    export_cmd.add_argument("--input-spec", action="append", metavar="NAME:DTYPE[DIMS]",
                            help='an input, e.g. "x:float32[-1,784]" (repeat for several)')
    export_cmd.add_argument("-o", "--output", required=True, metavar="PATH",
                            help="path prefix: writes PATH.json and PATH.safetensors")
    export_cmd.set_defaults(run=_export)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 0
    try:
        return args.run(args) or 0
    except BrokenPipeError:  # the output was piped into a program that stopped reading
        sys.stderr.close()
        return 0
    except (UserError, serialize.FormatError, ValueError, TypeError, RuntimeError,
            FileNotFoundError, json.JSONDecodeError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"dy2stat {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
