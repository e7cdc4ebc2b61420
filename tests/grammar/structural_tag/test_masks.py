"""Token masks of structural tags on three real vocabularies (SmolLM2, Llama 3.2 and Gemma 3,
which cut triggers and tags at different places) against the reference recogniser: at each
position, every token (whole UTF-8 text) is allowed iff prefix + token is a prefix of some
valid output, and EOS iff the prefix is a complete output."""

from __future__ import annotations

import pytest

from formcast.grammar.structural_tag import compile_structural_tag
from tests.grammar.structural_tag._helpers import mask_mismatches

ENUM_CALL = {
    "type": "triggered_tags",
    "triggers": ["<tool_call>"],
    "tags": [
        {
            "type": "tag",
            "begin": "<tool_call>\n",
            "content": {"type": "json_schema", "json_schema": {"enum": ["a", "bc"]}},
            "end": "\n</tool_call>",
        }
    ],
}
OVERLAPPING = {  # a trigger that overlaps itself
    "type": "triggered_tags",
    "triggers": ["aa"],
    "tags": [
        {
            "type": "tag",
            "begin": "aab",
            "content": {"type": "regex", "pattern": "[0-9]+"},
            "end": "!",
        }
    ],
}
REASONING = {
    "type": "sequence",
    "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        {
            "type": "or",
            "elements": [
                {"type": "const_string", "value": "yes"},
                {"type": "const_string", "value": "no"},
            ],
        },
    ],
}
IN_TAG = {  # triggered tags inside a tag: the free text also stops at the tag's end
    "type": "tag",
    "begin": "<r>",
    "content": {
        "type": "triggered_tags",
        "triggers": ["<f"],
        "tags": [
            {
                "type": "tag",
                "begin": "<f>",
                "content": {"type": "const_string", "value": "1"},
                "end": "</f>",
            }
        ],
        "stop_after_first": True,
        "excludes": ["##"],
    },
    "end": ["</r>", "</x>"],
}
SEPARATED = {
    "type": "tags_with_separator",
    "tags": [
        {
            "type": "tag",
            "begin": "[a]",
            "content": {"type": "regex", "pattern": "[a-z]{1,3}"},
            "end": "[/a]",
        },
        {
            "type": "tag",
            "begin": "[b]",
            "content": {"type": "any_text", "excludes": ["x"]},
            "end": "[/b]",
        },
    ],
    "separator": ", ",
    "at_least_one": True,
}

CASES = [
    (ENUM_CALL, ["Hi", "Hi <tool", 'Hi <tool_call>\n"b', 'x<tool_call>\n"a"\n</tool_call> ']),
    (OVERLAPPING, ["", "a", "aa", "xaab12"]),
    (REASONING, ["<thi", "<think>hm </", "<think></think>"]),
    (IN_TAG, ["<r>text #", "<r>a<f>1</f", "<r>t</"]),
    (SEPARATED, ["", "[a]ab", "[a]a[/a], [b]zy"]),
]


# the other vocabularies on the trigger and tag cases (the reference reads every token in
# Python: 262k Gemma tokens per prefix)
OTHER_VOCAB_CASES = (0, 2)


@pytest.fixture(scope="module")
def grammars(request):
    return {}


def _grammar(grammars, request, vocab_name: str, case: int):
    if (vocab_name, case) not in grammars:
        vocab = request.getfixturevalue(vocab_name)
        fmt = {"type": "structural_tag", "format": CASES[case][0]}
        grammars[vocab_name, case] = compile_structural_tag(fmt, vocab, cache=False)
    return grammars[vocab_name, case]


@pytest.mark.parametrize(
    ("vocab_name", "case", "prefix"),
    [
        (vocab_name, k, prefix)
        for vocab_name in ("smollm2_vocab", "llama_vocab", "gemma_vocab")
        for k, (_, prefixes) in enumerate(CASES)
        if vocab_name == "smollm2_vocab" or k in OTHER_VOCAB_CASES
        for prefix in prefixes
    ],
)
def test_mask_equals_reference(grammars, request, vocab_name, case, prefix):
    grammar = _grammar(grammars, request, vocab_name, case)
    assert mask_mismatches(grammar, CASES[case][0], prefix) == []
