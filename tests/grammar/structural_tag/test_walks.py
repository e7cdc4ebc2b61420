"""Structural tags walked token by token with the real SmolLM2 tokenizer: valid outputs
(including tokens that straddle free text and a trigger, or a tag's end and free text) are
accepted and end accepting; invalid ones are rejected; jump-forward, rollback and fork; compile
errors name their pointer; GrammarSpec builds the kind."""

from __future__ import annotations

import pickle

import pytest

from formcast.grammar.limits import GrammarLimits, check_grammar_size
from formcast.grammar.spec import GrammarSpec
from formcast.grammar.structural_tag import StructuralTagError, compile_structural_tag
from tests.grammar.structural_tag._helpers import mask_mismatches, straddles, walk
from tests.grammar.structural_tag._reference import Reference

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}
TIME = {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}


def _tool(name: str, schema: dict) -> dict:
    return {
        "type": "tag",
        "begin": f"<function={name}>",
        "content": {"type": "json_schema", "json_schema": schema},
        "end": "</function>",
    }


def _tools(**flags) -> dict:
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [_tool("get_weather", WEATHER), _tool("get_time", TIME)],
            **flags,
        },
    }


REASONING = {
    "type": "structural_tag",
    "format": {
        "type": "sequence",
        "elements": [
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
            {"type": "json_schema", "json_schema": TIME},
        ],
    },
}
NO_FENCE = {"type": "structural_tag", "format": {"type": "any_text", "excludes": ["```"]}}

VALID = [
    (_tools(), 'Hi there <function=get_weather>{"city":"Paris"}</function>.'),
    (
        _tools(),
        'x <function=get_time>{"zone":"UTC"}</function>ok.<function=get_weather>{"city":"Oslo","days":3}</function>',
    ),
    (_tools(), "No tools needed: a < b, and <function is just text <functio"),
    (_tools(), ""),
    (_tools(at_least_one=True), '<function=get_time>{"zone":"CET"}</function> done'),
    (_tools(stop_after_first=True), 'Sure.<function=get_time>{"zone":"CET"}</function>'),
    (
        _tools(at_least_one=True, stop_after_first=True),
        '<function=get_weather>{"city":"Rome"}</function>',
    ),
    (REASONING, '<think>Which zone? Not </thin or </ think></think>{"zone":"UTC"}'),
    (NO_FENCE, "code: `` ` `x`` ``"),
]
INVALID = [
    (_tools(), 'a <function=get_weather>{"city":5}</function>'),  # violates the schema
    (_tools(), 'a <function=get_weather>{"town":"Paris"}</function>'),  # required missing
    (_tools(), "a <function=get_date>{}</function>"),  # no such tag
    (_tools(), 'a <function=get_time>{"zone":"UTC"}'),  # missing end string
    (
        _tools(stop_after_first=True),
        '<function=get_time>{"zone":"UTC"}</function><function=get_time>{"zone":"UTC"}</function>',
    ),
    (_tools(stop_after_first=True), '<function=get_time>{"zone":"UTC"}</function> and text'),
    (_tools(at_least_one=True), 'text first <function=get_time>{"zone":"UTC"}</function>'),
    (_tools(at_least_one=True), "no call at all"),
    (REASONING, '<think>a</think> {"zone":"UTC"}'),
    (REASONING, '<think>a</think>b</think>{"zone":"UTC"}'),
    (NO_FENCE, "code: ```python"),
]


@pytest.fixture(scope="module")
def compiled(smollm2_vocab):
    cache: dict[str, object] = {}

    def get(request: dict):
        key = repr(request)
        if key not in cache:
            cache[key] = compile_structural_tag(request, smollm2_vocab, cache=False)
        return cache[key]

    return get


@pytest.mark.parametrize(("request_", "text"), VALID)
def test_valid_outputs_walk_and_accept(compiled, smollm2_tokenizer, request_, text):
    assert Reference(request_).is_sentence(text)
    assert walk(compiled(request_), smollm2_tokenizer, text) == (True, True)


@pytest.mark.parametrize(("request_", "text"), INVALID)
def test_invalid_outputs_are_rejected(compiled, smollm2_tokenizer, request_, text):
    assert not Reference(request_).is_sentence(text)
    assert walk(compiled(request_), smollm2_tokenizer, text) != (True, True)
    matcher = compiled(request_).matcher()
    assert not (matcher.accept_bytes(text.encode()) and matcher.is_accepting())


def test_tokens_straddle_the_boundaries(smollm2_tokenizer):
    """The walks above do cross segment boundaries inside one token (checked, so a tokenizer
    change that stopped merging would be noticed)."""
    text = VALID[0][1]
    assert straddles(smollm2_tokenizer, text, text.index("<function="))  # " <" : text | trigger
    assert straddles(smollm2_tokenizer, text, len(text) - 1)  # ">." : end | free text
    second = VALID[1][1]
    assert straddles(smollm2_tokenizer, second, second.index("<function=", 5))  # ".<"


