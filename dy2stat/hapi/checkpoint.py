"""Training checkpoints of ``Model.save(path, training=True)``.

``{path}.pdparams`` holds the network's ``state_dict`` (parameters and
persistable buffers, keyed by their dotted structured names such as
``features.0.weight``); ``{path}.pdopt`` holds the optimizer's accumulators,
keyed ``{structured name}_{accumulator}_0`` (``fc.0.weight_moment1_0``), with
the learning-rate scheduler's state as JSON in the file's metadata
(``lr_scheduler``). The file names are Paddle's, but both files are
safetensors (the format of ``dy2stat.runtime.serialize.save_params``): loading
them never runs code. Keys use structured names, not the parameters' unique
runtime names (``linear_3.w_0``), so a checkpoint loads into a network built
again in another process, in dynamic or static mode alike.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from dy2stat.nn import Layer
from dy2stat.runtime import serialize

__all__ = ["read", "write"]

_SCHEDULER_KEY = "lr_scheduler"


def write(path: str, arrays: dict, scheduler_state: dict | None = None) -> None:
    """Write ``{name: array}`` (and a scheduler state) as a safetensors file at ``path``."""
    import safetensors.numpy

    tensors = {}
    for name, value in arrays.items():
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = array.copy(order="C")
        tensors[name] = array
    metadata = {"format": serialize.PARAMS_FORMAT, "version": serialize.PARAMS_VERSION}
    if scheduler_state is not None:
        metadata[_SCHEDULER_KEY] = json.dumps(scheduler_state)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    data = safetensors.numpy.save(tensors, metadata=metadata)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read(path: str) -> tuple[dict, dict | None]:
    """``({name: array}, scheduler state or None)`` from a file ``write`` made.

    A missing file is a ``FileNotFoundError`` naming it; a malformed one a
    ``ValueError`` (``serialize.FormatError``) naming it.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Model.load: {path} does not exist")
    with open(path, "rb") as f:
        data = f.read()
    arrays = serialize.params_from_bytes(data, path)  # validates header, dtypes and offsets
    (size,) = struct.unpack("<Q", data[:8])
    header = serialize.parse_json(data[8:8 + size], f"{path} (header)")
    meta = header.get("__metadata__", {}) if isinstance(header, dict) else {}
    scheduler = None
    text = meta.get(_SCHEDULER_KEY) if isinstance(meta, dict) else None
    if isinstance(text, str):
        try:
            scheduler = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: the learning-rate scheduler state in the metadata is "
                             f"not valid JSON ({exc})") from None
        if not isinstance(scheduler, dict):
            raise ValueError(f"{path}: the learning-rate scheduler state must be an object")
    return arrays, scheduler


class _NameMap:
    """Runtime parameter names (``linear_3.weight``) <-> structured ones (``fc.0.weight``),
    applied to the prefix of optimizer-state keys (``{param}_{accumulator}_0``)."""

    def __init__(self, network: Layer):
        pairs = [(name, p.name) for name, p in network.named_parameters() if p.name]
        self._to_structured = sorted(((rt, st) for st, rt in pairs), key=lambda x: -len(x[0]))
        self._to_runtime = sorted(pairs, key=lambda x: -len(x[0]))

    @staticmethod
    def _map(key: str, table) -> str:
        for old, new in table:
            if key.startswith(old + "_"):
                return new + key[len(old):]
        return key

    def structured(self, key: str) -> str:
        return self._map(key, self._to_structured)

    def runtime(self, key: str) -> str:
        return self._map(key, self._to_runtime)
