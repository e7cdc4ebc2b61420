"""Tool calling: the tools a request may call, and a call's JSON read as it arrives.

`selected_tools` reads ``tools`` / ``tool_choice`` into a mode (``"none"``, ``"auto"``,
``"required"``; a named tool is ``"required"`` with that tool alone). The formats the model
writes calls in, their grammars and the parser of a whole turn are in
:mod:`formcast.server.tool_formats`; this module reads ONE call object
``{"name": ..., "arguments": {...}}`` (`ToolCallStream`).

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

from formcast.server.errors import bad_request
from formcast.server.protocol import NamedToolChoice, ToolDefinition

_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def tool_parameters(tool: ToolDefinition) -> dict[str, Any]:
    """The JSON Schema of a function tool's arguments (no parameters: the empty object)."""
    return tool.function.parameters if tool.function.parameters is not None else _NO_PARAMETERS


def custom_input_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The JSON Schema of a custom tool's input: a string, matching the regex of its format
    (anchored: the whole input matches)."""
    fmt = tool.custom.format
    if fmt is None or fmt.type == "text":
        return {"type": "string"}
    return {"type": "string", "pattern": f"^(?:{fmt.grammar.definition})$"}


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
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise bad_request(f"tool names must be unique, got {names}", param="tools")
    for k, tool in enumerate(tools):
        if tool.custom is not None:
            _check_custom(tool, k)
            continue
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
        named = tool_choice.function if tool_choice.type == "function" else tool_choice.custom
        name = (named or {}).get("name")
        if name is None:
            raise bad_request(
                f"tool_choice names no tool: give {{'type': {tool_choice.type!r}, "
                f"{tool_choice.type!r}: {{'name': <tool name>}}}}",
                param=f"tool_choice.{tool_choice.type}.name",
            )
        chosen = [tool for tool in tools if tool.name == name]
        if not chosen:
            raise bad_request(
                f"tool_choice names function {name!r}, which is not among the tools {names}",
                param="tool_choice",
            )
        return "required", chosen
    if tool_choice == "none":
        return "none", []
    return tool_choice, list(tools)


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
    into OpenAI's streamed ``tool_calls`` deltas (`is_complete` once its closing brace was
    read; `openai_call` is the whole entry).

    `feed` returns the deltas the new text completes: first ``{"index", "id", "type":
    "function", "function": {"name", "arguments": ""}}`` once the name is complete, then
    ``{"index", "function": {"arguments": <piece>}}`` for each piece of the rewritten
    arguments (module docstring). The pieces concatenate to `arguments`.

    A call of a custom tool (a name in ``custom_names``) is ``{"name": ..., "input": "..."}``:
    its input string is held back and handed out whole, as one ``{"index", "id", "type":
    "custom", "custom": {"name", "input"}}`` delta, once the call is complete.

    Parameters
    ----------
    index : int
        The call's position in the message's ``tool_calls``.
    arguments_key : str
        The member holding the arguments (Llama 3 writes ``"parameters"``).
    custom_names : frozenset of str
        The custom tools' names.
    """

    def __init__(
        self,
        index: int = 0,
        arguments_key: str = "arguments",
        custom_names: frozenset[str] = frozenset(),
    ) -> None:
        self.index = index
        self.arguments_key = arguments_key
        self.custom_names = custom_names
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
    def is_custom(self) -> bool:
        """True for a call of a custom tool (its name is known)."""
        return self.name is not None and self.name in self.custom_names

    @property
    def input(self) -> str:
        """A complete custom call's input string."""
        return json.loads(self.arguments)

    def _value_key(self) -> str:
        return "input" if self.is_custom else self.arguments_key

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
        if self._state == "value" and self._key == self._value_key():
            if self._has_arguments:  # a second "arguments" member
                self.is_invalid = True
            self._has_arguments = True

    def _collect(self) -> None:
        text = self._value.take()
        if self._state == "value" and self._key == self._value_key():
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
        if self.is_custom:
            if self.call_id is None and self.is_complete:
                self.call_id = "call_" + uuid.uuid4().hex[:24]
                deltas.append({"index": self.index, **openai_call(self)})
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


def _check_custom(tool: ToolDefinition, k: int) -> None:
    """Refuse a custom tool whose input formcast cannot constrain (a Lark grammar: the input
    is a JSON string inside the call, where only a regex is expressible)."""
    fmt = tool.custom.format
    if fmt is None or fmt.type == "text":
        return
    if fmt.grammar is None:
        raise bad_request(
            f"custom tool {tool.name!r}: a 'grammar' format needs its 'grammar' object",
            param=f"tools[{k}].custom.format.grammar",
        )
    if fmt.grammar.syntax == "lark":
        raise bad_request(
            f"custom tool {tool.name!r}: Lark grammars are not supported for custom tool "
            "input (it is written as a JSON string inside the call); use syntax 'regex'",
            param=f"tools[{k}].custom.format.grammar.syntax",
        )


def openai_call(stream: ToolCallStream) -> dict[str, Any]:
    """The ``message.tool_calls`` entry of a call (a custom tool's: complete)."""
    if stream.is_custom:
        return {
            "id": stream.call_id,
            "type": "custom",
            "custom": {"name": stream.name, "input": stream.input},
        }
    return {
        "id": stream.call_id,
        "type": "function",
        "function": {"name": stream.name, "arguments": stream.arguments},
    }


def describe_tools(tools: list[ToolDefinition], mode: str, instructions: str) -> str:
    """System-prompt text describing ``tools`` and, in ``instructions``, the call syntax."""
    lines = [f"You can call functions. {instructions}"]
    if mode == "auto":
        lines.append("If no function is needed, reply in plain text instead.")
    lines.append("Functions:")
    for tool in tools:
        description = re.sub(r"\s+", " ", tool.description).strip()
        if tool.custom is not None:
            schema = json.dumps(custom_input_schema(tool), ensure_ascii=False)
            lines.append(f"- {tool.name}: {description} Input (a string, key 'input'): {schema}")
            continue
        params = json.dumps(tool_parameters(tool), ensure_ascii=False)
        lines.append(f"- {tool.name}: {description} Arguments schema: {params}")
    return "\n".join(lines)