def test_forced_bytes_jump_over_begin_and_end(compiled):
    grammar = compiled(_tools())
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"Let me check <function=get_t")
    assert matcher.forced_bytes() == b'ime>{"zone":'  # (an optional space may follow)
    assert matcher.accept_bytes(b'ime>{"zone": "UT')
    assert matcher.forced_bytes() == b'C"}</function>'


def test_rollback_and_fork_keep_exact_state(compiled, smollm2_tokenizer):
    grammar = compiled(_tools())
    ids = smollm2_tokenizer.encode(VALID[0][1], add_special_tokens=False)
    matcher = grammar.matcher()
    for token_id in ids[:5]:
        assert matcher.accept_token(token_id)
    twin = matcher.fork()
    row = matcher.allowed_token_ids().tolist()
    for token_id in ids[5:9]:
        assert matcher.accept_token(token_id)
    matcher.rollback(4)
    assert matcher.allowed_token_ids().tolist() == row == twin.allowed_token_ids().tolist()
    for token_id in ids[5:]:
        assert twin.accept_token(token_id)
    assert twin.is_accepting()


def test_the_mask_check_can_fail(compiled):
    """A grammar compared with another format's reference disagrees (the check has teeth)."""
    first_only = _tools(stop_after_first=True)
    grammar = compiled(_tools())
    prefix = 'a<function=get_time>{"zone":"UTC"}</function>'
    assert mask_mismatches(grammar, first_only["format"], prefix) != []


def test_compile_errors_name_the_pointer(smollm2_vocab):
    bad_schema = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "x"},
                {
                    "type": "json_schema",
                    "json_schema": {"type": "object", "properties": {"a": {"type": "frob"}}},
                },
            ],
        },
    }
    with pytest.raises(StructuralTagError) as info:
        compile_structural_tag(bad_schema, smollm2_vocab, cache=False)
    assert info.value.pointer.startswith("/format/elements/1/json_schema")
    bad_regex = {"type": "structural_tag", "format": {"type": "regex", "pattern": "a(b"}}
    with pytest.raises(StructuralTagError, match=r"^/format/pattern: "):
        compile_structural_tag(bad_regex, smollm2_vocab, cache=False)
    bad_lark = {
        "type": "structural_tag",
        "format": {
            "type": "or",
            "elements": [
                {"type": "const_string", "value": "x"},
                {"type": "grammar", "grammar": "start: undefined_rule"},
            ],
        },
    }
    with pytest.raises(StructuralTagError, match=r"^/format/elements/1/grammar: "):
        compile_structural_tag(bad_lark, smollm2_vocab, cache=False)


def test_embedded_grammars_keep_their_ignore_and_symbols_apart(smollm2_vocab, smollm2_tokenizer):
    lark = 'start: "(" NUM ("," NUM)* ")"\nNUM: /[0-9]+/\n%import common.WS\n%ignore WS'
    request = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "grammar", "grammar": lark},
                {"type": "const_string", "value": "|"},
                {"type": "grammar", "grammar": 'root ::= "(" [a-z]+ ")"'},
            ],
        },
    }
    grammar = compile_structural_tag(request, smollm2_vocab, cache=False)
    assert walk(grammar, smollm2_tokenizer, "( 1 , 22 ) |(ab)") == (True, True)
    # the Lark grammar's %ignore does not leak into the GBNF part or around "|"
    matcher = grammar.matcher()
    assert not (matcher.accept_bytes(b"(1)|( ab)") and matcher.is_accepting())
    assert grammar.kind == "structural_tag"


def test_grammar_spec_and_shorthand(smollm2_vocab):
    request = _tools(stop_after_first=True)
    spec = GrammarSpec.structural_tag(request)
    same = GrammarSpec.coerce({"structural_tag": request})
    assert spec == same and spec.key[0] == "structural_tag"
    grammar = spec.compile_fn(smollm2_vocab)
    assert grammar.kind == "structural_tag"
    assert spec.recipe is not None and spec.recipe.spec() == spec
    spec.recipe.check_size(GrammarLimits())
    with pytest.raises(StructuralTagError):
        GrammarSpec.structural_tag({"type": "structural_tag", "format": {"type": "nope"}})
    tiny = GrammarLimits(max_pattern_chars=3)
    regex_tag = {"type": "structural_tag", "format": {"type": "regex", "pattern": "[a-z]+x"}}
    with pytest.raises(ValueError, match="max_pattern_chars"):
        check_grammar_size("structural_tag", regex_tag, tiny)
    clone = pickle.loads(pickle.dumps(grammar))
    assert (
        clone.matcher().allowed_token_ids().tolist()
        == grammar.matcher().allowed_token_ids().tolist()
    )
