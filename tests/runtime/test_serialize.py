"""Program (JSON) and parameter (safetensors) files: round trips and hostile files."""

from __future__ import annotations

import builtins
import copy
import json
import math
import pickle
import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dy2stat.runtime import serialize as S
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.serialize import FormatError
from tests.runtime import programs as P

FEED, FETCH = ["x"], ["y"]


def mlp_doc():
    program, _ = P.mlp()
    return S.program_to_dict(program, FEED, FETCH)


def load_doc(doc, source="model.json"):
    return S.program_from_json(json.dumps(doc), source)


def expect_error(doc, *fragments, source="model.json"):
    with pytest.raises(FormatError) as info:
        load_doc(doc, source)
    message = str(info.value)
    assert message.startswith(f"{source}: "), message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def random_params():
    rng = np.random.default_rng(1)
    return {
        "w32": rng.standard_normal((3, 4)).astype(np.float32),
        "w64": rng.standard_normal((2, 2, 2)),
        "w16": rng.standard_normal(5).astype(np.float16),
        "scalar": np.array(2.5, dtype=np.float32),  # 0-d
        "scalar_int": np.array(-7, dtype=np.int64),
        "mask": np.array([[True, False], [False, True]]),
        "bytes": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "i8": np.array([-128, 127], dtype=np.int8),
        "i16": np.array([1, -2], dtype=np.int16),
        "i32": np.array([[1], [2]], dtype=np.int32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "specials": np.array([np.inf, -np.inf, np.nan, -0.0], dtype=np.float32),
        "strided": np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2],  # not contiguous
    }


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# --------------------------------------------------------------- round trips


def test_program_round_trip_is_exact():
    program, _ = P.mlp()
    program.random_seed = 1234
    doc = S.program_to_dict(program, FEED, FETCH)
    text = json.dumps(doc)
    loaded, feed, fetch = S.program_from_json(text, "model.json")
    assert (feed, fetch) == (FEED, FETCH)
    assert str(loaded) == str(program)
    assert loaded.random_seed == 1234
    assert json.dumps(S.program_to_dict(loaded, feed, fetch)) == text
    for a, b in zip(program.list_vars(), loaded.list_vars()):
        assert a == b and type(a.shape) is tuple
    scale = loaded.global_block().ops[-1]
    assert scale.attrs["scale"] == 2.0 and math.isnan(scale.attrs["bias"])


def test_document_layout():
    doc = mlp_doc()
    assert doc["format"] == "dy2stat.program" and doc["version"] == 2
    assert doc["feed"] == FEED and doc["fetch"] == FETCH
    (block,) = doc["blocks"]
    assert block["idx"] == 0 and block["parent_idx"] == -1
    assert block["vars"][0] == {"name": "x", "shape": [-1, 4], "dtype": "float32",
                                "persistable": False, "is_data": True, "stop_gradient": False}
    assert block["ops"][0] == {"type": "matmul", "inputs": {"X": ["x"], "Y": ["fc_0.w"]},
                               "outputs": {"Out": ["h"]}, "attrs": {}}
    # non-finite floats are tagged; the text is strict JSON (no NaN/Infinity literals)
    assert block["ops"][4]["attrs"] == {"scale": 2.0, "bias": {"float": "nan"}}
    text = S.program_to_json(P.mlp()[0])
    json.loads(text, parse_constant=lambda c: pytest.fail(f"literal {c} in output"))


@pytest.mark.parametrize("value", [
    None, True, False, 0, -3, 2**70, 1.5, -0.0, 1e-300, math.inf, -math.inf, "text",
    [1, [2.5, None]], (1, 2), ((0, -1), [True]), {"a": (1,), "b": [math.inf]},
    np.dtype("int64"), np.float32(0.1), np.int64(5), np.bool_(True),
    np.array([[1.5, -np.inf], [0.0, 3.0]], dtype=np.float32), np.array(True),
    ["slice", None, 3, None], [["ellipsis"], ["none"], ["list", [0, 1]]],
])
def test_attr_values_round_trip(value):
    encoded = S.encode_attr(value)
    text = json.dumps(encoded, allow_nan=False)
    decoded = S._ProgramReader("t.json").attr_value(json.loads(text), "attr", 0)
    expected = value
    if isinstance(value, np.generic):
        expected = value.item()
    if isinstance(value, np.ndarray):
        assert same_bits(decoded, value)
        return
    assert repr(decoded) == repr(expected)
    assert type(decoded) is type(expected)


