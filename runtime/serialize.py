"""Saving and loading programs (versioned JSON) and parameters (safetensors).

The formats are documented in ``docs/format.md``. In short:

- a program is one JSON document ``{"format": "dy2stat.program", "version": 1,
  "random_seed": int, "feed": [names], "fetch": [names], "blocks": [...]}``;
  attrs are plain JSON values, with tagged objects for what JSON lacks
  (``{"float": "inf"}``, ``{"tuple": [...]}``, ``{"dtype": "float32"}``, ...);
- parameters are a safetensors file (raw little-endian tensor bytes and a JSON
  header), read with ``safetensors.numpy``.

Nothing in a file is ever executed: no pickle, no eval/exec, no imports by
name. Loading validates every field and every cross-reference and fails with
one error type, :class:`FormatError`, whose message names the file and the
field, e.g. ``model.json: blocks[0].ops[3].type: unknown op type 'foo'``.
This module checks the document as JSON (each field's type, var
declarations, block headers, feed/fetch names, attr encodings) and the
parameters against the program; what the program means (op types, slots,
attrs, sub-block references, use after definition, single definition,
shape/dtype inference) is checked by the IR verifier, ``runtime/verify.py``,
whose errors carry the field they concern.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile

import numpy as np

from dy2stat.runtime import dtypes, shapes, verify
from dy2stat.runtime.ir import Block, Operator, Program, Var

FORMAT = "dy2stat.program"
VERSION = 1
SUPPORTED_VERSIONS = (1,)
PARAMS_FORMAT = "dy2stat.params"
PARAMS_VERSION = "1"

# Deepest nesting of an attr value (lists in lists ...) a file may hold.
MAX_ATTR_DEPTH = 32

_DTYPES = {str(d): d for d in dtypes.ALL}
_PROGRAM_KEYS = {"format", "version", "random_seed", "feed", "fetch", "blocks"}
_BLOCK_KEYS = {"idx", "parent_idx", "vars", "ops"}
_VAR_KEYS = {"name", "shape", "dtype", "persistable", "is_data", "stop_gradient"}
_VAR_FLAGS = ("persistable", "is_data", "stop_gradient")
_OP_KEYS = {"type", "inputs", "outputs", "attrs"}
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class FormatError(ValueError):
    """A program or parameter file that cannot be loaded.

    ``source`` is the file, ``field`` the path of the offending field inside it
    (``blocks[0].ops[3].type``; empty when the file as a whole is wrong) and
    ``reason`` what is wrong with it.
    """

    def __init__(self, source: str, field: str, reason: str):
        self.source, self.field, self.reason = str(source), field, reason
        where = f"{self.source}: {field}: " if field else f"{self.source}: "
        super().__init__(where + reason)

    def __reduce__(self):
        return type(self), (self.source, self.field, self.reason)


# --------------------------------------------------------------------- saving


def program_to_dict(program: Program, feed_names=None, fetch_names=None) -> dict:
    """The JSON document for ``program`` (plain dicts/lists, ready for ``json.dumps``).

    ``feed_names``/``fetch_names`` are stored as ``"feed"``/``"fetch"`` when given.
    Raises ``TypeError`` naming the op and attr when an attr value has no JSON form.
    """
    doc: dict = {"format": FORMAT, "version": VERSION, "random_seed": int(program.random_seed)}
    if feed_names is not None:
        doc["feed"] = [_name(n, "feed") for n in feed_names]
    if fetch_names is not None:
        doc["fetch"] = [_name(n, "fetch") for n in fetch_names]
    blocks = []
    for block in program.blocks:
        blocks.append({
            "idx": block.idx,
            "parent_idx": block.parent_idx,
            "vars": [_var_to_dict(v) for v in block.vars.values()],
            "ops": [_op_to_dict(op, f"blocks[{block.idx}].ops[{i}]")
                    for i, op in enumerate(block.ops)],
        })
    doc["blocks"] = blocks
    return doc


def program_to_json(program: Program, feed_names=None, fetch_names=None) -> str:
    """``program_to_dict`` as JSON text (one field per line, readable in a diff)."""
    doc = program_to_dict(program, feed_names, fetch_names)
    return json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n"


def save_program(path, program: Program, feed_names, fetch_names) -> None:
    """Write ``program`` with its feed and fetch names to ``path`` (JSON)."""
    text = program_to_json(program, list(feed_names), list(fetch_names))
    _write_atomic(path, text.encode("utf-8"))


def save_params(path, params: dict) -> None:
    """Write ``{name: array}`` to ``path`` as safetensors (0-d and bool arrays included)."""
    import safetensors.numpy

    tensors = {}
    for name, value in params.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_params: parameter names must be non-empty strings, got {name!r}")
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        if array.dtype not in dtypes.ALL:
            raise TypeError(
                f"save_params: parameter {name!r} has unsupported dtype {array.dtype} "
                f"(supported: {dtypes.names(dtypes.ALL)})"
            )
        tensors[name] = array
    metadata = {"format": PARAMS_FORMAT, "version": PARAMS_VERSION}
    _write_atomic(path, safetensors.numpy.save(tensors, metadata=metadata))


def save_model(path_prefix, program: Program, feed_names, fetch_names, params: dict) -> None:
    """``{prefix}.json`` (the program) and ``{prefix}.safetensors`` (its parameters)."""
    check_params(program, params, f"{path_prefix}.safetensors")
    save_program(f"{path_prefix}.json", program, feed_names, fetch_names)
    save_params(f"{path_prefix}.safetensors", params)


def _name(value, what):
    if hasattr(value, "name") and not isinstance(value, str):
        value = value.name
    if not isinstance(value, str):
        raise TypeError(f"{what} names must be strings or variables, got {value!r}")
    return value


def _var_to_dict(var: Var) -> dict:
    return {
        "name": var.name,
        "shape": [int(d) for d in var.shape],
        "dtype": str(np.dtype(var.dtype)),
        "persistable": bool(var.persistable),
        "is_data": bool(var.is_data),
        "stop_gradient": bool(var.stop_gradient),
    }


def _op_to_dict(op: Operator, where: str) -> dict:
    attrs = {}
    for key, value in op.attrs.items():
        try:
            attrs[key] = encode_attr(value)
        except TypeError as e:
            raise TypeError(f"{where} ({op.type}): attr {key!r}: {e}") from None
    return {
        "type": op.type,
        "inputs": {slot: list(names) for slot, names in op.inputs.items()},
        "outputs": {slot: list(names) for slot, names in op.outputs.items()},
        "attrs": attrs,
    }


def encode_attr(value):
    """The JSON form of one attr value (see docs/format.md, "Attr values")."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [encode_attr(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode_attr(v) for v in value]}
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"dict attr keys must be strings, got {k!r}")
        return {"dict": {k: encode_attr(v) for k, v in value.items()}}
    if isinstance(value, np.dtype):
        return {"dtype": str(value)}
    if isinstance(value, np.ndarray):
        if value.dtype not in dtypes.ALL:
            raise TypeError(f"an array attr of dtype {value.dtype} cannot be saved")
        return {"ndarray": {
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "data": [encode_attr(v) for v in value.ravel().tolist()],
        }}
    raise TypeError(f"a {type(value).__name__} attr value cannot be saved ({value!r})")


