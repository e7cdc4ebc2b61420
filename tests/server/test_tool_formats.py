"""Model-native tool-call formats on the real SmolLM2 and Llama 3.2 vocabularies (Llama's
``{"``, ``":``, `` {"`` and ``}}`` tokens straddle the call's parts): masks of finite turns
against brute force over every token, walks of valid turns (several calls, free text with
``{``, an answer in the response schema) accepted and invalid ones rejected, and the parser:
rendered calls read back whole and in streamed pieces."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from formcast.grammar.structural_tag import compile_structural_tag
from formcast.server.protocol import ToolDefinition
from formcast.server.tool_formats import FORMATS, ToolCallsParser, detect_format, tool_call_tag

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
TOOLS = [
    ToolDefinition.model_validate({"type": "function", "function": {"name": n, "parameters": p}})
    for n, p in (("get_weather", WEATHER), ("add", ADD))
]
# finite arguments (closed objects of enums): the turn's language is a finite set of texts
FINITE_ARGS = {"ping": [{}], "go": [{"to": "a"}, {"to": "b"}]}
FINITE = [
    ToolDefinition.model_validate(
        {"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}
    ),
    ToolDefinition.model_validate(
        {
            "type": "function",
            "function": {
                "name": "go",
                "parameters": {
                    "type": "object",
                    "properties": {"to": {"enum": ["a", "b"]}},
                    "required": ["to"],
                },
            },
        }
    ),
]
VOCABS = ["smollm2", "llama3.2", "gemma3"]


@pytest.fixture(params=VOCABS)
def vocab_and_tokenizer(request):
    if request.param == "smollm2":
        return request.getfixturevalue("smollm2_vocab"), request.getfixturevalue(
            "smollm2_tokenizer"
        )
    if request.param == "gemma3":
        return request.getfixturevalue("gemma_vocab"), request.getfixturevalue("gemma_tokenizer")
    return request.getfixturevalue("llama_vocab"), request.getfixturevalue("llama_tokenizer")


ANSWER = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _grammar(vocab, fmt, mode, tools, parallel, answer=None):
    return compile_structural_tag(tool_call_tag(fmt, mode, tools, parallel, answer), vocab)


def _accepts(grammar, tokenizer, text: str) -> bool:
    matcher = grammar.matcher()
    for token_id in tokenizer.encode(text, add_special_tokens=False):
        if token_id not in set(matcher.allowed_token_ids().tolist()):
            assert not matcher.accept_token(token_id)
            return False
        assert matcher.accept_token(token_id)
    return matcher.is_accepting()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_finite_turn_masks_equal_brute_force(vocab_and_tokenizer, name):
    vocab, _ = vocab_and_tokenizer
    fmt = FORMATS[name]
    grammar = _grammar(vocab, fmt, "required", FINITE, False)
    outputs = [
        fmt.render_calls([(name, args)])
        for name, choices in FINITE_ARGS.items()
        for args in choices
    ]
    eos = set(vocab.eos_token_ids)
    for output in outputs[1:]:
        data = output.encode()
        for cut in sorted({0, 1, len(fmt.trigger) - 1, len(fmt.call_prefix("go")), len(data) - 1}):
            prefix = data[:cut]
            matcher = grammar.matcher()
            assert matcher.accept_bytes(prefix) or not prefix
            expected = {
                t for t, d in enumerate(vocab.token_bytes)
                if d and any(o.encode().startswith(prefix + d) for o in outputs)
            }  # fmt: skip
            if prefix.decode() in outputs:
                expected |= eos
            assert set(matcher.allowed_token_ids().tolist()) == expected, (name, prefix)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_required_and_parallel_turns(vocab_and_tokenizer, name):
    vocab, tokenizer = vocab_and_tokenizer
    fmt = FORMATS[name]
    one = fmt.render_calls([("get_weather", {"city": "Paris", "unit": "c"})])
    two = fmt.render_calls(
        [("get_weather", {"city": "Lima", "unit": "f"}), ("add", {"a": 1, "b": -2})]
    )
    bad_args = fmt.render_calls([("get_weather", {"city": "Paris", "unit": "k"})])
    unknown = fmt.render_calls([("delete_all", {})])
    single = _grammar(vocab, fmt, "required", TOOLS, False)
    parallel = _grammar(vocab, fmt, "required", TOOLS, True)
    assert _accepts(single, tokenizer, one)
    assert not _accepts(single, tokenizer, two)  # parallel_tool_calls=false: one call
    assert _accepts(parallel, tokenizer, one)
    assert _accepts(parallel, tokenizer, two)
    for text in (bad_args, unknown, "Sure, " + one, ""):
        assert not _accepts(parallel, tokenizer, text)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_auto_turns_allow_braces_in_text(vocab_and_tokenizer, name):
    vocab, tokenizer = vocab_and_tokenizer
    fmt = FORMATS[name]
    call = fmt.render_calls([("add", {"a": 2, "b": 3})])
    grammar = _grammar(vocab, fmt, "auto", TOOLS, False)
    assert _accepts(grammar, tokenizer, 'Use {"x": 1} as a set {1, 2}.')
    assert _accepts(grammar, tokenizer, "Let me add them. " + call)
    assert not _accepts(grammar, tokenizer, call + " done")  # nothing after the call
    broken = fmt.render_calls([("add", {"a": "two", "b": 3})])
    assert not _accepts(grammar, tokenizer, broken)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_auto_with_response_format_is_calls_or_the_answer(vocab_and_tokenizer, name):
    vocab, tokenizer = vocab_and_tokenizer
    fmt = FORMATS[name]
    grammar = _grammar(vocab, fmt, "auto", TOOLS, True, ANSWER)
    assert _accepts(grammar, tokenizer, '{"ok":true}')
    assert _accepts(grammar, tokenizer, fmt.render_calls([("add", {"a": 1, "b": 1})]))
    assert not _accepts(grammar, tokenizer, "plain text")
    assert not _accepts(grammar, tokenizer, '{"ok":"yes"}')


def test_non_strict_tool_takes_any_object(smollm2_vocab, smollm2_tokenizer):
    loose = ToolDefinition.model_validate(
        {"type": "function", "function": {"name": "add", "parameters": ADD, "strict": False}}
    )
    fmt = FORMATS["hermes"]
    grammar = _grammar(smollm2_vocab, fmt, "required", [loose], False)
    assert _accepts(grammar, smollm2_tokenizer, fmt.render_calls([("add", {"x": [1, "y"]})]))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_parser_reads_rendered_calls_whole_and_streamed(name):
    fmt = FORMATS[name]
    calls = [("get_weather", {"city": "Paris", "unit": "c"}), ("add", {"a": 1, "b": -2})]
    text = (
        "Checking both. " + fmt.render_calls(calls)
        if not fmt.list_begin
        else fmt.render_calls(calls)
    )
    whole = ToolCallsParser(fmt)
    whole.feed(text)
    whole.finish()
    assert [c.name for c in whole.calls] == ["get_weather", "add"]
    assert [json.loads(c.arguments) for c in whole.calls] == [a for _, a in calls]
    assert all(c.is_complete for c in whole.calls)
    assert whole.content.strip() == ("Checking both." if not fmt.list_begin else "")
    rng = random.Random(7)
    for _ in range(5):
        parser = ToolCallsParser(fmt)
        content, pieces = "", {}
        k = 0
        while k < len(text):
            step = rng.randint(1, 6)
            got, deltas = parser.feed(text[k : k + step])
            content += got
            for delta in deltas:
                pieces.setdefault(delta["index"], []).append(delta)
            k += step
        rest, deltas = parser.finish()
        content += rest
        assert content == whole.content
        for index, deltas_of_call in pieces.items():
            assert deltas_of_call[0]["function"]["name"] == calls[index][0]
            arguments = "".join(d["function"]["arguments"] for d in deltas_of_call)
            assert json.loads(arguments) == calls[index][1]
            jsonschema.validate(json.loads(arguments), TOOLS[index].function.parameters)


def test_plain_text_turn_is_all_content():
    parser = ToolCallsParser(FORMATS["hermes"])
    content, deltas = parser.feed("No tool needed: <tool> is not <tool_call")
    rest, more = parser.finish()
    assert content + rest == "No tool needed: <tool> is not <tool_call" and not deltas + more


def test_format_detection():
    assert detect_format(None).name == "hermes"
    assert detect_format("{{ '[TOOL_CALLS]' }}").name == "mistral"
    assert detect_format("{{ '<|python_tag|>' }} parameters").name == "llama3_json"
    assert detect_format("<tool_call>").name == "hermes"


def _family_parse(name: str, text: str) -> list[tuple[str, dict]]:
    """The calls of ``text`` read by each family's published rules (as the model cards and
    vLLM's parsers read them): Hermes blocks, Llama's ``; ``-separated objects, Mistral's
    array after ``[TOOL_CALLS]``."""
    import re

    if name == "hermes":
        blocks = re.findall(r"<tool_call>\s*(.*?)\s*</tool_call>", text, re.S)
        return [(c["name"], c["arguments"]) for c in map(json.loads, blocks)]
    if name == "llama3_json":
        return [(c["name"], c["parameters"]) for c in map(json.loads, text.split("; "))]
    assert text.startswith("[TOOL_CALLS]")
    return [(c["name"], c["arguments"]) for c in json.loads(text[len("[TOOL_CALLS]") :])]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_random_turns_parse_by_the_family_rules(smollm2_vocab, name):
    """Turns drawn token by token from the masks (parallel calls allowed) are read by the
    family's own rules into calls whose arguments validate, and by our parser alike."""
    fmt = FORMATS[name]
    grammar = _grammar(smollm2_vocab, fmt, "required", TOOLS, True)
    schemas = {tool.function.name: tool.function.parameters for tool in TOOLS}
    eos = set(smollm2_vocab.eos_token_ids)
    rng = random.Random(11)
    num_parsed = 0
    for _ in range(12):
        matcher = grammar.matcher()
        text = b""
        for _step in range(300):
            allowed = sorted(matcher.allowed_token_ids().tolist())
            ends = [t for t in allowed if t in eos]
            token_id = ends[0] if ends and rng.random() < 0.5 else rng.choice(allowed)
            assert matcher.accept_token(token_id)
            if token_id in eos:
                break
            text += smollm2_vocab.token_bytes[token_id]
        if not matcher.is_terminated():
            continue  # a long walk (an integer with many digits): not finished, not checked
        calls = _family_parse(name, text.decode())
        for tool_name, arguments in calls:
            jsonschema.validate(arguments, schemas[tool_name])
        parser = ToolCallsParser(fmt)
        parser.feed(text.decode())
        parser.finish()
        assert [(c.name, json.loads(c.arguments)) for c in parser.calls] == calls
        num_parsed += 1
    assert num_parsed >= 6