def test_unsavable_attr_names_op_and_attr():
    program, _ = P.mlp()
    program.global_block().ops[3].attrs["max"] = object()
    with pytest.raises(TypeError, match=r"blocks\[0\].ops\[3\] \(clip\): attr 'max'"):
        S.program_to_dict(program)


def test_cond_program_round_trip():
    program = P.with_cond()
    loaded, feed, fetch = load_doc(S.program_to_dict(program, ["x", "pred"], ["y", "w"]))
    assert str(loaded) == str(program)
    assert [b.parent_idx for b in loaded.blocks] == [-1, 0, 0, 0, 0]
    x = np.array([-1.0, 2.0], dtype=np.float32)
    for pred in (True, False):
        feed_values = {"x": x, "pred": np.array(pred)}
        expected = P.run(program, feed_values, {}, ["y", "z", "w"])
        got = P.run(loaded, feed_values, {}, ["y", "z", "w"])
        for a, b in zip(expected, got):
            assert same_bits(a, b)


def test_while_program_round_trip():
    program = P.with_while()
    loaded, _, _ = load_doc(S.program_to_dict(program, ["n"], ["i"]))
    assert str(loaded) == str(program)
    feed, params = {"n": np.array(10)}, {"step": np.array(3)}
    assert P.run(loaded, feed, params, ["i"])[0] == P.run(program, feed, params, ["i"])[0] == 12
    doc = S.program_to_dict(program, ["n"], ["i"])
    doc["blocks"][0]["ops"][1]["attrs"]["cond_out"] = 5
    expect_error(doc, "blocks[0].ops[1].attrs.cond_out: expected a variable name, got an integer")


def test_params_round_trip_bit_exact(tmp_path):
    params = random_params()
    path = tmp_path / "model.safetensors"
    S.save_params(path, params)
    loaded = S.load_params(path)
    assert sorted(loaded) == sorted(params)
    for name, value in params.items():
        assert same_bits(loaded[name], value), name
    assert loaded["scalar"].shape == () and loaded["mask"].dtype == np.bool_


def test_empty_params_round_trip(tmp_path):
    S.save_params(tmp_path / "p.safetensors", {})
    assert S.load_params(tmp_path / "p.safetensors") == {}


def test_save_and_load_model_files(tmp_path):
    program, params = P.mlp()
    prefix = tmp_path / "model"
    S.save_model(prefix, program, FEED, FETCH, params)
    assert (tmp_path / "model.json").exists() and (tmp_path / "model.safetensors").exists()
    loaded, feed, fetch, loaded_params = S.load_model(prefix)
    assert (feed, fetch) == (FEED, FETCH)
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    (expected,) = P.run(program, {"x": x}, params, ["y"])
    (got,) = P.run(loaded, {"x": x}, loaded_params, fetch)
    assert same_bits(expected, got)
    assert not list(tmp_path.glob(".tmp-*"))  # atomic writes leave no temp files


def test_save_program_and_load_program(tmp_path):
    program = P.with_cond()
    S.save_program(tmp_path / "m.json", program, ["x", "pred"], ["y"])
    loaded, feed, fetch = S.load_program(tmp_path / "m.json")
    assert str(loaded) == str(program) and feed == ["x", "pred"] and fetch == ["y"]


def test_program_from_dict_returns_the_program():
    program = S.program_from_dict(mlp_doc(), "m.json")
    assert isinstance(program, Program) and len(program.global_block().ops) == 5


def test_feed_and_fetch_are_optional():
    doc = mlp_doc()
    del doc["feed"], doc["fetch"]
    _, feed, fetch = load_doc(doc)
    assert feed == [] and fetch == []


def test_var_flags_default_to_false():
    doc = mlp_doc()
    for var in doc["blocks"][0]["vars"]:
        if not (var["persistable"] or var["is_data"]):
            del var["persistable"], var["is_data"], var["stop_gradient"]
    load_doc(doc)


# ------------------------------------------------------------ program errors


def test_wrong_version():
    doc = mlp_doc()
    doc["version"] = 7
    expect_error(doc, "model.json: version 7 is not supported "
                      "(this dy2stat reads versions 1 and 2)")


@pytest.mark.parametrize("version, fragment", [
    ("1", "version: expected an integer, got a string"),
    (True, "version: expected an integer, got a boolean"),
    (1.0, "version: expected an integer, got a number"),
])
def test_version_must_be_an_int(version, fragment):
    doc = mlp_doc()
    doc["version"] = version
    expect_error(doc, fragment)


