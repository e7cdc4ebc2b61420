"""Structural tags -> one context-free grammar -> CompiledCFG (``compile_structural_tag``).

A structural tag (:mod:`~formcast.grammar.structural_tag.format`) becomes ONE
:class:`~formcast.grammar.cfg.rules.CfgGrammar`: constants and regexes are terminals, a JSON
Schema's grammar (``json_schema_to_cfg``) and a Lark / GBNF grammar are embedded under fresh
symbols (:class:`~formcast.grammar.structural_tag.rule_builder.RuleBuilder`), free text is a
terminal built as an automaton (:mod:`~formcast.grammar.structural_tag.free_text`), and the
combinators are rules. The CFG engine then gives exact token masks at every position — a
trigger that begins mid-token, a token that straddles the end of free text and the start of a
tag, a JSON value and its end string — with rollback, fork and jump-forward over forced text
(``forced_bytes``: a tag's begin after its trigger, end strings after a closed JSON value).

Language (what a complete output is). Below, *first occurrence* is the leftmost position at
which one of a set of non-empty strings occurs; occurrences are searched only inside the free
text and the literal right after it (a tag's begin or an end string), never in text before it.

- ``const_string v``: exactly ``v``. ``regex p``: a fullmatch of ``p`` (Python ``re``
  dialect, as ``compile_regex``). ``json_schema S``: JSON valid against ``S`` in formcast's
  layout (``compile_json_schema``'s options ``whitespace``, ``indent``, ``strict``...).
  ``grammar g``: a sentence of the Lark grammar ``g`` (start rule ``start``), or of the GBNF
  grammar when ``g`` holds ``::=`` (start rule ``root``).
- ``sequence``: the elements concatenated. ``or``: any element. ``optional`` / ``star`` /
  ``plus`` / ``repeat``: the content 0-1, 0+, 1+ or min..max times.
- ``tag``: ``begin``, the content, one of the ``end`` strings.
- ``any_text`` with ``excludes`` X: any text (every Unicode character) in which no string of X
  occurs. Inside a tag with ends E (as the content, or as the last element of the content, or
  an ``or`` branch there, recursively): the text also ends at the first occurrence of any
  string of E, and that occurrence is the tag's end: text + e holds no string of E starting
  before e does. (XGrammar's automatic end detection; it does not reach into ``repeat`` /
  ``star`` / ``plus``.)
- ``triggered_tags`` with triggers T, tags, excludes X: free text in which no string of T or
  X occurs; at the first occurrence of a trigger, a tag whose begin starts there (every begin
  starts with a trigger; several tags may share one), then free text again. With ``at_least_one``
  the output starts with a tag (no free text before the first one, as in XGrammar); with
  ``stop_after_first`` nothing follows the first tag. Inside a tag with ends E, the free text
  also stops at E: its last piece ends at the first occurrence of an end string, which is the
  enclosing tag's end, and no piece contains one.
- ``tags_with_separator``: zero or more tags (one or more with ``at_least_one``, at most one
  with ``stop_after_first``) with ``separator`` between them and nothing else.

Differences from XGrammar: free text is any text, not bounded in tokens or characters
(``max_tokens`` / ``max_chars`` are refused); a trigger or end string never completes across
the boundary from text before the free text (after a tag's end, searching starts afresh); an
empty end string adds no stop (the text before it still holds no other end string);
``json_schema`` follows formcast's JSON layout (compact by default; ``any_order: true`` lets
members come in any order, as ``compile_json_schema(any_order=True)``) and refuses non-JSON
``style`` values; of the token-level formats only ``token`` is accepted, by text, for a
special token, which it allows besides the same text in ordinary tokens. End detection is by the enclosing tag's
end only: ``any_text`` followed by a ``const_string`` in a ``sequence`` is any text then that
string (exact as a language, the boundary is wherever the text allows it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence as Sequence_
from typing import Any

from formcast.errors import GrammarError, SchemaError
from formcast.grammar.automata.budget import gc_paused
from formcast.grammar.cfg import lexer as cfg_lexer
from formcast.grammar.cfg.compiled import CfgTuning, CompiledCFG, compile_cfg
from formcast.grammar.cfg.gbnf_frontend import gbnf_to_cfg
from formcast.grammar.cfg.lark_frontend import lark_to_cfg
from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema.structural import json_schema_to_cfg
from formcast.grammar.regex.combinators import literal, trie_alt
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Node
from formcast.grammar.structural_tag.error import StructuralTagError
from formcast.grammar.structural_tag.format import (
    AnyText,
    ConstString,
    Format,
    GrammarText,
    JsonSchema,
    Or,
    Regex,
    Repeat,
    Sequence,
    StructuralTag,
    Tag,
    TagsWithSeparator,
    Token,
    TriggeredTags,
    parse_structural_tag,
)
from formcast.grammar.structural_tag.free_text import FreeTextTooLarge, free_text_tree
from formcast.grammar.structural_tag.rule_builder import RuleBuilder

# part of the compile cache key: bump when the language a tag compiles to changes
SEMANTICS_VERSION = 1
# most copies of a bounded ``repeat`` written out as rules
MAX_REPEAT_COPIES = 10_000

Follow = tuple[str, ...] | None  # the end strings that come right after a node, if any


def structural_tag_to_cfg(
    tag: StructuralTag | dict | str, *, json_options: dict[str, Any] | None = None
) -> CfgGrammar:
    """The context-free grammar of a structural tag (semantics: module docstring).

    Parameters
    ----------
    tag : StructuralTag, dict or str
        A parsed tag, or a request as :func:`~formcast.grammar.structural_tag.format.
        parse_structural_tag` reads it.
    json_options : dict, optional
        Options for every ``json_schema`` node (``json_schema_to_cfg``'s: ``whitespace``,
        ``max_whitespace``, ``indent``, ``strict``, ``lenient``, ``max_any_depth``).

    Returns
    -------
    CfgGrammar

    Raises
    ------
    StructuralTagError
        A malformed request or a node that cannot be compiled, naming its JSON pointer.
    """
    parsed = parse_structural_tag(tag)
    translator = _Translator(json_options or {})
    start = translator.builder.nonterminal("structural_tag")
    translator.builder.rule(start, translator.symbols(parsed.format, None))
    return translator.builder.grammar(start)


def compile_structural_tag(
    tag: StructuralTag | dict | str,
    vocab: Vocabulary,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int | None = None,
    max_depth: int | None = None,
    cache: bool = True,
    tuning: CfgTuning | None = None,
) -> CompiledCFG:
    """Compile a structural tag to a grammar with exact token masks (``kind="structural_tag"``).

    Parameters
    ----------
    tag : StructuralTag, dict or str
        ``{"type": "structural_tag", "format": {...}}`` (XGrammar / vLLM), vLLM's older
        ``{"type": "structural_tag", "structures": [...], "triggers": [...]}``, a bare
        format, their JSON text, or a parsed :class:`StructuralTag`.
    vocab : Vocabulary
        The model's vocabulary.
    whitespace, max_whitespace, indent, strict, lenient, max_any_depth
        JSON layout and keyword options of every ``json_schema`` node, as in
        ``compile_json_schema``.
    max_depth : int, optional
        Nesting bound of the CFG runtime (see ``compile_lark``).
    cache : bool
        Reuse a compile of the same tag, options and vocabulary (memory and disk).
    tuning : CfgTuning, optional
        The CFG runtime's exact paths (tests compare them); by default JSON-schema-style set
        walks when the tag holds a ``json_schema``.

    Returns
    -------
    CompiledCFG
        A grammar whose ``kind`` is ``"structural_tag"`` and ``source`` the tag's canonical
        JSON text.

    Raises
    ------
    StructuralTagError
        A malformed or unsupported node, naming its JSON pointer.
    GrammarError
        No output can be written with the vocabulary's bytes.
    """
    with gc_paused():  # parsing and the tag's JSON text allocate as much as the build
        return _compile_parsed(
            parse_structural_tag(tag),
            vocab,
            {
                "whitespace": whitespace,
                "max_whitespace": max_whitespace,
                "indent": indent,
                "strict": strict,
                "lenient": lenient,
                "max_any_depth": max_any_depth,
            },
            max_depth,
            cache,
            tuning,
        )


def _compile_parsed(
    parsed: StructuralTag,
    vocab: Vocabulary,
    json_options: dict[str, Any],
    max_depth: int | None,
    cache: bool,
    tuning: CfgTuning | None,
) -> CompiledCFG:
    vocab = control_vocabulary(parsed, vocab)
    source = parsed.to_json()
    if tuning is None:
        has_json = '"type": "json_schema"' in source
        tuning = CfgTuning(min_set_parts=cfg_lexer.MIN_SET_PARTS if has_json else None)
    return compile_cfg(
        "structural_tag",
        source,
        {"json": json.dumps(json_options, sort_keys=True), "version": SEMANTICS_VERSION},
        vocab,
        lambda: structural_tag_to_cfg(parsed, json_options=json_options),
        lenient=False,
        max_depth=max_depth,
        cache=cache,
        # as for JSON-schema CFGs: measured (RESULTS, stop 39), ahead-of-use lexer walks cost a
        # small tag's compile up to 15 ms and keep its first-walk masks under 1 ms either way
        precompute_s=0.0,
        tuning=tuning,
    )


def control_vocabulary(parsed: StructuralTag, vocab: Vocabulary) -> Vocabulary:
    """``vocab`` with the control tokens ``parsed`` names writing their text.

    Raises
    ------
    StructuralTagError
        A named token is not a special (non-EOS) token of ``vocab`` (its pointer).
    """
    ids = []
    for text, pointer in parsed.control_tokens:
        token_id = vocab.control_token_id(text)
        if token_id is None:
            raise StructuralTagError(
                pointer,
                f"{text!r} is not a special token of this tokenizer (a token format names a "
                "control token such as '[TOOL_CALLS]'; write other text as a const_string)",
            )
        ids.append(token_id)
    return vocab.with_control_tokens(ids)


class _Translator:
    """Format nodes -> symbols of one :class:`RuleBuilder` grammar."""

    def __init__(self, json_options: dict[str, Any]) -> None:
        self.builder = RuleBuilder()
        self.json_options = json_options
        self._embedded: dict[tuple, int] = {}  # (kind, source[, any_order]) -> start symbol
        self._follows: dict[tuple[str, ...], tuple[int, ...]] = {}  # end strings -> symbols

    def symbols(self, node: Format, follow: Follow) -> tuple[int, ...]:
        """Symbols whose language is ``node``'s text, then one of ``follow`` (if given)."""
        if isinstance(node, ConstString):
            return self._literal(node.value, node.pointer) + self._follow(follow)
        if isinstance(node, Token):  # its text: the vocabulary lets the token write it
            return self._literal(node.text, node.pointer) + self._follow(follow)
        if isinstance(node, Regex):
            return (self._regex(node),) + self._follow(follow)
        if isinstance(node, JsonSchema):
            return (self._json_schema(node),) + self._follow(follow)
        if isinstance(node, GrammarText):
            return (self._grammar(node),) + self._follow(follow)
        if isinstance(node, AnyText):
            return (self._any_text(node, follow),)
        if isinstance(node, Sequence):
            out: tuple[int, ...] = ()
            for element in node.elements[:-1]:
                out += self.symbols(element, None)
            return out + self.symbols(node.elements[-1], follow)
        if isinstance(node, Or):
            lhs = self.builder.nonterminal(f"or@{node.pointer}")
            for element in node.elements:
                self.builder.rule(lhs, self.symbols(element, follow))
            return (lhs,)
        if isinstance(node, Repeat):
            return self._repeat(node, follow)
        if isinstance(node, Tag):
            begin = self._literal(node.begin, f"{node.pointer}/begin")
            return begin + self.symbols(node.content, node.ends) + self._follow(follow)
        if isinstance(node, TriggeredTags):
            return (self._triggered_tags(node, follow),)
        return (self._tags_with_separator(node, follow),)

    # --- leaves ---

    def _literal(self, text: str, pointer: str) -> tuple[int, ...]:
        if not text:
            return ()
        return (self.builder.terminal(literal(text), f"{text!r}@{pointer}"),)

    def _follow(self, follow: Follow) -> tuple[int, ...]:
        """Symbols of one of the end strings ``follow``: one set of symbols per distinct
        ``follow`` (a turn's tools all end in the same strings; their language is the same
        wherever they stand)."""
        if follow is None:
            return ()
        found = self._follows.get(follow)
        if found is None:
            found = self._follows[follow] = self._new_follow(follow)
        return found

    def _new_follow(self, follow: tuple[str, ...]) -> tuple[int, ...]:
        texts = [t for t in follow if t]
        if not texts:
            return ()
        tree = trie_alt(texts)
        assert tree is not None
        if "" in follow:
            lhs = self.builder.nonterminal(f"end{list(follow)}")
            self.builder.rule(lhs, ())
            self.builder.rule(lhs, (self.builder.terminal(tree, f"end{texts}"),))
            return (lhs,)
        return (self.builder.terminal(tree, f"end{texts}"),)

    def _regex(self, node: Regex) -> int:
        where = f"{node.pointer}/pattern"
        try:
            tree = parse_regex(node.pattern, "python")
            regex_to_dfa(tree)  # refuses what the automata cannot build, here with a pointer
        except GrammarError as exc:
            raise StructuralTagError(where, f"regex cannot be compiled: {exc}") from None
        return self.builder.terminal(tree, f"regex@{node.pointer}")

    def _json_schema(self, node: JsonSchema) -> int:
        key = ("json", node.schema_text, node.any_order)
        found = self._embedded.get(key)
        if found is not None:
            return found
        options = self.json_options
        if node.any_order:
            options = {**options, "any_order": True}
        try:
            grammar = json_schema_to_cfg(node.schema, **options)
        except SchemaError as exc:
            raise StructuralTagError(node.pointer + exc.pointer, str(exc)) from None
        except GrammarError as exc:
            raise StructuralTagError(node.pointer, f"schema cannot be compiled: {exc}") from None
        start = self._embedded[key] = self.builder.embed(grammar, f"json@{node.pointer}")
        return start

    def _grammar(self, node: GrammarText) -> int:
        found = self._embedded.get((node.syntax, node.grammar))
        if found is not None:
            return found
        try:
            if node.syntax == "gbnf":
                grammar = gbnf_to_cfg(node.grammar, "root")
            else:
                grammar = lark_to_cfg(node.grammar, "start")
        except GrammarError as exc:
            raise StructuralTagError(
                f"{node.pointer}/grammar", f"{node.syntax} grammar cannot be compiled: {exc}"
            ) from None
        for name, regex in zip(grammar.terminal_names, grammar.terminal_regexes, strict=True):
            try:
                regex_to_dfa(regex, dialect="python")
            except GrammarError as exc:
                raise StructuralTagError(
                    f"{node.pointer}/grammar", f"terminal {name} cannot be compiled: {exc}"
                ) from None
        start = self._embedded[(node.syntax, node.grammar)] = self.builder.embed(
            grammar, f"{node.syntax}@{node.pointer}"
        )
        return start

    def _free_text(
        self, stops: tuple[str, ...], excludes: tuple[str, ...], follow: str | None, where: str
    ) -> int:
        return self.builder.terminal(
            self._free_text_tree(stops, excludes, follow, where), f"text@{where}"
        )

    @staticmethod
    def _free_text_tree(
        stops: tuple[str, ...], excludes: tuple[str, ...], follow: str | None, where: str
    ) -> Node:
        try:
            return free_text_tree(stops, excludes, follow)
        except FreeTextTooLarge as exc:
            raise StructuralTagError(where, str(exc)) from None

    def _any_text(self, node: AnyText, follow: Follow) -> int:
        lhs = self.builder.nonterminal(f"any_text@{node.pointer}")
        if follow is None:
            self.builder.rule(lhs, (self._free_text((), node.excludes, None, node.pointer),))
            return lhs
        stops = tuple(t for t in follow if t)
        for end in follow:
            text = self._free_text(stops, node.excludes, end, node.pointer)
            self.builder.rule(lhs, (text,) + self._literal(end, node.pointer))
        return lhs

    # --- combinators ---

    def _repeat(self, node: Repeat, follow: Follow) -> tuple[int, ...]:
        b = self.builder
        if (node.min_count, node.max_count) == (0, 1):  # optional: end detection reaches in
            lhs = b.nonterminal(f"optional@{node.pointer}")
            b.rule(lhs, self._follow(follow))
            b.rule(lhs, self.symbols(node.content, follow))
            return (lhs,)
        item = self.symbols(node.content, None)
        copies = node.min_count if node.max_count is None else node.max_count
        if copies > MAX_REPEAT_COPIES:
            raise StructuralTagError(
                node.pointer, f"repeat of {copies} copies is over the limit {MAX_REPEAT_COPIES}"
            )
        out = item * node.min_count
        if node.max_count is None:
            loop = b.nonterminal(f"repeat*@{node.pointer}")
            b.rule(loop, ())
            b.rule(loop, (loop,) + item)
            out += (loop,)
        else:
            tail: tuple[int, ...] = ()
            for k in range(node.max_count - node.min_count):
                lhs = b.nonterminal(f"repeat?{k}@{node.pointer}")
                b.rule(lhs, ())
                b.rule(lhs, item + tail)
                tail = (lhs,)
            out += tail
        return out + self._follow(follow)

    def _tag_choice(self, tags: Sequence_[Tag], name: str) -> int:
        """A nonterminal deriving any one of ``tags`` (begin, content, one end), the begins
        left-factored into a radix tree of literal terminals: where begins share a prefix,
        one terminal reads it and only the branches after it are expected next (the
        ``<tool_call>\n{"name": "`` of a turn's 100 tools is one terminal, not 100 begins
        the lexer follows side by side). The same language as one rule per tag."""
        items = [(tag.begin, self.symbols(tag.content, tag.ends)) for tag in tags]
        return self._radix(items, name, tags[0].pointer)

    def _radix(self, items: list[tuple[str, tuple[int, ...]]], name: str, pointer: str) -> int:
        b = self.builder
        lhs = b.nonterminal(name)
        by_first: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
        for text, rest in items:
            if text:
                by_first.setdefault(text[0], []).append((text, rest))
            else:
                b.rule(lhs, rest)
        for k, group in enumerate(by_first.values()):
            if len(group) == 1:
                text, rest = group[0]
                b.rule(lhs, self._literal(text, pointer) + rest)
                continue
            prefix = os.path.commonprefix([text for text, _ in group])
            tails = [(text[len(prefix) :], rest) for text, rest in group]
            child = self._radix(tails, f"{name}/{k}", pointer)
            b.rule(lhs, self._literal(prefix, pointer) + (child,))
        return lhs

    def _triggered_tags(self, node: TriggeredTags, follow: Follow) -> int:
        b = self.builder
        stops = node.triggers + tuple(t for t in (follow or ()) if t)
        where = node.pointer
        lhs = b.nonterminal(f"triggered_tags@{where}")
        # the free text before a tag depends on the tag's begin: tags grouped by its tree
        by_text: dict[Node, list[Tag]] = {}
        for tag in node.tags:
            tree = self._free_text_tree(stops, node.excludes, tag.begin, where)
            by_text.setdefault(tree, []).append(tag)
        choices = {
            tree: self._tag_choice(tags, f"tag{k}@{where}")
            for k, (tree, tags) in enumerate(by_text.items())
        }
        if node.at_least_one:  # a tag first, without free text before it
            first_tag = b.nonterminal(f"tag@{where}")
            for choice in choices.values():
                b.rule(first_tag, (choice,))
            if node.stop_after_first:
                b.rule(lhs, (first_tag,) + self._follow(follow))
                return lhs
        text_tag = b.nonterminal(f"text tag@{where}")  # free text, then a tag
        for tree, choice in choices.items():
            b.rule(text_tag, (b.terminal(tree, f"text@{where}"), choice))
        if node.stop_after_first:  # (and not at_least_one)
            b.rule(lhs, (text_tag,) + self._follow(follow))
            b.rule(lhs, self._last_text(node, stops, follow))
            return lhs
        loop = b.nonterminal(f"more tags@{where}")
        b.rule(loop, ())
        b.rule(loop, (loop, text_tag))
        first = (first_tag,) if node.at_least_one else ()
        b.rule(lhs, first + (loop,) + self._last_text(node, stops, follow))
        return lhs

    def _last_text(
        self, node: TriggeredTags, stops: tuple[str, ...], follow: Follow
    ) -> tuple[int, ...]:
        """Symbols of the free text that ends a ``triggered_tags`` (then ``follow``)."""
        b = self.builder
        where = node.pointer
        if follow is None:
            return (self._free_text(stops, node.excludes, None, where),)
        last = b.nonterminal(f"last text@{where}")
        for end in follow:
            text = self._free_text(stops, node.excludes, end, where)
            b.rule(last, (text,) + self._literal(end, where))
        return (last,)

    def _tags_with_separator(self, node: TagsWithSeparator, follow: Follow) -> int:
        b = self.builder
        where = node.pointer
        any_tag = self._tag_choice(node.tags, f"tag@{where}")
        after = self._follow(follow)
        lhs = b.nonterminal(f"tags_with_separator@{where}")
        if not node.at_least_one:
            b.rule(lhs, after)
        if node.stop_after_first:
            b.rule(lhs, (any_tag,) + after)
            return lhs
        tags = b.nonterminal(f"tags@{where}")
        b.rule(tags, (any_tag,))
        b.rule(tags, (tags,) + self._literal(node.separator, f"{where}/separator") + (any_tag,))
        b.rule(lhs, (tags,) + after)
        return lhs
