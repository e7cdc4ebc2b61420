"""The tree combinators against ``re`` on the regex text they stand for, and the size measure.

Each combinator must denote what its regex text would (``seq`` = concatenation, ``alt`` =
union, ``repeat`` = counted repetition, ``trie_alt`` = the word set); every tree's
``num_chars`` must equal the length of its printed regex; and the printed regex must parse
back to a tree with the same automaton (what ``json_schema_to_regex`` hands to other tools).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar.automata.byte_dfa import same_language
from formcast.grammar.index.compile import regex_to_dfa
from formcast.grammar.regex.combinators import (
    alt,
    char_range,
    group,
    joined,
    literal,
    one_of,
    opt,
    repeat,
    seq,
    star,
    trie_alt,
)
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import EMPTY, Lookahead, Node, Repeat, to_python_regex

# (tree, equivalent regex text) building blocks, special characters included
_PARTS: list[tuple[Node, str]] = [
    (literal("a"), "a"),
    (alt([literal("a"), literal("b")]), "a|b"),
    (one_of("|("), r"[|(]"),
    (literal("a.b"), r"a\.b"),
    (char_range("a", "c"), "[a-c]"),
    (star(literal("x")), "x*"),
    (seq(literal("x"), literal("y")), "xy"),
    (EMPTY, ""),
    (literal("{1}"), r"\{1\}"),
]


def _same(node: Node | None, text: str | None, sample: str) -> bool:
    got = node is not None and re.fullmatch(to_python_regex(node), sample) is not None
    want = text is not None and re.fullmatch(text, sample) is not None
    return got == want


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(_PARTS))), min_size=1, max_size=3),
    st.text(alphabet="abcxy|(.{}1", max_size=6),
    st.integers(0, 2),
    st.one_of(st.none(), st.integers(0, 3)),
)
def test_combinators_mean_their_regex(picks, sample, low, high):
    nodes = [_PARTS[k][0] for k in picks]
    texts = [_PARTS[k][1] for k in picks]
    assert _same(seq(*nodes), "".join(f"(?:{t})" for t in texts), sample)
    assert _same(alt(nodes), "|".join(f"(?:{t})" for t in texts), sample)
    assert _same(opt(nodes[0]), f"(?:{texts[0]})?", sample)
    counted = (
        None
        if high is not None and high < low
        else f"(?:{texts[0]}){{{low},{high if high is not None else ''}}}"
    )
    assert _same(repeat(nodes[0], low, high), counted, sample)
    separated = joined(nodes, literal("|"))
    assert _same(separated, r"\|".join(f"(?:{t})" for t in texts), sample)


def test_empty_language_propagates():
    a = literal("a")
    assert seq(a, None) is None
    assert alt([None, None]) is None
    assert alt([None, a]) == a
    assert repeat(None, 0, 3) == EMPTY
    assert repeat(None, 1, 3) is None
    assert repeat(a, 3, 2) is None
    assert opt(None) == EMPTY
    assert joined([], a) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="ab.|", max_size=4), max_size=6), st.text(alphabet="ab.|", max_size=5)
)
def test_trie_alt_is_the_word_set(words, sample):
    node = trie_alt(words)
    if not words:
        assert node is None
        return
    assert (re.fullmatch(to_python_regex(node), sample) is not None) == (sample in set(words))


def _random_tree(draw_ints: list[int]) -> Node:
    """A deterministic tree from a list of ints (Hypothesis draws the list)."""
    leaves = [literal("a"), literal("{"), one_of("xyz"), char_range("\u00e0", "\u00ff"), EMPTY]
    stack: list[Node] = []
    for k in draw_ints:
        op = k % 6
        if op == 0 or len(stack) < 2:
            stack.append(leaves[k % len(leaves)])
        elif op == 1:
            b, a = stack.pop(), stack.pop()
            stack.append(seq(a, b))
        elif op == 2:
            b, a = stack.pop(), stack.pop()
            stack.append(alt([a, b]))  # type: ignore[arg-type]
        elif op == 3:
            stack.append(repeat(stack.pop(), k % 3, None if k % 4 == 0 else k % 3 + k % 5))  # type: ignore[arg-type]
        elif op == 4:
            stack.append(opt(stack.pop()))
        else:
            stack.append(star(stack.pop()))
    return seq(*stack) if stack else EMPTY


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=14))
def test_num_chars_is_the_printed_length_and_the_text_round_trips(ints):
    node = _random_tree(ints)
    text = to_python_regex(node)
    assert node.num_chars == len(text)
    assert same_language(regex_to_dfa(node), regex_to_dfa(parse_regex(text)))


def test_a_lookahead_group_is_kept_whole():
    """``group`` keeps a guard's scope to its own group: ``seq`` never flattens it."""
    guard = Lookahead(seq(Repeat(literal("a"), 1, 2, -1), literal('"')), -1)
    guarded = group(guard, star(literal("a")), literal('"'))
    whole = seq(literal('"'), guarded, literal("b"))
    text = to_python_regex(whole)
    assert whole.num_chars == len(text)
    assert re.fullmatch(text, '"aa"b') and not re.fullmatch(text, '"aaa"b')
