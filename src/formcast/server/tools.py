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

The call's ``arguments`` string is the generated arguments JSON rewritten as
``json.dumps(value, ensure_ascii=False)`` writes it (separators ``", "`` and ``": "``).
`ToolCallStream` does that rewriting incrementally, so a stream sends the call as OpenAI
does (the id, type and name as soon as the name is complete, then ``arguments`` pieces as
they are generated) and the pieces concatenate to the very string a non-streamed completion
of the same tokens returns. Exceptions to ``json.dumps`` (whose output would not be valid
JSON): a number too large for a float keeps its digits as written, and an unpaired surrogate
escape stays an escape.
"""

from __future__ import annotations

import json
import math
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
            if not isinstance(parameters, dict):
                got = f"a {type(parameters).__name__}"
            elif "type" not in parameters:
                got = "a schema without 'type'"
            else:
                got = f"type {parameters['type']!r}"
            raise bad_request(
                f"tool {tool.function.name!r}: parameters must be a JSON Schema with "
                f"type 'object' (the arguments are a JSON object), got {got}",
                param=f"tools[{k}].function.parameters",
            )
    if tool_choice is None:
        tool_choice = "auto"
    if isinstance(tool_choice, NamedToolChoice):
        name = tool_choice.function.get("name")
        if name is None:
            raise bad_request(
                "tool_choice names no function: give {'type': 'function', "
                "'function': {'name': <tool name>}}",
                param="tool_choice.function.name",
            )
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


def openai_tool_call(text: str, tools: list[ToolDefinition]) -> dict[str, Any] | None:
    """The OpenAI ``tool_calls`` entry of ``text`` if it is a complete call of one of
    ``tools`` (else None): id ``call_...``, ``arguments`` as a JSON string (module docstring).
    """
    if parse_tool_call(text, tools) is None:
        return None
    stream = ToolCallStream()
    stream.feed(text)
    stream.finish()
    if not stream.is_complete:
        return None
    return {
        "id": stream.call_id,
        "type": "function",
        "function": {"name": stream.name, "arguments": stream.arguments},
    }


_JSON_WHITESPACE = frozenset(" \t\n\r")
_SCALAR_CHARS = frozenset("0123456789+-.eEtruefalsn")
_SHORT_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _dumps_char(char: str) -> str:
    """``char`` inside a string as ``json.dumps(..., ensure_ascii=False)`` writes it."""
    if char >= " " and char not in '"\\':
        return char
    return json.dumps(char)[1:-1]


def _dumps_scalar(text: str) -> str:
    """A number or literal as ``json.dumps(json.loads(text))`` writes it (``text`` itself when
    that is no JSON: a float overflowing to infinity, an int with too many digits)."""
    if text in ("true", "false", "null"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text
    return json.dumps(value)


class JsonValueRewriter:
    """One JSON value, fed a character at a time, rewritten as ``json.dumps(json.loads(text),
    ensure_ascii=False)`` writes it (module docstring), and handed out as soon as possible:
    string characters at once, a number or literal once its end is seen.

    The input is generated under a grammar, so it is valid JSON; the rewriter checks only
    what it needs to find the value's end (``is_invalid`` is set on anything else).
    """

    def __init__(self) -> None:
        self.is_done = False
        self.is_invalid = False
        self._pieces: list[str] = []
        self._depth = 0
        self._is_in_string = False
        self._escape: str | None = None  # after a backslash: the escape read so far
        self._high_surrogate: int | None = None  # a \uD800-\uDBFF escape awaiting its pair
        self._scalar = ""  # the number or literal being read

    def push(self, char: str) -> bool:
        """Feed ``char``; False when it is not part of the value (the value ended before)."""
        if self.is_done or self.is_invalid:
            return False
        if self._is_in_string:
            self._string_char(char)
            return True
        if self._scalar:
            if char in _SCALAR_CHARS:
                self._scalar += char
                return True
            self._end_scalar()
            if self.is_done:
                return False
        if char in _JSON_WHITESPACE:
            return True
        if char == '"':
            self._is_in_string = True
            self._pieces.append('"')
        elif char in "{[":
            self._depth += 1
            self._pieces.append(char)
        elif char in "}]" and self._depth > 0:
            self._depth -= 1
            self._pieces.append(char)
            self.is_done = self._depth == 0
        elif char in ",:" and self._depth > 0:
            self._pieces.append(char + " ")
        elif char in _SCALAR_CHARS:
            self._scalar = char
        else:
            self.is_invalid = True
            return False
        return True

    def take(self) -> str:
        """The rewritten text produced since the last call."""
        text = "".join(self._pieces)
        self._pieces.clear()
        return text

    def finish(self) -> None:
        """End of input: a pending number or literal is written as it is (a cut value)."""
        if self._scalar:
            self._end_scalar()
        if self._escape is not None:
            self._pieces.append("\\" + self._escape)
            self._escape = None
        self._flush_surrogate()

    def _end_scalar(self) -> None:
        self._pieces.append(_dumps_scalar(self._scalar))
        self._scalar = ""
        self.is_done = self._depth == 0

    def _flush_surrogate(self) -> None:
        if self._high_surrogate is not None:
            self._pieces.append(f"\\u{self._high_surrogate:04x}")
            self._high_surrogate = None

    def _string_char(self, char: str) -> None:
        if self._escape is None:
            if char == "\\":
                self._escape = ""
                return
            self._flush_surrogate()
            if char == '"':
                self._pieces.append('"')
                self._is_in_string = False
                self.is_done = self._depth == 0
            else:
                self._pieces.append(_dumps_char(char))
            return
        self._escape += char
        if self._escape[0] != "u":
            self._escape = None
            if char not in _SHORT_ESCAPES:
                self.is_invalid = True
                return
            self._flush_surrogate()
            self._pieces.append(_dumps_char(_SHORT_ESCAPES[char]))
            return
        if len(self._escape) < 5:
            return
        digits, self._escape = self._escape[1:], None
        try:
            code = int(digits, 16)
        except ValueError:
            self.is_invalid = True
            return
        if 0xDC00 <= code <= 0xDFFF and self._high_surrogate is not None:
            pair = 0x10000 + ((self._high_surrogate - 0xD800) << 10) + (code - 0xDC00)
            self._high_surrogate = None
            self._pieces.append(chr(pair))
            return
        self._flush_surrogate()
        if 0xD800 <= code <= 0xDBFF:
            self._high_surrogate = code
        elif 0xDC00 <= code <= 0xDFFF:  # unpaired: kept as an escape (valid JSON, UTF-8 safe)
            self._pieces.append(f"\\u{code:04x}")
        else:
            self._pieces.append(_dumps_char(chr(code)))


class ToolCallStream:
    """A tool call ``{"name": ..., "arguments": {...}}`` parsed as its text arrives, turned
    into OpenAI's streamed ``tool_calls`` deltas.

    `feed` returns the deltas the new text completes: first ``{"index", "id", "type":
    "function", "function": {"name", "arguments": ""}}`` once the name is complete, then
    ``{"index", "function": {"arguments": <piece>}}`` for each piece of the rewritten
    arguments (module docstring). The pieces concatenate to `arguments`.

    Parameters
    ----------
    index : int
        The call's position in the message's ``tool_calls`` (one call per turn: 0).
    """

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.call_id: str | None = None
        self.name: str | None = None
        self.arguments = ""
        self.is_invalid = False
        self._state = "start"  # start, key, colon, value, next, done
        self._key: str | None = None
        self._value: JsonValueRewriter | None = None
        self._buffer = ""  # rewritten text of the key or non-arguments value being read
        self._has_arguments = False
        self._num_sent = 0  # characters of `arguments` handed out

    @property
    def has_started(self) -> bool:
        """True once the name delta was handed out."""
        return self.call_id is not None

    @property
    def is_complete(self) -> bool:
        """True when the text so far is a whole call (its closing brace was read)."""
        return (
            self._state == "done"
            and not self.is_invalid
            and self.name is not None
            and self._has_arguments
        )

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Read ``text``; return the deltas it completes (see the class docstring)."""
        for char in text:
            if self.is_invalid:
                break
            self._push(char)
        return self._deltas()

    def finish(self) -> list[dict[str, Any]]:
        """End of the output: hand out what a cut call holds back (a partial number)."""
        if self._value is not None and not self.is_invalid:
            self._value.finish()
            self._collect()
        return self._deltas()

    def _push(self, char: str) -> None:
        value = self._value
        if value is not None:
            is_consumed = value.push(char)
            self._collect()
            if value.is_invalid:
                self.is_invalid = True
                return
            if not value.is_done:
                return
            self._end_value()
            if is_consumed:
                return
        if char in _JSON_WHITESPACE:
            return
        state = self._state
        if state == "start" and char == "{":
            self._state = "key"
        elif state == "key" and char == '"':
            self._start_value()
            self._value.push(char)
        elif state == "key" and char == "}":
            self._state = "done"
        elif state == "colon" and char == ":":
            self._state = "value"
            self._start_value()
        elif state == "next" and char == ",":
            self._state = "key"
        elif state == "next" and char == "}":
            self._state = "done"
        else:
            self.is_invalid = True

    def _start_value(self) -> None:
        self._value = JsonValueRewriter()
        self._buffer = ""
        if self._state == "value" and self._key == "arguments":
            if self._has_arguments:  # a second "arguments" member
                self.is_invalid = True
            self._has_arguments = True

    def _collect(self) -> None:
        text = self._value.take()
        if self._state == "value" and self._key == "arguments":
            self.arguments += text
        else:
            self._buffer += text

    def _end_value(self) -> None:
        self._value = None
        if self._state == "key":
            self._key = json.loads(self._buffer)
            self._state = "colon"
            return
        if self._key == "name":
            name = json.loads(self._buffer)
            if not isinstance(name, str) or self.name is not None:
                self.is_invalid = True
            self.name = name
        self._state = "next"

    def _deltas(self) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = []
        if self.name is None or (self.is_invalid and not self.has_started):
            return deltas
        if self.call_id is None:
            self.call_id = "call_" + uuid.uuid4().hex[:24]
            deltas.append(
                {
                    "index": self.index,
                    "id": self.call_id,
                    "type": "function",
                    "function": {"name": self.name, "arguments": ""},
                }
            )
        if len(self.arguments) > self._num_sent:
            piece = self.arguments[self._num_sent :]
            self._num_sent = len(self.arguments)
            deltas.append({"index": self.index, "function": {"arguments": piece}})
        return deltas


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
