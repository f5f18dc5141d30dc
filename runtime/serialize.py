"""Saving and loading programs (versioned JSON) and parameters (safetensors).

The formats are documented in ``docs/format.md``. In short:

- a program is one JSON document ``{"format": "dy2stat.program", "version": 1,
  "random_seed": int, "feed": [names], "fetch": [names], "blocks": [...]}``;
  attrs are plain JSON values, with tagged objects for what JSON lacks
  (``{"float": "inf"}``, ``{"tuple": [...]}``, ``{"dtype": "float32"}``, ...);
- parameters are a safetensors file (raw little-endian tensor bytes and a JSON
  header), written with ``safetensors.numpy`` and read as views of one buffer
  after its header is checked (a file loads in memory about its own size);
- ``save_model`` writes the pair all or nothing (``runtime/atomic.py``): the
  program records the parameters file's SHA-256 (``params_sha256``) and
  ``load_model`` refuses a program and parameters from different saves.

Nothing in a file is ever executed: no pickle, no eval/exec, no imports by
name. Loading validates every field and every cross-reference and fails with
one error type, :class:`FormatError`, whose message names the file and the
field, e.g. ``model.json: blocks[0].ops[3].type: unknown op type 'foo'``;
names and values from the file are quoted in at most ~200 characters
(``runtime/quoting.py``).
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

import numpy as np

from dy2stat.runtime import atomic, dtypes, shapes, verify
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.quoting import describe_kind, field_key, quote

FORMAT = "dy2stat.program"
# Version 2 added "params_sha256"; version 1 files (no digest) still load.
VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
PARAMS_FORMAT = "dy2stat.params"
PARAMS_VERSION = "1"

# Deepest nesting of an attr value (lists in lists ...) a file may hold.
MAX_ATTR_DEPTH = 32

_DTYPES = {str(d): d for d in dtypes.ALL}
_PROGRAM_KEYS = {"format", "version", "random_seed", "feed", "fetch", "params_sha256",
                 "blocks"}
_BLOCK_KEYS = {"idx", "parent_idx", "vars", "ops"}
_VAR_KEYS = {"name", "shape", "dtype", "persistable", "is_data", "stop_gradient"}
_VAR_FLAGS = ("persistable", "is_data", "stop_gradient")
_OP_KEYS = {"type", "inputs", "outputs", "attrs", "origin", "scope"}
ORIGIN_LIMIT = 1000  # characters of an op's recorded source location kept
SCOPE_LIMIT = 500  # characters of an op's Layer scope path a file may hold
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
# The longest reason or field path an error carries (names in them are quoted
# shorter still; this bounds what a message can grow to).
_MESSAGE_LIMIT = 2000


class FormatError(ValueError):
    """A program or parameter file that cannot be loaded.

    ``source`` is the file, ``field`` the path of the offending field inside it
    (``blocks[0].ops[3].type``; empty when the file as a whole is wrong) and
    ``reason`` what is wrong with it.
    """

    def __init__(self, source: str, field: str, reason: str):
        field, reason = _cut(str(field), _MESSAGE_LIMIT // 4), _cut(str(reason), _MESSAGE_LIMIT)
        self.source, self.field, self.reason = str(source), field, reason
        where = f"{self.source}: {field}: " if field else f"{self.source}: "
        super().__init__(where + reason)

    def __reduce__(self):
        return type(self), (self.source, self.field, self.reason)


# --------------------------------------------------------------------- saving


def program_to_dict(program: Program, feed_names=None, fetch_names=None,
                    params_sha256: str | None = None) -> dict:
    """The JSON document for ``program`` (plain dicts/lists, ready for ``json.dumps``).

    ``feed_names``/``fetch_names`` are stored as ``"feed"``/``"fetch"`` and the
    parameters file's digest as ``"params_sha256"`` when given. Raises
    ``TypeError`` naming the op and attr when an attr value has no JSON form.
    """
    doc: dict = {"format": FORMAT, "version": VERSION, "random_seed": int(program.random_seed)}
    if feed_names is not None:
        doc["feed"] = [_name(n, "feed") for n in feed_names]
    if fetch_names is not None:
        doc["fetch"] = [_name(n, "fetch") for n in fetch_names]
    if params_sha256 is not None:
        doc["params_sha256"] = params_sha256
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


def program_to_json(program: Program, feed_names=None, fetch_names=None,
                    params_sha256: str | None = None) -> str:
    """``program_to_dict`` as JSON text (one field per line, readable in a diff)."""
    doc = program_to_dict(program, feed_names, fetch_names, params_sha256)
    return json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n"


def save_program(path, program: Program, feed_names, fetch_names) -> None:
    """Write ``program`` with its feed and fetch names to ``path`` (JSON), atomically.

    A program saved alone records no parameters digest; ``save_model`` writes
    the program and its parameters as one save."""
    text = program_to_json(program, list(feed_names), list(fetch_names))
    atomic.write(path, text.encode("utf-8"))


def params_to_bytes(params: dict, metadata: dict | None = None) -> bytes:
    """``{name: array}`` as safetensors bytes (0-d and bool arrays included), with
    ``metadata`` (strings) beside the format's own keys."""
    import safetensors.numpy

    tensors = {}
    for name, value in params.items():
        if not isinstance(name, str) or not name:
            raise TypeError("save_params: parameter names must be non-empty strings, "
                            f"got {quote(name)}")
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        if array.dtype not in dtypes.ALL:
            raise TypeError(
                f"save_params: parameter {quote(name)} has unsupported dtype {array.dtype} "
                f"(supported: {dtypes.names(dtypes.ALL)})"
            )
        tensors[name] = array
    metadata = {**(metadata or {}), "format": PARAMS_FORMAT, "version": PARAMS_VERSION}
    return safetensors.numpy.save(tensors, metadata=metadata)


