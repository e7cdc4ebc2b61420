"""The import-layering rules of DESIGN.md, checked by walking every module's imports.

Between packages: grammar and samplers import neither each other nor anything above them;
decoding may import both; engine may import all three; the facade (src/formcast) imports
everything and nothing imports it, except the ground floor (formcast.errors, formcast.bitmask),
which imports nothing of ours and which every layer may import. Only absolute ``formcast.*``
imports are allowed.

Inside grammar/, the stages import only earlier stages: protocol/caches < regex < automata <
index < cfg < json_schema < the package's top (``__init__``, spec, kernel_warmup). And no package
holds an import cycle between its modules, counting imports inside functions (which hide
cycles) but not ``if TYPE_CHECKING:`` blocks (annotations only).
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
GROUND_FLOOR = {"errors", "bitmask"}
ALLOWED = {
    "grammar": GROUND_FLOOR | {"grammar"},
    "samplers": GROUND_FLOOR | {"samplers"},
    "decoding": GROUND_FLOOR | {"grammar", "samplers", "decoding"},
    "engine": GROUND_FLOOR | {"grammar", "samplers", "decoding", "engine"},
}
# package folder -> dotted package name (the pyproject package-dir mapping)
PACKAGE_ROOTS = {
    ROOT / "grammar": "formcast.grammar",
    ROOT / "samplers": "formcast.samplers",
    ROOT / "decoding": "formcast.decoding",
    ROOT / "engine": "formcast.engine",
    ROOT / "src" / "formcast": "formcast",
}
# grammar's stages in pipeline order; a module's stage is its first folder under grammar/
GRAMMAR_STAGES = ["regex", "automata", "index", "cfg", "json_schema"]
GRAMMAR_FLOOR = {"protocol", "caches"}  # below every stage: imports no stage


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


def _runtime_import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted_name(path: Path) -> str:
    for folder, package in PACKAGE_ROOTS.items():
        if folder in path.parents or path.parent == folder:
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise AssertionError(f"{path} is in no package")


def _module_graph(folder: Path) -> dict[str, set[str]]:
    """Dotted module -> the modules of the same tree it imports at run time (package
    ``__init__`` files are left out: they only re-export their folder's nouns)."""
    modules = {_dotted_name(p): p for p in _modules(folder) if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _runtime_import_nodes(ast.parse(path.read_text(), filename=str(path))):
            targets = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{alias.name}" for alias in node.names] + [node.module or ""]
            )
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
                    break
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def _grammar_rank(dotted: str) -> int:
    """Pipeline rank of a formcast.grammar module: 0 floor, 1..5 stages, 6 the package top."""
    parts = dotted.split(".")[2:]
    if not parts:
        return len(GRAMMAR_STAGES) + 1
    if parts[0] in GRAMMAR_STAGES:
        return GRAMMAR_STAGES.index(parts[0]) + 1
    return 0 if parts[0] in GRAMMAR_FLOOR else len(GRAMMAR_STAGES) + 1


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports_only_what_it_may(layer):
    violations = []
    for path in _modules(LAYERS[layer]):
        for line, target in _formcast_imports(path):
            if target not in ALLOWED[layer]:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports formcast.{target}")
    assert not violations, "\n".join(violations)


def test_grammar_stages_import_only_earlier_stages():
    known = {_dotted_name(path) for path in _modules(LAYERS["grammar"])}
    violations = []
    for path in _modules(LAYERS["grammar"]):
        rank = _grammar_rank(_dotted_name(path))
        for node in _runtime_import_nodes(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:  # `from package import module` imports the module, not the package's top
                module = node.module or ""
                names = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                    for alias in node.names
                ]
            for name in names:
                if name.startswith("formcast.grammar") and _grammar_rank(name) > rank:
                    violations.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("folder", sorted(PACKAGE_ROOTS, key=str), ids=lambda p: p.name)
def test_no_import_cycle_inside_a_package(folder):
    cycles = _cycles(_module_graph(folder))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_ground_floor_imports_only_the_ground_floor():
    assert _formcast_imports(ROOT / "src" / "formcast" / "errors.py") == []
    for name in sorted(GROUND_FLOOR):
        imported = {
            target for _, target in _formcast_imports(ROOT / "src" / "formcast" / f"{name}.py")
        }
        assert imported <= GROUND_FLOOR - {name}, (name, imported)


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


def test_cycle_finder_finds_a_cycle_and_ignores_a_chain():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_grammar_rank_orders_the_stages():
    assert _grammar_rank("formcast.grammar.caches") == 0
    assert _grammar_rank("formcast.grammar.regex.parser") == 1
    assert _grammar_rank("formcast.grammar.json_schema.any_value.frames") == 5
    assert _grammar_rank("formcast.grammar") == _grammar_rank("formcast.grammar.spec") == 6
