"""JSON Schemas -> context-free grammar -> CompiledCFG: recursion and very large schemas.

The regex compiler (``compiler``) knows the output layout and every keyword; what it
cannot do is recursion, and one giant regex determinised at once is the wrong shape for very
large schemas. So we run it with one change, *cutting*: a sub-result is compiled to a
reference node (:class:`~formcast.grammar.regex.syntax_tree.Reference` ``k``) that stands for
nonterminal ``k + 1`` instead of being inlined. Cut are:

- every ``$ref`` (without sibling assertions): its target is compiled once (per nesting depth
  under ``indent``) and shared by every use; a ``$ref`` met again while its target is being
  compiled (a cycle) is simply its reference, so recursion costs nothing special;
- every other sub-result longer than ``cut_chars`` regex characters (``num_chars``), and every
  string value whose tree has more than ``STRING_CUT_CHARS`` characters (so a string, with its Unicode
  classes, is one shared lexeme; the terminals around it are short ASCII runs);
- every plain string with a ``maxLength`` (no ``pattern``/``format``): its quotes are literal
  text and its characters one or more *counted chains* (:meth:`_CuttingCompiler._chunked`),
  whose lexer walks are shared across strings by distance to the bounds
  (:mod:`~formcast.grammar.automata.chain_keys`).

Unconstrained values (``true``/``{}`` schemas) become one recursive "any JSON value"
nonterminal, nested without bound (``max_any_depth`` only bounds the regex path), except under
``indent`` where the whitespace depends on the depth (there ``max_any_depth=None`` is refused).

Each resulting tree is turned into rules: subtrees without references become terminals
(maximal runs in a concatenation are merged, so e.g. ``{"name":"..."`` is one lexeme), a
reference becomes its nonterminal, alternations and repetitions around references become
rules (repetitions left-recursive). The language is
exactly the regex path's language, with recursion unrolled without bound; automata stay per
terminal (per leaf run), so their size never multiplies across the schema.

An ``allOf`` over ``$ref`` targets (and a ``$ref`` with sibling assertions met inside its own
target) is one nonterminal named by its content (:meth:`_CuttingCompiler._shared_merge`): a
recursive target whose members repeat the same merge refers back to it, as a recursive
``$ref`` does (the regex compiler refuses such merges).

Limits: ``indent`` layout with a recursive ``$ref`` (the indentation would grow without
bound); a recursive ``$ref`` inside text that must be written out exactly (``propertyNames``,
``enum`` checks, string complements).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from formcast.errors import CompileBudgetError, GrammarError, SchemaError
from formcast.grammar.automata.budget import check_deadline
from formcast.grammar.automata.nfa_builder import CHAIN_MIN_COPIES
from formcast.grammar.cfg.compiled import (
    DEFAULT_TUNING,
    CfgTuning,
    CompiledCFG,
    check_max_depth,
    compile_cfg,
)
from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema import unevaluated
from formcast.grammar.json_schema.charset import JSON_CHAR
from formcast.grammar.json_schema.compiler import QUOTE, SchemaCompiler, has_assertions
from formcast.grammar.json_schema.layout import Layout, make_layout
from formcast.grammar.json_schema.number_ranges import NUMBER
from formcast.grammar.json_schema.refs import resolve_ref
from formcast.grammar.json_schema.sources import schema_of
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.unique_plan import UniqueItemsPlan, build_checked, may_need_plan
from formcast.grammar.regex.combinators import alt, literal, repeat, seq, star
from formcast.grammar.regex.syntax_tree import (
    EMPTY,
    Alternation,
    Concat,
    Node,
    Reference,
    Repeat,
    has_reference,
    subtrees,
)

DEFAULT_CUT_CHARS = 2_000
STRING_CHUNK = 256  # plain strings with a larger maxLength are chunked (see _chunked)
STRING_CUT_CHARS = 24  # string regexes longer than this are nonterminals (module docstring)
INLINE_REF_CHARS = 300  # $ref targets up to this many regex characters are inlined
# most copies of a counted repetition around references written out as rules (one rule per
# copy): maxItems 100,000, or a plain string's maxLength 25.6 M (chunks of STRING_CHUNK);
# above, a CompileBudgetError at once (maxLength 10**12 was minutes and all of memory)
MAX_UNROLLED_COPIES = 100_000
_ANNOTATIONS = {
    "$ref", "description", "title", "default", "examples", "$comment", "deprecated",
    "readOnly", "writeOnly",
}  # fmt: skip
_OLD_DRAFTS = ("draft4", "draft6", "draft7")


def refers_to(node: Node, index: int) -> bool:
    """True if ``node`` holds ``Reference(index)``."""
    return any(isinstance(item, Reference) and item.index == index for item in subtrees(node))


class _CuttingCompiler(SchemaCompiler):
    """SchemaCompiler whose ``$ref``s and large sub-results compile to rule references."""

    def __init__(self, root: Any, *, cut_chars: int | None = DEFAULT_CUT_CHARS, **options) -> None:
        # plain $refs are shared as nonterminals here (_compile), under the unique plan
        super().__init__(root, share_refs=False, **options)
        self.cut_chars = cut_chars
        self.rule_trees: list[Node | None] = []  # reference k -> its tree (None: empty)
        self._ref_index: dict[tuple[str, int | str], int] = {}
        self._tree_index: dict[Node, int] = {}
        self._ref_tree: dict[tuple[str, int | str], Node | None] = {}
        self._any_index: int | None = None
        self._is_exact = 0  # > 0 while compiling text that will be fullmatched: no cutting
        # references to helper nonterminals: named ``...~`` so that ``max_depth`` does not
        # count them as nesting (earley_parser: rule weights)
        self.helper_cuts: set[int] = set()

    def compile_exact(self, schema: Any, pointer: str = "") -> Node | None:
        self._is_exact += 1
        try:
            return super().compile_exact(schema, pointer)
        finally:
            self._is_exact -= 1

    def compile(self, schema: Any, pointer: str = "") -> Node | None:
        found = super().compile(schema, pointer)
        if found is None or self.cut_chars is None or found.num_chars <= self.cut_chars:
            return found
        return self._cut(found)

    def _string(self, s: dict, ptr: str) -> Node | None:
        max_len = s.get("maxLength")
        if (
            self.cut_chars is not None
            and not self._is_exact
            and max_len is not None
            and int(max_len) >= CHAIN_MIN_COPIES
            and "pattern" not in s
            and "format" not in s
        ):
            min_len = int(s.get("minLength", 0))
            if int(max_len) < min_len:
                return None
            # one nonterminal per (minLength, maxLength): every string with the same bounds
            # shares its chunk-count rules instead of repeating them
            if self.unique_plan is not None:
                self.unique_plan.note_string()
            return self._cut(self._chunked(min_len, int(max_len)), is_helper=True)
        found = super()._string(s, ptr)
        return None if found is None else self.lexeme(found)

    def _chunked(self, lo: int, hi: int) -> Node:
        """A JSON string of ``lo..hi`` characters: ``"``, full chunks of ``STRING_CHUNK``
        characters, one shorter chunk, ``"``. ``n = STRING_CHUNK * q + r`` with
        ``r < STRING_CHUNK`` is unique, so the grammar is unambiguous. A chunk is a counted
        chain ``C{a,b}`` of JSON characters, built directly (14 states per character,
        :func:`~formcast.grammar.automata.nfa_builder.counted_chain_dfa`; one DFA for ``{0,6000}`` would
        be too large, hence chunks); its lexer walks depend only on the distance to its bounds
        up to the longest token (:mod:`~formcast.grammar.automata.chain_keys`), so strings of every
        ``maxLength`` share them and a position far from the end costs a lookup."""
        size = STRING_CHUNK
        full = self._cut(Repeat(JSON_CHAR, size, size, -1), is_helper=True)

        def part(a: int, b: int) -> Node:
            return EMPTY if b == 0 else self._cut(repeat(JSON_CHAR, a, b) or EMPTY, is_helper=True)

        q_lo, r_lo = divmod(lo, size)
        q_hi, r_hi = divmod(hi, size)
        if q_lo == q_hi:
            branches = [seq(repeat(full, q_lo, q_lo), part(r_lo, r_hi))]
        else:
            branches = [seq(repeat(full, q_lo, q_lo), part(r_lo, size - 1))]
            if q_hi - q_lo >= 2:
                branches.append(seq(repeat(full, q_lo + 1, q_hi - 1), part(0, size - 1)))
            branches.append(seq(repeat(full, q_hi, q_hi), part(0, r_hi)))
        return seq(QUOTE, alt(branches) or EMPTY, QUOTE)

    def lexeme(self, node: Node) -> Node:
        # strings and key sets are lexemes of their own, shared by equal trees: the keys and
        # punctuation around them stay short ASCII terminals (cheap automata)
        if self.cut_chars is None or node.num_chars <= STRING_CUT_CHARS:
            return node
        return self._cut(node)

    def any_value(self, depth: int | None = None) -> Node:
        # any JSON value, nested without bound: one recursive nonterminal (not under indent,
        # whose whitespace depends on the depth; not for text that will be fullmatched)
        is_unbounded = depth is None and self.max_any_depth is None
        if self._is_exact or (not is_unbounded and self.cut_chars is None):
            return super().any_value(depth)
        if self.layout.is_depth_dependent:
            if is_unbounded:
                raise SchemaError(
                    "unconstrained values under the indent layout nest without bound only on "
                    "the regex route (route='auto' or 'regex'); the structural route needs "
                    "max_any_depth=N",
                    pointer="",
                )
            return super().any_value(depth)
        if self._any_index is None:
            self._any_index = len(self.rule_trees)
            self.rule_trees.append(None)
            value = Reference(self._any_index)
            layout = self.layout
            string = self.lexeme(self.any_string)
            sep = layout.item_sep(0)
            member = seq(string, layout.key_sep(), value)
            self.rule_trees[self._any_index] = alt(
                [
                    literal("null"),
                    literal("true"),
                    literal("false"),
                    NUMBER,
                    string,
                    layout.container("[]", seq(value, star(seq(sep, value))), True, 0),
                    layout.container("{}", seq(member, star(seq(sep, member))), True, 0),
                ]
            )
        return Reference(self._any_index)

    def share(self, node: Node) -> Node:
        """One nonterminal for ``node``, used wherever it occurs (written out if exact)."""
        return super().share(node) if self._is_exact else self._cut(node)

    def _cut(self, node: Node, is_helper: bool = False) -> Node:
        """The reference of ``node`` (one nonterminal per distinct tree), unless exact.
        ``is_helper``: a nonterminal inside one value (a string's chunks), not a nesting
        level of the JSON text (see :attr:`helper_cuts`)."""
        if self._is_exact:
            return node
        index = self._tree_index.get(node)
        if index is None:
            index = self._tree_index[node] = len(self.rule_trees)
            self.rule_trees.append(node)
        if is_helper:
            self.helper_cuts.add(index)
        return Reference(index)

    def _compile(self, schema: Any, pointer: str) -> Node | None:
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str):
            if self._is_shared_merge(schema):
                return self._shared_merge(schema, pointer)
            return super()._compile(schema, pointer)
        target, target_ptr = resolve_ref(self.root, ref, pointer)
        if self.is_any_value_ref(schema, target, target_ptr):
            return self.any_value()  # (a recursive "any JSON value" definition)
        extra = sorted(set(schema) - _ANNOTATIONS)
        is_plain = self.draft in _OLD_DRAFTS or not has_assertions(
            {k: v for k, v in schema.items() if k != "$ref"}
        )
        is_cycle = ref in self._ref_stack
        if is_cycle and self.layout.is_depth_dependent:
            raise SchemaError(
                f"indent layout with the recursive $ref {ref!r}: the indentation would grow "
                "without bound (use whitespace='compact' or 'flexible')",
                pointer=pointer,
                keyword="$ref",
            )
        if is_cycle and not is_plain and not self._is_exact:  # the target merged with them
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self._shared_merge({"allOf": [{"$ref": ref}, rest]}, pointer)
        if is_cycle and self._is_exact:  # (text a propertyNames / enum check fullmatches)
            raise SchemaError(
                f"keywords {extra} used by propertyNames/enum checks with the recursive $ref "
                f"{ref!r} are not supported",
                pointer=pointer,
                keyword=extra[0] if extra else "$ref",
            )
        if not is_plain or self._is_exact:
            return super()._compile(schema, pointer)  # inlined (merged with its siblings)
        key = (ref, self.depth if self.layout.is_depth_dependent else 0)
        self._ref_stack.append(ref)
        try:
            return self._shared(key, lambda: self.compile(target, target_ptr))
        finally:
            self._ref_stack.pop()

    def _shared(self, key: tuple[str, int | str], build: Callable[[], Node | None]) -> Node | None:
        """The one tree of nonterminal ``key`` (a ``$ref`` target or a merge), ``build()``
        on first use: a reference while ``build`` runs (a cycle), then the reference, or the
        tree itself where it is empty or small and not recursive (fewer nonterminals)."""
        if self.unique_plan is not None:
            self.unique_plan.note_ref_use(key)
        if key in self._ref_tree:
            return self._ref_tree[key]
        index = self._ref_index.get(key)
        if index is not None:  # a cycle: the tree is being built right now
            return Reference(index)
        index = self._ref_index[key] = len(self.rule_trees)
        self.rule_trees.append(None)
        if self.unique_plan is None:
            found = build()
        else:  # one tree for every place the nonterminal is used (note_ref_use)
            with self.unique_plan.shared(key):
                found = build()
        self.rule_trees[index] = found
        shared: Node | None = Reference(index)
        if found is None or (found.num_chars <= INLINE_REF_CHARS and not refers_to(found, index)):
            shared = found
        self._ref_tree[key] = shared
        return shared

    def _is_shared_merge(self, schema: Any) -> bool:
        """An ``allOf`` with a ``$ref`` part, at any ``allOf`` nesting (outside exact text and
        depth-dependent layouts): compiled by :meth:`_shared_merge`."""
        parts = schema.get("allOf") if isinstance(schema, dict) else None
        return (
            isinstance(parts, list)
            and not self._is_exact
            and not self.layout.is_depth_dependent
            and not any(key in schema for key in unevaluated.KEYWORDS)  # (expressed first)
            and _merges_ref(parts)
        )

    def _shared_merge(self, schema: dict, pointer: str) -> Node | None:
        """``schema`` (an ``allOf`` over ``$ref`` targets) merged into one schema, as one
        nonterminal named by the schema's content: meeting the same merge again while it is
        compiled (a recursive target whose own members repeat the ``allOf``) is a reference
        to it, as a recursive ``$ref`` is. ``$ref`` targets are inlined into the merge even
        while they are being compiled (the key, not the ``$ref`` stack, ends the recursion).
        A ``$ref`` has no base-URI context left to tell apart here: ``localize_refs`` made
        every reference a pointer into the root document."""
        key = ("allOf", json.dumps(schema, sort_keys=True, default=repr))
        rest = {k: v for k, v in schema.items() if k != "allOf"}

        def build() -> Node | None:
            flat = self._flatten_all([rest, *schema["allOf"]], pointer, is_recursive_ok=True)
            return None if flat is False else self.compile(flat, pointer)

        return self._shared(key, build)


def _merges_ref(parts: list) -> bool:
    """True if ``allOf`` parts (nested ``allOf`` lists included) hold a ``$ref``."""
    stack = list(parts)
    while stack:
        part = stack.pop()
        if isinstance(part, dict):
            if isinstance(part.get("$ref"), str):
                return True
            if isinstance(part.get("allOf"), list):
                stack += part["allOf"]
    return False


class _TreeToRules:
    """Syntax trees with references -> rules over merged regular terminals."""

    def __init__(self, num_references: int, helpers: set[int]) -> None:
        self._referenced: set[int] = set()
        self.terminal_trees: list[Node] = []
        self._terminal_ids: dict[Node, int] = {}
        self.nonterminal_names = ["json"] + [
            f"json~part{k}" if k in helpers else f"$ref#{k}" for k in range(num_references)
        ]
        self.rules: list[tuple[int, tuple[int, ...]]] = []

    def terminal(self, node: Node) -> int:
        found = self._terminal_ids.get(node)
        if found is None:
            found = self._terminal_ids[node] = len(self.terminal_trees)
            self.terminal_trees.append(node)
        return found

    def fresh(self) -> int:
        self.nonterminal_names.append(f"json~{len(self.nonterminal_names)}")
        return len(self.nonterminal_names) - 1

    def define(self, lhs: int, node: Node) -> None:
        options = node.options if isinstance(node, Alternation) else (node,)
        for option in options:
            self.rules.append((lhs, self.sequence(option)))

    def sequence(self, node: Node) -> tuple[int, ...]:
        items = node.items if isinstance(node, Concat) else (node,)
        out: list[int] = []
        run: list[Node] = []
        for item in items:
            if not has_reference(item):
                run.append(item)
                continue
            if run:
                out.append(self.terminal(Concat(tuple(run))))
                run = []
            out += self.symbols(item)
        if run:
            out.append(self.terminal(Concat(tuple(run))))
        return tuple(out)

    def take_referenced(self) -> set[int]:
        """References met since the last call."""
        found, self._referenced = self._referenced, set()
        return found

    def symbols(self, node: Node) -> tuple[int, ...]:
        if isinstance(node, Reference):
            self._referenced.add(node.index)
            return (~(node.index + 1),)
        if isinstance(node, Concat):
            return self.sequence(node)
        if isinstance(node, Alternation):
            n = self.fresh()
            self.define(n, node)
            return (~n,)
        assert isinstance(node, Repeat)
        num_copies = max(node.min_count, node.max_count or 0)
        if num_copies > MAX_UNROLLED_COPIES:
            digits = len(str(num_copies))
            shown = f"{num_copies:,}" if digits <= 15 else f"about 10^{digits - 1}"
            raise CompileBudgetError(
                f"a counted repetition of {shown} items (from maxLength, minLength, "
                f"maxItems or minItems) is over the {MAX_UNROLLED_COPIES:,} copies the "
                "context-free route writes out as rules; lower the bound"
            )
        item = self.sequence(node.item)
        if node.max_count is None:
            star = self.fresh()
            self.rules += [(star, ()), (star, (~star, *item))]
            return (*(item * node.min_count), ~star)
        # up to k more items as a chain R_k -> "" | item R_{k-1} (unambiguous, unlike k
        # independent optional items)
        chain: int | None = None
        for k in range(node.max_count - node.min_count):
            if k % 4096 == 0:
                check_deadline("writing out a counted repetition as rules")
            link = self.fresh()
            more = item if chain is None else (*item, ~chain)
            self.rules += [(link, ()), (link, more)]
            chain = link
        return (*(item * node.min_count), *(() if chain is None else (~chain,)))


def json_schema_to_cfg(
    schema: Any,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int | None = None,
    cut_chars: int | None = DEFAULT_CUT_CHARS,
) -> CfgGrammar:
    """The JSON texts (formcast layout) valid against ``schema``, as a CFG (module docstring).

    Options are those of ``compile_json_schema``; ``cut_chars`` is the regex size above which
    a sub-result becomes a nonterminal of its own (``None``: only ``$ref`` targets are cut).

    Raises
    ------
    SchemaError
        As the regex path does for unsupported keywords; also for ``allOf`` over a recursive
        ``$ref``, assertions next to a recursive ``$ref``, or ``indent`` with a recursive
        ``$ref``.
    """
    root = schema_of(schema)
    layout = make_layout(
        whitespace, max_whitespace=max_whitespace, indent=indent, any_order=any_order
    )
    grammar = _cfg_from(root, layout, strict, lenient, max_any_depth, cut_chars)
    assert grammar is not None
    return grammar


def _cfg_from(
    root: Any,
    layout: Layout,
    strict: bool,
    lenient: bool,
    max_any_depth: int | None,
    cut_chars: int | None,
    unique_plan: UniqueItemsPlan | None = None,
    is_plan_only: bool = False,
) -> CfgGrammar | None:
    """The grammar of ``root``; with ``unique_plan``, uniqueItems arrays over open item
    kinds are recorded there (see unique_plan); ``is_plan_only``: stop after recording."""

    def build() -> tuple[_CuttingCompiler, Node | None]:
        compiler = _CuttingCompiler(
            root,
            layout=layout,
            strict=strict,
            lenient=lenient,
            max_any_depth=max_any_depth,
            cut_chars=cut_chars,
            unique_plan=unique_plan,
        )
        try:
            return compiler, compiler.compile(root, "")
        except RecursionError as exc:
            raise SchemaError("schema nesting too deep", pointer="") from exc

    compiler, top = build_checked(build, unique_plan, lenient)
    if unique_plan is not None and is_plan_only:
        return None
    if top is None:
        raise SchemaError("the schema is unsatisfiable: no JSON value validates", pointer="")
    trees = [top, *compiler.rule_trees]  # nonterminal n; reference k is nonterminal k + 1
    rules = _TreeToRules(len(compiler.rule_trees), compiler.helper_cuts)
    pending, seen = [0], {0}
    while pending:  # only the trees reachable from the root become rules
        n = pending.pop()
        tree = trees[n]
        if tree is None:
            continue
        check_deadline("building the schema's grammar rules")
        rules.define(n, tree)
        for k in rules.take_referenced():
            if k + 1 not in seen:
                seen.add(k + 1)
                pending.append(k + 1)
    kept = _productive_reachable(rules.rules, len(rules.nonterminal_names))
    if not any(lhs == 0 for lhs, _ in kept):
        raise SchemaError("the schema is unsatisfiable: no JSON value validates", pointer="")
    return CfgGrammar(
        terminal_names=[f"json#{t}" for t in range(len(rules.terminal_trees))],
        terminal_regexes=list(rules.terminal_trees),
        nonterminal_names=rules.nonterminal_names,
        rules=kept,
        start=0,
    )


def _productive_reachable(rules: list, num_nonterminals: int) -> list:
    """The rules whose symbols all derive some sentence, reachable from nonterminal 0.

    (A reference whose sub-schema is unsatisfiable has no rules: every rule using it goes,
    exactly as the regex path drops an empty alternative.)
    """
    is_productive = [False] * num_nonterminals
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            if not is_productive[lhs] and all(s >= 0 or is_productive[~s] for s in rhs):
                is_productive[lhs] = changed = True
    kept = [(lhs, rhs) for lhs, rhs in rules if all(s >= 0 or is_productive[~s] for s in rhs)]
    by_lhs: dict[int, list] = {}
    for lhs, rhs in kept:
        by_lhs.setdefault(lhs, []).append(rhs)
    reached, stack = {0}, [0]
    while stack:
        for rhs in by_lhs.get(stack.pop(), []):
            for s in rhs:
                if s < 0 and ~s not in reached:
                    reached.add(~s)
                    stack.append(~s)
    return [(lhs, rhs) for lhs, rhs in kept if lhs in reached]


def compile_json_schema_cfg(
    schema: Any,
    vocab: Vocabulary,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int | None = None,
    cut_chars: int | None = DEFAULT_CUT_CHARS,
    max_depth: int | None = None,
    cache: bool = True,
    tuning: CfgTuning = DEFAULT_TUNING,
) -> CompiledCFG | UniqueItemsGrammar:
    """Compile a JSON Schema through the context-free (structural) path.

    Same layout and options as ``compile_json_schema``; ``$ref`` targets and sub-results over
    ``cut_chars`` regex characters become nonterminals.

    Parameters
    ----------
    max_depth:
        ``None`` (default): ``$ref`` cycles are unrolled without a depth limit. An int ``N``
        >= 1: matchers raise ``GrammarError`` (naming the depth, the bound and the output byte
        offset; the matcher is left unchanged) when the output would open more than ``N``
        schema levels at once. A level is one open nonterminal of the schema's grammar: the
        root schema and each ``$ref`` target (and each sub-schema over ``cut_chars``) being
        expanded; brackets inside one level (an array of integers, say) do not count. For a
        tree or linked-list schema whose nodes ``$ref`` themselves, an instance ``k`` nodes
        deep needs ``max_depth >= k``. The error is raised on the first byte at which every
        reading of the output is deeper than ``N`` (inside the first node past the bound).
        The bound is part of the cache key; ``compile_json_schema(..., max_depth=N)``
        forwards it.
    tuning:
        Which exact paths the CFG runtime and lexer take (tests compare them).
    others:
        As ``compile_json_schema``.

    Raises
    ------
    SchemaError
        As :func:`json_schema_to_cfg`, or a grammar that cannot be built.
    GrammarError
        ``max_depth`` is not ``None`` or a positive int.
    """
    check_max_depth(max_depth)
    root = schema_of(schema)
    layout = make_layout(
        whitespace, max_whitespace=max_whitespace, indent=indent, any_order=any_order
    )
    source = json.dumps(root, sort_keys=True)
    options = {
        "layout": layout.key(),
        "strict": strict,
        "schema_lenient": lenient,
        "max_any_depth": max_any_depth,
        "cut_chars": cut_chars,
    }

    # uniqueItems over open item kinds: recorded while the trees are built, enforced by the
    # matcher (unique_items); on a cache hit the trees are built again for the plan alone
    plan = UniqueItemsPlan()

    def make() -> CfgGrammar:
        plan.reset()
        grammar = _cfg_from(root, layout, strict, lenient, max_any_depth, cut_chars, plan)
        assert grammar is not None
        return grammar

    try:
        compiled = compile_cfg(
            "json_schema",
            source,
            options,
            vocab,
            make,
            lenient=True,
            max_depth=max_depth,
            cache=cache,
            precompute_s=0.0,  # measured: ahead-of-use walks do not lower these masks' p99
            tuning=tuning,
        )
    except (SchemaError, CompileBudgetError):
        raise
    except GrammarError as exc:
        raise SchemaError(f"schema cannot be compiled as a grammar: {exc}", pointer="") from exc
    if not plan.is_filled and may_need_plan(source):
        plan.reset()
        _cfg_from(root, layout, strict, lenient, max_any_depth, cut_chars, plan, True)
    if plan.needs_matcher:
        return UniqueItemsGrammar(compiled, plan.patterns(), plan.text_patterns())
    return compiled


def is_recursion_error(exc: SchemaError) -> bool:
    """True if ``exc`` is the regex path's refusal of a recursive ``$ref``."""
    return exc.keyword == "$ref" and "recursive" in str(exc)
