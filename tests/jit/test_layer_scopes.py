"""Each op a trace appends records the Layers whose forward built it (``LeNet/conv1``),
and the saved program keeps it."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn, static
from dy2stat.runtime import serialize
from dy2stat.static import InputSpec, framework
from dy2stat.vision.models import LeNet


def scopes_by_type(program) -> dict:
    found = {}
    for op in program.all_ops():
        found.setdefault(op.type, []).append(op.scope)
    return found


def test_a_saved_lenet_records_each_op_under_the_layer_that_built_it(tmp_path):
    net = LeNet()
    net.eval()
    d2s.jit.save(net, str(tmp_path / "lenet"), input_spec=[InputSpec([-1, 1, 28, 28], "float32")])
    program, _, _, _ = serialize.load_model(tmp_path / "lenet")
    found = scopes_by_type(program)
    assert found["conv2d"] == ["LeNet/features/0", "LeNet/features/3"]
    assert found["relu"] == ["LeNet/features/1", "LeNet/features/4"]
    assert found["flatten"] == ["LeNet"]  # in LeNet.forward itself
    assert found["matmul"] == ["LeNet/fc/0", "LeNet/fc/1", "LeNet/fc/2"]
    assert all(op.scope for op in program.all_ops())


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.mean() > 0:  # a tensor predicate: a cond op, its branches in this layer
            return self.fc(x) * 2.0
        return x - 1.0


class Tower(nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = nn.LayerList([Block(), Block()])
        self.shared = nn.Linear(4, 4)

    @d2s.jit.to_static
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.shared(self.shared(x)).sum()


def test_layers_are_named_as_their_owner_holds_them_and_branches_keep_the_scope():
    tower = Tower()
    x = d2s.to_tensor(np.random.default_rng(0).standard_normal((3, 4)).astype("float32"))
    tower(x)
    program = tower.forward.main_program
    conds = [op for op in program.global_block().ops if op.type == "cond"]
    assert [op.scope for op in conds] == ["Tower/blocks/0", "Tower/blocks/1"]
    for cond, name in zip(conds, ["Tower/blocks/0", "Tower/blocks/1"]):
        true_ops = program.blocks[cond.attrs["true_block"]].ops
        assert {op.scope for op in true_ops} == {name, f"{name}/fc"}
        assert {op.scope for op in program.blocks[cond.attrs["false_block"]].ops} == {name}
    # a layer called twice: both calls under one name
    matmuls = [op.scope for op in program.global_block().ops if op.type == "matmul"]
    assert matmuls == ["Tower/shared", "Tower/shared"]
    assert program.global_block().ops[-1].scope == "Tower"  # the sum, in Tower.forward


def test_a_converted_function_has_no_scope_of_its_own_and_its_layers_are_named_by_class():
    fc = nn.Linear(4, 2)

    @d2s.jit.to_static
    def f(x):
        return fc(x * 2.0)

    f(d2s.ones([3, 4]))
    ops = f.concrete_program.main_program.global_block().ops
    assert {op.scope for op in ops if op.type in ("full", "multiply")} == {""}
    assert {op.scope for op in ops if op.type in ("matmul", "add")} == {"Linear"}


def test_static_mode_records_scopes_and_eager_calls_record_nothing():
    main, startup = static.Program(), static.Program()
    with framework.program_guard(main, startup), framework.static_guard(True):
        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net(static.data("x", [-1, 4], "float32"))
    assert [op.scope for op in main.all_ops()] == ["Sequential/0"] * 2 + ["Sequential/1"]
    nn.Sequential(nn.Linear(4, 4))(d2s.ones([2, 4]))
    assert framework.defaults.scopes == []


def test_a_failing_forward_leaves_no_scope_behind():
    class Broken(nn.Layer):
        @d2s.jit.to_static
        def forward(self, x):
            raise ValueError("broken on purpose")

    with pytest.raises(ValueError, match="broken on purpose"):
        Broken()(d2s.ones([2]))
    assert framework.defaults.scopes == []