def save_params(path, params: dict) -> None:
    """Write ``{name: array}`` to ``path`` as safetensors, atomically."""
    atomic.write(path, params_to_bytes(params))


def save_model(path_prefix, program: Program, feed_names, fetch_names, params: dict) -> None:
    """``{prefix}.json`` (the program) and ``{prefix}.safetensors`` (its parameters),
    written as one save: all or nothing, the program recording the parameters'
    SHA-256 (see ``runtime/atomic.py``)."""
    path_prefix = os.fspath(path_prefix)
    check_params(program, params, f"{path_prefix}.safetensors")
    data = params_to_bytes(params)
    text = program_to_json(program, list(feed_names), list(fetch_names), atomic.digest(data))
    atomic.write_pair(f"{path_prefix}.safetensors", data, f"{path_prefix}.json",
                      text.encode("utf-8"))


def _name(value, what):
    if hasattr(value, "name") and not isinstance(value, str):
        value = value.name
    if not isinstance(value, str):
        raise TypeError(f"{what} names must be strings or variables, got {quote(value)}")
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
            raise TypeError(f"{where} ({op.type}): attr {quote(key)}: {e}") from None
    result = {
        "type": op.type,
        "inputs": {slot: list(names) for slot, names in op.inputs.items()},
        "outputs": {slot: list(names) for slot, names in op.outputs.items()},
        "attrs": attrs,
    }
    if op.origin:  # where the user's code built it: run-time errors name that line
        result["origin"] = op.origin[:ORIGIN_LIMIT]
    if op.scope:  # the Layers that built it: pictures of the program group by it
        result["scope"] = op.scope[:SCOPE_LIMIT].strip("/")
    return result


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
                raise TypeError(f"dict attr keys must be strings, got {quote(k)}")
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
    raise TypeError(f"a {type(value).__name__} attr value cannot be saved ({quote(value)})")


# -------------------------------------------------------------------- loading


def load_program(path) -> tuple[Program, list[str], list[str]]:
    """``(program, feed_names, fetch_names)`` from a JSON program file; validated.

    A malformed file raises :class:`FormatError`; a missing file ``OSError``.
    """
    return _read_program_file(path)[:3]


