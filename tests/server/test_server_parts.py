"""Server parts without a server: chat conversion, tool grammars, metrics text, sampling mapping."""

from __future__ import annotations

import json

import pytest
from server_helpers import parse_metrics

from formcast.errors import SamplingParamsError
from formcast.grammar.structural_tag import compile_structural_tag
from formcast.server.chat import chat_messages
from formcast.server.errors import APIError
from formcast.server.metrics import ServerMetrics
from formcast.server.protocol import ChatCompletionRequest, ToolDefinition
from formcast.server.sampling import sampling_params_from
from formcast.server.tool_formats import FORMATS, ToolCallsParser, tool_call_tag

HERMES = FORMATS["hermes"]

TOOLS = [
    ToolDefinition.model_validate(
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "parameters": {
                    "type": "object",
                    "properties": {"key": {"enum": ["a", "b"]}},
                    "required": ["key"],
                },
            },
        }
    ),
    ToolDefinition.model_validate({"type": "function", "function": {"name": "ping"}}),
]


def test_chat_messages_conversion():
    messages = [
        {
            "role": "developer",
            "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
        },
        {"role": "user", "content": "Look up a."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"key": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    out = chat_messages(messages, TOOLS, "auto")
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool"]
    assert out[0]["content"].startswith("Be brief.\n\n") and "lookup" in out[0]["content"]
    assert out[2]["content"] == HERMES.render_calls([("lookup", {"key": "a"})])
    assert chat_messages(messages[1:2], TOOLS, "none") == [
        {"role": "user", "content": "Look up a."}
    ]
    with pytest.raises(APIError) as info:
        chat_messages([{"role": "user", "content": [{"type": "image_url"}]}], [], "none")
    assert info.value.param == "messages[0].content[0]"
    with pytest.raises(APIError):
        chat_messages([{"role": "wizard", "content": "x"}], [], "none")


def _tool_grammar(vocab, mode, tools):
    return compile_structural_tag(tool_call_tag(HERMES, mode, tools, True), vocab)


def test_parsed_calls_keep_names_and_arguments():
    parser = ToolCallsParser(HERMES)
    parser.feed(HERMES.render_calls([("ping", {}), ("lookup", {"key": "b"})]))
    parser.finish()
    assert [(c.name, json.loads(c.arguments)) for c in parser.calls] == [
        ("ping", {}),
        ("lookup", {"key": "b"}),
    ]
    cut = ToolCallsParser(HERMES)
    cut.feed('<tool_call>\n{"name": "ping"')
    cut.finish()
    assert not cut.calls[0].is_complete


def test_auto_tool_grammar_language(smollm2_vocab):
    grammar = _tool_grammar(smollm2_vocab, "auto", TOOLS)

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return bool(matcher.accept_bytes(text.encode())) and matcher.is_accepting()

    assert accepts(HERMES.render_calls([("lookup", {"key": "a"})]))
    assert accepts("Sure. " + HERMES.render_calls([("ping", {})]))
    assert accepts("Hello there {not a call}")
    assert accepts('{"hello": 1}')  # free text may start with a brace
    assert not accepts(HERMES.render_calls([("lookup", {"key": "z"})]))
    assert not accepts('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>')


def test_auto_tool_grammar_nests_unconstrained_arguments_without_bound(smollm2_vocab):
    tools = [
        ToolDefinition.model_validate(
            {
                "type": "function",
                "function": {
                    "name": "store",
                    "parameters": {
                        "type": "object",
                        "properties": {"data": {}},
                        "required": ["data"],
                        "additionalProperties": False,
                    },
                },
            }
        )
    ]
    grammar = _tool_grammar(smollm2_vocab, "auto", tools)

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return bool(matcher.accept_bytes(text.encode())) and matcher.is_accepting()

    def call(arguments_text: str) -> str:
        return f'<tool_call>\n{{"name": "store", "arguments": {arguments_text}}}\n</tool_call>'

    # (strict=True closes the object branch of the `{}` schema itself, not of nested values)
    deep = [{"b": {"c": [[{"d": [1, "}]"]}]]}}, [[[]]]]
    compact = {"separators": (",", ":")}
    assert accepts(call(json.dumps({"data": deep}, **compact)))
    assert accepts(call(json.dumps({"data": [[[[[]]]]]}, **compact)))
    assert accepts("No call [{[{ needed")
    assert not accepts(call('{"data":[[[[]]]}'))
    assert not accepts(call('{"data":{},"x":1}'))


def test_sampling_mapping():
    def request(**fields):
        return ChatCompletionRequest(
            model="m", messages=[{"role": "user", "content": "x"}], **fields
        )

    params = sampling_params_from(request(max_completion_tokens=7, stop="END", top_k=5))
    assert (params.max_tokens, params.stop, params.top_k, params.temperature) == (
        7,
        ("END",),
        5,
        1.0,
    )
    assert sampling_params_from(request()).max_tokens is None
    assert sampling_params_from(request(logprobs=True, top_logprobs=4)).logprobs == 4
    with pytest.raises(SamplingParamsError):
        sampling_params_from(request(min_p=2.0))
    with pytest.raises(APIError):
        sampling_params_from(request(max_tokens=3, max_completion_tokens=4))


def test_metrics_text_format():
    """prometheus_client exposition, read back by its own parser: escaped label values,
    cumulative buckets, every series labelled with the model name, no ``_created`` series."""
    metrics = ServerMetrics("smol\\m", max_model_len=100)
    metrics.count_http_request('/a"b\\c', 200)
    for value in (0.001, 0.2, 0.2, 1000.0):
        metrics.time_to_first_token.observe(value)
    samples = parse_metrics(metrics.render())
    labels = (("model_name", "smol\\m"), ("path", '/a"b\\c'), ("status", "200"))
    assert samples[("formcast:http_requests_total", labels)] == 1
    model = (("model_name", "smol\\m"),)
    assert samples[("formcast:time_to_first_token_seconds_count", model)] == 4
    assert samples[("formcast:time_to_first_token_seconds_bucket", (("le", "0.005"), *model))] == 1
    assert samples[("formcast:time_to_first_token_seconds_bucket", (("le", "0.2"), *model))] == 3
    assert samples[("formcast:time_to_first_token_seconds_bucket", (("le", "640.0"), *model))] == 3
    assert samples[("formcast:time_to_first_token_seconds_sum", model)] == pytest.approx(1000.401)
    assert samples[("formcast:prompt_tokens_total", model)] == 0
    # token-count histograms end at max_model_len
    bounds = [
        dict(labels)["le"]
        for name, labels in samples
        if name == "formcast:request_prompt_tokens_bucket"
    ]
    assert bounds[-2:] == ["100.0", "+Inf"]
    assert all(dict(labels)["model_name"] == "smol\\m" for _, labels in samples)


def test_serve_limits_help_matches_server_limits():
    """``formcast serve --help`` states the ServerLimits defaults (written out there so the
    CLI need not import the server to print its help)."""
    from formcast.cli import build_parser
    from formcast.server import ServerLimits

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    helps = {action.dest: action.help for action in serve._actions}
    defaults = ServerLimits()
    assert f"default: {defaults.max_body_bytes}," in helps["max_body_bytes"]
    assert f"default: {defaults.max_waiting_requests})" in helps["max_waiting_requests"]
    assert f"default: {defaults.drain_timeout_s:g})" in helps["drain_timeout"]
    assert f"default: {defaults.stall_timeout_s:g})" in helps["stall_timeout"]


def test_server_limits_refuse_unusable_values():
    from formcast.server import ServerLimits
    from formcast.server.limits import ServerConfigError

    for field, value in (
        ("max_body_bytes", 0),
        ("max_waiting_requests", 0),
        ("drain_timeout_s", -1.0),
        ("stall_timeout_s", 0.0),
    ):
        with pytest.raises(ServerConfigError, match=field):
            ServerLimits(**{field: value})


def test_serve_command_passes_engine_options(monkeypatch):
    import formcast.server
    from formcast.cli import main

    calls = []
    monkeypatch.setattr(formcast.server, "serve", lambda model, **kw: calls.append((model, kw)))
    argv = ["serve", "--model", "smollm2-135m", "--port", "8123", "--max-num-seqs", "4"]
    assert main([*argv, "--host", "0.0.0.0", "--no-jump-forward"]) == 0
    model, options = calls[0]
    assert model == "smollm2-135m"
    assert options["port"] == 8123 and options["host"] == "0.0.0.0"
    assert options["max_num_seqs"] == 4 and options["jump_forward"] is False
    assert "max_model_len" not in options  # unset knobs keep the engine defaults
    assert options["limits"] == formcast.server.ServerLimits()


def test_serve_command_passes_limits(monkeypatch):
    import formcast.server
    from formcast.cli import main

    calls = []
    monkeypatch.setattr(formcast.server, "serve", lambda model, **kw: calls.append((model, kw)))
    argv = ["serve", "--max-body-bytes", "1000", "--max-waiting-requests", "7"]
    assert main([*argv, "--drain-timeout", "2.5", "--stall-timeout", "9"]) == 0
    assert calls[0][1]["limits"] == formcast.server.ServerLimits(
        max_body_bytes=1000, max_waiting_requests=7, drain_timeout_s=2.5, stall_timeout_s=9.0
    )
    assert main(["serve", "--max-waiting-requests", "0"]) == 1  # ServerConfigError, reported


def _tool(name: str, parameters: object) -> ToolDefinition:
    return ToolDefinition.model_validate(
        {"type": "function", "function": {"name": name, "parameters": parameters}}
    )


def test_tool_parameters_with_defs_are_re_rooted(smollm2_vocab):
    """A pydantic model with a nested model and an Enum (``$defs`` + ``$ref``) as a tool,
    next to a tree that refers to itself with ``$ref: "#"`` (was: 400 ``$ref does not
    resolve``, and ``#`` resolved to the call envelope)."""
    from enum import Enum

    from pydantic import BaseModel

    class Kind(Enum):
        HOME = "home"
        WORK = "work"

    class Address(BaseModel):
        city: str
        kind: Kind

    class Person(BaseModel):
        name: str
        address: Address

    tree = {
        "type": "object",
        "properties": {"label": {"type": "string"}, "child": {"$ref": "#"}},
        "required": ["label"],
        "additionalProperties": False,
    }
    tools = [_tool("save_person", Person.model_json_schema()), _tool("save_tree", tree)]
    person = {"name": "Ada", "address": {"city": "London", "kind": "home"}}
    nested = {"label": "a", "child": {"label": "b", "child": {"label": "c"}}}
    grammar = _tool_grammar(smollm2_vocab, "required", tools)

    def accepts(name: str, value: object) -> bool:
        matcher = grammar.matcher()
        text = HERMES.render_calls([(name, value)])
        return bool(matcher.accept_bytes(text.encode())) and matcher.is_accepting()

    assert accepts("save_person", person)
    assert accepts("save_tree", nested)
    assert not accepts("save_tree", {"label": "a", "child": {"name": "f"}})
    assert not accepts("save_person", {**person, "address": {"city": "L", "kind": "x"}})
    assert Person.model_json_schema()["properties"]["address"] == {"$ref": "#/$defs/Address"}


def test_tool_parameters_must_be_an_object_schema():
    from formcast.server.tools import selected_tools

    for parameters in ({"type": "string"}, {"type": "array", "items": {}}, {"properties": {}}):
        with pytest.raises(APIError) as info:
            selected_tools([TOOLS[0], _tool("f", parameters)], "auto")
        assert info.value.param == "tools[1].function.parameters"
        assert "type 'object'" in str(info.value)
