"""The IR verifier (``runtime/verify.py``): valid programs pass, and one broken
program per rule fails with a message naming the block, op, slot/attr and
variable."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import serialize
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.serialize import FormatError
from dy2stat.runtime.verify import VerifyError, verify
from dy2stat.static import framework
from tests.runtime import programs as P


def broken(program, *fragments, field=None):
    with pytest.raises(VerifyError) as info:
        verify(program)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    if field is not None:
        assert info.value.field == field, info.value.field
    return info.value


# ------------------------------------------------------------ valid programs


def test_hand_built_programs_verify():
    verify(P.mlp()[0])
    verify(P.with_cond())
    verify(P.with_while())


def _frontend_program():
    """Nested cond/while with captured values, plus append_backward (cond and
    while_grad ops with their sub-blocks)."""
    main, startup = d2s.static.Program(), d2s.static.Program()
    with d2s.static.program_guard(main, startup):
        x = d2s.static.data("x", [None, 3], "float64")
        w = d2s.static.create_parameter([3, 3], "float64", name="w")
        h = x @ w
        scale = h.mean()

        def body(i, acc):
            inner = d2s.static.nn.cond(acc.sum() > 0, lambda: acc * scale, lambda: acc - h)
            return i + 1, inner

        i0 = d2s.zeros([], dtype="int64")
        _, acc = d2s.static.nn.while_loop(lambda i, a: i < 3, body, [i0, h])
        loss = acc.sum()
        pairs = d2s.static.append_backward(loss)
        gx = d2s.static.gradients(loss, x)
    return main, startup, pairs, gx


def test_frontend_programs_with_backward_verify():
    d2s.enable_static()
    try:
        main, startup, pairs, _ = _frontend_program()
    finally:
        d2s.disable_static()
    assert {op.type for op in main.all_ops()} >= {"cond", "while", "while_grad"}
    assert pairs
    verify(main)
    verify(startup)


def test_error_is_a_value_error_with_a_field():
    p, _ = P.mlp()
    p.global_block().ops[1].inputs["Y"] = ["nope"]
    err = broken(p, "block 0, op 1 (add), inputs.Y[0]: variable 'nope' is not defined in "
                    "block 0 or its parents", field="blocks[0].ops[1].inputs.Y[0]")
    assert isinstance(err, ValueError)
    assert err.reason.startswith("variable 'nope'")


# ------------------------------------------------------ 1. structure


def test_unknown_op_type():
    p, _ = P.mlp()
    p.global_block().ops[2].type = "relu6"
    broken(p, "block 0, op 2 (relu6), type: unknown op type 'relu6'")


def test_unknown_slot():
    p, _ = P.mlp()
    p.global_block().ops[0].inputs["Z"] = ["x"]
    broken(p, "block 0, op 0 (matmul), inputs.Z: op 'matmul' has no slot 'Z' (slots: X, Y)")
    p, _ = P.mlp()
    p.global_block().ops[2].outputs = {"Y": ["r"]}
    broken(p, "op 2 (relu), outputs.Y: op 'relu' has no slot 'Y'")


def test_slot_sizes():
    p, _ = P.mlp()
    del p.global_block().ops[0].inputs["Y"]
    broken(p, "op 0 (matmul), inputs.Y: missing (op 'matmul' requires it)")
    p, _ = P.mlp()
    p.global_block().ops[0].inputs["Y"] = ["fc_0.w", "fc_0.w"]
    broken(p, "op 0 (matmul), inputs.Y: expected one name, got 2")
    p, _ = P.mlp()
    p.global_block().ops[0].inputs["Y"] = []
    broken(p, "op 0 (matmul), inputs.Y: expected one name, got none")


def _layer_norm_program():
    p = Program()
    g = p.global_block()
    g.create_var((2, 4), "float32", name="x", is_data=True)
    g.create_var((4,), "float32", name="s", persistable=True)
    g.create_var((2, 4), "float32", name="y")
    g.create_var((2,), "float32", name="mean")
    g.create_var((2,), "float32", name="var")
    g.append_op(Operator("layer_norm", {"X": ["x"], "Scale": ["s"]},
                         {"Y": ["y"], "Mean": ["mean"], "Variance": ["var"]},
                         {"begin_norm_axis": 1}))
    g.create_var((2, 4), "float32", name="c")
    g.append_op(Operator("concat", {"Xs": ["x"]}, {"Out": ["c"]}, {"axis": 0}))
    return p


def test_optional_slot_may_be_absent_or_hold_one():
    p = _layer_norm_program()
    verify(p)  # Bias left out; a one-input concat (variadic)
    p.global_block().ops[0].inputs["Bias"] = ["s", "s"]
    broken(p, "op 0 (layer_norm), inputs.Bias: expected one name, got 2")


def test_output_count_of_a_variadic_slot_must_match_inference():
    p = Program()
    g = p.global_block()
    g.create_var((4, 2), "float32", name="x", is_data=True)
    for n in ("a", "b"):
        g.create_var((2, 2), "float32", name=n)
    g.append_op(Operator("split", {"X": ["x"]}, {"Outs": ["a", "b"]},
                         {"num_or_sections": 2, "axis": 0}))
    verify(p)
    g.ops[0].attrs["num_or_sections"] = 4
    broken(p, "op 0 (split), outputs.Outs: op 'split' produces 4 values here, the op lists 2")


def test_unknown_attr():
    p, _ = P.mlp()
    p.global_block().ops[0].attrs["transpose_z"] = True
    broken(p, "op 0 (matmul), attrs.transpose_z: op 'matmul' has no attr 'transpose_z' "
              "(attrs: transpose_x, transpose_y)")


def test_sub_block_attrs():
    p = P.with_cond()
    p.global_block().ops[0].attrs["true_block"] = 9
    broken(p, "op 0 (cond), attrs.true_block: expected a sub-block index (1 to 4), got 9")
    p = P.with_cond()
    p.global_block().ops[0].attrs["false_block"] = True
    broken(p, "attrs.false_block: expected a sub-block index (1 to 4), got True")
    p = P.with_cond()
    del p.global_block().ops[0].attrs["false_block"]
    broken(p, "attrs.false_block: missing (op 'cond' needs a sub-block index)")


def test_name_attrs_must_name_visible_variables():
    p = P.with_cond()
    p.global_block().ops[0].attrs["true_outs"] = ["ghost"]
    broken(p, "op 0 (cond), attrs.true_outs[0]: variable 'ghost' is not declared in any block")
    p = P.with_cond()
    op = p.global_block().ops[0]
    op.attrs["true_outs"] = list(op.attrs["false_outs"])  # declared in the false branch only
    broken(p, "attrs.true_outs[0]", "is not visible from block 1")
    p = P.with_cond()
    p.global_block().ops[0].attrs["true_outs"] = "relu_0"
    broken(p, "attrs.true_outs: expected a list of variable names, got a string")
    p = P.with_while()
    p.global_block().ops[1].attrs["cond_out"] = 5
    broken(p, "op 1 (while), attrs.cond_out: expected a variable name, got an integer")


def test_arguments_are_declared_in_their_sub_block():
    p = P.with_while()
    p.global_block().ops[1].attrs["body_args"] = ["ci"]  # the cond block's argument
    broken(p, "op 1 (while), attrs.body_args[0]: argument 'ci' is not declared in block 2")


def test_control_flow_counts_agree():
    p = P.with_cond()
    p.global_block().ops[0].attrs["false_outs"] = []
    broken(p, "op 0 (cond), attrs.false_outs: names 0 values but outputs.Out has 1")
    p = P.with_while()
    p.global_block().ops[1].attrs["body_outs"] = []
    broken(p, "op 1 (while), attrs.body_outs: names 0 values but inputs.X has 1")


# ---------------------------------------------------- 2./3. sub-block graph


def test_sub_block_cycle():
    p = P.with_cond()
    b1 = p.blocks[1]
    b1.append_op(Operator("cond", {"Cond": ["pred"], "Input": []}, {"Out": []},
                          {"true_block": 1, "false_block": 2, "true_outs": [],
                           "false_outs": []}))
    broken(p, "block 1, op 1 (cond), attrs.true_block: block 1 contains", "a cycle")


def test_sub_block_must_be_nested_in_the_op_block():
    p = P.with_cond()
    p.blocks[2].parent_idx = 1  # the false branch hangs under the true branch
    broken(p, "block 0, op 0 (cond), attrs.false_block: block 2 is not nested in block 0 "
              "(its parent is block 1)")


# ------------------------------------------------- 4. use after definition


def test_use_before_definition_in_op_order():
    p, _ = P.mlp()
    ops = p.global_block().ops
    ops[0], ops[1] = ops[1], ops[0]  # add reads h before matmul writes it
    broken(p, "block 0, op 0 (add), inputs.X[0]: 'h' is read before any op writes it",
           field="blocks[0].ops[0].inputs.X[0]")


def test_feeds_count_as_defined():
    p, _ = P.mlp()
    p.global_block().vars["x"].is_data = False
    broken(p, "inputs.X[0]: 'x' is read before any op writes it")
    verify(p, feed_names=["x"])


def test_sub_block_reads_from_ancestors_before_the_op():
    p = P.with_cond()
    g = p.global_block()
    verify(p)  # the branches read x (block 0) and the cond reads pred
    # the true branch reads w, which block 0 computes only after the cond
    p.blocks[1].ops[0].inputs["X"] = ["w"]
    broken(p, "block 1, op 0 (relu), inputs.X[0]: 'w' is read before any op writes it")
    assert g.ops[-1].outputs["Out"] == ["w"]


def test_sub_block_arguments_count_as_defined():
    p = P.with_while()
    verify(p)  # the cond block reads its argument ci, the body bi
    # the cond block reading the body's argument: not visible from it
    p.blocks[1].ops[0].inputs["X"] = ["bi"]
    broken(p, "block 1, op 0 (less_than), inputs.X[0]: variable 'bi' is not defined in block 1")


def test_yielded_values_must_be_defined_in_the_sub_block():
    p = P.with_cond()
    tb = p.blocks[1]
    tb.create_var((2,), "float32", name="never_written")
    p.global_block().ops[0].attrs["true_outs"] = ["never_written"]
    broken(p, "block 0, op 0 (cond), attrs.true_outs[0]: 'never_written' is yielded by "
              "block 1 but no op defines it")


def test_while_grad_blocks_read_the_recomputed_body():
    d2s.enable_static()
    try:
        main, _, _, _ = _frontend_program()
    finally:
        d2s.disable_static()
    block, op = next((b, op) for b in main.blocks for op in b.ops if op.type == "while_grad")
    body = main.blocks[op.attrs["body_block"]]
    grad_block = main.blocks[op.attrs["grad_block"]]
    reads = {n for o in grad_block.ops for n in o.input_names()}
    # the gradient block reads values the recomputed body defines (and its arguments)
    assert reads & (set(body.vars) - set(op.attrs["body_args"]))
    assert reads & set(op.attrs["grad_args"])
    verify(main)
    grad_block.parent_idx = block.idx  # out of the body's scope: body values are not visible
    broken(main, f"block {grad_block.idx}, op ", f"is not defined in block {grad_block.idx} "
                                                 "or its parents")


# ------------------------------------------------------------ 5. inference


def test_declared_outputs_must_agree_with_inference():
    p, _ = P.mlp()
    p.global_block().vars["h"].shape = (-1, 7)
    broken(p, "block 0, op 0 (matmul), outputs.Out[0]: 'h' is declared float32[-1, 7] but "
              "op 'matmul' computes float32[-1, 3]")
    p, _ = P.mlp()
    p.global_block().vars["h"].dtype = np.dtype("float64")
    broken(p, "'h' is declared float64[-1, 3] but op 'matmul' computes float32[-1, 3]")


def test_unknown_dims_agree_with_anything():
    p, _ = P.mlp()
    p.global_block().vars["h"].shape = (5, -1)
    verify(p)
    p.global_block().vars["h"].shape = (-1,)
    broken(p, "'h' is declared float32[-1]")  # a different rank never agrees


def test_ops_that_reject_their_inputs():
    p, _ = P.mlp()
    p.global_block().ops[0].attrs["transpose_y"] = True  # [-1, 4] @ [3, 4]^T
    broken(p, "block 0, op 0 (matmul): op 'matmul' does not accept its inputs/attrs")
    p, _ = P.mlp()
    g = p.global_block()
    g.create_var((), "bool", name="flag", persistable=True)
    g.create_var((), "bool", name="e")
    g.append_op(Operator("exp", {"X": ["flag"]}, {"Out": ["e"]}, {}))
    broken(p, "op 5 (exp)", "does not accept")


def test_cond_outputs_agree_with_both_branches():
    p = P.with_cond()
    p.global_block().vars["y"].dtype = np.dtype("float64")
    broken(p, "block 0, op 0 (cond), outputs.Out[0]: 'y' is declared float64[2] but "
              "true_outs[0]")
    p = P.with_cond()
    p.global_block().vars["pred"].dtype = np.dtype("int64")
    broken(p, "op 0 (cond), inputs.Cond[0]: the predicate 'pred' must be a bool with one "
              "element, got int64[]")


def test_while_carried_values_agree():
    p = P.with_while()
    p.blocks[2].vars["bi"].dtype = np.dtype("int32")
    broken(p, "block 0, op 1 (while)", "the loop carries it as body_args[0] 'bi'")
    p = P.with_while()
    cond_out = p.global_block().ops[1].attrs["cond_out"]
    p.blocks[1].vars[cond_out].shape = (3,)
    broken(p)  # a declared bool[3] predicate: inference or the predicate rule


# -------------------------------------------------------- 6. single definition


def test_a_name_is_defined_once():
    p, _ = P.mlp()
    g = p.global_block()
    g.append_op(Operator("relu", {"X": ["h2"]}, {"Out": ["r"]}, {}))
    broken(p, "block 0, op 5 (relu), outputs.Out[0]: 'r' is defined twice (first by block 0, "
              "op 2 (relu))")


def test_persistable_variables_may_be_written_again():
    p, _ = P.mlp()
    g = p.global_block()
    for _ in range(2):  # an update op writing the parameter's own name, twice
        g.append_op(Operator("scale", {"X": ["fc_0.b"]}, {"Out": ["fc_0.b"]},
                             {"scale": 0.5, "bias": 0.0}))
    verify(p)


def test_data_variables_and_arguments_are_not_written():
    p, _ = P.mlp()
    g = p.global_block()
    g.append_op(Operator("relu", {"X": ["x"]}, {"Out": ["x"]}, {}))
    broken(p, "op 5 (relu), outputs.Out[0]: writes 'x', a data variable")
    p = P.with_while()
    body = p.blocks[2]
    body.append_op(Operator("assign", {"X": ["step"]}, {"Out": ["bi"]}, {}))
    broken(p, "block 2, op 1 (assign), outputs.Out[0]: 'bi' is defined twice (first by an "
              "argument of block 2)")


def test_sub_blocks_do_not_write_outer_variables():
    p = P.with_cond()
    p.blocks[1].append_op(Operator("scale", {"X": ["x"]}, {"Out": ["w"]},
                                   {"scale": 1.0, "bias": 0.0}))
    broken(p, "block 1, op 1 (scale), outputs.Out[0]: writes 'w', a variable of the enclosing "
              "block 0")


# ----------------------------------------------------- serialize uses it


def test_serialize_reports_verifier_errors_with_file_and_field():
    p, _ = P.mlp()
    doc = serialize.program_to_dict(p, ["x"], ["y"])
    doc["blocks"][0]["ops"].append({"type": "relu", "inputs": {"X": ["h2"]},
                                    "outputs": {"Out": ["r"]}, "attrs": {}})
    with pytest.raises(FormatError) as info:
        serialize.program_from_json(json.dumps(doc), "model.json")
    err = info.value
    assert err.source == "model.json"
    assert err.field == "blocks[0].ops[5].outputs.Out[0]"
    assert str(err).startswith("model.json: blocks[0].ops[5].outputs.Out[0]: 'r' is defined "
                               "twice"), str(err)


def test_serialize_accepts_feeds_that_are_not_data_variables():
    p, _ = P.mlp()
    p.global_block().vars["x"].is_data = False
    doc = serialize.program_to_dict(p, ["x"], ["y"])
    loaded, feed, _ = serialize.program_from_json(json.dumps(doc), "model.json")
    assert feed == ["x"]
    doc = serialize.program_to_dict(p, [], ["y"])
    with pytest.raises(FormatError, match=r"blocks\[0\].ops\[0\].inputs.X\[0\]: 'x' is read "
                                          "before any op writes it"):
        serialize.program_from_json(json.dumps(doc), "model.json")


def test_a_while_that_saves_an_unknown_body_value_is_refused():
    main = d2s.static.Program()
    with framework.program_guard(main, d2s.static.Program()), framework.static_guard(True):
        x = d2s.static.data("x", [2], "float32")
        x.stop_gradient = False
        (out,) = d2s.static.nn.while_loop(lambda h: h.sum() < 10.0, lambda h: [h * 2.0], [x])
        d2s.static.gradients([out.sum()], [x])
    loop = next(op for op in main.global_block().ops if op.type == "while")
    assert loop.attrs["saved"]
    verify(main)
    loop.attrs["saved"] = ["no_such_value"]
    with pytest.raises(VerifyError, match="no_such_value"):
        verify(main)


# --------------------------------------------- attr types, promotion, loops


def _one_op(op_type, inputs: dict, attrs: dict, out_shape=(3,), out_dtype="float32"):
    """A program with data vars for ``inputs`` (name -> (shape, dtype)) and one op
    writing ``out``; the op's attrs are taken as given."""
    p = Program()
    g = p.global_block()
    slots = {}
    for slot, (shape, dtype) in inputs.items():
        g.create_var(shape, dtype, name=slot.lower(), is_data=True)
        slots[slot] = [slot.lower()]
    g.create_var(out_shape, out_dtype, name="out")
    g.append_op(Operator(op_type, slots, {"Out": ["out"]}, attrs))
    return p