def _read_program_file(path):
    """``(program, feed, fetch, params_sha256 or None)`` from a program file."""
    source = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    reader = _ProgramReader(source)
    program, feed, fetch = reader.read(parse_json(data, source))
    return program, feed, fetch, reader.params_sha256


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
        reason = f"invalid JSON: the key {quote(e.args[0])} appears twice"
        raise FormatError(source, "", reason) from None
    except RecursionError:
        raise FormatError(source, "", "invalid JSON: nested too deeply") from None
    except ValueError as e:  # e.g. an integer literal with too many digits
        raise FormatError(source, "", f"invalid JSON: {e}") from None


class _JSONLiteral(Exception):
    pass


class _JSONDuplicate(Exception):
    pass


_kind = describe_kind


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _ProgramReader:
    """Validates a parsed document field by field while building the Program."""

    def __init__(self, source: str):
        self.source = str(source)
        self.params_sha256: str | None = None

    def fail(self, field: str, reason: str):
        raise FormatError(self.source, field, reason)

    # ---- small typed getters

    def obj(self, value, field, keys, required):
        if not isinstance(value, dict):
            self.fail(field, f"expected an object, got {_kind(value)}")
        for key in value:
            if key not in keys:
                known = ", ".join(sorted(keys))
                self.fail(_join(field, field_key(key)), f"unknown field (known: {known})")
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
                self.fail(f"{field}[{i}]", f"{quote(n)} is listed twice")
            seen.add(n)
        return names

    # ---- the document

    def read(self, doc):
        if not isinstance(doc, dict):
            self.fail("", f"expected a JSON object at the top level, got {_kind(doc)}")
        if doc.get("format") != FORMAT:
            if "format" not in doc:
                self.fail("format", f"missing (expected {FORMAT!r}; is this a dy2stat program?)")
            self.fail("format", f"expected {FORMAT!r}, got {quote(doc['format'])}")
        version = doc.get("version")
        if "version" not in doc:
            self.fail("version", "missing")
        if not _is_int(version):
            self.fail("version", f"expected an integer, got {_kind(version)}")
        if version not in SUPPORTED_VERSIONS:
            self.fail("", f"version {version} is not supported (this dy2stat reads versions "
                          f"{' and '.join(map(str, SUPPORTED_VERSIONS))})")
        self.obj(doc, "", _PROGRAM_KEYS, ("format", "version", "blocks"))

        program = Program()
        seed = doc.get("random_seed", 0)
        if not _is_int(seed):
            self.fail("random_seed", f"expected an integer, got {_kind(seed)}")
        program.random_seed = seed
        digest = doc.get("params_sha256")
        if digest is not None and (version < 2 or not _is_sha256(digest)):
            reason = ("the field is new in version 2" if version < 2
                      else f"expected 64 lowercase hex digits, got {quote(digest)}")
            self.fail("params_sha256", reason)
        self.params_sha256 = digest

        raw_blocks = self.list_of(doc["blocks"], "blocks")
        if not raw_blocks:
            self.fail("blocks", "expected at least one block (the global block)")
        program.blocks = [self.block_header(raw, i, program) for i, raw in enumerate(raw_blocks)]
        program._forget_names()
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
                    self.fail(f"{what}[{i}]",
                              f"{quote(n)} is not a variable of the global block")
        self.run_verifier(program, feed)
        program.bump()
        return program, feed, fetch

    def block_header(self, raw, i, program) -> Block:
        field = f"blocks[{i}]"
        self.obj(raw, field, _BLOCK_KEYS, ("idx", "parent_idx", "vars", "ops"))
        idx, parent = raw["idx"], raw["parent_idx"]
        if not _is_int(idx) or idx != i:
            self.fail(f"{field}.idx", f"expected {i} (blocks are listed in index order), "
                                      f"got {quote(idx)}")
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
                self.fail(f"{vf}.name",
                          f"variable {quote(name)} is defined twice in block {block.idx}")
            shape = raw["shape"]
            if not isinstance(shape, list) or not all(_is_int(d) and d >= -1 for d in shape):
                self.fail(f"{vf}.shape", f"expected a list of ints >= -1, got {_short(shape)}")
            dtype = raw["dtype"]
            if not isinstance(dtype, str) or dtype not in _DTYPES:
                self.fail(f"{vf}.dtype", f"unknown dtype {_short(dtype)} "
                                         f"(known: {dtypes.names(dtypes.ALL)})")
            flags = {k: self.flag(raw.get(k, False), f"{vf}.{k}") for k in _VAR_FLAGS}
            block.add_var(Var(name, tuple(shape), _DTYPES[dtype], **flags))

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
        op = Operator(op_type, inputs, outputs, attrs)
        origin = raw.get("origin", "")
        if not isinstance(origin, str):
            self.fail(f"{field}.origin", f"expected a string, got {_kind(origin)}")
        op.origin = origin[:ORIGIN_LIMIT]  # text only: shown in messages, never run
        op.scope = self.scope(raw.get("scope", ""), f"{field}.scope")
        return op

    def scope(self, value, field) -> str:
        """A Layer scope path: names joined by '/' (text only: shown, never run)."""
        if not isinstance(value, str):
            self.fail(field, f"expected a string, got {_kind(value)}")
        if len(value) > SCOPE_LIMIT:
            self.fail(field, f"longer than {SCOPE_LIMIT} characters ({len(value):,})")
        if value and not all(value.split("/")):
            self.fail(field, f"expected names joined by '/', got {quote(value)}")
        return value

    def slots(self, raw, field) -> dict:
        if not isinstance(raw, dict):
            self.fail(field, f"expected an object mapping slot names to lists of names, "
                             f"got {_kind(raw)}")
        result = {}
        for key, value in raw.items():
            sf = f"{field}.{field_key(key)}"
            names = self.list_of(value, sf)
            for i, n in enumerate(names):
                self.name(n, f"{sf}[{i}]")
            result[key] = list(names)
        return result

    def attrs(self, raw, field) -> dict:
        if not isinstance(raw, dict):
            self.fail(field, f"expected an object, got {_kind(raw)}")
        return {key: self.attr_value(value, f"{field}.{field_key(key)}", 0)
                for key, value in raw.items()}

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
        tf = f"{field}.{field_key(tag)}"
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
            return {k: self.attr_value(v, f"{tf}.{field_key(k)}", depth + 1)
                    for k, v in inner.items()}
        if tag == "dtype":
            if not isinstance(inner, str) or inner not in _DTYPES:
                self.fail(tf, f"unknown dtype {_short(inner)}")
            return _DTYPES[inner]
        if tag == "ndarray":
            return self.ndarray(inner, tf)
        self.fail(field, f"unknown tag {quote(tag)} (known: float, tuple, dict, dtype, ndarray)")

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