def test_missing_version_and_wrong_format():
    doc = mlp_doc()
    del doc["version"]
    expect_error(doc, "version: missing")
    doc = mlp_doc()
    doc["format"] = "paddle.program"
    expect_error(doc, "format: expected 'dy2stat.program', got 'paddle.program'")
    doc = mlp_doc()
    del doc["format"]
    expect_error(doc, "format: missing")


@pytest.mark.parametrize("doc, fragment", [
    ([], "expected a JSON object at the top level, got a list"),
    ("program", "expected a JSON object at the top level, got a string"),
    (None, "expected a JSON object at the top level, got null"),
])
def test_top_level_type(doc, fragment):
    expect_error(doc, fragment)


def test_unknown_op_type():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][3]["type"] = "foo"
    expect_error(doc, "model.json: blocks[0].ops[3].type: unknown op type 'foo'")


def test_op_type_not_a_string():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][1]["type"] = ["add"]
    expect_error(doc, "blocks[0].ops[1].type: expected a string, got a list")


def test_unknown_slot():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["inputs"]["Z"] = ["x"]
    expect_error(doc, "blocks[0].ops[0].inputs.Z: op 'matmul' has no slot 'Z' (slots: X, Y)")
    doc = mlp_doc()
    doc["blocks"][0]["ops"][2]["outputs"] = {"Y": ["r"]}
    expect_error(doc, "blocks[0].ops[2].outputs.Y: op 'relu' has no slot 'Y'")


def test_missing_and_overfull_slots():
    doc = mlp_doc()
    del doc["blocks"][0]["ops"][0]["inputs"]["Y"]
    expect_error(doc, "blocks[0].ops[0].inputs.Y: missing (op 'matmul' requires it)")
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["inputs"]["Y"] = ["fc_0.w", "x"]
    expect_error(doc, "blocks[0].ops[0].inputs.Y: expected one name, got 2")
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["inputs"]["Y"] = []
    expect_error(doc, "blocks[0].ops[0].inputs.Y: expected one name, got none")
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["inputs"]["Y"] = "fc_0.w"
    expect_error(doc, "blocks[0].ops[0].inputs.Y: expected a list, got a string")


def test_undefined_variable():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][1]["inputs"]["Y"] = ["nope"]
    expect_error(doc, "blocks[0].ops[1].inputs.Y[0]: variable 'nope' is not defined in block 0")


def test_use_before_definition():
    doc = mlp_doc()
    ops = doc["blocks"][0]["ops"]
    ops[0], ops[1] = ops[1], ops[0]  # add reads h before matmul writes it
    expect_error(doc, "blocks[0].ops[0].inputs.X[0]: 'h' is read before any op writes it")


def test_unknown_attr():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["transpose_z"] = True
    expect_error(doc, "blocks[0].ops[0].attrs.transpose_z: op 'matmul' has no attr "
                      "'transpose_z' (attrs: transpose_x, transpose_y)")


def test_bad_attr_value_fails_inference():
    doc = mlp_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["transpose_y"] = True  # [-1, 4] @ [3, 4]: mismatch
    expect_error(doc, "blocks[0].ops[0]: op 'matmul' does not accept its inputs/attrs")


def test_declared_output_must_match_inference():
    doc = mlp_doc()
    doc["blocks"][0]["vars"][3]["shape"] = [-1, 7]  # h = x @ w is [-1, 3]
    expect_error(doc, "blocks[0].ops[0].outputs.Out[0]: 'h' is declared float32[-1, 7] but "
                      "op 'matmul' computes float32[-1, 3]")
    doc = mlp_doc()
    doc["blocks"][0]["vars"][3]["dtype"] = "float64"
    expect_error(doc, "'h' is declared float64[-1, 3]")


@pytest.mark.parametrize("tag, fragment", [
    ({"float": "Infinity"}, "attrs.bias.float: expected 'inf', '-inf' or 'nan'"),
    ({"code": "__import__('os')"}, "attrs.bias: unknown tag 'code'"),
    ({"float": "inf", "x": 1}, "attrs.bias: expected a tagged value"),
    ({"dtype": "object"}, "attrs.bias.dtype: unknown dtype 'object'"),
    ({"ndarray": {"dtype": "float32", "shape": [2], "data": [1.0]}},
     "attrs.bias.ndarray.data: expected 2 values for shape [2], got 1"),
    ({"ndarray": {"dtype": "int8", "shape": [1], "data": [1000]}},
     "attrs.bias.ndarray.data: values do not fit dtype int8"),
    ({"ndarray": {"dtype": "float32", "shape": [1], "data": ["1"]}},
     "attrs.bias.ndarray.data[0]: expected a number, got a string"),
])
def test_bad_tagged_attrs(tag, fragment):
    doc = mlp_doc()
    doc["blocks"][0]["ops"][4]["attrs"]["bias"] = tag
    expect_error(doc, fragment)