def _write_atomic(path, data: bytes) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# -------------------------------------------------------------------- loading


def load_program(path) -> tuple[Program, list[str], list[str]]:
    """``(program, feed_names, fetch_names)`` from a JSON program file; validated.

    A malformed file raises :class:`FormatError`; a missing file ``OSError``.
    """
    with open(path, "rb") as f:
        data = f.read()
    return program_from_json(data, source=os.fspath(path))


def program_from_json(text, source: str = "<program>") -> tuple[Program, list[str], list[str]]:
    """``(program, feed_names, fetch_names)`` from JSON text or bytes; validated."""
    return load_program_dict(parse_json(text, source), source)


def program_from_dict(data, source: str = "<program>") -> Program:
    """The Program a (parsed) JSON document describes; validated."""
    return load_program_dict(data, source)[0]


def load_program_dict(data, source: str = "<program>") -> tuple[Program, list[str], list[str]]:
    """``(program, feed_names, fetch_names)`` from a parsed document; validated.

    Feed/fetch names absent from the document come back as empty lists.
    """
    return _ProgramReader(source).read(data)


def parse_json(text, source: str):
    """Parse JSON text/bytes strictly: no NaN/Infinity literals, no duplicate keys."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            reason = f"not UTF-8 text (bad byte at offset {e.start})"
            raise FormatError(source, "", reason) from None

    def constant(name):
        raise _JSONLiteral(name)

    def pairs(items):
        result = {}
        for key, value in items:
            if key in result:
                raise _JSONDuplicate(key)
            result[key] = value
        return result

    try:
        return json.loads(text, parse_constant=constant, object_pairs_hook=pairs)
    except json.JSONDecodeError as e:
        raise FormatError(
            source, "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg} (truncated?)"
        ) from None
    except _JSONLiteral as e:
        raise FormatError(
            source, "", f"invalid JSON: the literal {e.args[0]} is not allowed "
            '(non-finite numbers are written {"float": "inf"})'
        ) from None
    except _JSONDuplicate as e:
        reason = f"invalid JSON: the key {e.args[0]!r} appears twice"
        raise FormatError(source, "", reason) from None
    except RecursionError:
        raise FormatError(source, "", "invalid JSON: nested too deeply") from None
    except ValueError as e:  # e.g. an integer literal with too many digits
        raise FormatError(source, "", f"invalid JSON: {e}") from None


class _JSONLiteral(Exception):
    pass


class _JSONDuplicate(Exception):
    pass


_kind = verify.describe_kind


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _ProgramReader:
    """Validates a parsed document field by field while building the Program."""

    def __init__(self, source: str):
        self.source = str(source)

    def fail(self, field: str, reason: str):
        raise FormatError(self.source, field, reason)

    # ---- small typed getters

    def obj(self, value, field, keys, required):
        if not isinstance(value, dict):
            self.fail(field, f"expected an object, got {_kind(value)}")
        for key in value:
            if key not in keys:
                known = ", ".join(sorted(keys))
                self.fail(_join(field, key), f"unknown field (known: {known})")
        for key in required:
            if key not in value:
                self.fail(_join(field, key), "missing")
        return value

    def list_of(self, value, field):
        if not isinstance(value, list):
            self.fail(field, f"expected a list, got {_kind(value)}")
        return value

    def name(self, value, field):
        if not isinstance(value, str) or not value:
            self.fail(field, f"expected a non-empty string, got {_kind(value)}")
        return value

    def flag(self, value, field):
        if not isinstance(value, bool):
            self.fail(field, f"expected true or false, got {_kind(value)}")
        return value

    def names(self, value, field):
        names = [self.name(v, f"{field}[{i}]") for i, v in enumerate(self.list_of(value, field))]
        seen = set()
        for i, n in enumerate(names):
            if n in seen:
                self.fail(f"{field}[{i}]", f"{n!r} is listed twice")
            seen.add(n)
        return names

    # ---- the document

    def read(self, doc):
        if not isinstance(doc, dict):
            self.fail("", f"expected a JSON object at the top level, got {_kind(doc)}")
        if doc.get("format") != FORMAT:
            if "format" not in doc:
                self.fail("format", f"missing (expected {FORMAT!r}; is this a dy2stat program?)")
            self.fail("format", f"expected {FORMAT!r}, got {doc['format']!r}")
        version = doc.get("version")
        if "version" not in doc:
            self.fail("version", "missing")
        if not _is_int(version):
            self.fail("version", f"expected an integer, got {_kind(version)}")
        if version not in SUPPORTED_VERSIONS:
            self.fail("", f"version {version} is not supported "
                          f"(this dy2stat reads version {VERSION})")
        self.obj(doc, "", _PROGRAM_KEYS, ("format", "version", "blocks"))

        program = Program()
        seed = doc.get("random_seed", 0)
        if not _is_int(seed):
            self.fail("random_seed", f"expected an integer, got {_kind(seed)}")
        program.random_seed = seed

        raw_blocks = self.list_of(doc["blocks"], "blocks")
        if not raw_blocks:
            self.fail("blocks", "expected at least one block (the global block)")
        program.blocks = [self.block_header(raw, i, program) for i, raw in enumerate(raw_blocks)]
        for block, raw in zip(program.blocks, raw_blocks):
            self.block_vars(block, raw["vars"], f"blocks[{block.idx}].vars")
        for block, raw in zip(program.blocks, raw_blocks):
            ops = self.list_of(raw["ops"], f"blocks[{block.idx}].ops")
            for i, raw_op in enumerate(ops):
                block.ops.append(self.op(block, raw_op, f"blocks[{block.idx}].ops[{i}]"))

        glob = program.global_block()
        feed = self.names(doc.get("feed", []), "feed")
        fetch = self.names(doc.get("fetch", []), "fetch")
        for what, names in (("feed", feed), ("fetch", fetch)):
            for i, n in enumerate(names):
                if n not in glob.vars:
                    self.fail(f"{what}[{i}]", f"{n!r} is not a variable of the global block")
        self.run_verifier(program, feed)
        program.bump()
        return program, feed, fetch

    def block_header(self, raw, i, program) -> Block:
        field = f"blocks[{i}]"
        self.obj(raw, field, _BLOCK_KEYS, ("idx", "parent_idx", "vars", "ops"))
        idx, parent = raw["idx"], raw["parent_idx"]
        if not _is_int(idx) or idx != i:
            self.fail(f"{field}.idx", f"expected {i} (blocks are listed in index order), "
                                      f"got {idx!r}")
        if not _is_int(parent):
            self.fail(f"{field}.parent_idx", f"expected an integer, got {_kind(parent)}")
        if i == 0 and parent != -1:
            self.fail(f"{field}.parent_idx", f"the global block has no parent (-1), got {parent}")
        if i > 0 and not 0 <= parent < i:
            self.fail(f"{field}.parent_idx",
                      f"expected a block listed before this one (0 to {i - 1}), got {parent}")
        return Block(program, i, parent)

    def block_vars(self, block: Block, raw_vars, field):
        for j, raw in enumerate(self.list_of(raw_vars, field)):
            vf = f"{field}[{j}]"
            self.obj(raw, vf, _VAR_KEYS, ("name", "shape", "dtype"))
            name = self.name(raw["name"], f"{vf}.name")
            if name in block.vars:
                self.fail(f"{vf}.name", f"variable {name!r} is defined twice in block {block.idx}")
            shape = raw["shape"]
            if not isinstance(shape, list) or not all(_is_int(d) and d >= -1 for d in shape):
                self.fail(f"{vf}.shape", f"expected a list of ints >= -1, got {_short(shape)}")
            dtype = raw["dtype"]
            if not isinstance(dtype, str) or dtype not in _DTYPES:
                self.fail(f"{vf}.dtype", f"unknown dtype {_short(dtype)} "
                                         f"(known: {dtypes.names(dtypes.ALL)})")
            flags = {k: self.flag(raw.get(k, False), f"{vf}.{k}") for k in _VAR_FLAGS}
            block.vars[name] = Var(name, tuple(shape), _DTYPES[dtype], **flags)

    def op(self, block: Block, raw, field) -> Operator:
        """One op, checked as JSON (types of its fields); what the fields mean
        (op type, slots, attrs, names) is checked by the verifier afterwards."""
        self.obj(raw, field, _OP_KEYS, ("type", "inputs", "outputs"))
        op_type = raw["type"]
        if not isinstance(op_type, str):
            self.fail(f"{field}.type", f"expected a string, got {_kind(op_type)}")
        inputs = self.slots(raw["inputs"], f"{field}.inputs")
        outputs = self.slots(raw["outputs"], f"{field}.outputs")
        attrs = self.attrs(raw.get("attrs", {}), f"{field}.attrs")
        return Operator(op_type, inputs, outputs, attrs)

    def slots(self, raw, field) -> dict:
        if not isinstance(raw, dict):
            self.fail(field, f"expected an object mapping slot names to lists of names, "
                             f"got {_kind(raw)}")
        result = {}
        for key, value in raw.items():
            sf = f"{field}.{key}"
            names = self.list_of(value, sf)
            for i, n in enumerate(names):
                self.name(n, f"{sf}[{i}]")
            result[key] = list(names)
        return result

    def attrs(self, raw, field) -> dict:
        if not isinstance(raw, dict):
            self.fail(field, f"expected an object, got {_kind(raw)}")
        return {key: self.attr_value(value, f"{field}.{key}", 0) for key, value in raw.items()}

    def attr_value(self, value, field, depth):
        if depth > MAX_ATTR_DEPTH:
            self.fail(field, f"nested deeper than {MAX_ATTR_DEPTH} levels")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, list):
            return [self.attr_value(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            self.fail(field, f"expected a JSON value, got {_kind(value)}")
        # a tagged value: an object with exactly one known key
        if len(value) != 1:
            self.fail(field, "expected a tagged value, an object with one key "
                             "(float, tuple, dict, dtype or ndarray)")
        (tag, inner), = value.items()
        tf = f"{field}.{tag}"
        if tag == "float":
            if inner not in _NONFINITE:
                self.fail(tf, f"expected 'inf', '-inf' or 'nan', got {_short(inner)}")
            return _NONFINITE[inner]
        if tag == "tuple":
            items = self.list_of(inner, tf)
            return tuple(self.attr_value(v, f"{tf}[{i}]", depth + 1) for i, v in enumerate(items))
        if tag == "dict":
            if not isinstance(inner, dict) or not all(isinstance(k, str) for k in inner):
                self.fail(tf, f"expected an object, got {_kind(inner)}")
            return {k: self.attr_value(v, f"{tf}.{k}", depth + 1) for k, v in inner.items()}
        if tag == "dtype":
            if not isinstance(inner, str) or inner not in _DTYPES:
                self.fail(tf, f"unknown dtype {_short(inner)}")
            return _DTYPES[inner]
        if tag == "ndarray":
            return self.ndarray(inner, tf)
        self.fail(field, f"unknown tag {tag!r} (known: float, tuple, dict, dtype, ndarray)")

    def ndarray(self, raw, field):
        self.obj(raw, field, {"dtype", "shape", "data"}, ("dtype", "shape", "data"))
        dtype, shape, data = raw["dtype"], raw["shape"], raw["data"]
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            self.fail(f"{field}.dtype", f"unknown dtype {_short(dtype)}")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            self.fail(f"{field}.shape", f"expected a list of ints >= 0, got {_short(shape)}")
        items = self.list_of(data, f"{field}.data")
        if len(items) != math.prod(shape):
            self.fail(f"{field}.data", f"expected {math.prod(shape)} values for shape "
                                       f"{shape}, got {len(items)}")
        values = []
        for i, v in enumerate(items):
            if isinstance(v, dict):
                v = self.attr_value(v, f"{field}.data[{i}]", MAX_ATTR_DEPTH)
            if not isinstance(v, (bool, int, float)):
                self.fail(f"{field}.data[{i}]", f"expected a number, got {_kind(v)}")
            values.append(v)
        try:
            with np.errstate(all="ignore"):
                return np.array(values, dtype=_DTYPES[dtype]).reshape(shape)
        except (OverflowError, ValueError, TypeError) as e:
            self.fail(f"{field}.data", f"values do not fit dtype {dtype}: {e}")

    # ---- what the program means: the IR verifier

    def run_verifier(self, program: Program, feed) -> None:
        """Run ``runtime/verify.py`` on the loaded program; its errors name the field."""
        try:
            verify.verify(program, feed_names=feed)
        except verify.VerifyError as e:
            self.fail(e.field, e.reason)


def _join(field, key):
    return f"{field}.{key}" if field else key


def _short(value, limit=60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------- parameters


def load_params(path, program: Program | None = None) -> dict:
    """``{name: array}`` from a safetensors file; checked against ``program`` if given."""
    source = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    params = params_from_bytes(data, source)
    if program is not None:
        check_params(program, params, source)
    return params


def params_from_bytes(data: bytes, source: str = "<params>") -> dict:
    """``{name: array}`` from safetensors bytes, validated (header, dtypes, offsets)."""
    import safetensors.numpy

    data = bytes(data)
    bad = "not a valid safetensors file"
    if len(data) < 8:
        raise FormatError(source, "", f"{bad} (truncated?): {len(data)} bytes")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise FormatError(source, "", f"{bad} (truncated?): the header claims {size} bytes, "
                                      f"the file has {len(data) - 8} after the size field")
    header = parse_json(data[8 : 8 + size], f"{source} (header)")
    if not isinstance(header, dict):
        raise FormatError(source, "header", f"expected an object, got {_kind(header)}")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict):
        raise FormatError(source, "header.__metadata__", f"expected an object, got {_kind(meta)}")
    if "format" in meta and meta["format"] != PARAMS_FORMAT:
        raise FormatError(source, "header.__metadata__.format",
                          f"expected {PARAMS_FORMAT!r}, got {_short(meta['format'])}")
    if "version" in meta and meta["version"] != PARAMS_VERSION:
        raise FormatError(source, "", f"parameter format version {_short(meta['version'])} is "
                                      f"not supported (this dy2stat reads version "
                                      f"{PARAMS_VERSION})")
    try:
        params = safetensors.numpy.load(data)
    except BaseException as e:  # the Rust reader raises its own types, a panic included
        if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FormatError(source, "", f"{bad} (truncated?): {reason}") from None
    for name, array in params.items():
        if array.dtype not in dtypes.ALL:
            raise FormatError(source, "", f"parameter {name!r} has unsupported dtype "
                                          f"{array.dtype} (supported: {dtypes.names(dtypes.ALL)})")
    return params


def check_params(program: Program, params: dict, source: str = "<params>") -> None:
    """Parameters must match the program's persistable variables: names, dtypes, shapes."""
    declared = {v.name: v for v in program.persistables()}
    missing = [n for n in declared if n not in params]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise FormatError(source, "", f"missing parameter{plural} "
                                      f"{', '.join(repr(n) for n in missing)}")
    extra = [n for n in params if n not in declared]
    if extra:
        plural = "s" if len(extra) > 1 else ""
        raise FormatError(source, "", f"unexpected parameter{plural} "
                                      f"{', '.join(repr(n) for n in extra)} (the program "
                                      "declares no persistable variable of that name)")
    for name, var in declared.items():
        array = params[name]
        shape, dtype = tuple(np.shape(array)), np.asarray(array).dtype
        if dtype != var.dtype:
            raise FormatError(source, "", f"parameter {name!r} has dtype {dtype} but the "
                                          f"program declares {var.dtype}")
        if not shapes.same(shape, var.shape):
            raise FormatError(source, "", f"parameter {name!r} has shape {list(shape)} but the "
                                          f"program declares {list(var.shape)}")


def load_model(path_prefix) -> tuple[Program, list[str], list[str], dict]:
    """``(program, feed_names, fetch_names, params)`` from ``{prefix}.json`` and
    ``{prefix}.safetensors``; the parameters are checked against the program."""
    program, feed, fetch = load_program(f"{path_prefix}.json")
    params = load_params(f"{path_prefix}.safetensors", program)
    return program, feed, fetch, params