def test_custom_tool_input_matches_its_regex(smollm2_vocab, smollm2_tokenizer):
    """An OpenAI custom tool: its raw input is a JSON string inside the call that matches the
    tool's regex, whole; the parser hands the call out once, as a ``custom`` entry."""
    custom = ToolDefinition.model_validate(
        {
            "type": "custom",
            "custom": {
                "name": "sql",
                "format": {
                    "type": "grammar",
                    "grammar": {"syntax": "regex", "definition": r"SELECT [a-z]+ FROM [a-z]+;"},
                },
            },
        }
    )
    fmt = FORMATS["hermes"]
    grammar = _grammar(smollm2_vocab, fmt, "required", [custom, TOOLS[1]], True)
    good = fmt.render_calls([("sql", "SELECT name FROM users;"), ("add", {"a": 1, "b": 2})])
    assert _accepts(grammar, smollm2_tokenizer, good)
    for bad_input in ("DROP TABLE users;", "SELECT name FROM users; --", "select x from y;"):
        assert not _accepts(grammar, smollm2_tokenizer, fmt.render_calls([("sql", bad_input)]))
    parser = ToolCallsParser(fmt, frozenset({"sql"}))
    deltas = []
    for k in range(0, len(good), 5):
        deltas += parser.feed(good[k : k + 5])[1]
    deltas += parser.finish()[1]
    custom_deltas = [d for d in deltas if d.get("type") == "custom"]
    assert len(custom_deltas) == 1 and custom_deltas[0]["index"] == 0
    assert custom_deltas[0]["custom"] == {"name": "sql", "input": "SELECT name FROM users;"}
    assert {d["index"] for d in deltas} == {0, 1}


