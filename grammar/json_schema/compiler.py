"""The JSON Schema -> regex syntax tree compiler: keyword dispatch, types, enum/const,
combinators, refs.

``SchemaCompiler(root, ...).compile(schema, pointer)`` returns a regex syntax tree
(:mod:`~formcast.grammar.regex.syntax_tree`) of the JSON texts (formcast layout) valid against
``schema``, or ``None`` for the empty language; it is built with the tree combinators and
never printed and parsed again.
Every keyword is enforced exactly or refused through ``refuse`` (``SchemaError``, or a warning
with ``lenient=True``, which drops the keyword and so accepts a superset).
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from formcast.errors import CompileBudgetError, GrammarError, SchemaError
from formcast.grammar import caches
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.nfa_builder import unshared_states
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.json_schema import (
    complement,
    dependencies,
    ecma_pattern,
    number_ranges,
    unevaluated,
)
from formcast.grammar.json_schema.any_value.frames import FrameMachine
from formcast.grammar.json_schema.any_value_schema import is_any_value_target
from formcast.grammar.json_schema.arrays import array_tree
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.json_schema.formats import format_regex
from formcast.grammar.json_schema.keyword_types import check_keyword_types
from formcast.grammar.json_schema.layout import Layout
from formcast.grammar.json_schema.length_guard import LengthGuard
from formcast.grammar.json_schema.merge import (
    PATTERNS_ALSO_KEY,
    VALIDATION_KEYWORDS,
    is_impossible,
    merge,
)
from formcast.grammar.json_schema.objects import object_tree
from formcast.grammar.json_schema.pattern_intersection import intersect_branches, parse_pattern
from formcast.grammar.json_schema.refs import (
    REF_SIBLINGS_IGNORED,
    detect_draft,
    escape_pointer_token,
    resolve_ref,
)
from formcast.grammar.json_schema.values import JSON_TYPES, equality_key, ordered, type_of
from formcast.grammar.regex.combinators import alt, group, joined, literal, repeat, seq, star
from formcast.grammar.regex.syntax_tree import (
    Automaton,
    CharSet,
    Lookahead,
    Node,
    Repeat,
    largest_count,
    subtrees,
    to_python_regex,
)

if TYPE_CHECKING:
    from formcast.grammar.json_schema.unique_plan import Segment, UniqueItemsPlan

# states of a string automaton = pattern x character counter (``_guarded_string``)
GUARD_MAX_STATES = 20_000
# past this many product states (estimated: pattern states x counter values) the matcher
# counts the length instead where it can: the product is built in Python at ~50 us per
# state, so larger ones alone would pass the 100 ms compile budget of a whole schema
COUNTED_ABOVE_STATES = 2_000
# max_any_depth=None: containers this many levels inside an unconstrained value are written
# as the marker ``any_marker`` (expanded without bound by ``AnyValueGrammar``)
ANY_WINDOW = 0


MARKER = 0x01  # the unbounded-value marker's code point (see any_marker)
QUOTE = literal('"')
_PLAIN_TEXT = seq(QUOTE, repeat(JSON_CHAR, 0, None), QUOTE)  # any JSON string's text
_NULL, _TRUE, _FALSE = literal("null"), literal("true"), literal("false")


def any_marker(layout: Layout, depth: int) -> Node:
    """The marker for "one container value at ``depth``, nested without bound".

    Raw byte 0x01 (formcast never writes C0 controls: strings escape them); under the
    depth-dependent ``indent`` layout preceded by ``depth`` bytes 0x02 (the depth of the
    container, which fixes its indentation).
    """
    depth_prefix = layout.is_depth_dependent and depth
    return seq(
        repeat(literal("\x02"), depth, depth) if depth_prefix else literal(""), literal("\x01")
    )


def has_any_marker(node: Node) -> bool:
    """True if ``node`` (from the schema compiler) holds an unbounded-value marker."""
    return any(
        isinstance(item, CharSet) and any(lo <= MARKER <= hi for lo, hi in item.ranges)
        for item in subtrees(node)
    )


# Keywords with validation meaning that formcast does not implement: always refused.
# (unevaluated* reach here only inside an allOf member: see the unevaluated module)
# (draft-03's extends / disallow / divisibleBy are unknown keywords in the drafts formcast
# reads: ignored, with a warning, see keyword_types)
_REFUSED = {"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"}
_ANNOTATION_KEYS = {"title", "description", "$comment", "examples", "default"}


# json.dumps with options builds an encoder per call (~3x the cost of encoding a scalar)
_json_text = json.JSONEncoder(ensure_ascii=False).encode


@functools.lru_cache(maxsize=4096)
def _number_spellings(value_text: str) -> Node | None:
    return number_ranges.value_spellings([json.loads(value_text)])


def _number_literal(value: int | float) -> Node:
    """Every text of a number inside a literal value (``value_spellings``), memoised."""
    tree = _number_spellings(_json_text(value))
    assert tree is not None
    return tree


caches.register("json_schema.number_literals", "LRU: 4096 values", _number_spellings.cache_clear)


class _Member:
    """``with compiler.member(segment)``: see :meth:`SchemaCompiler.member` (a class, not a
    generator context manager: entered once per member compiled, 1.9 -> 0.4 us)."""

    __slots__ = ("_compiler", "_segment", "_path")

    def __init__(self, compiler: SchemaCompiler, segment: Segment | None) -> None:
        self._compiler = compiler
        self._segment = segment
        self._path: list | None = None

    def __enter__(self) -> None:
        compiler = self._compiler
        compiler.depth += 1
        plan = compiler.unique_plan
        if plan is not None and self._segment is not None:
            self._path = plan.path
            self._path.append(self._segment)

    def __exit__(self, *exc_info: object) -> None:
        self._compiler.depth -= 1
        if self._path is not None:
            self._path.pop()
            self._path = None


class SchemaCompiler:
    """Compiles subschemas of one root document to syntax trees (see module docstring)."""

    def __init__(
        self,
        root: Any,
        *,
        layout: Layout | None = None,
        strict: bool = True,
        lenient: bool = False,
        max_any_depth: int | None = None,
        max_regex_chars: int = 4_000_000,
        max_built_chars: int | None = None,
        max_shared_chars: int | None = None,
        max_count: int | None = None,
        unique_plan: UniqueItemsPlan | None = None,
        allow_automata: bool = True,
        share_refs: bool = True,
        count_strings_above: int | None = None,
        guarded_max_states: int | None = None,
        count_strings_floor: int | None = None,
        chain_max_states: int | None = None,
        count_items_above: int | None = None,
        items_max_states: int | None = None,
    ) -> None:
        self.root = root
        # the most regex characters a shared part may be written out with (see share; None:
        # max_regex_chars)
        self.max_shared_chars = max_regex_chars if max_shared_chars is None else max_shared_chars
        # languages whose regex text is too large may be automaton nodes (multipleOf's
        # residues); False where a regex text is wanted (json_schema_to_regex)
        self.allow_automata = allow_automata
        # where uniqueItems arrays over open item kinds sit (None: such arrays are refused)
        self.unique_plan = unique_plan
        self.draft = detect_draft(root)
        check_keyword_types(root, self.draft)  # malformed keyword values fail here, with pointer
        self.has_dependencies = dependencies.document_has_dependencies(root, self.draft)
        self.layout = Layout() if layout is None else layout
        self.depth = 0  # nesting depth of the value being compiled (0 = the whole output)
        self.strict = strict
        self.lenient = lenient
        self.max_any_depth = max_any_depth
        self.max_regex_chars = max_regex_chars
        # regex size (``num_chars``: the length of the tree's Python regex text) of all
        # sub-results together (a sub-schema referenced from many places is compiled at
        # each): a bound stops schemas whose tree only grows past max_regex_chars after
        # seconds of building
        self.max_built_chars = max_built_chars
        self.num_built_chars = 0
        # the largest counted repetition a sub-result may hold (None: any): the auto route's
        # early exit for e.g. maxLength 4096, before the rest of the document is built
        self.max_count = max_count
        # a plain string whose maxLength passes this has that bound counted by the matcher
        # (_string_text; None: never), its minLength (within max_count) in the automaton
        self.count_strings_above = count_strings_above
        # with such a string counted: the most NFA states the counted strings may need
        # together (_note_counted_states), and their tally
        self.guarded_max_states = guarded_max_states
        # once one string is counted, or the bounded strings written out need more than
        # chain_max_states NFA states together, every later plain string whose maxLength
        # passes this (at least what a token can put into a string it opens) is counted too
        self.count_strings_floor = count_strings_floor
        self.chain_max_states = chain_max_states
        self.num_counted_states = 0
        # an array whose maxItems passes count_items_above (more than a token's commas) has
        # that bound counted by the matcher where writing out its items would take more than
        # items_max_states NFA states (arrays._counts_items; None: never)
        self.count_items_above = count_items_above
        self.items_max_states = items_max_states
        self.state_memo: dict = {}  # (nfa_builder.unshared_states' memo by node identity)
        self.relaxed: list[tuple[str, str, str]] = []  # (pointer, keyword, message)
        self._ref_stack: list[str] = []
        # a plain $ref's result per (target pointer, depth where the layout depends on it),
        # with the regex characters its compile added to num_built_chars: the same target
        # compiles to the same tree wherever it is used. A compile reads no other context but
        # the unique plan (its instance path, and num_exact for its length guards), so
        # ``share_refs=False`` where the plan may be needed (unique_plan.may_need_plan)
        self._ref_results: dict[tuple[str, int], tuple[Node | None, int]] | None = (
            {} if share_refs else None
        )
        self._pattern_cache: dict[str, Node | None] = {}
        self.any_string: Node = seq(QUOTE, star(JSON_CHAR), QUOTE)
        self.num_exact = 0  # > 0 while compiling text that will be fullmatched
        self._any_cache: dict[tuple[int, int, bool], Node] = {}
        # (source, min, max) of a length-bounded pattern: its product automaton's budget
        # error (None: within budget), and its matcher-side guard (one object per key, so
        # the same schema reached along several paths is one guard, never a clash)
        self._guard_budget: dict[tuple[str, int, int | None], str | None] = {}
        self._length_guards: dict[tuple[str, int, int | None], LengthGuard | None] = {}

    def member(self, segment: Segment | None) -> _Member:
        """Context for compiling a member of the current container: one level deeper, with
        ``segment`` below the current instance path (a property name,
        ``any_key_except(names)``, ``"[]"`` for an array element; ``None``: no segment; see
        unique_plan)."""
        return _Member(self, segment)

    # ---- errors ------------------------------------------------------------------------------

    def refuse(self, message: str, pointer: str, keyword: str) -> None:
        """Raise ``SchemaError`` or, when lenient, warn and record the relaxation."""
        if not self.lenient:
            raise SchemaError(message, pointer=pointer, keyword=keyword)
        self.relaxed.append((pointer, keyword, message))
        warnings.warn(
            f"formcast: ignoring {keyword!r} at '{pointer or '#'}': {message}",
            stacklevel=3,
        )

    @staticmethod
    def pointer_token(name: str) -> str:
        return escape_pointer_token(name)

    # ---- helpers used by the object/array modules ---------------------------------------------

    def share(self, node: Node) -> Node:
        """``node`` as a part that many places of the result reuse (one object, referenced
        from each). A regex has no sharing: every use is written out, so the text the parts
        add up to is bounded (``CompileBudgetError`` past ``max_shared_chars``); the
        structural compiler makes it one nonterminal instead."""
        if node.num_chars > self.max_shared_chars:
            raise CompileBudgetError(
                f"a shared part written out at each use is {node.num_chars} regex characters "
                f"(budget {self.max_shared_chars}): use the structural path"
            )
        return node

    def fullmatch(self, node: Node | None, text: str) -> bool:
        """True if ``text`` is in the language of ``node`` (``None``: the empty language)."""
        return node is not None and _sample_matcher(node, self.layout)(text)

    def pattern_matches(self, pattern: str, name: str) -> bool:
        """ECMA ``pattern`` finds a match in string ``name`` (via its JSON-text regex)."""
        if pattern not in self._pattern_cache:
            try:
                branches = parse_pattern(pattern)
                found = ecma_pattern.pattern_tree(branches)
            except ecma_pattern.PatternRefused as exc:
                raise SchemaError(
                    f"pattern {pattern!r}: {exc}", keyword="patternProperties"
                ) from exc
            self._pattern_cache[pattern] = found
        return self.fullmatch(
            self._pattern_cache[pattern], json.dumps(name, ensure_ascii=False)[1:-1]
        )

    def literal_tree(self, value: Any, schema: Any = None) -> Node:
        """Exactly the formcast text of ``value`` (layout included, current depth)."""
        if self.unique_plan is not None and isinstance(value, list | dict):
            self.unique_plan.note_values_below()  # arrays of the literal, at any depth
        elif self.unique_plan is not None and isinstance(value, str):
            self.unique_plan.note_string()
        v = ordered(value, schema if schema is not None else {}, self.root)
        return self._literal(v, self.depth)

    def _literal(self, v: Any, depth: int) -> Node:
        layout = self.layout
        if isinstance(v, dict):
            members = [
                seq(
                    literal(_json_text(k)),
                    layout.key_sep(),
                    self._literal(x, depth + 1),
                )
                for k, x in v.items()
            ]
            return layout.container("{}", joined(members, layout.item_sep(depth)), False, depth)
        if isinstance(v, list):
            items = [self._literal(x, depth + 1) for x in v]
            return layout.container("[]", joined(items, layout.item_sep(depth)), False, depth)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return _number_literal(v)  # numbers compare by value: every spelling
        return literal(_json_text(v))

    def finite_values(self, schema: Any, pointer: str) -> list | None:
        """The finite list of values ``schema`` allows, if it is an enum/const/bool/null type."""
        s = self._resolve(schema, pointer)
        if not isinstance(s, dict):
            return None
        if "const" in s:
            return [s["const"]]
        if "enum" in s:
            return list(s["enum"])
        t = s.get("type")
        if t == "boolean":
            return [False, True]
        if t == "null":
            return [None]
        return None

    def any_value(self, depth: int | None = None) -> Node:
        """Any JSON value nested at most ``depth`` (default ``max_any_depth``) containers deep.

        With ``max_any_depth=None`` nesting is unbounded: containers ``ANY_WINDOW`` levels
        down are the marker :func:`any_marker` (not JSON text: ``AnyValueGrammar`` runs it;
        :meth:`fullmatch` too).
        """
        if self.unique_plan is not None:
            self.unique_plan.note_values_below()
        at = self.depth if self.layout.is_depth_dependent else 0
        limit = self.max_any_depth if depth is None else depth
        if limit is not None:
            return self._any(limit, at, False)
        return self._any(ANY_WINDOW, at, True)

    def _any(self, limit: int, at: int, is_marked: bool) -> Node:
        key = (limit, at, is_marked)
        if key in self._any_cache:
            return self._any_cache[key]
        layout = self.layout
        scalars = [_NULL, _TRUE, _FALSE, number_ranges.NUMBER, self.any_string]
        if limit == 0 and is_marked:
            found = alt([*scalars, any_marker(layout, at)])
        elif limit == 0:
            empty_array = layout.container("[]", None, True, at)
            found = alt([*scalars, empty_array, layout.container("{}", None, True, at)])
        else:
            inner = self._any(limit - 1, at + 1 if layout.is_depth_dependent else 0, is_marked)
            sep = layout.item_sep(at)
            member = seq(self.any_string, layout.key_sep(), inner)
            found = alt(
                [
                    *scalars,
                    layout.container("[]", seq(inner, star(seq(sep, inner))), True, at),
                    layout.container("{}", seq(member, star(seq(sep, member))), True, at),
                ]
            )
        assert found is not None
        self._any_cache[key] = found
        return found

    # ---- main entry ----------------------------------------------------------------------------

    def _resolve(self, schema: Any, pointer: str) -> Any:
        """Follow a chain of ``$ref`` at the top of ``schema`` (draft <= 7: siblings ignored)."""
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            target, _ = resolve_ref(self.root, schema["$ref"], pointer)
            seen += 1
            if seen > 64:
                raise SchemaError("$ref chain too long", pointer=pointer, keyword="$ref")
            if self.draft in REF_SIBLINGS_IGNORED:
                schema = target
            else:
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = {"allOf": [target, rest]} if has_assertions(rest) else target
        return schema

    def compile(self, schema: Any, pointer: str = "") -> Node | None:
        """The tree of ``schema`` at ``pointer``, or ``None`` (empty language).

        Raises ``CompileBudgetError`` as soon as a sub-result's regex size (``num_chars``)
        exceeds ``max_regex_chars``, all sub-results together exceed ``max_built_chars``, or a
        sub-result holds a counted repetition over ``max_count``.
        """
        found = self._compile(schema, pointer)
        if found is None:
            return found
        size = found.num_chars
        if size > self.max_regex_chars:
            raise CompileBudgetError(
                f"regex for the subschema at '{pointer or '#'}' has {size} characters "
                f"(budget {self.max_regex_chars}); very large schemas need the structural path"
            )
        self.num_built_chars += size
        self._check_built_chars(pointer)
        if self.max_count is not None and largest_count(found) > self.max_count:
            raise CompileBudgetError(
                f"counted repetition {{{largest_count(found)}}} over {self.max_count} "
                f"(at '{pointer or '#'}')"
            )
        return found

    def compile_exact(self, schema: Any, pointer: str = "") -> Node | None:
        """Like :meth:`compile`, for a tree that will be matched against sample texts.

        (The structural compiler in ``structural`` cuts sub-results into rule references;
        here it must not. Nor may the matcher count string lengths: see `_guarded_string`.)
        """
        self.num_exact += 1
        try:
            return self.compile(schema, pointer)
        finally:
            self.num_exact -= 1

    def lexeme(self, node: Node) -> Node:
        """Hook for a self-contained piece of text (a string value, a key set): the regex
        path inlines it; the structural path (``structural``) shares it as one lexeme."""
        return node

    def _compile(self, schema: Any, pointer: str) -> Node | None:
        if schema is True:
            return self.any_value()
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {schema!r}", pointer=pointer
            )
        if any(key in schema for key in unevaluated.KEYWORDS):
            try:
                schema = unevaluated.express_unevaluated(schema, self.root, self.draft, pointer)
            except SchemaError as exc:
                if not self.lenient:
                    raise
                self.refuse(exc.args[0], pointer, exc.keyword or "unevaluatedProperties")
                schema = {k: v for k, v in schema.items() if k not in unevaluated.KEYWORDS}
        if isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            target, target_ptr = resolve_ref(self.root, ref, pointer)
            if self.is_any_value_ref(schema, target, target_ptr):
                return self.any_value()
            if ref in self._ref_stack:
                raise SchemaError(
                    f"recursive schema ($ref {ref!r} refers to itself): no regular expression "
                    "describes it; compile_json_schema takes the context-free (structural) route",
                    pointer=pointer,
                    keyword="$ref",
                )
            self._ref_stack.append(ref)
            try:
                if self.draft in REF_SIBLINGS_IGNORED:
                    return self._compile_target(target, target_ptr)
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                if not has_assertions(rest):
                    return self._compile_target(target, target_ptr)
                return self.compile({"allOf": [target, rest]}, pointer)
            finally:
                self._ref_stack.pop()
        schema = self._normalize(schema, pointer)
        if "allOf" in schema:
            parts = [{k: v for k, v in schema.items() if k != "allOf"}]
            parts += list(schema["allOf"])
            flat = self._flatten_all(parts, pointer)
            if flat is False:
                return None
            return self.compile(flat, pointer)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema, key, pointer)
        return self._compile_plain(schema, pointer)

    def is_any_value_ref(self, schema: dict, target: Any, target_ptr: str) -> bool:
        """Does the ``$ref`` schema ``schema`` (its target resolved) accept every value, as
        ``true`` does (a recursive ``JsonValue`` definition, `any_value_schema`)? Only with
        unbounded any-values (``max_any_depth`` None: a bound would make the two differ) and
        nothing asserted beside the reference."""
        return reads_as_any_value(
            self.root, schema, target, target_ptr,
            draft=self.draft, strict=self.strict, max_any_depth=self.max_any_depth,
        )  # fmt: skip

    def _compile_target(self, target: Any, target_ptr: str) -> Node | None:
        """``compile(target, target_ptr)`` of a plain ``$ref``, once per target and context
        (``_ref_results``); a later use adds the same regex characters to ``num_built_chars``
        (so the budgets, and the route they choose, are those of compiling it again)."""
        if self._ref_results is None:
            return self.compile(target, target_ptr)
        key = (target_ptr, self.depth if self.layout.is_depth_dependent else 0)
        found = self._ref_results.get(key)
        if found is not None:
            node, num_chars = found
            self.num_built_chars += num_chars
            self._check_built_chars(target_ptr)
            return node
        before = self.num_built_chars
        node = self.compile(target, target_ptr)
        self._ref_results[key] = (node, self.num_built_chars - before)
        return node

    def _check_built_chars(self, pointer: str) -> None:
        if self.max_built_chars is not None and self.num_built_chars > self.max_built_chars:
            raise CompileBudgetError(
                f"building the regex passed {self.max_built_chars} characters of sub-results "
                f"(at '{pointer or '#'}'); very large schemas need the structural path"
            )

    def _normalize(self, schema: dict, pointer: str) -> dict:
        if "if" in schema or "then" in schema or "else" in schema:
            # (if and then) or (not if and else), as an allOf part (complement.conditional)
            schema = complement.conditional(schema, self.draft)
        for key in _REFUSED:
            if key in schema:
                self.refuse(f"keyword {key!r} is not supported", pointer, key)
                schema = {k: v for k, v in schema.items() if k not in (key, "then", "else")}
        # dependency keywords of another draft are unknown there (ignored); layout order
        schema = dependencies.normalize(schema, self.draft, self.root, self.has_dependencies)
        if self.draft == "draft4":
            schema = dict(schema)
            for bound, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
                if isinstance(schema.get(excl), bool):
                    if schema.pop(excl) and bound in schema:
                        schema[excl] = schema.pop(bound)
        if schema.get("nullable") is True and "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            schema = {**schema, "type": list(types) + ["null"]}
        return schema

    def _flatten_all(
        self, parts: list, pointer: str, *, is_recursive_ok: bool = False
    ) -> dict | bool:
        """Resolve refs, flatten nested allOf, merge everything into one schema.
        ``is_recursive_ok``: a ``$ref`` being compiled is inlined once more (the structural
        compiler names the merge, so meeting it again inside is a reference, not a loop)."""
        flat: list[dict] = []
        stack = list(parts)
        guard = 0
        while stack:
            guard += 1
            if guard > 10_000:
                raise SchemaError("allOf expansion too large", pointer=pointer, keyword="allOf")
            s = stack.pop(0)
            if s is True:
                continue
            if s is False:
                return False
            if isinstance(s, dict) and isinstance(s.get("$ref"), str):
                ref = s["$ref"]
                if ref in self._ref_stack and not is_recursive_ok:
                    raise SchemaError(
                        f"recursive schema ($ref {ref!r}): no regular expression describes it; "
                        "compile_json_schema takes the context-free (structural) route",
                        pointer=pointer,
                        keyword="$ref",
                    )
                target = resolve_ref(self.root, ref, pointer)[0]
                rest = {k: v for k, v in s.items() if k != "$ref"}
                if self.draft in REF_SIBLINGS_IGNORED:
                    rest = {}
                stack[:0] = [target, rest]
                continue
            if not isinstance(s, dict):
                raise SchemaError(f"allOf item must be a schema, got {s!r}", pointer=pointer)
            s = self._normalize(s, pointer)
            if "allOf" in s:
                stack[:0] = [{k: v for k, v in s.items() if k != "allOf"}, *s["allOf"]]
                continue
            flat.append(s)
        if not flat:
            return {}
        if len(flat) == 1:
            return flat[0]
        return merge(flat, pointer, self.pattern_matches)

    def _union(self, schema: dict, key: str, pointer: str) -> Node | None:
        base = {k: v for k, v in schema.items() if k != key}
        branches = schema[key]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{key} must be a non-empty array", pointer=pointer, keyword=key)
        has_base = has_assertions(base)
        merged = [
            ({"allOf": [base, b]} if has_base else b, f"{pointer}/{key}/{i}")
            for i, b in enumerate(branches)
        ]
        exclusive = self._exclusive_required(branches, pointer) if key == "oneOf" else None
        if exclusive is not None:
            merged = [
                ({"allOf": [base, b]} if has_base else b, f"{pointer}/{key}/{i}")
                for i, b in enumerate(exclusive)
            ]
        elif key == "oneOf" and len(merged) > 1:
            flat = []
            for b, p in merged:
                try:  # (analysis only: a recursive target is read one level deep)
                    flat.append(self._flatten_all([b], p, is_recursive_ok=True))
                except SchemaError:
                    flat.append(None)
            # branches that may overlap: branch i and none of the others it may share an
            # instance with (an instance valid against two branches is invalid)
            overlaps: list[list[int]] = [[] for _ in flat]
            for i in range(len(flat)):
                for j in range(i + 1, len(flat)):
                    if not self._disjoint(flat[i], flat[j]):
                        overlaps[i].append(j)
                        overlaps[j].append(i)
            merged = [
                (complement.exclusive_branch(b, [branches[j] for j in overlaps[i]]), p)
                for i, (b, p) in enumerate(merged)
            ]
        return alt(self.compile(b, p) for b, p in merged)

    def _exclusive_required(self, branches: list, pointer: str) -> list | None:
        """``oneOf`` of bare ``required`` lists, made disjoint exactly, or ``None``.

        Branch ``i`` becomes "``R_i`` present and, for every other branch ``j``, ``R_j`` not
        all present"; with one-name ``R_j`` that is ``properties: {r: false}``. (An instance
        with several such keys satisfies several branches and so no ``oneOf``.)
        """
        required = []
        for i, b in enumerate(branches):
            b = self._resolve(b, f"{pointer}/oneOf/{i}")
            if not isinstance(b, dict) or set(b) - _ANNOTATION_KEYS != {"required"}:
                return None
            names = b["required"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return None
            required.append(list(dict.fromkeys(names)))
        if len(required) < 2 or any(len(names) != 1 for names in required):
            return None
        return [
            {
                "required": names,
                "properties": {r[0]: False for j, r in enumerate(required) if j != i},
            }
            for i, names in enumerate(required)
        ]

    def _merged_part(self, schema: Any) -> Any:
        """``schema`` with its ``$ref``s and ``allOf`` merged (unmerged when merging fails):
        a discriminator ``const`` under ``allOf`` is then seen by :meth:`_disjoint`."""
        found = self._resolve(schema, "")
        if isinstance(found, dict) and "allOf" in found:
            try:
                return self._flatten_all([found], "", is_recursive_ok=True)
            except SchemaError:
                return found
        return found

    def _disjoint(self, a: Any, b: Any, depth: int = 0) -> bool:
        """Sound (incomplete) test that no instance satisfies both ``a`` and ``b``. A side
        with ``anyOf`` or ``oneOf`` branches is disjoint from the other where each of its
        branches is (an instance valid against it is valid against one of them), looked
        into ``_MAX_DISJOINT_DEPTH`` unions deep."""
        if a is False or b is False:
            return True
        if not isinstance(a, dict) or not isinstance(b, dict):
            return False
        if depth < _MAX_DISJOINT_DEPTH:
            for x, y in ((a, b), (b, a)):
                for key in ("anyOf", "oneOf"):
                    branches = x.get(key)
                    if (
                        isinstance(branches, list)
                        and branches
                        and all(
                            self._disjoint(self._merged_part(branch), y, depth + 1)
                            for branch in branches
                        )
                    ):
                        return True
        ta, tb = _possible_types(a), _possible_types(b)
        if not (ta & tb):
            return True
        if "enum" in a or "const" in a:
            va = a["enum"] if "enum" in a else [a["const"]]
            if "enum" in b or "const" in b:
                vb = b["enum"] if "enum" in b else [b["const"]]
                if not ({equality_key(v) for v in va} & {equality_key(v) for v in vb}):
                    return True
        for x, y in ((a, b), (b, a)):  # every value x lists fails y
            values = x["enum"] if "enum" in x else [x["const"]] if "const" in x else None
            if isinstance(values, list) and len(values) <= _MAX_DISJOINT_VALUES:
                if self._admits_none(y, values):
                    return True
        if ta & tb <= {"object"}:
            pa, pb = a.get("properties", {}) or {}, b.get("properties", {}) or {}
            ra, rb = set(a.get("required", [])), set(b.get("required", []))
            for name in ra & rb:
                if name in pa and name in pb:
                    sa, sb = self._merged_part(pa[name]), self._merged_part(pb[name])
                    if self._disjoint(sa, sb, depth + 1):
                        return True
            for _x, y, rx in ((a, b, ra), (b, a, rb)):
                # y allows no key but its declared ones and those of its patterns: explicitly
                # (the strict reading of an absent additionalProperties would let the two
                # branches' union accept an instance valid against both; complement.py makes
                # those exact instead)
                if y.get("additionalProperties") is False:
                    yp = y.get("properties", {}) or {}
                    patterns = y.get("patternProperties", {}) or {}
                    if any(n not in yp and not self._may_match(patterns, n) for n in rx):
                        return True
        return False

    def _may_match(self, patterns: dict, name: str) -> bool:
        """False only if no pattern of ``patterns`` (``patternProperties``) matches ``name``
        (a pattern formcast cannot read may)."""
        for pattern in patterns:
            try:
                if self.pattern_matches(pattern, name):
                    return True
            except SchemaError:
                return True
        return False

    def _admits_none(self, schema: Any, values: list) -> bool:
        """True only if every value of ``values`` is invalid against ``schema``
        (:meth:`_verdicts`)."""
        verdicts = self._verdicts(schema, values)
        return verdicts is not None and not any(verdicts)

    def admits_all(self, schema: Any, values: list) -> bool:
        """True only if every value of ``values`` is valid against ``schema``
        (:meth:`_verdicts`)."""
        verdicts = self._verdicts(schema, values)
        return verdicts is not None and all(verdicts)

    def _verdicts(self, schema: Any, values: list) -> list[bool] | None:
        """Whether each value of ``values`` is valid against ``schema``: its text is inside
        the exact tree of ``schema`` (built once). ``None`` where that cannot be judged:
        values holding a number (a number's text is one of its spellings; ``2.0`` is an
        integer to the specification, not to the integer layout), schemas the exact tree
        refuses."""
        if any(_holds_number(v) for v in values):
            return None
        try:
            check = self.compile_exact(schema, "")
        except (SchemaError, GrammarError):
            return None
        return [
            self.fullmatch(check, self.layout.dumps(ordered(v, schema, self.root), self.depth))
            for v in values
        ]

    def listed_values(self, sub: Any, pointer: str) -> dict[str, Any] | None:
        """The values ``sub`` allows by their JSON text, where it only lists values
        (``enum``/``const``, optionally ``type``) that are strings, booleans or ``null``
        (numbers are left out: ``1`` and ``1.0`` are one value, two texts); else ``None``."""
        sub = self._resolve(sub, pointer)
        if not isinstance(sub, dict) or set(sub) & VALIDATION_KEYWORDS - {"enum", "const", "type"}:
            return None
        if "enum" not in sub and "const" not in sub:
            return None
        values = sub.get("enum", [sub.get("const")])
        if not isinstance(values, list) or not all(
            v is None or isinstance(v, (str, bool)) for v in values
        ):
            return None
        if "const" in sub:  # (beside enum: the values both allow)
            values = [v for v in values if json.dumps(v) == json.dumps(sub["const"])]
        if "type" in sub:
            declared = sub["type"]
            types = {declared} if isinstance(declared, str) else set(declared)
            values = [v for v in values if type_of(v) & types]
        return {json.dumps(v): v for v in values}

    # ---- one merged schema without combinators --------------------------------------------------

    def _compile_plain(self, s: dict, ptr: str) -> Node | None:
        if "not" in s:
            applied = self._apply_not(s, ptr)
            if not isinstance(applied, dict):
                return None if applied is False else applied  # the complement's tree
            s = applied
        types = _declared_types(s, ptr)
        if "enum" in s or "const" in s:
            return self._enum(s, ptr, types)
        branches = []
        if "number" in types:
            types.discard("integer")
        for t in JSON_TYPES:
            if t in types:
                branches.append(self._typed(t, s, ptr))
        return alt(branches)

    def _apply_not(self, s: dict, ptr: str) -> dict | bool | Node | None:
        """``s`` with its ``not`` applied: a schema to compile on (``False``: empty) when the
        negation is a type or value filter, else the tree of the complement (``complement``).
        """
        neg = self._resolve(s["not"], ptr + "/not")
        rest = {k: v for k, v in s.items() if k != "not"}
        if neg is False or neg == {}:
            return rest if neg is False else False
        if neg is True:
            return False
        if "const" in rest and is_impossible(rest["const"]):
            return False
        if isinstance(neg, dict) and set(neg) - {"title", "description"} == {"type"}:
            excluded = {neg["type"]} if isinstance(neg["type"], str) else set(neg["type"])
            if "number" in excluded:
                excluded.add("integer")
            types = _declared_types(rest, ptr)
            if not ("integer" in excluded and "number" in types and "number" not in excluded):
                rest["type"] = sorted(types - excluded)
                return rest if rest["type"] else False
        if (
            isinstance(neg, dict)
            and set(neg) - {"title", "description"} <= {"enum", "const"}
            and ("enum" in rest or "const" in rest)
        ):
            bad = {equality_key(v) for v in neg.get("enum", [])}
            if "const" in neg:
                bad.add(equality_key(neg["const"]))
            vals = rest.pop("enum") if "enum" in rest else [rest.pop("const")]
            rest["enum"] = [v for v in vals if equality_key(v) not in bad]
            return rest
        return complement.compile_not(self, rest, s["not"], ptr)

    def _enum(self, s: dict, ptr: str, types: set[str]) -> Node | None:
        if "const" in s and is_impossible(s["const"]):
            return None
        values = list(s["enum"]) if "enum" in s else []
        if "const" in s:
            values = (
                [s["const"]]
                if "enum" not in s
                else [v for v in values if equality_key(v) == equality_key(s["const"])]
            )
        siblings = {k: v for k, v in s.items() if k not in ("enum", "const")}
        check = None
        if has_assertions(siblings):
            check = self.compile_exact(siblings, ptr)
        # a string passes siblings that assert nothing but ``type`` iff "string" is in
        # ``types``: written without a sample matched against them (thousand-value enums)
        is_type_only = all(k == "type" or k not in VALIDATION_KEYWORDS for k in siblings)
        is_string_allowed = "string" in types
        out = []
        numbers = []  # written together: each in every spelling of its value
        seen = set()
        seen_strings: set[str] = set()  # (distinct strings are distinct JSON values)
        for v in values:
            if type(v) is str and is_type_only:
                if is_string_allowed and v not in seen_strings:
                    seen_strings.add(v)
                    out.append(literal(_json_text(v)))  # = literal_tree(v): no layout
                continue
            key = equality_key(v)
            if key in seen or not (type_of(v) & types):
                continue
            seen.add(key)
            if check is not None:
                sample = self.layout.dumps(ordered(v, siblings, self.root), self.depth)
                if not self.fullmatch(check, sample):
                    continue
            elif check is None and has_assertions(siblings):
                continue
            if isinstance(v, int | float) and not isinstance(v, bool):
                numbers.append(v)
            else:
                out.append(self.literal_tree(v, siblings))
        if seen_strings and self.unique_plan is not None:
            self.unique_plan.note_string()  # (what literal_tree notes for each string)
        if numbers:
            is_integer_only = "number" not in types
            out.append(number_ranges.value_spellings(numbers, is_integer_only=is_integer_only))
        return alt(out)

    def _typed(self, t: str, s: dict, ptr: str) -> Node | None:
        if t == "null":
            return _NULL
        if t == "boolean":
            return alt([_TRUE, _FALSE])
        if t == "integer":
            return self._integer(s, ptr)
        if t == "number":
            return self._number(s, ptr)
        if t == "string":
            return self._string(s, ptr)
        if t == "array":
            return array_tree(self, s, ptr)
        if t == "object":
            return object_tree(self, s, ptr)
        raise SchemaError(f"unknown type {t!r}", pointer=ptr, keyword="type")

    def _bounds(self, s: dict) -> tuple:
        return (
            s.get("minimum"),
            s.get("exclusiveMinimum"),
            s.get("maximum"),
            s.get("exclusiveMaximum"),
        )

    def _integer(self, s: dict, ptr: str) -> Node | None:
        lo, hi = number_ranges.int_bounds(self._bounds(s))
        m = s.get("multipleOf")
        if m is None:
            return number_ranges.int_range(lo, hi)
        frac = number_ranges.to_fraction(m)
        if frac <= 0:
            raise SchemaError("multipleOf must be > 0", pointer=ptr, keyword="multipleOf")
        try:
            return number_ranges.int_multiple(
                frac.numerator, lo, hi, as_automaton=self.allow_automata
            )
        except ValueError as exc:
            self.refuse(str(exc), ptr, "multipleOf")
            return number_ranges.int_range(lo, hi)

    def _number(self, s: dict, ptr: str) -> Node | None:
        bounds = self._bounds(s)
        m = s.get("multipleOf")
        if all(b is None for b in bounds) and m is None:
            return number_ranges.NUMBER
        lo = hi = None
        lo_strict = hi_strict = False
        f = [None if b is None else number_ranges.to_fraction(b) for b in bounds]
        if f[0] is not None:
            lo = f[0]
        if f[1] is not None and (lo is None or f[1] >= lo):
            lo, lo_strict = f[1], True
        if f[2] is not None:
            hi = f[2]
        if f[3] is not None and (hi is None or f[3] <= hi):
            hi, hi_strict = f[3], True
        if m is not None:
            mf = number_ranges.to_fraction(m)
            if mf <= 0:
                raise SchemaError("multipleOf must be > 0", pointer=ptr, keyword="multipleOf")
            try:
                return number_ranges.decimal_multiple(
                    mf, lo, lo_strict, hi, hi_strict, as_automaton=self.allow_automata
                )
            except number_ranges.MultipleTooLarge as exc:  # lenient: the range without it
                self.refuse(str(exc), ptr, "multipleOf")
            except ValueError as exc:  # a bound past the decimal range's digits
                raise SchemaError(str(exc), pointer=ptr, keyword="minimum") from exc
        try:
            return number_ranges.decimal_range(lo, lo_strict, hi, hi_strict)
        except ValueError as exc:
            raise SchemaError(str(exc), pointer=ptr, keyword="minimum") from exc

    def _string(self, s: dict, ptr: str) -> Node | None:
        found, is_counted = self._string_text(s, ptr)
        if self.unique_plan is not None and not is_counted:
            self.unique_plan.note_string()
        return found

    def _string_text(self, s: dict, ptr: str) -> tuple[Node | None, bool]:
        """The string texts of ``s`` and whether the matcher counts their length."""
        min_len = int(s.get("minLength", 0))
        max_len = None if s.get("maxLength") is None else int(s["maxLength"])
        if max_len is not None and max_len < min_len:
            return None, False
        branches: list[ecma_pattern.Branch] | None = None
        patterns = s.get("pattern")
        fmt = s.get("format")
        fmt_rx = None
        if isinstance(fmt, str):
            try:
                fmt_rx = format_regex(fmt, self.draft)
            except KeyError:
                self.refuse(f"format {fmt!r} is not supported", ptr, "format")
        also = s.get(PATTERNS_ALSO_KEY, ())  # (allOf parts' own patterns: each must match)
        # messages (and the length guard's key) name every pattern
        shown = repr(patterns) if not also else " and ".join(map(repr, [patterns, *also]))
        if patterns is not None:
            try:
                branches = parse_pattern(patterns)
                for other in also:  # one anchored pattern (exact, bounded)
                    branches = intersect_branches(branches, parse_pattern(other))
            except ecma_pattern.PatternRefused as exc:
                self.refuse(f"pattern {shown}: {exc}", ptr, "pattern")
                branches = None
        if fmt_rx is not None:
            fmt_branches = ecma_pattern.format_branches(fmt_rx)
            if branches is not None:  # pattern & format: one anchored pattern (exact, bounded)
                try:
                    fmt_branches = intersect_branches(branches, fmt_branches)
                except ecma_pattern.PatternRefused as exc:
                    self.refuse(f"pattern {shown} with format {fmt!r}: {exc}", ptr, "pattern")
            branches = fmt_branches
        if branches is None:
            above = self.count_strings_above
            if (
                above is not None
                and max_len is not None
                and max_len > above
                and min_len <= max_len
                and (self.max_count is None or min_len <= self.max_count)
            ):
                # the automaton keeps minLength and an unbounded tail; the matcher counts
                # maxLength on the plain string's text (a clash with another string schema
                # at its place takes the structural path instead: UniqueItemsPlan.check),
                # one guard per maxLength whatever the minLength. No token can open the
                # string and pass maxLength within itself (maxLength > ``above``, at least
                # the most characters a token puts into a string it opens), so the count
                # starts at the opening quote
                text = seq(QUOTE, repeat(JSON_CHAR, min_len, None), QUOTE)
                key = ("plain string", 0, max_len)  # (the guard's text)
                if self._count_length(key, _PLAIN_TEXT, ptr, "maxLength", True):
                    # the matcher counts strings now: each later one it can count costs it
                    # a few table reads, the automaton ~14 states per character
                    floor = self.count_strings_floor
                    if floor is not None:
                        self.count_strings_above = min(floor, above)
                    self._note_counted_states(text, ptr)
                    return text, True
            counted = seq(QUOTE, repeat(JSON_CHAR, min_len, max_len), QUOTE)
            if above is not None and max_len is not None:
                floor = self.count_strings_floor
                if (
                    floor is not None
                    and floor < above
                    and max_len > floor
                    and self._passes_chain_budget(counted)
                ):
                    # from this string on, the matcher counts where it can (the chain is
                    # written only where it cannot: once, as ``above`` is the floor then)
                    self.count_strings_above = floor
                    return self._string_text(s, ptr)
                self._note_counted_states(counted, ptr)
            return counted, False
        out = []
        for b in branches:
            nodes = ecma_pattern.padded(b)
            try:
                nodes = ecma_pattern.with_length(nodes, min_len, max_len)
            except ecma_pattern.PatternRefused:
                source = f"pattern {shown}" if fmt_rx is None else f"format {fmt!r}"
                if fmt_rx is not None and patterns is not None:
                    source += f" with pattern {shown}"
                return self._guarded_string(branches, min_len, max_len, ptr, source)
            if nodes is None:
                continue
            try:
                out.append(ecma_pattern.encode(nodes))
            except ecma_pattern.PatternRefused as exc:
                self.refuse(f"pattern {shown}: {exc}", ptr, "pattern")
                return seq(QUOTE, repeat(JSON_CHAR, min_len, max_len), QUOTE), False
        text = seq(QUOTE, alt(out), QUOTE)
        if fmt_rx is not None and patterns is None and self.allow_automata and text is not None:
            return _format_text(text, fmt), False
        return text, False

    def _guarded_string(
        self,
        branches: list[ecma_pattern.Branch],
        min_len: int,
        max_len: int | None,
        ptr: str,
        source: str,
    ) -> tuple[Node | None, bool]:
        """A string whose pattern and length bounds do not fold into one repetition: the
        pattern's JSON text under a length guard ``(?=(?:JSON_CHAR){m,n}")``; and whether
        the matcher counts the length instead (True: the tree is the pattern's alone).

        The guard and the body both end at the closing quote and JSON string texts form a
        prefix code, so the lookahead is the intersection (``regex_ast.Lookahead``); its
        automaton is the product of the pattern's with a character counter, built here once
        to check it stays within ``GUARD_MAX_STATES`` (``SchemaError`` otherwise). Past an
        estimated ``COUNTED_ABOVE_STATES``, or past the budget, the matcher counts instead
        where it can (`_count_length`). ``source`` names the constraint in messages
        (``pattern '...'`` or ``format 'email'``).
        """
        kw = "maxLength" if max_len is not None else "minLength"
        try:
            body = ecma_pattern.pattern_tree(branches)
        except ecma_pattern.PatternRefused as exc:
            self.refuse(f"{source}: {exc}", ptr, "pattern")
            return seq(QUOTE, repeat(JSON_CHAR, min_len, max_len), QUOTE), False
        if body is None:
            return None, False
        # an explicit counter, also for {1,1} and {0,0} (which `repeat` would simplify away):
        # a length guard is a lookahead starting with a counter (regex.syntax_tree.Lookahead)
        guard = Lookahead(seq(Repeat(JSON_CHAR, min_len, max_len, -1), QUOTE), -1)
        guarded = seq(QUOTE, group(guard, body, QUOTE))
        key = (source, min_len, max_len)
        text = seq(QUOTE, body, QUOTE)
        bound = max_len if max_len is not None else min_len
        # the product has about (pattern states) x (counter values) states
        try:
            num_text = regex_to_dfa(text).num_states  # (memoised DFA)
        except CompileBudgetError as exc:
            num_text, text_error = GUARD_MAX_STATES + 1, str(exc)
        else:
            text_error = None
        num_product = num_text * (bound + 1)
        plan = self.unique_plan
        if (
            num_product > COUNTED_ABOVE_STATES
            and (plan is None or key not in plan.uncounted_keys)
            and self._count_length(key, text, ptr, kw, is_optional=True)
        ):
            return text, True
        if key not in self._guard_budget:
            if text_error is not None:
                self._guard_budget[key] = text_error
            elif num_product > GUARD_MAX_STATES:  # refused before building it
                self._guard_budget[key] = (
                    f"~{num_text} pattern states x {bound + 1} lengths > {GUARD_MAX_STATES}"
                )
            else:
                self._guard_budget[key] = _product_budget_error(guarded)
        over_budget = self._guard_budget[key]
        if over_budget is None:
            return guarded, False
        if self._count_length(key, text, ptr, kw):
            return text, True
        self.refuse(
            f"{source} with length bounds {min_len}..{max_len}: the product of the pattern "
            f"automaton and the character counter exceeds the budget ({over_budget})",
            ptr,
            kw,
        )
        return text, False

    def _note_counted_states(self, text: Node, ptr: str) -> None:
        """Tally the NFA states of a bounded string's text (the auto route,
        ``count_strings_above`` set). Once the matcher counts some string, strings needing
        more than ``guarded_max_states`` states together make the structural path the
        cheaper one: ``CompileBudgetError`` as soon as that is known, not after the whole
        automaton is built (bounded strings written out before the first counted one)."""
        self.num_counted_states += unshared_states(text, CompileBudget(), counts=self.state_memo)
        plan, bound = self.unique_plan, self.guarded_max_states
        if bound is None or plan is None or not plan.has_route_guards:
            return
        if self.num_counted_states > bound:
            raise CompileBudgetError(
                f"bounded strings need more than {bound} automaton states with some bound "
                f"counted by the matcher (at '{ptr or '#'}'): the structural path holds them"
            )

    def _passes_chain_budget(self, chain: Node) -> bool:
        """Would writing out ``chain`` (a bounded string's counted text) take the bounded
        strings past ``chain_max_states`` NFA states together? (Then the matcher counts it
        and every later one: the automaton stays small enough to index eagerly.)"""
        bound = self.chain_max_states
        if bound is None:
            return False
        num_states = unshared_states(chain, CompileBudget(), counts=self.state_memo)
        return self.num_counted_states + num_states > bound

    def _count_length(
        self,
        key: tuple[str, int, int | None],
        text: Node,
        ptr: str,
        keyword: str,
        is_route_choice: bool = False,
        is_optional: bool = False,
    ) -> bool:
        """Leave the length bounds ``key[1:]`` of the string texts ``text`` to the matcher
        (`~formcast.grammar.json_schema.length_guard.LengthGuard`, recorded in the plan);
        False where it cannot: no plan, inside a complemented language or a text that will
        be fullmatched, or an automaton over budget. ``is_route_choice``: the grammar could
        hold the bounds on the structural path, so a clash takes that path (not a refusal);
        ``is_optional``: the automaton could hold them as a product here, so a clash builds
        that product (`unique_plan.CountedClash`, not a refusal)."""
        plan = self.unique_plan
        if plan is None or plan.num_negations > 0 or self.num_exact > 0:
            return False
        if key not in self._length_guards:
            source, min_len, max_len = key
            base = self._length_guards.get((source, min_len, None), False)
            if base is False:  # (the analysis is shared by every max_len)
                try:
                    dfa = complement.byte_dfa(text)
                    base = LengthGuard(dfa, min_len, None) if dfa is not None else None
                except (CompileBudgetError, GrammarError, ValueError):
                    base = None
                self._length_guards[(source, min_len, None)] = base
            self._length_guards[key] = None if base is None else base.with_max_len(max_len)
        guard = self._length_guards[key]
        if guard is None:
            return False
        plan.note_text_guard(
            guard, ptr, keyword, is_route_choice, optional_key=key if is_optional else None
        )
        return True


def _format_text(text: Node, fmt: str) -> Node:
    """A ``format`` string's text (quotes included), from its second use on (in this schema
    or an earlier one) as the :class:`~formcast.grammar.regex.syntax_tree.Automaton` of its
    minimal DFA, which the NFA builder copies in as one memoised edge block instead of
    building the format's NFA again (a manifest's 32 ``format: uri`` members: 118 -> 75 ms);
    the first use is the tree itself, so a format met once costs no DFA of its own."""
    found = _FORMAT_TEXTS.get(text, _UNSEEN)
    if found is _UNSEEN:
        if len(_FORMAT_TEXTS) >= _FORMAT_TEXTS_SIZE:
            _FORMAT_TEXTS.clear()
        _FORMAT_TEXTS[text] = None
        return text
    if found is None:
        dfa = regex_to_dfa(text)
        found = _FORMAT_TEXTS[text] = Automaton.of(
            dfa.transitions, dfa.byte_to_class, dfa.is_accepting, f"format {fmt!r}"
        )
    return found


# format texts met so far: None once, their Automaton from the second use (_format_text)
_FORMAT_TEXTS: dict[Node, Automaton | None] = {}
_FORMAT_TEXTS_SIZE = 256
_UNSEEN = object()
caches.register(
    "json_schema.format_automata",
    f"{_FORMAT_TEXTS_SIZE} format texts, then emptied",
    _FORMAT_TEXTS.clear,
)


def _product_budget_error(guarded: Node) -> str | None:
    """Why the automaton of ``guarded`` (a pattern under a length guard) is over
    ``GUARD_MAX_STATES``, or None when it is within."""
    try:
        regex_to_dfa(guarded, max_states=GUARD_MAX_STATES, timeout_s=5.0)
    except CompileBudgetError as exc:
        return str(exc)
    return None


def reads_as_any_value(
    root: Any,
    schema: dict,
    target: Any,
    target_ptr: str,
    *,
    draft: str,
    strict: bool,
    max_any_depth: int | None,
) -> bool:
    """Does the ``$ref`` schema ``schema`` of document ``root`` (its target resolved) accept
    every value, as ``true`` does (a recursive ``JsonValue`` definition, `any_value_schema`)?
    Only with unbounded any-values (``max_any_depth`` None: a bound would make the two
    differ) and nothing asserted beside the reference (where ``draft`` reads its siblings)."""
    if max_any_depth is not None:
        return False
    if draft not in REF_SIBLINGS_IGNORED and has_assertions(
        {k: v for k, v in schema.items() if k != "$ref"}
    ):
        return False
    return is_any_value_target(root, target, target_ptr, strict=strict)


# enum / const values a disjointness test checks one by one against the other branch
_MAX_DISJOINT_VALUES = 64
# unions _disjoint looks into, nested (each level pairs every branch with the other side)
_MAX_DISJOINT_DEPTH = 2


def _holds_number(value: Any) -> bool:
    """True if ``value`` is a number or a container holding one (at any depth)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return False
    if isinstance(value, list):
        return any(_holds_number(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_number(v) for v in value.values())
    return True


def has_assertions(s: dict) -> bool:
    return any(k in VALIDATION_KEYWORDS for k in s) if isinstance(s, dict) else True


def _declared_types(s: dict, ptr: str) -> set[str]:
    t = s.get("type")
    if t is None:
        return set(JSON_TYPES)
    types = {t} if isinstance(t, str) else set(t)
    bad = types - set(JSON_TYPES)
    if bad:
        raise SchemaError(f"unknown type(s) {sorted(bad)}", pointer=ptr, keyword="type")
    return types


def _possible_types(s: dict) -> set[str]:
    types = _declared_types(s, "")
    if "number" in types:
        types.add("integer")
    if "enum" in s or "const" in s:
        vals = s["enum"] if "enum" in s else [s["const"]]
        vt: set[str] = set()
        for v in vals:
            vt |= type_of(v)
        types &= vt
    return types


@functools.lru_cache(maxsize=256)
def _sample_matcher(node: Node, layout: Layout) -> Callable[[str], bool]:
    """Fullmatch of ``node`` for sample texts (enum values against their sibling keywords,
    declared names against ``propertyNames``): ``re`` on the printed tree, or the frame
    machine when the tree holds unbounded-value markers (decided once per tree)."""
    if has_any_marker(node):
        machine = FrameMachine(
            regex_to_dfa(node),
            lambda depth: regex_to_dfa(container_tree(layout, depth)),
            layout.is_depth_dependent,
        )
        return lambda text: machine.fullmatch(text.encode("utf-8"))
    if any(isinstance(x, Automaton) for x in subtrees(node)):  # no regex text: its DFA
        dfa = regex_to_dfa(node)

        def fullmatch(text: str) -> bool:
            state = dfa.walk(0, text.encode("utf-8"))
            return state >= 0 and bool(dfa.is_accepting[state])

        return fullmatch
    pattern = re.compile(to_python_regex(node))
    return lambda text: pattern.fullmatch(text) is not None


def container_tree(layout: Layout, depth: int) -> Node:
    """``A_depth``: one container at ``depth``, its own nested containers marked.

    (It also matches scalars: never used, as a frame starts on ``{`` or ``[``.)
    """
    return SchemaCompiler(True, layout=layout)._any(ANY_WINDOW + 1, depth, True)


caches.register(
    "json_schema.sample_matchers", "LRU: 256 matchers of trees", _sample_matcher.cache_clear
)