@pytest.mark.parametrize("op_type, attrs, field, fragment", [
    ("sum", {"keepdim": 1}, "attrs.keepdim", "expected true or false, got 1"),
    ("sum", {"axis": 0.5}, "attrs.axis", "expected null or an integer or a list of ints"),
    ("reshape", {"shape": [3, "a"]}, "attrs.shape", "expected a list of ints >= -1"),
    ("reshape", {"shape": [3, True]}, "attrs.shape", "expected a list of ints >= -1"),
    ("cast", {"dtype": "f4"}, "attrs.dtype", "expected a dtype name"),
    ("scale", {"scale": "2"}, "attrs.scale", "expected a number, got '2'"),
    ("scale", {"scale": True}, "attrs.scale", "expected a number, got True"),
    ("getitem", {"index": [True]}, "attrs.index", "expected an encoded index"),
    ("bernoulli_mask", {"p": 1.5}, "attrs.p", "expected a number from 0 to 1"),
    ("getitem", {"index": [["slice", 0, "a", None]]}, "attrs.index", "expected an encoded index"),
    ("getitem", {"index": [["tensor", -1]]}, "attrs.index", "expected an encoded index"),
    ("sum", {"axis": 1}, "attrs.axis", "axis 1 is out of range for X, which has 1 dims"),
    ("cumsum", {"axis": -2}, "attrs.axis", "axis -2 is out of range"),
    ("sum", {"axis": [0, -1]}, "attrs.axis", "names an axis twice: [0, -1]"),
])
def test_attr_values_are_checked_against_the_registry(op_type, attrs, field, fragment):
    p = _one_op(op_type, {"X": ((3,), "float32")}, attrs)
    broken(p, fragment, field=f"blocks[0].ops[0].{field}")


