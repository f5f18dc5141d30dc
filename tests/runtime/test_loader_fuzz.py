"""The loader against mutated real saved models: fixed seed, a few seconds.

Programs saved by ``jit.save`` (a converted layer with ``while`` and
``cond``), by ``save_inference_model`` and by ``serialize.save_model`` (a
program with its backward: ``while_grad``), mutated field by field (deleted,
retyped, renamed, swapped), byte by byte (truncation, bit flips, inserted
and deleted bytes) and, for parameters, with headers that lie about sizes,
offsets and dtypes. Every load either succeeds -- and then the program saves
and loads again the same -- or raises ``FormatError`` whose message starts
with the file's path (or ``FileNotFoundError`` for a file that is gone). No
other exception, no hang (each load has a time limit), no code run.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import os
import pickle
import random
import signal
import struct

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import serialize as S
from dy2stat.runtime.serialize import FormatError
from dy2stat.static import InputSpec

SEED = 20240917
SECONDS_PER_LOAD = 5


class LoopNet(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = d2s.nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        i = 0
        while y.abs().sum() < 10.0 and i < 5:
            if y.mean() > 0:
                y = y * 2.0
            else:
                y = y - 1.0
            i += 1
        return d2s.nn.functional.relu(y)


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """``[(json bytes, safetensors bytes)]`` of models as dy2stat saves them."""
    folder = tmp_path_factory.mktemp("fuzz_originals")
    d2s.seed(0)
    d2s.jit.save(d2s.jit.to_static(LoopNet()), str(folder / "loop"),
                 input_spec=[InputSpec([-1, 4], "float32", "x")])
    d2s.enable_static()
    try:
        main, startup = d2s.static.Program(), d2s.static.Program()
        with d2s.static.program_guard(main, startup):
            x = d2s.static.data("x", [None, 8], "float32")
            out = d2s.static.nn.fc(d2s.static.nn.fc(x, 6), 3)
        exe = d2s.static.Executor()
        exe.run(startup)
        d2s.static.save_inference_model(str(folder / "fc"), [x], [out], exe)
        main, startup = d2s.static.Program(), d2s.static.Program()
        with d2s.static.program_guard(main, startup):
            x = d2s.static.data("x", [None, 3], "float64")
            w = d2s.static.create_parameter([3, 3], "float64", name="w")
            h = x @ w
            _, acc = d2s.static.nn.while_loop(lambda i, a: i < 3,
                                              lambda i, a: (i + 1, a * h.mean()),
                                              [d2s.zeros([], dtype="int64"), h])
            loss = acc.sum()
            d2s.static.append_backward(loss)
        params = {v.name: np.zeros(v.shape, v.dtype) for v in main.persistables()}
        names = [n for b in main.blocks for op in b.ops for n in op.output_names()]
        S.save_model(folder / "grad", main, ["x"], [names[-1]], params)
    finally:
        d2s.disable_static()
    return [((folder / f"{n}.json").read_bytes(), (folder / f"{n}.safetensors").read_bytes())
            for n in ("loop", "fc", "grad")]


# ----------------------------------------------------------------- mutations

ODD_VALUES = [None, True, False, 0, -1, 7, 2**70, -2**70, 1.5, -0.0, "", "x", "float32",
              "\x1b[2J", "n" * 5000, [], [0], [-1, 3], ["a"], [[1]], {}, {"float": "inf"},
              {"tuple": [1]}, {"ndarray": {"dtype": "float32", "shape": [10**12], "data": []}},
              {"dict": {"a": None}}, {"dtype": "int64"}]


def _nodes(value, path=()):
    """Every (path, value) inside a parsed document."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, path + (i,))


def mutate_document(doc, rng: random.Random):
    doc = copy.deepcopy(doc)
    nodes = [(p, v) for p, v in _nodes(doc) if p]
    path, _ = rng.choice(nodes)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    kind = rng.randrange(6)
    if kind == 0:  # delete
        del parent[key]
    elif kind == 1:  # retype
        parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    elif kind == 2 and isinstance(parent, dict):  # rename
        parent[str(key) + rng.choice(["_", "X", ".", "0"])] = parent.pop(key)
    elif kind == 3 and isinstance(parent, list) and len(parent) > 1:  # swap
        j = rng.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]
    elif kind == 4 and isinstance(parent, list):  # duplicate
        parent.insert(key, copy.deepcopy(parent[key]))
    else:  # a number nudged, a name changed by one character
        value = parent[key]
        if isinstance(value, bool):
            parent[key] = not value
        elif isinstance(value, int):
            parent[key] = value + rng.choice([-2, -1, 1, 2, 10**6])
        elif isinstance(value, str) and value:
            i = rng.randrange(len(value))
            parent[key] = value[:i] + rng.choice("a_0.\"\\") + value[i + 1:]
        else:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    return doc


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # truncation
        return bytes(out[: rng.randrange(len(out))])
    if kind == 1:  # bit flips
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif kind == 2:  # inserted bytes
        i = rng.randrange(len(out))
        out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    else:  # deleted bytes
        i = rng.randrange(len(out))
        del out[i:i + rng.randint(1, 8)]
    return bytes(out)