def test_deeply_nested_attr():
    doc = mlp_doc()
    value = 1.0
    for _ in range(100):
        value = [value]
    doc["blocks"][0]["ops"][4]["attrs"]["bias"] = value
    expect_error(doc, "nested deeper than 32 levels")


@pytest.mark.parametrize("shape", [[-2, 4], [4.0], "4", [True, 3], None, [[4]]])
def test_bad_shapes(shape):
    doc = mlp_doc()
    doc["blocks"][0]["vars"][2]["shape"] = shape
    expect_error(doc, "model.json: blocks[0].vars[2].shape: expected a list of ints >= -1")


@pytest.mark.parametrize("dtype", ["float", "complex64", "object", "<f4", "bfloat16", 5, None])
def test_bad_dtypes(dtype):
    doc = mlp_doc()
    doc["blocks"][0]["vars"][1]["dtype"] = dtype
    expect_error(doc, "blocks[0].vars[1].dtype: unknown dtype")


def test_bad_var_fields():
    doc = mlp_doc()
    doc["blocks"][0]["vars"][0]["persistable"] = "yes"
    expect_error(doc, "blocks[0].vars[0].persistable: expected true or false, got a string")
    doc = mlp_doc()
    doc["blocks"][0]["vars"][0]["persistible"] = True
    expect_error(doc, "blocks[0].vars[0].persistible: unknown field")
    doc = mlp_doc()
    del doc["blocks"][0]["vars"][0]["name"]
    expect_error(doc, "blocks[0].vars[0].name: missing")
    doc = mlp_doc()
    doc["blocks"][0]["vars"][1]["name"] = "x"
    expect_error(doc, "blocks[0].vars[1].name: variable 'x' is defined twice in block 0")
    doc = mlp_doc()
    doc["blocks"][0]["vars"][1]["name"] = ""
    expect_error(doc, "blocks[0].vars[1].name: expected a non-empty string")


def test_bad_block_fields():
    doc = mlp_doc()
    doc["blocks"] = []
    expect_error(doc, "blocks: expected at least one block")
    doc = mlp_doc()
    doc["blocks"][0]["idx"] = 3
    expect_error(doc, "blocks[0].idx: expected 0")
    doc = mlp_doc()
    doc["blocks"][0]["parent_idx"] = 0
    expect_error(doc, "blocks[0].parent_idx: the global block has no parent (-1), got 0")
    doc = mlp_doc()
    doc["blocks"][0]["ops"] = {}
    expect_error(doc, "blocks[0].ops: expected a list, got an object")
    doc = mlp_doc()
    doc["extra"] = 1
    expect_error(doc, "extra: unknown field")


def cond_doc():
    return S.program_to_dict(P.with_cond(), ["x", "pred"], ["y"])


def test_sub_block_index_out_of_range():
    doc = cond_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["true_block"] = 9
    expect_error(doc, "blocks[0].ops[0].attrs.true_block: expected a sub-block index (1 to 4), "
                      "got 9")
    doc = cond_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["false_block"] = 0
    expect_error(doc, "attrs.false_block: expected a sub-block index")
    doc = cond_doc()
    del doc["blocks"][0]["ops"][0]["attrs"]["false_block"]
    expect_error(doc, "blocks[0].ops[0].attrs.false_block: missing (op 'cond' needs a sub-block")


def test_sub_block_cycle():
    doc = cond_doc()
    # block 1 gets a cond whose true branch is block 1 itself
    doc["blocks"][1]["ops"].append({
        "type": "cond", "inputs": {"Cond": ["pred"], "Input": []}, "outputs": {"Out": []},
        "attrs": {"true_block": 1, "false_block": 2, "true_outs": [], "false_outs": []}})
    expect_error(doc, "blocks[1].ops[1].attrs.true_block: block 1 contains", "a cycle")


def test_sub_block_parent_must_come_first():
    doc = cond_doc()
    doc["blocks"][1]["parent_idx"] = 3
    expect_error(doc, "blocks[1].parent_idx: expected a block listed before this one")


def test_control_flow_name_attrs_are_checked():
    doc = cond_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["true_outs"] = ["ghost"]
    expect_error(doc, "attrs.true_outs[0]: variable 'ghost' is not declared in any block")
    doc = cond_doc()
    doc["blocks"][0]["ops"][0]["attrs"]["true_outs"] = "relu_0"
    expect_error(doc, "attrs.true_outs: expected a list of variable names, got a string")