def _short(value) -> str:
    return quote(value, 60)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 30] + f"... ({len(text):,} characters)"


def _is_sha256(value) -> bool:
    return (isinstance(value, str) and len(value) == 64
            and all(c in "0123456789abcdef" for c in value))


# ----------------------------------------------------------------- parameters

# safetensors dtype codes: those dy2stat reads, and names for the others' errors
_ST_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
              "I64": "int64", "F16": "float16", "F32": "float32", "F64": "float64"}
_ST_OTHERS = {"U16": "uint16", "U32": "uint32", "U64": "uint64", "BF16": "bfloat16",
              "F8_E4M3": "float8_e4m3", "F8_E5M2": "float8_e5m2", "C64": "complex64"}
# The largest header safetensors itself accepts.
_MAX_HEADER = 100_000_000


def load_params(path, program: Program | None = None) -> dict:
    """``{name: array}`` from a safetensors file; checked against ``program`` if given.

    The arrays are views of one buffer of the file's size (no second copy)."""
    source = os.fspath(path)
    params = params_from_bytes(atomic.read_data(source, None)[0], source)
    if program is not None:
        check_params(program, params, source)
    return params


def params_from_bytes(data, source: str = "<params>") -> dict:
    """``{name: array}`` from safetensors bytes, validated (header, dtypes, offsets).

    Every declared size is checked against what the data holds before anything is
    allocated. From a writable buffer (``bytearray``) the arrays are views of it;
    from ``bytes`` they are copies."""
    return params_with_metadata(data, source)[0]


