"""save_inference_model / load_inference_model, hostile files, and feed errors."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dy2stat as d2s
from dy2stat.runtime.serialize import FormatError
from dy2stat.runtime.verify import verify
from dy2stat.static import Variable, load_inference_model, save_inference_model
from tests.static.helpers import building

rng = np.random.default_rng(3)
X = rng.standard_normal((5, 4)).astype(np.float32)


def _model():
    """fc -> cond -> while: control flow must survive the round trip too."""
    with building() as (main, startup):
        x = d2s.static.data("x", [None, 4])
        h = d2s.static.nn.fc(x, 6, activation="tanh")
        h = d2s.static.nn.cond(h.sum() > 0, lambda: h * 2.0, lambda: h - 1.0)
        _, h = d2s.static.nn.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 0.5 + 1.0),
                                        [d2s.zeros([], "int64"), h])
        y = d2s.static.nn.fc(h, 3)
        dead = d2s.static.nn.fc(x, 7)  # not needed for y: pruned away
    return main, startup, x, y, dead


def _saved(tmp_path):
    main, startup, x, y, dead = _model()
    exe = d2s.static.Executor()
    exe.run(startup)
    expected = exe.run(main, feed={"x": X}, fetch_list=[y])[0]
    prefix = str(tmp_path / "model" / "net")
    save_inference_model(prefix, [x], [y], exe)
    return prefix, expected, main, dead


def test_save_writes_the_pruned_program_and_its_parameters(tmp_path):
    prefix, _, main, dead = _saved(tmp_path)
    assert os.path.exists(prefix + ".json") and os.path.exists(prefix + ".safetensors")
    doc = json.loads(open(prefix + ".json").read())
    assert doc["format"] == "dy2stat.program" and doc["version"] == 2
    assert doc["feed"] == ["x"] and len(doc["fetch"]) == 1
    names = {v["name"] for b in doc["blocks"] for v in b["vars"]}
    params = {v["name"] for v in doc["blocks"][0]["vars"] if v["persistable"]}
    assert len(params) == 4  # the two fc layers y needs
    dead_params = {n for op in main.global_block().ops if dead.name in op.output_names()
                   for n in op.input_names() if main.global_block().vars[n].persistable}
    assert dead.name not in names and not (dead_params & names)
    from safetensors.numpy import load_file
    assert set(load_file(prefix + ".safetensors")) == params


def test_load_in_the_same_process(tmp_path):
    prefix, expected, _, _ = _saved(tmp_path)
    exe = d2s.static.Executor()
    program, feed_names, fetch_targets = load_inference_model(prefix, exe)
    assert feed_names == ["x"]
    assert all(isinstance(t, Variable) for t in fetch_targets)
    verify(program, feed_names=feed_names)
    got = exe.run(program, feed={"x": X}, fetch_list=fetch_targets)[0]
    np.testing.assert_array_equal(got, expected)


def test_load_in_a_new_process_gives_the_same_outputs(tmp_path):
    prefix, expected, _, _ = _saved(tmp_path)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npy"
    script = textwrap.dedent(f"""
        import numpy as np
        import dy2stat as d2s
        exe = d2s.static.Executor()
        program, feeds, fetches = d2s.static.load_inference_model({prefix!r}, exe)
        x = np.load({str(tmp_path / "x.npy")!r})
        (y,) = exe.run(program, feed={{feeds[0]: x}}, fetch_list=fetches)
        np.save({str(out)!r}, y)
        print("ops:", sorted({{op.type for op in program.all_ops()}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "'cond'" in result.stdout and "'while'" in result.stdout
    np.testing.assert_array_equal(np.load(out), expected)


# ------------------------------------------------------------ hostile files


@contextlib.contextmanager
def nothing_runs():
    """Loading must not evaluate code or unpickle anything."""

    def forbidden(*args, **kwargs):
        raise AssertionError("loading tried to run code")

    with pytest.MonkeyPatch.context() as mp:
        for name in ("eval", "exec", "compile"):
            mp.setattr(builtins, name, forbidden)
        mp.setattr(pickle, "loads", forbidden)
        mp.setattr(pickle, "load", forbidden)
        yield


def _load(prefix):
    with nothing_runs():
        return load_inference_model(prefix, d2s.static.Executor())


def _load_fails_naming(prefix, filename, *fragments):
    with pytest.raises(FormatError) as info:
        _load(prefix)
    message = str(info.value)
    assert message.startswith(filename), message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def test_truncated_files(tmp_path):
    prefix, *_ = _saved(tmp_path)
    for suffix in (".json", ".safetensors"):
        path = prefix + suffix
        data = open(path, "rb").read()
        for cut in (0, 7, len(data) // 2, len(data) - 2):
            with open(path, "wb") as f:
                f.write(data[:cut])
            _load_fails_naming(prefix, path, "truncated")
        with open(path, "wb") as f:
            f.write(data)


def test_wrong_versions(tmp_path):
    prefix, *_ = _saved(tmp_path)
    doc = json.loads(open(prefix + ".json").read())
    doc["version"] = 99
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f)
    _load_fails_naming(prefix, prefix + ".json", "version 99 is not supported")
    doc["version"] = 1  # a version 1 program records no parameters digest
    del doc["params_sha256"]
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f)
    from safetensors.numpy import load_file, save_file
    params = load_file(prefix + ".safetensors")
    save_file(params, prefix + ".safetensors",
              metadata={"format": "dy2stat.params", "version": "7"})
    _load_fails_naming(prefix, prefix + ".safetensors", "version '7' is not supported")


def test_a_program_that_breaks_the_ir_rules_names_the_field(tmp_path):
    prefix, *_ = _saved(tmp_path)
    doc = json.loads(open(prefix + ".json").read())
    ops = doc["blocks"][0]["ops"]
    ops[0], ops[1] = ops[1], ops[0]  # an op reads a value before it is written
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f)
    err = _load_fails_naming(prefix, prefix + ".json", "is read before any op writes it")
    assert err.field.startswith("blocks[0].ops[0].inputs.")


def _forget_the_digest(prefix):
    """Make the program one saved without its parameters (no digest to pair them)."""
    doc = json.loads(open(prefix + ".json").read())
    del doc["params_sha256"]
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f)


