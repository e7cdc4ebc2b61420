"""Recursive JSON Schemas -> context-free grammar -> CompiledCFG (no depth cap).

The regex compiler (``schema_compiler``) already knows the output layout and every keyword;
only recursion is out of its reach. So we run it with one change: a ``$ref`` met again while
it is being expanded (a cycle) is *cut* — compiled to a placeholder code point (Plane 16
private use, U+100000 + k) instead of raising — and each cut target is compiled on its own,
its inner cut references again becoming placeholders. Every resulting regex is parsed into a
regex syntax tree and turned into rules: subtrees without placeholders become terminals
(maximal runs in a concatenation are merged, so e.g. ``{"name":"..."`` is one lexeme), a
placeholder becomes the nonterminal of its target, alternations and repetitions around
placeholders become rules (repetitions left-recursive). The language is exactly the regex
path's language with recursion unrolled without bound.

Limits: ``allOf`` that merges a recursive ``$ref`` is refused by the regex compiler
(``SchemaError``); so are sibling assertions next to a cut ``$ref``.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.errors import GrammarError, SchemaError
from formcast.grammar.cfg_compiled import CompiledCFG, compile_cfg
from formcast.grammar.cfg_grammar import CfgGrammar
from formcast.grammar.json_schema import schema_of
from formcast.grammar.regex_ast import Alternation, CharSet, Concat, Node, Repeat, to_python_regex
from formcast.grammar.regex_parser import parse_regex
from formcast.grammar.schema_compiler import SchemaCompiler
from formcast.grammar.vocabulary import Vocabulary

_PLACEHOLDER_BASE = 0x100000
_ANNOTATIONS = {
    "$ref", "description", "title", "default", "examples", "$comment", "deprecated",
    "readOnly", "writeOnly",
}  # fmt: skip


class _CuttingCompiler(SchemaCompiler):
    """SchemaCompiler whose recursive ``$ref``s compile to placeholders (module docstring)."""

    def __init__(self, root: Any, **options: Any) -> None:
        super().__init__(root, **options)
        self.cut_refs: dict[str, int] = {}  # ref -> placeholder index
        self.targets: list[str] = []

    def _compile(self, schema: Any, pointer: str) -> str | None:
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if isinstance(ref, str) and (ref in self.cut_refs or ref in self._ref_stack):
            extra = sorted(set(schema) - _ANNOTATIONS)
            if extra and self.draft not in ("draft4", "draft6", "draft7"):
                raise SchemaError(
                    f"keywords {extra} next to the recursive $ref {ref!r} are not supported",
                    pointer=pointer,
                    keyword=extra[0],
                )
            index = self.cut_refs.setdefault(ref, len(self.cut_refs))
            if index == len(self.targets):
                self.targets.append(ref)
            return f"\\U{_PLACEHOLDER_BASE + index:08x}"
        return super()._compile(schema, pointer)


class _RegexToRules:
    """Regex syntax trees with placeholders -> rules over merged regular terminals."""

    def __init__(self, num_placeholders: int) -> None:
        self.terminal_regexes: list[str] = []
        self._terminal_ids: dict[str, int] = {}
        self.nonterminal_names = ["json"] + [f"$ref#{k}" for k in range(num_placeholders)]
        self.rules: list[tuple[int, tuple[int, ...]]] = []
        self._has_placeholder: dict[int, bool] = {}

    def placeholder(self, node: Node) -> int | None:
        if isinstance(node, CharSet) and len(node.ranges) == 1:
            lo, hi = node.ranges[0]
            if lo == hi and lo >= _PLACEHOLDER_BASE:
                return lo - _PLACEHOLDER_BASE
        return None

    def is_regular(self, node: Node) -> bool:
        key = id(node)
        found = self._has_placeholder.get(key)
        if found is None:
            if isinstance(node, CharSet):
                found = self.placeholder(node) is None
            elif isinstance(node, Concat):
                found = all(self.is_regular(x) for x in node.items)
            elif isinstance(node, Alternation):
                found = all(self.is_regular(x) for x in node.options)
            elif isinstance(node, Repeat):
                found = self.is_regular(node.item)
            else:
                found = True
            self._has_placeholder[key] = found
        return found

    def terminal(self, node: Node) -> int:
        rx = to_python_regex(node)
        found = self._terminal_ids.get(rx)
        if found is None:
            found = self._terminal_ids[rx] = len(self.terminal_regexes)
            self.terminal_regexes.append(rx)
        return found

    def fresh(self) -> int:
        self.nonterminal_names.append(f"json~{len(self.nonterminal_names)}")
        return len(self.nonterminal_names) - 1

    def define_root(self, lhs: int, node: Node) -> None:
        """Rules for one whole regex tree (the placeholder memo is keyed by node identity,
        valid while this tree is alive)."""
        self._has_placeholder.clear()
        self.define(lhs, node)
        self._has_placeholder.clear()

    def define(self, lhs: int, node: Node) -> None:
        options = node.options if isinstance(node, Alternation) else (node,)
        for option in options:
            self.rules.append((lhs, self.sequence(option)))

    def sequence(self, node: Node) -> tuple[int, ...]:
        items = node.items if isinstance(node, Concat) else (node,)
        out: list[int] = []
        run: list[Node] = []
        for item in items:
            if self.is_regular(item):
                run.append(item)
                continue
            if run:
                out.append(self.terminal(Concat(tuple(run))))
                run = []
            out += self.symbols(item)
        if run:
            out.append(self.terminal(Concat(tuple(run))))
        return tuple(out)

    def symbols(self, node: Node) -> tuple[int, ...]:
        index = self.placeholder(node)
        if index is not None:
            return (~(index + 1),)
        if isinstance(node, Concat):
            return self.sequence(node)
        if isinstance(node, Alternation):
            n = self.fresh()
            self.define(n, node)
            return (~n,)
        assert isinstance(node, Repeat)
        item = self.sequence(node.item)
        if node.max_count is None:
            star = self.fresh()
            self.rules += [(star, ()), (star, (~star, *item))]
            return (*(item * node.min_count), ~star)
        opt = self.fresh()
        self.rules += [(opt, ()), (opt, item)]
        return (*(item * node.min_count), *([~opt] * (node.max_count - node.min_count)))


def json_schema_to_cfg(
    schema: Any,
    *,
    whitespace: int | None = None,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int = 2,
) -> CfgGrammar:
    """The JSON texts (formcast layout) valid against a possibly recursive ``schema``, as a CFG.

    Raises
    ------
    SchemaError
        As the regex path does for unsupported keywords; also for ``allOf`` over a recursive
        ``$ref``, assertions next to a recursive ``$ref``, or a schema that uses Plane 16
        private-use characters (they serve as placeholders here).
    """
    root = schema_of(schema)
    if any(ord(ch) >= _PLACEHOLDER_BASE for ch in json.dumps(root, ensure_ascii=False)):
        raise SchemaError("schemas with Plane 16 private-use characters are not supported")
    compiler = _CuttingCompiler(
        root, whitespace=whitespace, strict=strict, lenient=lenient, max_any_depth=max_any_depth
    )
    from formcast.grammar.schema_refs import resolve_ref

    regexes = [compiler.compile(root, "")]
    k = 0
    while k < len(compiler.targets):
        ref = compiler.targets[k]
        target, pointer = resolve_ref(root, ref, "")
        compiler._ref_stack.append(ref)
        try:
            regexes.append(compiler.compile(target, pointer))
        finally:
            compiler._ref_stack.pop()
        k += 1
    if regexes[0] is None:
        raise SchemaError("the schema is unsatisfiable: no JSON value validates", pointer="")
    rules = _RegexToRules(len(compiler.targets))
    for n, rx in enumerate(regexes):
        if rx is None:  # an unsatisfiable recursive target: no rules, never derivable
            continue
        rules.define_root(n, parse_regex(rx, "python"))
    # drop rules that mention a target without rules (its language is empty)
    defined = {lhs for lhs, _ in rules.rules}
    kept = [(lhs, rhs) for lhs, rhs in rules.rules if all(s >= 0 or ~s in defined for s in rhs)]
    return CfgGrammar(
        terminal_names=[f"json#{t}" for t in range(len(rules.terminal_regexes))],
        terminal_regexes=rules.terminal_regexes,
        nonterminal_names=rules.nonterminal_names,
        rules=kept,
        start=0,
    )


def compile_json_schema_cfg(
    schema: Any,
    vocab: Vocabulary,
    *,
    whitespace: int | None = None,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int = 2,
    cache: bool = True,
) -> CompiledCFG:
    """Compile a (recursive) JSON Schema through the context-free path.

    Same layout and options as ``compile_json_schema``; ``$ref`` cycles are unrolled without
    a depth limit. Raises ``SchemaError`` like :func:`json_schema_to_cfg`.
    """
    root = schema_of(schema)
    source = json.dumps(root, sort_keys=True)
    options = {"whitespace": whitespace, "strict": strict, "max_any_depth": max_any_depth}

    def make() -> CfgGrammar:
        return json_schema_to_cfg(root, lenient=lenient, **options)

    try:
        return compile_cfg("json_schema", source, options, vocab, make, lenient=True, cache=cache)
    except SchemaError:
        raise
    except GrammarError as exc:
        raise SchemaError(f"recursive schema cannot be compiled: {exc}", pointer="") from exc


def is_recursion_error(exc: SchemaError) -> bool:
    """True if ``exc`` is the regex path's refusal of a recursive ``$ref``."""
    return exc.keyword == "$ref" and "recursive" in str(exc)