def params_with_metadata(data, source: str = "<params>") -> tuple[dict, dict]:
    """``({name: array}, metadata)`` from safetensors bytes (see ``params_from_bytes``)."""
    view = memoryview(data).cast("B")
    bad = "not a valid safetensors file"
    if len(view) < 8:
        raise FormatError(source, "", f"{bad} (truncated?): {len(view)} bytes")
    (size,) = struct.unpack("<Q", view[:8])
    if size > len(view) - 8 or size > _MAX_HEADER:
        raise FormatError(source, "", f"{bad} (truncated?): the header claims {size} bytes, "
                                      f"the file has {len(view) - 8} after the size field")
    header = parse_json(bytes(view[8 : 8 + size]), f"{source} (header)")
    if not isinstance(header, dict):
        raise FormatError(source, "header", f"expected an object, got {_kind(header)}")
    metadata = header.get("__metadata__", {})
    _check_params_metadata(metadata, source)
    start = 8 + size
    entries = _tensor_entries(header, len(view) - start, source)
    params = {}
    for name, dtype, shape, begin in entries:
        count = math.prod(shape)
        array = np.frombuffer(view, dtype=dtype.newbyteorder("<"), count=count,
                              offset=start + begin).reshape(shape)
        if dtype == dtypes.bool_ and count and array.view(np.uint8).max() > 1:
            raise FormatError(source, f"header.{field_key(name)}",
                              "a bool tensor holds bytes other than 0 and 1")
        if view.readonly or not array.flags.aligned or not array.dtype.isnative:
            array = array.astype(dtype, order="C", copy=True)
        params[name] = array
    return params, metadata


def _check_params_metadata(meta, source) -> None:
    field = "header.__metadata__"
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(source, field, "expected an object of strings, "
                                         f"got {_kind(meta)}")
    if "format" in meta and meta["format"] != PARAMS_FORMAT:
        raise FormatError(source, f"{field}.format",
                          f"expected {PARAMS_FORMAT!r}, got {_short(meta['format'])}")
    if "version" in meta and meta["version"] != PARAMS_VERSION:
        raise FormatError(source, "", f"parameter format version {_short(meta['version'])} is "
                                      f"not supported (this dy2stat reads version "
                                      f"{PARAMS_VERSION})")