def test_llama_python_tag_is_the_control_token(llama_vocab, llama_tokenizer):
    """Llama 3.2's ``<|python_tag|>`` is a special token: with it among the control tokens,
    a turn may start its calls with that token (required and auto turns), its text is not
    content, and a turn without it is still a valid turn."""
    fmt = FORMATS["llama3_json"]
    specials = frozenset(t for t, _ in llama_vocab.special_token_texts)
    assert fmt.control_tokens(specials) == {"<|python_tag|>"}
    tag_id = llama_vocab.control_token_id("<|python_tag|>")
    call = fmt.render_calls([("go", {"to": "b"})])
    for mode, prose in (("required", ""), ("auto", "Let me call it. ")):
        grammar = compile_structural_tag(
            tool_call_tag(fmt, mode, FINITE, True, None, specials), llama_vocab
        )
        matcher = grammar.matcher()
        for piece in llama_tokenizer.encode(prose, add_special_tokens=False):
            assert matcher.accept_token(piece)
        assert tag_id in set(matcher.allowed_token_ids().tolist())
        assert matcher.accept_token(tag_id)
        for piece in llama_tokenizer.encode(call, add_special_tokens=False):
            assert piece in set(matcher.allowed_token_ids().tolist())
            assert matcher.accept_token(piece)
        assert matcher.is_accepting(), mode
        assert _accepts(grammar, llama_tokenizer, prose + call)  # without the token
    parser = ToolCallsParser(fmt)
    text = "Let me call it. <|python_tag|>" + call
    content, deltas = "", []
    for k in range(0, len(text), 3):
        got, more = parser.feed(text[k : k + 3])
        content, deltas = content + got, deltas + more
    rest, more = parser.finish()
    assert (content + rest).strip() == "Let me call it."
    assert [c.name for c in parser.calls] == ["go"] and parser.calls[0].is_complete


