"""The import-layering rule of DESIGN.md, checked by walking every module's imports.

grammar and samplers import neither each other nor anything above them; decoding may import
both; engine may import all three; the facade (src/formcast) imports everything and nothing
imports it, except formcast.errors, which imports nothing and which every layer may import.
Only absolute ``formcast.*`` imports are allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "grammar": ROOT / "grammar",
    "samplers": ROOT / "samplers",
    "decoding": ROOT / "decoding",
    "engine": ROOT / "engine",
}
ALLOWED = {
    "grammar": {"errors", "grammar"},
    "samplers": {"errors", "samplers"},
    "decoding": {"errors", "grammar", "samplers", "decoding"},
    "engine": {"errors", "grammar", "samplers", "decoding", "engine"},
}


def _formcast_imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level formcast subpackage or '' for bare `formcast`) of every import."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "<relative>"))
            elif node.module and (node.module == "formcast" or node.module.startswith("formcast.")):
                parts = node.module.split(".")
                if len(parts) > 1:
                    found.append((node.lineno, parts[1]))
                else:
                    found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "formcast":
                    found.append((node.lineno, parts[1] if len(parts) > 1 else ""))
    return found


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports_only_what_it_may(layer):
    violations = []
    for path in _modules(LAYERS[layer]):
        for line, target in _formcast_imports(path):
            if target not in ALLOWED[layer]:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports formcast.{target}")
    assert not violations, "\n".join(violations)


def test_errors_module_imports_nothing_from_formcast():
    assert _formcast_imports(ROOT / "src" / "formcast" / "errors.py") == []


def test_facade_uses_absolute_imports():
    relative = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in _modules(ROOT / "src" / "formcast")
        for line, target in _formcast_imports(p)
        if target == "<relative>"
    ]
    assert not relative, "\n".join(relative)


def test_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from formcast.engine import LLM\nfrom . import x\nimport formcast\n")
    assert _formcast_imports(bad) == [(1, "engine"), (2, "<relative>"), (3, "")]