def _tensor_entries(header: dict, data_size: int, source) -> list:
    """``[(name, dtype, shape, begin)]`` of the header's tensors, each checked: a known
    dtype, a shape of ints, offsets that hold exactly its bytes, and together the
    offsets tile the data without gaps or overlaps (as the format requires)."""
    entries, spans = [], []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        field = f"header.{field_key(name)}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise FormatError(source, field, "expected an object with dtype, shape and "
                                             f"data_offsets, got {_short(entry)}")
        code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if code not in _ST_DTYPES:
            kind = _ST_OTHERS.get(code, _short(code)) if isinstance(code, str) else _short(code)
            raise FormatError(source, "", f"parameter {quote(name)} has unsupported dtype "
                                          f"{kind} (supported: {dtypes.names(dtypes.ALL)})")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise FormatError(source, f"{field}.shape",
                              f"expected a list of ints >= 0, got {_short(shape)}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(o) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data_size):
            raise FormatError(source, f"{field}.data_offsets",
                              f"expected [begin, end] within the {data_size} bytes of data, "
                              f"got {_short(offsets)} (truncated?)")
        dtype = np.dtype(_ST_DTYPES[code])
        need = math.prod(shape) * dtype.itemsize
        if offsets[1] - offsets[0] != need:
            raise FormatError(source, f"{field}.data_offsets",
                              f"shape {shape} of {dtype} needs {need} bytes, the offsets "
                              f"hold {offsets[1] - offsets[0]}")
        entries.append((name, dtype, tuple(shape), offsets[0]))
        spans.append((offsets[0], offsets[1], name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            what = "overlaps another tensor" if begin < end else "leaves a gap before it"
            raise FormatError(source, f"header.{field_key(name)}.data_offsets",
                              f"{what} (the data must be tiled without gaps or overlaps)")
        end = stop
    if end != data_size:
        raise FormatError(source, "", f"the header accounts for {end} bytes of data, the "
                                      f"file holds {data_size} (truncated or padded?)")
    return entries


def check_params(program: Program, params: dict, source: str = "<params>") -> None:
    """Parameters must match the program's persistable variables: names, dtypes, shapes."""
    declared = {v.name: v for v in program.persistables()}
    missing = [n for n in declared if n not in params]
    if missing:
        raise FormatError(source, "", f"missing {_plural(missing, 'parameter')}")
    extra = [n for n in params if n not in declared]
    if extra:
        raise FormatError(source, "", f"unexpected {_plural(extra, 'parameter')} (the "
                                      "program declares no persistable variable of that name)")
    for name, var in declared.items():
        array = params[name]
        shape, dtype = tuple(np.shape(array)), np.asarray(array).dtype
        if dtype != var.dtype:
            raise FormatError(source, "", f"parameter {quote(name)} has dtype {dtype} but the "
                                          f"program declares {var.dtype}")
        if not shapes.same(shape, var.shape):
            raise FormatError(source, "", f"parameter {quote(name)} has shape {list(shape)} "
                                          f"but the program declares {list(var.shape)}")


def _plural(names: list, what: str) -> str:
    shown = ", ".join(quote(n, 60) for n in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{what}{'s' if len(names) > 1 else ''} {shown}{more}"


# --------------------------------------------------------------------- models


def load_model(path_prefix) -> tuple[Program, list[str], list[str], dict]:
    """``(program, feed_names, fetch_names, params)`` from ``{prefix}.json`` and
    ``{prefix}.safetensors``.

    The parameters must be the ones saved with the program (the SHA-256 the
    program records; a save interrupted after its commit is completed in
    memory, see ``runtime/atomic.py``) and match its persistable variables."""
    path_prefix = os.fspath(path_prefix)
    json_path, params_path = f"{path_prefix}.json", f"{path_prefix}.safetensors"
    program, feed, fetch, recorded = _read_program_file(json_path)
    data, source, matched = atomic.read_data(params_path, recorded)
    if not matched:
        raise FormatError(params_path, "", (
            f"not the parameters saved with {json_path}: the files come from different saves "
            f"(the program records parameters with SHA-256 {recorded[:16]}..., this file "
            f"has {atomic.digest(data)[:16]}...); save the model again"))
    params = params_from_bytes(data, source)
    check_params(program, params, source)
    return program, feed, fetch, params


def model_prefix(path, what: str = "load") -> str:
    """The path prefix of a saved model given as the prefix, as ``{prefix}.json`` or
    ``{prefix}.safetensors``, or as a folder holding one model (``model.json`` or
    the only ``*.json`` beside its ``.safetensors``).

    Raises ``FileNotFoundError`` saying which files it looked for."""
    path = os.fspath(path)
    if os.path.isfile(f"{path}.json"):
        return path
    for suffix in (".json", ".safetensors"):
        if path.endswith(suffix) and os.path.isfile(path[: -len(suffix)] + ".json"):
            return path[: -len(suffix)]
    if os.path.isdir(path):
        names = sorted(n[:-5] for n in os.listdir(path) if n.endswith(".json")
                       and os.path.isfile(os.path.join(path, n[:-5] + ".safetensors")))
        if "model" in names:
            return os.path.join(path, "model")
        if len(names) == 1:
            return os.path.join(path, names[0])
        found = (f"it holds {len(names)}: {', '.join(quote(n, 60) for n in names[:5])}; name one"
                 if names else "it holds none")
        raise FileNotFoundError(f"{what}: {path} is a folder; looked in it for one saved model "
                                f"(NAME.json with NAME.safetensors): {found}")
    raise FileNotFoundError(f"{what}: no saved model at {path}: looked for {path}.json and "
                            f"{path}.safetensors (the path is the prefix given to jit.save)")
