"""Tool calling: tool schemas -> one grammar, and generated text -> OpenAI ``tool_calls``.

A tool call is written as one JSON object ``{"name": <tool name>, "arguments": {...}}``.
Its schema is the ``anyOf`` over the tools of ``{"name": {"const": name}, "arguments":
<that tool's parameters>}``, so a call can never name a missing tool and its arguments
always validate against that tool's ``parameters`` schema.

``tool_choice``:

- ``"required"``: the output is exactly one tool call (the schema above);
- a named function: the same with only that tool;
- ``"auto"`` (default when tools are given): a regular grammar with two branches, the tool
  call (the schema above compiled to its syntax tree) or free text that does not start with ``{``
  (and holds no C0 control 0x01/0x02).
  The model chooses with its first character: ``{`` commits to a tool call. (Tool parameter
  schemas must therefore be regular, i.e. without recursive ``$ref``; ``"required"`` and named
  choices also accept recursive schemas through the context-free path.)
- ``"none"``: plain text, and the tools are not described in the prompt.

One call per turn: ``parallel_tool_calls`` is accepted but a turn holds at most one call.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from formcast.errors import SchemaError
from formcast.grammar import AnyValueGrammar, Grammar, Vocabulary
from formcast.grammar.index.compile import compile_tree
from formcast.grammar.json_schema.compile import marked_schema_tree, reads_marker
from formcast.grammar.json_schema.embedding import embed_schema
from formcast.grammar.json_schema.layout import make_layout
from formcast.grammar.regex.combinators import alt
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import Node
from formcast.grammar.spec import GrammarSpec
from formcast.server.errors import bad_request
from formcast.server.protocol import NamedToolChoice, ToolDefinition

_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
# free text for tool_choice="auto": at least one character, the first is not "{"; never the
# C0 controls 0x01/0x02, which are the unbounded-value markers of the call's automaton
_FREE_TEXT: Node = parse_regex(r"[^{\x01\x02][^\x01\x02]*")


def tool_parameters(tool: ToolDefinition) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments (no parameters: the empty object)."""
    return tool.function.parameters if tool.function.parameters is not None else _NO_PARAMETERS


def tool_call_schema(tools: list[ToolDefinition]) -> dict[str, Any]:
    """JSON Schema of one call of any of ``tools`` (``anyOf`` over the tools).

    Each tool's parameters sit inside the envelope at ``[/anyOf/i]/properties/arguments``;
    their local ``$ref`` s (``#/$defs/...``, ``#``) are re-rooted there (``embed_schema``),
    so nested pydantic models and enums resolve to the tool's own definitions.
    """
    branches = []
    for k, tool in enumerate(tools):
        at = ("" if len(tools) == 1 else f"/anyOf/{k}") + "/properties/arguments"
        branches.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": tool.function.name},
                    "arguments": embed_schema(tool_parameters(tool), at),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def selected_tools(
    tools: list[ToolDefinition] | None, tool_choice: str | NamedToolChoice | None
) -> tuple[str, list[ToolDefinition]]:
    """``(mode, tools)``: mode ``"none"``, ``"auto"`` or ``"required"`` and the callable tools.

    Raises
    ------
    APIError
        ``tool_choice`` without tools, a named function that is not among the tools,
        duplicate tool names.
    """
    if not tools:
        if tool_choice not in (None, "none"):
            raise bad_request("tool_choice is set but no tools are given", param="tool_choice")
        return "none", []
    names = [tool.function.name for tool in tools]
    if len(set(names)) != len(names):
        raise bad_request(f"tool names must be unique, got {names}", param="tools")
    for k, tool in enumerate(tools):
        parameters = tool_parameters(tool)
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            shown = parameters.get("type") if isinstance(parameters, dict) else parameters
            raise bad_request(
                f"tool {tool.function.name!r}: parameters must be a JSON Schema with "
                f"type 'object' (the arguments are a JSON object), got type {shown!r}",
                param=f"tools[{k}].function.parameters",
            )
    if tool_choice is None:
        tool_choice = "auto"
    if isinstance(tool_choice, NamedToolChoice):
        name = tool_choice.function.get("name")
        chosen = [tool for tool in tools if tool.function.name == name]
        if not chosen:
            raise bad_request(
                f"tool_choice names function {name!r}, which is not among the tools {names}",
                param="tool_choice",
            )
        return "required", chosen
    if tool_choice == "none":
        return "none", []
    return tool_choice, list(tools)


def tool_grammar(mode: str, tools: list[ToolDefinition]) -> GrammarSpec | None:
    """The grammar of the output for ``mode`` (None for ``"none"``)."""
    if mode == "none":
        return None
    schema = tool_call_schema(tools)
    if mode == "required":
        return GrammarSpec.json_schema(schema)
    text = json.dumps(schema, ensure_ascii=False)

    def call_or_text() -> Node:
        try:
            call = marked_schema_tree(schema)
        except SchemaError as exc:
            if exc.keyword == "$ref":
                exc.add_note("tool_choice='auto' needs regular tool schemas; use 'required'")
            raise
        return alt([call, _FREE_TEXT])  # type: ignore[return-value]

    def compile_auto(vocab: Vocabulary) -> Grammar:
        grammar = compile_tree(
            call_or_text, vocab, kind="tools-auto", source=text, options={"layout": "compact"}
        )
        if not reads_marker(grammar.dfa):
            return grammar
        # unconstrained argument values nest without bound (AnyValueGrammar); free text
        # never holds the marker bytes, so the frames only ever open inside the call
        return AnyValueGrammar(grammar, make_layout("compact"))

    return GrammarSpec(("tools-auto", text), compile_auto, f"tool calls (auto) {text[:40]!r}")


def parse_tool_call(text: str, tools: list[ToolDefinition]) -> dict[str, Any] | None:
    """``{"name", "arguments"}`` if ``text`` is a complete call of one of ``tools``, else None."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    names = {tool.function.name for tool in tools}
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    if not isinstance(value.get("arguments"), dict):
        return None
    return value


def openai_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI ``tool_calls`` entry (``arguments`` as a JSON string, id ``call_...``)."""
    return {
        "id": "call_" + uuid.uuid4().hex[:24],
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": json.dumps(call["arguments"], ensure_ascii=False),
        },
    }


def describe_tools(tools: list[ToolDefinition], mode: str) -> str:
    """System-prompt text describing ``tools`` and how to call them."""
    lines = [
        "You can call functions. To call one, reply with only a JSON object "
        '{"name": <function name>, "arguments": <arguments object>}.'
    ]
    if mode == "auto":
        lines.append("If no function is needed, reply in plain text instead.")
    lines.append("Functions:")
    for tool in tools:
        params = json.dumps(tool_parameters(tool), ensure_ascii=False)
        description = re.sub(r"\s+", " ", tool.function.description or "").strip()
        lines.append(f"- {tool.function.name}: {description} Arguments schema: {params}")
    return "\n".join(lines)
