"""Dependencies point one way: dy2stat -> dy2stat.runtime -> dy2stat.kernels."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _violations(folder: str, allowed: tuple):
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for lineno, module in _imports(path):
            top = module.split(".")[0]
            if top in ("runtime", "kernels"):
                found.append(f"{path.relative_to(ROOT)}:{lineno} imports {module} (use dy2stat.)")
            elif top == "dy2stat" and not module.startswith(allowed):
                found.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    return found


@pytest.mark.parametrize("folder, allowed", [
    ("kernels", ("dy2stat.kernels",)),
    ("runtime", ("dy2stat.runtime", "dy2stat.kernels")),
])
def test_lower_layers_do_not_import_upper_ones(folder, allowed):
    assert _violations(folder, allowed) == []


def test_frontend_never_imports_top_level_runtime_or_kernels():
    assert [v for v in _violations("dy2stat", ("dy2stat",)) if "use dy2stat." in v] == []
