"""Free text through triggered tags and excluded strings, with Hypothesis: random text made of
pieces of the triggers (partial triggers, overlapping ones) is accepted byte by byte exactly
when the reference recogniser says it is a prefix / a complete output; the free-text terminal's
own language equals its definition (checked with ``re.fullmatch`` on the printed tree)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.grammar.regex.syntax_tree import to_python_regex
from formcast.grammar.structural_tag import compile_structural_tag, free_text_tree
from tests.grammar.structural_tag._reference import Reference

FORMATS = {
    "overlap": {
        "type": "triggered_tags",
        "triggers": ["aa", "<ab"],
        "tags": [
            {
                "type": "tag",
                "begin": "aa(",
                "content": {"type": "regex", "pattern": "[0-9]"},
                "end": ")",
            },
            {"type": "tag", "begin": "<ab>", "content": {"type": "any_text"}, "end": "</ab>"},
        ],
        "excludes": ["zz"],
    },
    "in_tag": {
        "type": "tag",
        "begin": "<r>",
        "content": {
            "type": "triggered_tags",
            "triggers": ["<a"],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<a>",
                    "content": {"type": "const_string", "value": "1"},
                    "end": "</a>",
                }
            ],
        },
        "end": "</r>",
    },
    "first_only": {
        "type": "triggered_tags",
        "triggers": ["ab"],
        "tags": [{"type": "tag", "begin": "ab", "content": {"type": "any_text"}, "end": "ba"}],
        "stop_after_first": True,
    },
}
# text from pieces of the triggers, tags and ends, so partial and overlapping ones are common
PIECES = [
    "a",
    "aa",
    "b",
    "<",
    "<a",
    "<ab>",
    "(",
    "1",
    ")",
    "z",
    "x",
    " ",
    "</",
    "</ab>",
    "<r>",
    "</r>",
    "<a>",
    "</a>",
    "ab",
    "ba",
    "é",
]


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    return {
        name: compile_structural_tag(
            {"type": "structural_tag", "format": fmt}, smollm2_vocab, cache=False
        )
        for name, fmt in FORMATS.items()
    }


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(sorted(FORMATS)), pieces=st.lists(st.sampled_from(PIECES), max_size=12))
def test_random_text_matches_reference(grammars, name, pieces):
    text = "".join(pieces)
    reference = Reference(FORMATS[name])
    matcher = grammars[name].matcher()
    alive = True
    for k in range(1, len(text) + 1):  # character by character: every prefix agrees
        step = text[k - 1].encode()
        alive = matcher.accept_bytes(step)
        assert alive == reference.is_prefix(text[:k]), text[:k]
        if not alive:
            break
    if alive:
        assert matcher.is_accepting() == reference.is_sentence(text)


def _definition(text: str, stops, excludes, follow) -> bool:
    if any(s in text for s in (*stops, *excludes)):
        return False
    if follow is None or not stops:
        return True
    found = [p for p in ((text + follow).find(s) for s in stops) if p >= 0]
    return not found or min(found) >= len(text)


@settings(max_examples=200, deadline=None)
@given(
    stops=st.lists(st.text("ab<", min_size=1, max_size=4), min_size=1, max_size=3),
    excludes=st.lists(st.text("abc", min_size=1, max_size=3), max_size=2),
    follow=st.one_of(st.none(), st.text("ab<c", min_size=1, max_size=5)),
    texts=st.lists(st.text("ab<cd", max_size=8), min_size=5, max_size=20),
)
def test_free_text_tree_is_its_definition(stops, excludes, follow, texts):
    pattern = re.compile(to_python_regex(free_text_tree(tuple(stops), tuple(excludes), follow)))
    for text in texts:
        expected = _definition(text, stops, excludes, follow)
        assert bool(pattern.fullmatch(text)) == expected, (text, stops, excludes, follow)


def test_overlapping_trigger_has_one_reading():
    pattern = re.compile(to_python_regex(free_text_tree(("aa",), (), "aa(")))
    assert pattern.fullmatch("xa") is None  # "xa" + "aa(" holds "aa" at 1, before the begin
    assert pattern.fullmatch("aa") is None  # holds the trigger itself
    assert pattern.fullmatch("") and pattern.fullmatch("x") and pattern.fullmatch("ab")