@pytest.mark.parametrize("attrs, field, fragment", [
    ({"shape": [2, -1]}, "attrs.shape", "expected a list of ints >= 0"),
    ({"shape": [2], "seed": -1}, "attrs.seed", "expected an integer >= 0, got -1"),
    ({"shape": [2], "dtype": "complex64"}, "attrs.dtype", "expected a dtype name"),
])
def test_attr_ranges_are_checked(attrs, field, fragment):
    p = _one_op("uniform", {}, attrs, out_shape=(2,))
    broken(p, fragment, field=f"blocks[0].ops[0].{field}")


def test_every_attr_of_every_op_has_a_declared_type():
    from dy2stat.runtime.registry import OPS

    undeclared = [f"{op.type}.{k}" for op in OPS.values() for k in op.attrs
                  if op.attr_type(k) is None]
    assert undeclared == []


def _mixed_add(dtype_x, dtype_y, out_dtype):
    return _one_op("add", {"X": ((3,), dtype_x), "Y": ((3,), dtype_y)}, {},
                   out_dtype=out_dtype)


def test_promoted_inputs_must_promote_alike_in_numpy_and_dy2stat():
    # float32 + int64: dy2stat infers float32, NumPy computes float64
    broken(_mixed_add("float32", "int64", "float32"),
           "op 'add' reads float32 (inputs.X[0]) and int64 here: dy2stat promotes them to "
           "float32 but the kernel computes float64", field="blocks[0].ops[0].inputs.Y[0]")
    verify(_mixed_add("float32", "float64", "float64"))  # both say float64
    verify(_mixed_add("float32", "float32", "float32"))