def lying_header(data: bytes, rng: random.Random) -> bytes:
    """The parameters with a header that lies: sizes, offsets, dtypes, the size field."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    names = [n for n in header if n != "__metadata__"]
    kind = rng.randrange(5)
    if kind == 4 or not names:
        lie = rng.choice([0, 1, size - 1, size + 1, len(data), 2**40, 2**64 - 1])
        return struct.pack("<Q", lie) + data[8:]
    entry = header[rng.choice(names)]
    if kind == 0:
        entry["shape"] = [rng.choice([0, 1, 10**9, 2**62])] + entry["shape"]
    elif kind == 1:
        begin, end = entry["data_offsets"]
        entry["data_offsets"] = rng.choice([[begin, end + 4], [begin - 4, end], [0, 2**60],
                                            [end, begin], [begin, end * 1000]])
    elif kind == 2:
        entry["dtype"] = rng.choice(["F64", "I8", "BOOL", "U32", "BF16", "F32 ", "", 7])
    else:
        entry.pop(rng.choice(["dtype", "shape", "data_offsets"]))
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


# -------------------------------------------------------------------- checks


@contextlib.contextmanager
def nothing_runs_and_no_hang():
    def forbidden(*args, **kwargs):
        raise AssertionError("loading tried to run code")

    def too_slow(signum, frame):
        raise AssertionError(f"a load took more than {SECONDS_PER_LOAD} s")

    saved = {name: getattr(builtins, name) for name in ("eval", "exec")}
    loads, previous = pickle.loads, signal.signal(signal.SIGALRM, too_slow)
    for name in saved:
        setattr(builtins, name, forbidden)
    pickle.loads = forbidden
    try:
        yield lambda: signal.alarm(SECONDS_PER_LOAD)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        pickle.loads = loads
        for name, value in saved.items():
            setattr(builtins, name, value)


def load_checked(folder, program: bytes, params: bytes, arm) -> str:
    """Load one mutated pair; returns "loaded" or "refused" (or fails the test)."""
    prefix = os.path.join(folder, "m")
    with open(prefix + ".json", "wb") as f:
        f.write(program)
    with open(prefix + ".safetensors", "wb") as f:
        f.write(params)
    arm()
    try:
        loaded, feed, fetch, _ = S.load_model(prefix)
    except FormatError as exc:
        assert str(exc).startswith((prefix + ".json", prefix + ".safetensors")), str(exc)
        assert len(str(exc)) < 2500, len(str(exc))
        return "refused"
    finally:
        signal.alarm(0)
    text = S.program_to_json(loaded, feed, fetch)  # what loads is a valid program
    again, _, _ = S.program_from_json(text, "again.json")
    assert str(again) == str(loaded)
    return "loaded"


def without_digest(program: bytes) -> bytes:
    doc = json.loads(program)
    doc.pop("params_sha256", None)
    return json.dumps(doc).encode()


def test_mutated_saved_models_load_or_fail_with_a_format_error_naming_the_file(originals,
                                                                             tmp_path):
    rng = random.Random(SEED)
    outcomes = {"loaded": 0, "refused": 0}
    with nothing_runs_and_no_hang() as arm:
        for program, params in originals:
            doc = json.loads(program)
            for _ in range(150):  # fields of the program
                mutated = json.dumps(mutate_document(doc, rng), allow_nan=False).encode()
                outcomes[load_checked(tmp_path, mutated, params, arm)] += 1
            for _ in range(100):  # bytes of the program
                outcomes[load_checked(tmp_path, mutate_bytes(program, rng), params, arm)] += 1
            unpaired = without_digest(program)  # so the parameters themselves are read
            for _ in range(60):  # bytes of the parameters
                outcomes[load_checked(tmp_path, unpaired, mutate_bytes(params, rng), arm)] += 1
            for _ in range(60):  # parameter headers that lie
                outcomes[load_checked(tmp_path, unpaired, lying_header(params, rng), arm)] += 1
            for _ in range(10):  # the paired program refuses any changed parameters
                changed = mutate_bytes(params, rng)
                if changed != params:
                    assert load_checked(tmp_path, program, changed, arm) == "refused"
    assert outcomes["refused"] > 1000 and outcomes["loaded"] > 20, outcomes


def test_a_missing_file_is_a_file_not_found_error_naming_it(originals, tmp_path):
    program, _ = originals[0]
    (tmp_path / "m.json").write_bytes(program)
    with pytest.raises(FileNotFoundError, match="m.safetensors"):
        S.load_model(tmp_path / "m")