def _vocab_with_tool_calls_token():
    """Every byte as a token, ``[TOOL_CALLS]`` as a special token, and EOS."""
    from formcast.grammar.index.vocabulary import Vocabulary

    tokens = [bytes([b]) for b in range(256)] + [b"", b""]
    return Vocabulary(
        token_bytes=tuple(tokens),
        eos_token_ids=frozenset({257}),
        special_token_ids=frozenset({256, 257}),
        vocab_size=258,
        kind="byte_level",
        num_tokenizer_tokens=258,
        special_token_texts=(("[TOOL_CALLS]", 256),),
    )


@pytest.mark.parametrize("mode", ["required", "auto"])
def test_mistral_calls_start_with_the_control_token(mode):
    """Mistral's ``[TOOL_CALLS]`` as a special token (id 256 here): the calls' array follows
    it; in auto turns free text ends at it; the spelled-out text stays valid."""
    vocab = _vocab_with_tool_calls_token()
    fmt = FORMATS["mistral"]
    tag = tool_call_tag(fmt, mode, FINITE, True, None, frozenset({"[TOOL_CALLS]"}))
    grammar = compile_structural_tag(tag, vocab, cache=False)
    call = fmt.render_calls([("go", {"to": "a"})])
    prose = "" if mode == "required" else "Sure. "
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prose.encode())
    allowed = set(matcher.allowed_token_ids().tolist())
    assert 256 in allowed and (mode == "auto") == (ord("S") in allowed)
    assert matcher.accept_token(256)
    assert 256 not in set(matcher.allowed_token_ids().tolist())
    assert matcher.accept_bytes(call.removeprefix("[TOOL_CALLS]").encode())
    assert matcher.is_accepting()
    spelled = grammar.matcher()
    assert spelled.accept_bytes((prose + call).encode()) and spelled.is_accepting()
