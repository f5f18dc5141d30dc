"""``d2s.save`` and ``d2s.load``: state dicts (and values nested in dicts,
lists and tuples) in one safetensors file.

```python
d2s.save(layer.state_dict(), "net.pdparams")
layer.set_state_dict(d2s.load("net.pdparams"))
d2s.save({"model": layer.state_dict(), "opt": opt.state_dict(), "epoch": 3}, "ckpt")
```

Tensors and arrays are stored as the file's tensors (under their key in a flat
dict, a ``/``-joined path when nested); the structure around them, and plain
values (None, bool, int, float, str), as JSON in the metadata entry
``structure``, where a tensor is ``{"tensor": key}``, a tuple ``{"tuple": [...]}``,
a dict ``{"dict": {...}}`` and a non-finite float ``{"float": "nan"}``. Loading
runs nothing from the file. The file is written atomically (a temporary name,
then a rename: ``runtime/atomic.py``).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from dy2stat.creation import to_tensor
from dy2stat.kernels.backend import to_host
from dy2stat.runtime import atomic, serialize
from dy2stat.runtime.quoting import describe_kind, quote
from dy2stat.tensor import Tensor

__all__ = ["load", "save"]

_STRUCTURE_KEY = "structure"
_MAX_DEPTH = 32


def save(obj, path: str) -> None:
    """Write ``obj`` -- a Tensor, an array, or dicts (string keys), lists and tuples
    of them and of None, bool, int, float and str -- to ``path``, atomically."""
    path = os.fspath(path)
    arrays: dict = {}
    structure = _encode(obj, [], arrays, 0)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    metadata = {_STRUCTURE_KEY: json.dumps(structure, allow_nan=False)}
    atomic.write(path, serialize.params_to_bytes(arrays, metadata))


def load(path: str, return_numpy: bool = False):
    """What ``save`` wrote to ``path``: Tensors (or NumPy arrays with
    ``return_numpy``) in the saved structure. A file that is not such a file
    raises ``serialize.FormatError`` naming it; a plain safetensors file loads
    as a dict of its tensors."""
    path = os.fspath(path)
    arrays, metadata = serialize.params_with_metadata(atomic.read_data(path, None)[0], path)
    wrap = (lambda a: a) if return_numpy else to_tensor
    text = metadata.get(_STRUCTURE_KEY)
    if text is None:
        return {name: wrap(a) for name, a in arrays.items()}
    structure = serialize.parse_json(text, f"{path} (metadata {_STRUCTURE_KEY})")
    used: set = set()
    value = _Decoder(path, arrays, wrap, used).decode(structure, "structure", 0)
    unused = [n for n in arrays if n not in used]
    if unused:
        raise serialize.FormatError(path, "", f"tensor {quote(unused[0])} is not part of the "
                                              "saved structure")
    return value


def _encode(value, keys: list, arrays: dict, depth: int):
    if depth > _MAX_DEPTH:
        raise ValueError(f"d2s.save: values nest deeper than {_MAX_DEPTH} levels")
    if isinstance(value, Tensor) or hasattr(value, "__array_interface__") or hasattr(
            value, "__cuda_array_interface__"):
        array = to_host(value._data if isinstance(value, Tensor) else value)
        key = "/".join(keys) or "tensor"
        while key in arrays:
            key += "'"
        arrays[key] = np.asarray(array)
        return {"tensor": key}
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, [*keys, str(i)], arrays, depth + 1) for i, v in enumerate(value)]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"d2s.save: dict keys must be strings, got {quote(k)}")
        return {"dict": {k: _encode(v, [*keys, k], arrays, depth + 1) for k, v in value.items()}}
    raise TypeError(f"d2s.save: {type(value).__name__} values cannot be saved (save Tensors, "
                    "arrays, and dicts, lists, tuples of them and of plain values)")


class _Decoder:
    """The saved structure back, each field checked; errors name the file and field."""

    _NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}

    def __init__(self, path, arrays, wrap, used):
        self.path, self.arrays, self.wrap, self.used = path, arrays, wrap, used

    def fail(self, field, reason):
        raise serialize.FormatError(self.path, field, reason)

    def decode(self, value, field, depth):
        if depth > _MAX_DEPTH:
            self.fail(field, f"nested deeper than {_MAX_DEPTH} levels")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.decode(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
        if not isinstance(value, dict) or len(value) != 1:
            self.fail(field, f"expected a value or an object with one key, got {quote(value)}")
        (tag, inner), = value.items()
        if tag == "tensor":
            if not isinstance(inner, str) or inner not in self.arrays:
                self.fail(f"{field}.tensor", f"no tensor named {quote(inner)} in the file")
            self.used.add(inner)
            return self.wrap(self.arrays[inner])
        if tag == "float" and inner in self._NONFINITE:
            return self._NONFINITE[inner]
        if tag == "tuple" and isinstance(inner, list):
            return tuple(self.decode(v, f"{field}.tuple[{i}]", depth + 1)
                         for i, v in enumerate(inner))
        if tag == "dict" and isinstance(inner, dict):
            return {k: self.decode(v, f"{field}.dict[{quote(k, 60)}]", depth + 1)
                    for k, v in inner.items()}
        self.fail(field, f"unknown tag {quote(tag)} with {describe_kind(inner)} "
                         "(known: tensor, float, tuple, dict)")
