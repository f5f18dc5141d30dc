"""The README's example runs as printed, and its set-up commands are the documented ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_example_runs(tmp_path):
    (example,) = [b for b in python_blocks(README) if "jit.save" in b]
    script = tmp_path / "readme_example.py"
    script.write_text(example)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "_jst.convert_ifelse" in result.stdout  # .code printed the converted source
    assert result.stdout.rstrip().endswith("True")  # the loaded model agrees
    assert (tmp_path / "gate.json").exists() and (tmp_path / "gate.safetensors").exists()
    assert len(example.strip().splitlines()) <= 30


def test_readme_quick_start_commands():
    assert 'pip install -e ".[dev]" && dy2stat demo' in README
    assert "\npytest" in README


def test_readme_links_exist():
    for link in re.findall(r"\]\(((?:docs|examples)/[^)#]*)\)", README):
        assert (ROOT / link).exists(), link