def test_feed_and_fetch_must_name_global_vars():
    doc = mlp_doc()
    doc["fetch"] = ["y", "nope"]
    expect_error(doc, "fetch[1]: 'nope' is not a variable of the global block")
    doc = mlp_doc()
    doc["feed"] = ["x", "x"]
    expect_error(doc, "feed[1]: 'x' is listed twice")
    doc = mlp_doc()
    doc["feed"] = "x"
    expect_error(doc, "feed: expected a list, got a string")


def test_json_syntax_errors_name_line_and_column():
    text = json.dumps(mlp_doc(), indent=1)
    lines = text.splitlines()
    lines[5] = lines[5] + ","  # a stray comma
    with pytest.raises(FormatError, match=r"model.json: invalid JSON at line \d+ column \d+"):
        S.program_from_json("\n".join(lines), "model.json")


def test_truncated_json(tmp_path):
    program, _ = P.mlp()
    path = tmp_path / "model.json"
    S.save_program(path, program, FEED, FETCH)
    data = path.read_bytes()
    for cut in [0, 1, len(data) // 3, len(data) // 2, len(data) - 3]:
        path.write_bytes(data[:cut])
        with pytest.raises(FormatError, match=r"model.json: invalid JSON at line \d+ column \d+"):
            S.load_program(path)


def test_json_literals_and_duplicates_are_rejected():
    with pytest.raises(FormatError, match="the literal NaN is not allowed"):
        S.program_from_json('{"format": NaN}', "m.json")
    with pytest.raises(FormatError, match="the key 'version' appears twice"):
        S.program_from_json('{"version": 1, "version": 2}', "m.json")
    with pytest.raises(FormatError, match="not UTF-8 text"):
        S.program_from_json(b'{"format": "\xff"}', "m.json")
    with pytest.raises(FormatError, match="nested too deeply"):
        S.program_from_json("[" * 100000 + "]" * 100000, "m.json")


def test_format_error_is_a_value_error_and_pickles():
    err = FormatError("m.json", "blocks[0]", "bad")
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == "m.json: blocks[0]: bad"
    assert (again.source, again.field, again.reason) == ("m.json", "blocks[0]", "bad")


# ---------------------------------------------------------- nothing executes


@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    """Fail the test if loading evaluates code or unpickles anything."""

    def forbidden(*args, **kwargs):
        raise AssertionError("loading tried to run code")

    real_import = builtins.__import__

    def guarded_import(name, *args, **kwargs):
        if name in ("os", "subprocess") and args and args[0] is None:
            raise AssertionError(f"loading imported {name} by name")
        return real_import(name, *args, **kwargs)

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    monkeypatch.setattr(builtins, "__import__", guarded_import)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    return tmp_path / "pwned"


def test_code_in_a_file_is_only_text(nothing_runs, tmp_path):
    sentinel = nothing_runs
    payload = f"__import__('os').system('touch {sentinel}')"
    program, params = P.mlp()
    # a variable whose name is code: a legal name, loaded as a plain string
    g = program.global_block()
    g.vars[payload] = g.vars.pop("y")
    g.vars[payload].name = payload
    g.ops[3].outputs["Out"] = [payload]
    doc = S.program_to_dict(program, FEED, [payload])
    loaded, _, fetch = load_doc(doc)
    assert fetch == [payload] and payload in loaded.global_block().vars
    # code in an attr that takes a string: rejected as a bad value, not run
    doc = mlp_doc()
    doc["blocks"][0]["ops"].append({"type": "cast", "inputs": {"X": ["y"]},
                                    "outputs": {"Out": ["dead"]}, "attrs": {"dtype": payload}})
    expect_error(doc, "blocks[0].ops[5].attrs.dtype: expected a dtype name")
    # pickle/dunder smuggling: unknown fields and tags
    doc = mlp_doc()
    doc["__reduce__"] = ["os.system", ["touch " + str(sentinel)]]
    expect_error(doc, "__reduce__: unknown field")
    doc = mlp_doc()
    doc["blocks"][0]["ops"][4]["attrs"]["bias"] = {"__class__": "os.system"}
    expect_error(doc, "unknown tag '__class__'")
    # a pickle where the parameters should be
    path = tmp_path / "evil.safetensors"
    path.write_bytes(b"\x80\x04\x95" + b"cos\nsystem\n(S'touch " + str(sentinel).encode()
                     + b"'\ntR.")
    with pytest.raises(FormatError, match="evil.safetensors: not a valid safetensors file"):
        S.load_params(path)
    # safetensors metadata is only strings
    S.save_params(tmp_path / "ok.safetensors", params)
    assert not sentinel.exists()


# -------------------------------------------------------------- param errors


def write_params(tmp_path, params, name="model.safetensors"):
    path = tmp_path / name
    S.save_params(path, params)
    return path


def test_missing_parameter(tmp_path):
    program, params = P.mlp()
    del params["fc_0.w"]
    path = write_params(tmp_path, params)
    with pytest.raises(FormatError) as info:
        S.load_params(path, program)
    assert str(info.value) == f"{path}: missing parameter 'fc_0.w'"


def test_extra_parameter(tmp_path):
    program, params = P.mlp()
    params["stray"] = np.zeros(2, np.float32)
    path = write_params(tmp_path, params)
    with pytest.raises(FormatError, match="unexpected parameter 'stray'"):
        S.load_params(path, program)


def test_misshaped_parameter(tmp_path):
    program, params = P.mlp()
    params["fc_0.w"] = np.zeros((3, 4), np.float32)
    path = write_params(tmp_path, params)
    with pytest.raises(FormatError) as info:
        S.load_params(path, program)
    assert str(info.value) == (f"{path}: parameter 'fc_0.w' has shape [3, 4] but the program "
                               "declares [4, 3]")


def test_mistyped_parameter(tmp_path):
    program, params = P.mlp()
    params["fc_0.b"] = params["fc_0.b"].astype(np.float64)
    path = write_params(tmp_path, params)
    with pytest.raises(FormatError, match="parameter 'fc_0.b' has dtype float64 but the "
                                          "program declares float32"):
        S.load_params(path, program)


def test_load_model_checks_params(tmp_path):
    program, params = P.mlp()
    S.save_program(tmp_path / "m.json", program, FEED, FETCH)
    S.save_params(tmp_path / "m.safetensors", {"fc_0.w": params["fc_0.w"]})
    with pytest.raises(FormatError, match="m.safetensors: missing parameter 'fc_0.b'"):
        S.load_model(tmp_path / "m")


def test_save_model_refuses_mismatched_params(tmp_path):
    program, params = P.mlp()
    del params["fc_0.b"]
    with pytest.raises(FormatError, match="missing parameter 'fc_0.b'"):
        S.save_model(tmp_path / "m", program, FEED, FETCH, params)


def test_truncated_safetensors(tmp_path):
    path = write_params(tmp_path, random_params())
    data = path.read_bytes()
    for cut in sorted({0, 3, 8, 9, 20, len(data) // 2, len(data) - 1}):
        path.write_bytes(data[:cut])
        with pytest.raises(FormatError, match=r"model.safetensors: .*(truncated\?|invalid JSON)"):
            S.load_params(path)


def test_safetensors_with_wrong_metadata(tmp_path):
    import safetensors.numpy

    path = tmp_path / "p.safetensors"
    path.write_bytes(safetensors.numpy.save({"a": np.zeros(1, np.float32)},
                                            metadata={"format": "pt"}))
    with pytest.raises(FormatError, match="header.__metadata__.format: expected 'dy2stat.params'"):
        S.load_params(path)
    path.write_bytes(safetensors.numpy.save({"a": np.zeros(1, np.float32)},
                                            metadata={"format": "dy2stat.params", "version": "9"}))
    with pytest.raises(FormatError, match="parameter format version '9' is not supported"):
        S.load_params(path)
    # plain safetensors files (no metadata) are accepted
    path.write_bytes(safetensors.numpy.save({"a": np.zeros(1, np.float32)}))
    assert list(S.load_params(path)) == ["a"]


def test_safetensors_with_unsupported_dtype(tmp_path):
    import safetensors.numpy

    path = tmp_path / "p.safetensors"
    path.write_bytes(safetensors.numpy.save({"a": np.zeros(2, np.uint32)}))
    with pytest.raises(FormatError, match="parameter 'a' has unsupported dtype uint32"):
        S.load_params(path)


def test_safetensors_header_lies_about_sizes():
    header = json.dumps({"a": {"dtype": "F32", "shape": [1000, 1000],
                               "data_offsets": [0, 4000000]}}).encode()
    data = struct.pack("<Q", len(header)) + header + b"\0" * 16
    with pytest.raises(FormatError, match=r"header.a.data_offsets: expected \[begin, end\] "
                                          "within the 16 bytes of data"):
        S.params_from_bytes(data, "p.safetensors")
    data = struct.pack("<Q", 2**63) + b"{}"
    with pytest.raises(FormatError, match="header claims"):
        S.params_from_bytes(data, "p.safetensors")


# ------------------------------------------------ hypothesis: mutated files

_PROGRAM_BYTES = S.program_to_json(P.with_cond(), ["x", "pred"], ["y"]).encode()
_MLP_BYTES = S.program_to_json(P.mlp()[0], FEED, FETCH).encode()
_WHILE_BYTES = S.program_to_json(P.with_while(), ["n"], ["i"]).encode()
_PARAMS_BYTES = __import__("safetensors.numpy").numpy.save(
    random_params(), metadata={"format": "dy2stat.params", "version": "1"})

_MUTATION_SETTINGS = settings(max_examples=300, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])


def _mutate(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        out[position % len(out)] = value
    return bytes(out)


_edits = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4)
# JSON-flavoured bytes hit the structure more often than random ones
_json_bytes = st.sampled_from(b'{}[]",:0123456789-.eE tfnul\\') | st.integers(0, 255)
_json_edits = st.lists(st.tuples(st.integers(0, 10**6), _json_bytes), min_size=1, max_size=4)


def _load_or_format_error(data: bytes):
    try:
        program, feed, fetch = S.program_from_json(data, "model.json")
    except FormatError as e:
        assert str(e).startswith("model.json"), str(e)
        return
    # a mutation that still loads gives a valid program that saves and reloads the same
    again = S.program_to_json(program, feed, fetch)
    reloaded, _, _ = S.program_from_json(again, "again.json")
    assert str(reloaded) == str(program)


@_MUTATION_SETTINGS
@given(edits=_json_edits | _edits,
       data=st.sampled_from([_PROGRAM_BYTES, _MLP_BYTES, _WHILE_BYTES]))
def test_mutated_program_files_fail_cleanly(edits, data):
    _load_or_format_error(_mutate(data, edits))


@_MUTATION_SETTINGS
@given(cut=st.integers(0, len(_MLP_BYTES)), edits=st.lists(
    st.tuples(st.integers(0, 10**6), _json_bytes), max_size=2))
def test_truncated_and_mutated_program_files_fail_cleanly(cut, edits):
    data = _MLP_BYTES[:cut]
    if data and edits:
        data = _mutate(data, edits)
    _load_or_format_error(data)


@_MUTATION_SETTINGS
@given(path=st.lists(st.sampled_from(["blocks", 0, "vars", "ops", 1, 2, "inputs", "attrs",
                                      "shape", "X", "Out", "type", "dtype", "outputs"]),
                     min_size=1, max_size=5),
       value=st.recursive(st.none() | st.booleans() | st.integers(-3, 10**20) | st.floats()
                          | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                          max_leaves=8))
def test_structurally_mutated_documents_fail_cleanly(path, value):
    """Replace one field (reached by a random path) with a random JSON value."""
    doc = copy.deepcopy(S.program_to_dict(P.with_cond(), ["x", "pred"], ["y"]))
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict) and isinstance(key, str) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
    last = path[-1]
    if isinstance(node, dict):
        node[str(last)] = value
    elif isinstance(node, list) and node:
        node[last if isinstance(last, int) and last < len(node) else 0] = value
    try:
        text = json.dumps(doc, allow_nan=False)
    except ValueError:  # a non-finite float: not JSON; check the dict path instead
        try:
            S.program_from_dict(doc, "model.json")
        except FormatError:
            pass
        return
    _load_or_format_error(text.encode())


@_MUTATION_SETTINGS
@given(edits=_edits)
def test_mutated_params_files_fail_cleanly(edits):
    program = Program()
    g = program.global_block()
    for name, value in random_params().items():
        g.create_var(value.shape, value.dtype, name=name, persistable=True)
    try:
        params = S.params_from_bytes(_mutate(_PARAMS_BYTES, edits), "model.safetensors")
        S.check_params(program, params, "model.safetensors")
    except FormatError as e:
        assert str(e).startswith("model.safetensors"), str(e)


@_MUTATION_SETTINGS
@given(cut=st.integers(0, len(_PARAMS_BYTES) - 1))
def test_truncated_params_files_fail_cleanly(cut):
    with pytest.raises(FormatError, match="model.safetensors"):
        S.params_from_bytes(_PARAMS_BYTES[:cut], "model.safetensors")


def test_every_truncation_of_a_program_fails_cleanly():
    for cut in range(0, len(_PROGRAM_BYTES) - 1, 7):
        with pytest.raises(FormatError):
            S.program_from_json(_PROGRAM_BYTES[:cut], "model.json")


def test_operator_ir_helpers_still_match():
    # the loader builds ir.Operator objects; sub_blocks() sees the block attrs
    program, _, _ = load_doc(cond_doc())
    first = program.global_block().ops[0]
    assert isinstance(first, Operator) and sorted(first.sub_blocks()) == [1, 2]
    assert len(list(program.all_ops())) == len(program.global_block().ops) + 4


def test_the_example_in_docs_format_md_loads():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "format.md").read_text()
    example = text.split("### An example", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    program, feed, fetch = S.program_from_json(example, "format.md")
    assert (feed, fetch) == (["x"], ["y"])
    assert [op.type for op in program.global_block().ops] == ["matmul", "clip"]
    assert program.global_block().ops[1].attrs["min"] == -math.inf


def test_load_in_a_new_process(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    program, params = P.mlp()
    S.save_model(tmp_path / "m", program, FEED, FETCH, params)
    x = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = (
        "import numpy as np\n"
        "from dy2stat.runtime import serialize as S\n"
        "from tests.runtime import programs as P\n"
        f"prog, feed, fetch, params = S.load_model({str(tmp_path / 'm')!r})\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r}, allow_pickle=False)\n"
        "(y,) = P.run(prog, {feed[0]: x}, params, fetch)\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, y, allow_pickle=False)\n"
    )
    root = Path(__file__).parents[2]
    subprocess.run([sys.executable, "-c", script], check=True, cwd=root, timeout=120)
    (expected,) = P.run(program, {"x": x}, params, FETCH)
    assert same_bits(np.load(tmp_path / "y.npy", allow_pickle=False), expected)


def test_where_an_op_was_built_round_trips_as_text_and_is_checked():
    program, _ = P.mlp()
    op = program.global_block().ops[0]
    op.origin = '  File "model.py", line 12\n    h = x @ w'
    doc = S.program_to_dict(program, FEED, FETCH)
    assert doc["blocks"][0]["ops"][0]["origin"] == op.origin
    assert "origin" not in doc["blocks"][0]["ops"][1]  # nothing recorded: left out
    loaded, _, _ = S.program_from_json(json.dumps(doc), "model.json")
    assert loaded.global_block().ops[0].origin == op.origin
    doc["blocks"][0]["ops"][0]["origin"] = "x" * 5000  # kept, cut to the limit
    loaded, _, _ = S.program_from_json(json.dumps(doc), "model.json")
    assert len(loaded.global_block().ops[0].origin) == S.ORIGIN_LIMIT
    doc["blocks"][0]["ops"][0]["origin"] = {"code": "import os"}
    with pytest.raises(S.FormatError, match=r"model\.json.*ops\[0\]\.origin.*expected a string"):
        S.program_from_json(json.dumps(doc), "model.json")


def test_the_layer_scope_of_an_op_round_trips_and_is_checked(tmp_path):
    program, params = P.mlp()
    ops = program.global_block().ops
    ops[0].scope, ops[1].scope = "MLP/fc", "MLP/\x1b[2J<b>"  # text only, kept as it is
    S.save_model(tmp_path / "m", program, FEED, FETCH, params)
    loaded, _, _, _ = S.load_model(tmp_path / "m")
    assert [op.scope for op in loaded.global_block().ops] == [op.scope for op in ops]
    doc = S.program_to_dict(program, FEED, FETCH)
    assert "scope" not in doc["blocks"][0]["ops"][2]  # nothing recorded: left out
    ops[0].scope = "Net/" + "deep/" * 200  # saved cut to the limit, never with an empty name
    saved = S.program_to_dict(program, FEED, FETCH)["blocks"][0]["ops"][0]["scope"]
    assert len(saved) <= S.SCOPE_LIMIT and all(saved.split("/"))
    for bad, message in [({"path": "Net"}, "expected a string, got an object"),
                         ("x" * (S.SCOPE_LIMIT + 1), f"longer than {S.SCOPE_LIMIT} characters"),
                         ("Net//fc", "expected names joined by '/'"),
                         ("/Net", "expected names joined by '/'")]:
        doc["blocks"][0]["ops"][0]["scope"] = bad
        with pytest.raises(S.FormatError, match=r"model\.json: blocks\[0\]\.ops\[0\]\.scope: "
                                                + re.escape(message)):
            S.program_from_json(json.dumps(doc), "model.json")
