"""Every script in examples/ runs as it is (`python examples/NAME.py --quick`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# script, arguments, text its output must contain
CASES = [
    ("mnist_declarative.py", ["--quick"], ["static program ops:", "conv2d",
                                           "reloaded model gives the same output: True"]),
    ("hybrid_mlp.py", ["--quick"], ["eager (dynamic graph), 20 calls", "same results: True",
                                    "my_net.safetensors", "jit.load gives the same results: True"]),
    ("lenet_model.py", ["--quick"], ["dynamic mode: 2 epochs", "acc_top1"]),
    ("lenet_model.py", ["--quick", "--static"], ["static mode: 2 epochs", "acc_top2"]),
    ("double_grad.py", ["--quick"], ["dz/dx = 4.0", "penalty"]),
    ("forward_pre_hook.py", ["--quick"], ["eager Linear: hooked == doubled input: True",
                                          "to_static(Linear): hooked == doubled input: True",
                                          "converted: hooked == doubled input: True"]),
    ("rnn_dynamic_loop.py", ["--quick"], ["match eager", "(1 trace)", "while"]),
    ("transformer.py", ["--quick"], ["trained 10 steps", "decoding stopped after",
                                     "converted decoding gives the eager tokens and scores: True",
                                     "while ops: 1 (greedy), 2 (beam search"]),
    ("ernie.py", ["--quick"], ["pretraining, 8 steps", "fine-tuned classifier accuracy"]),
    ("seq2seq_attention.py", ["--quick"], ["trained 8 steps",
                                           "converted decoding gives the eager tokens: True"]),
    ("bilstm_classifier.py", ["--quick"], ["trained 8 steps", "1 trace", "accuracy"]),
]


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.py")} == {name for name, _, _ in CASES}


@pytest.mark.parametrize("script, args, expected", CASES,
                         ids=[" ".join([name, *args]) for name, args, _ in CASES])
def test_example_runs(tmp_path, script, args, expected):
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for text in expected:
        assert text in result.stdout, result.stdout