@pytest.mark.parametrize("op_type, inputs, out_shape, out_dtype, field, fragment", [
    ("where", {"Cond": ((3,), "int32"), "X": ((3,), "float32"), "Y": ((3,), "float32")},
     (3,), "float32", "inputs.Cond[0]", "where: Cond must be a bool tensor, got int32"),
    ("gather", {"X": ((3,), "float32"), "Index": ((2,), "float32")}, (2,), "float32",
     "inputs.Index[0]", "gather: Index must be an integer tensor"),
    ("dropout", {"X": ((3,), "float32"), "Mask": ((3,), "int64")}, (3,), "float32",
     "inputs.Mask[0]", "dropout: Mask must be a float tensor"),
    # integer sums and products are int64, whatever the file says
    ("sum", {"X": ((3,), "uint8")}, (), "uint8", "outputs.Out[0]",
     "'out' is declared uint8[] but op 'sum' computes int64[]"),
    ("sum", {"X": ((3,), "int32")}, (), "int32", "outputs.Out[0]",
     "'out' is declared int32[] but op 'sum' computes int64[]"),
    ("prod", {"X": ((3,), "int16")}, (), "int16", "outputs.Out[0]",
     "'out' is declared int16[] but op 'prod' computes int64[]"),
    ("dropout", {"X": ((3,), "float16"), "Mask": ((3,), "float32")}, (3,), "float32",
     "outputs.Out[0]", "'out' is declared float32[3] but op 'dropout' computes float16[3]"),
])
def test_dtypes_the_registry_does_not_give_are_refused(op_type, inputs, out_shape, out_dtype,
                                                      field, fragment):
    p = _one_op(op_type, inputs, {}, out_shape=out_shape, out_dtype=out_dtype)
    broken(p, fragment, field=f"blocks[0].ops[0].{field}")
    doc = serialize.program_to_dict(p, [slot.lower() for slot in inputs], ["out"])
    with pytest.raises(FormatError) as info:
        serialize.program_from_json(json.dumps(doc), "model.json")
    assert info.value.field == f"blocks[0].ops[0].{field}"
    assert str(info.value).startswith(f"model.json: blocks[0].ops[0].{field}: ")


