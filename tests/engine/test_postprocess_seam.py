"""The engine's commit seam: tokens are committed only by `formcast.engine.postprocess`.

Plain decoding, jump-forward and both speculators append tokens through the `Postprocessor`
(beam search alone re-forms its beams in ``beam_group``); the speculators reach the engine
through its public parts and never import ``llm_engine``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
COMMITTERS = {"postprocess.py", "beam_group.py"}


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_postprocess_appends_tokens():
    callers = [
        f"{path.relative_to(ENGINE)}:{node.lineno}"
        for path in _modules(ENGINE)
        if path.name not in COMMITTERS
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "append_token"
    ]
    assert not callers, "\n".join(callers)


def test_speculators_use_no_engine_privates_and_never_import_llm_engine():
    violations = []
    for path in _modules(ENGINE / "speculative"):
        for node in ast.walk(_tree(path)):
            where = f"{path.relative_to(ENGINE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module == "formcast.engine.llm_engine":
                violations.append(f"{where} imports llm_engine")
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and (
                    (isinstance(node.value, ast.Name) and node.value.id == "llm")
                    or (isinstance(node.value, ast.Attribute) and node.value.attr == "llm")
                )
            ):
                violations.append(f"{where} uses llm.{node.attr}")
    assert not violations, "\n".join(violations)
