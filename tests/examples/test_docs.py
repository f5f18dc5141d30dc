"""The docs stay true: their runnable code runs, their generated code is the converter's,
and their links resolve."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dy2stat as d2s
from dy2stat import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["getting-started.md", "debugging.md", "deploying.md",
                                  "layers.md"])
def test_doc_code_runs_in_order(tmp_path, name):
    if name == "deploying.md":  # its ONNX section runs the export in ONNX Runtime
        pytest.importorskip("onnxruntime")
    script = tmp_path / "doc.py"
    script.write_text("\n".join(python_blocks(DOCS / name)))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_deploying_md_runs_an_onnx_export():
    code = "\n".join(python_blocks(DOCS / "deploying.md"))
    assert "d2s.onnx.export(" in code and "ort.InferenceSession(" in code


def test_generated_code_in_conversion_md_is_what_the_converter_writes(tmp_path):
    blocks = python_blocks(DOCS / "conversion.md")
    pairs = [(source, converted) for source, converted in zip(blocks, blocks[1:])
             if source.startswith("@d2s.jit.to_static")]
    assert len(pairs) >= 4
    for source, documented in pairs:
        model = tmp_path / "model.py"
        model.write_text("import dy2stat as d2s\n\n\n" + source)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["transpile", str(model)]) == 0
        generated = out.getvalue().split("\n", 1)[1]  # drop the "# model.py:LINE" header
        assert generated.strip() == documented.strip(), (
            "docs/conversion.md is out of date: regenerate this block with "
            f"`dy2stat transpile` of\n{source}")


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_links_resolve(page):
    for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", (DOCS / page).read_text()):
        assert (DOCS / link).exists(), f"{page}: broken link {link}"


def _normalize(text: str) -> str:
    text = re.sub(r'File "[^"]*"', 'File "F"', text)
    text = re.sub(r"[\w./<>-]+\.py:\d+", "F:N", text)
    text = re.sub(r"line \d+", "line N", text)
    return re.sub(r"\b(greater_than|cond|while)_\d+\b", r"\1_N", text)


def _error_pairs():
    """(function source, documented error) for each example of an unsupported construct."""
    text = (DOCS / "syntax.md").read_text()
    pattern = r"```python\n((?:@d2s\.jit\.not_to_static\n)?def .*?)```\s*```text\n(.*?)```"
    return re.findall(pattern, text, flags=re.S)


@pytest.mark.parametrize("source, documented", _error_pairs(),
                         ids=lambda v: v.split("(")[0].split()[-1] if v.startswith(("def", "@"))
                         else "")
def test_errors_in_syntax_md_are_the_real_ones(tmp_path, source, documented):
    path = tmp_path / "model.py"
    path.write_text("import dy2stat as d2s\n\n\n" + source)
    spec = importlib.util.spec_from_file_location(f"syntax_doc_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name = re.findall(r"^def (\w+)", source, flags=re.M)[-1]
    with pytest.raises(Exception) as info:
        d2s.jit.to_static(getattr(module, name))(d2s.ones([2, 3]))
    actual = _normalize(str(info.value) + "\n" + "\n".join(getattr(info.value, "__notes__", [])))
    first, *rest = documented.strip().splitlines()
    assert first.split(": ", 1)[0].rpartition(".")[2] == type(info.value).__name__
    for line in [first.split(": ", 1)[1], *rest]:
        if re.match(r"\s*>?\s*\d+ \|", line):  # excerpt lines: the file differs
            continue
        assert _normalize(line).strip() in actual, line