def _saved_loop(tmp_path):
    """A converted loop (float32 x + int64 i cast inside the body), saved with jit.save."""
    @d2s.jit.to_static
    def f(x, n):
        i = d2s.zeros([1], "int64")
        while i < n:
            x = x + i
            i = i + 1
        return x

    spec = [d2s.static.InputSpec([2], "float32", "x"), d2s.static.InputSpec([1], "int64", "n")]
    d2s.jit.save(f, str(tmp_path / "loop"), input_spec=spec)
    return tmp_path / "loop"


def test_a_saved_loop_body_whose_cast_was_removed_is_refused(tmp_path):
    prefix = _saved_loop(tmp_path)
    doc = json.loads((tmp_path / "loop.json").read_text())
    loaded = d2s.jit.load(str(prefix))
    np.testing.assert_array_equal(loaded(d2s.ones([2]), d2s.to_tensor([3])).numpy(), [4, 4])
    casts = {op["outputs"]["Out"][0]: op["inputs"]["X"][0] for b in doc["blocks"]
             for op in b["ops"] if op["type"] == "cast"}
    where = next((b["idx"], j) for b in doc["blocks"] for j, op in enumerate(b["ops"])
                 if op["type"] == "add" and op["inputs"]["Y"][0] in casts)
    op = doc["blocks"][where[0]]["ops"][where[1]]
    op["inputs"]["Y"] = [casts[op["inputs"]["Y"][0]]]  # float32 + int64, no cast
    del doc["params_sha256"]
    (tmp_path / "loop.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError) as info:
        d2s.jit.load(str(prefix))
    assert info.value.field == f"blocks[{where[0]}].ops[{where[1]}].inputs.Y[0]"
    assert "the kernel computes float64" in str(info.value)


def _with_while_grad():
    d2s.enable_static()
    try:
        main, *_ = _frontend_program()
    finally:
        d2s.disable_static()
    block, i, op = next((b, i, op) for b in main.blocks for i, op in enumerate(b.ops)
                        if op.type == "while_grad")
    loop = next(o for b in main.blocks for o in b.ops if o.type == "while")
    return main, block, i, op, loop


def test_a_while_grad_must_match_its_while():
    main, block, i, op, loop = _with_while_grad()
    verify(main)
    where = f"block {block.idx}, op {i} (while_grad)"

    main, block, i, op, loop = _with_while_grad()
    op.attrs["body_args"] = op.attrs["body_args"][::-1]  # the saved carries bound in reverse
    broken(main, f"{where}, attrs.body_args: expected", "its while loop's body_args")

    main, block, i, op, loop = _with_while_grad()
    op.attrs["saved"] = [loop.attrs["body_outs"][0]]  # not what the loop saves
    broken(main, f"{where}, attrs.saved: expected the start of its while loop's saved list")

    main, block, i, op, loop = _with_while_grad()
    other = main.create_block(loop.attrs["body_block"])  # a block that is not the loop's body
    op.attrs["body_block"] = other.idx
    broken(main, f"{where}, attrs.body_")  # refused: its arguments are not that block's

    main, block, i, op, loop = _with_while_grad()
    op.inputs["Input"] = op.inputs["Input"][::-1] + ["x"]
    broken(main, f"{where}, inputs.Input: expected")


def test_a_while_grad_without_a_while_is_refused():
    main, block, i, op, loop = _with_while_grad()
    carries = op.inputs["Carries"][0]
    loop.outputs["Carries"] = []
    block.ops.insert(0, Operator("assign", {"X": ["x"]}, {"Out": [carries]}, {}))
    with pytest.raises(VerifyError):  # first broken rule: the assign's output
        verify(main)


def test_messages_quote_names_from_a_file_in_a_few_hundred_characters():
    p, _ = P.mlp()
    huge = "n" * 10_000_000
    p.global_block().ops[1].inputs["Y"] = [huge]
    with pytest.raises(VerifyError) as info:
        verify(p)
    assert len(str(info.value)) < 500 and "10,000,000 characters" in str(info.value)
    doc = serialize.program_to_dict(P.mlp()[0], ["x"], ["y"])
    doc["blocks"][0]["ops"][0]["attrs"] = {huge: 1}
    with pytest.raises(FormatError) as info:
        serialize.program_from_dict(doc, "m.json")
    assert len(str(info.value)) < 600
