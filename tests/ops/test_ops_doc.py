"""docs/ops.md stays in step: it names every function of ``dy2stat.ops`` (and the tensor
array and functional additions), and its code runs."""

import importlib.util
import re
from pathlib import Path

import dy2stat as d2s
from dy2stat import array, ops
from dy2stat.nn.functional import shaping

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_every_function_is_listed():
    text = DOC.read_text()
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)[`(]", text))
    names = set(ops.__all__) | set(array.__all__) | set(shaping.__all__)
    assert sorted(names - listed) == []
    assert all(hasattr(d2s, name) for name in array.__all__)


def test_the_examples_run(tmp_path):
    """The blocks in order as one module (imported from a file: converted functions
    need their source)."""
    code = "\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S))
    script = tmp_path / "ops_doc.py"
    script.write_text(code)
    spec = importlib.util.spec_from_file_location("ops_doc", script)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