def test_parameters_from_another_save_are_refused_naming_both_files(tmp_path):
    prefix, *_ = _saved(tmp_path)
    from safetensors.numpy import load_file, save_file
    params = load_file(prefix + ".safetensors")
    save_file({k: v + 1 for k, v in params.items()}, prefix + ".safetensors",
              metadata={"format": "dy2stat.params", "version": "1"})
    _load_fails_naming(prefix, prefix + ".safetensors",
                       f"not the parameters saved with {prefix}.json", "different saves")


def test_parameters_that_do_not_match_the_program(tmp_path):
    prefix, *_ = _saved(tmp_path)
    _forget_the_digest(prefix)
    from safetensors.numpy import load_file, save_file
    params = load_file(prefix + ".safetensors")
    name = sorted(params)[0]
    broken = dict(params)
    broken[name] = np.zeros((9, 9), dtype=params[name].dtype)
    save_file(broken, prefix + ".safetensors")
    _load_fails_naming(prefix, prefix + ".safetensors", f"parameter {name!r} has shape [9, 9]")
    broken = dict(params)
    del broken[name]
    save_file(broken, prefix + ".safetensors")
    _load_fails_naming(prefix, prefix + ".safetensors", f"missing parameter {name!r}")


def test_missing_files_name_the_file(tmp_path):
    prefix, *_ = _saved(tmp_path)
    os.remove(prefix + ".safetensors")
    with pytest.raises(OSError) as info:  # docs/format.md: a missing file is an OSError
        load_inference_model(prefix, d2s.static.Executor())
    assert prefix + ".safetensors" in str(info.value)
    with pytest.raises(OSError) as info:
        load_inference_model(str(tmp_path / "nowhere"), d2s.static.Executor())
    assert "nowhere.json" in str(info.value)


_SAVED = {}


def _saved_bytes(tmp_path_factory):
    if not _SAVED:
        folder = tmp_path_factory.mktemp("hostile")
        prefix, *_ = _saved(folder)
        for suffix in (".json", ".safetensors"):
            _SAVED[suffix] = open(prefix + suffix, "rb").read()
    return _SAVED


@settings(max_examples=int(os.environ.get("D2S_HOSTILE_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from([".json", ".safetensors"]),
       edits=st.lists(st.tuples(st.integers(0, 10**6),
                                st.sampled_from(b'{}[]",:0123456789-.eE tfnul') |
                                st.integers(0, 255)), min_size=1, max_size=4))
def test_corrupted_files_fail_cleanly(tmp_path_factory, which, edits):
    saved = _saved_bytes(tmp_path_factory)
    folder = tmp_path_factory.mktemp("case")
    prefix = str(folder / "net")
    for suffix, data in saved.items():
        if suffix == which:
            data = bytearray(data)
            for position, value in edits:
                data[position % len(data)] = value
        with open(prefix + suffix, "wb") as f:
            f.write(bytes(data))
    try:
        program, feeds, fetches = _load(prefix)
    except FormatError as e:
        # the damaged file, or the parameters checked against a damaged program
        assert str(e).startswith((prefix + which, prefix + ".safetensors")), str(e)
        return
    verify(program, feed_names=feeds)  # what loads is a well-formed program


# ----------------------------------------------------------- feed errors


def _feed_program():
    with building() as (main, _):
        x = d2s.static.data("x", [None, 4])
        n = d2s.static.data("n", [], "int64")
        y = x * n.astype("float32")
    return main, y


def test_feed_with_the_wrong_shape_names_it():
    main, y = _feed_program()
    exe = d2s.static.Executor()
    with pytest.raises(ValueError, match=r"feed 'x': expected shape \[-1, 4\], got \[2, 5\]"):
        exe.run(main, feed={"x": np.ones((2, 5), np.float32), "n": np.array(2)}, fetch_list=[y])
    with pytest.raises(ValueError, match=r"feed 'x': expected shape \[-1, 4\], got \[4\]"):
        exe.run(main, feed={"x": np.ones(4, np.float32), "n": np.array(2)}, fetch_list=[y])


def test_feed_with_the_wrong_dtype_names_it():
    main, y = _feed_program()
    exe = d2s.static.Executor()
    with pytest.raises(TypeError, match="feed 'x': expected float32, got float64"):
        exe.run(main, feed={"x": np.ones((2, 4)), "n": np.array(2)}, fetch_list=[y])
    with pytest.raises(TypeError, match="feed 'n': expected int64, got float32"):
        exe.run(main, feed={"x": np.ones((2, 4), np.float32), "n": np.float32(2)},
                fetch_list=[y])


def test_missing_and_unknown_feeds_are_named():
    main, y = _feed_program()
    exe = d2s.static.Executor()
    with pytest.raises(ValueError, match="feed 'n' is missing"):
        exe.run(main, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=[y])
    with pytest.raises(ValueError, match="feed 'nope'"):
        exe.run(main, feed={"x": np.ones((2, 4), np.float32), "n": np.array(1),
                            "nope": np.ones(1)}, fetch_list=[y])
    got = exe.run(main, feed={"x": np.ones((2, 4), np.float32), "n": np.array(3)},
                  fetch_list=[y])[0]
    np.testing.assert_array_equal(got, np.full((2, 4), 3.0, np.float32))
