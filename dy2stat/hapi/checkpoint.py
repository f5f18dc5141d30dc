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
again in another process, in dynamic or static mode alike. The two files are
one save: ``.pdopt`` records the SHA-256 of ``.pdparams`` (``params_sha256`` in
its metadata) and they are written all or nothing (``runtime/atomic.py``).
"""

from __future__ import annotations

import json
import os

from dy2stat.nn import Layer
from dy2stat.runtime import atomic, serialize

__all__ = ["read", "write"]

_SCHEDULER_KEY = "lr_scheduler"
# The SHA-256 of the .pdparams file saved together with a .pdopt file.
_PARAMS_KEY = "params_sha256"


def write(path: str, arrays: dict, optimizer_state: tuple[dict, dict | None] | None) -> None:
    """Save ``{path}.pdparams`` (``arrays``) and, with an ``optimizer_state``
    ``(arrays, scheduler state)``, ``{path}.pdopt``, all or nothing: the
    ``.pdopt`` file records the ``.pdparams`` file's SHA-256 (``runtime/atomic.py``).
    Saved without an optimizer, an older ``{path}.pdopt`` (from another save) is
    removed."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    data = serialize.params_to_bytes(arrays)
    params_path, opt_path = f"{path}.pdparams", f"{path}.pdopt"
    if optimizer_state is None:
        atomic.write(params_path, data)
        if os.path.isfile(opt_path):
            os.unlink(opt_path)
        return
    opt_arrays, scheduler = optimizer_state
    metadata = {_PARAMS_KEY: atomic.digest(data)}
    if scheduler is not None:
        metadata[_SCHEDULER_KEY] = json.dumps(scheduler)
    atomic.write_pair(params_path, data, opt_path,
                      serialize.params_to_bytes(opt_arrays, metadata))


def read(path: str, optimizer: bool) -> tuple[dict, tuple[dict, dict | None] | None]:
    """``(arrays of {path}.pdparams, (optimizer arrays, scheduler state) or None)``.

    The optimizer state is read when ``optimizer`` is true and ``{path}.pdopt``
    exists; the two files must then come from one save. A missing ``.pdparams``
    is a ``FileNotFoundError`` naming it; a malformed file or a mismatched pair a
    ``ValueError`` (``serialize.FormatError``) naming the files.
    """
    params_path, opt_path = f"{path}.pdparams", f"{path}.pdopt"
    recorded, opt_state = None, None
    if optimizer and os.path.isfile(opt_path):
        opt_arrays, meta = serialize.params_with_metadata(atomic.read_data(opt_path, None)[0],
                                                          opt_path)
        recorded = meta.get(_PARAMS_KEY)
        opt_state = (opt_arrays, _scheduler(meta, opt_path))
    if not os.path.isfile(params_path) and recorded is None:
        raise FileNotFoundError(f"Model.load: {params_path} does not exist")
    data, source, matched = atomic.read_data(params_path, recorded)
    if not matched:
        raise serialize.FormatError(params_path, "", (
            f"not the parameters saved with {opt_path}: the files come from different saves "
            f"(the optimizer state records parameters with SHA-256 {recorded[:16]}..., this "
            f"file has {atomic.digest(data)[:16]}...); save the model again, or load it with "
            "reset_optimizer=True"))
    return serialize.params_from_bytes(data, source), opt_state


def _scheduler(meta: dict, path: str) -> dict | None:
    text = meta.get(_SCHEDULER_KEY)
    if text is None:
        return None
    try:
        scheduler = serialize.parse_json(text, f"{path} (metadata {_SCHEDULER_KEY})")
    except serialize.FormatError:
        raise ValueError(f"{path}: the learning-rate scheduler state in the metadata is "
                         "not valid JSON") from None
    if not isinstance(scheduler, dict):
        raise ValueError(f"{path}: the learning-rate scheduler state must be an object")
    return scheduler


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
