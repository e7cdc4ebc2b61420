"""Model-native tool-call formats: each a structural tag over the tools' schemas, and a parser
that turns the generated text back into OpenAI ``tool_calls`` (whole, or as streamed deltas).

Formats (the syntax each model family is trained on and its chat template documents):

- ``hermes`` (Hermes, Qwen 2.5/3, SmolLM3, ChatML models): every call is
  ``<tool_call>\\n{"name": <name>, "arguments": {...}}\\n</tool_call>``; several calls are
  separated by ``\\n``. The default for templates that name no format.
- ``llama3_json`` (Llama 3.1-3.3 custom tools): ``{"name": <name>, "parameters": {...}}``;
  several calls are separated by ``; ``.
- ``mistral``: ``[TOOL_CALLS][{"name": <name>, "arguments": {...}}, ...]``.

``tool_choice``: ``"required"``: the output is one or more calls (exactly one when
``parallel_tool_calls`` is false); a named tool: exactly one call of it; ``"auto"``: free text (any text: ``{`` included) in
which a call starts only at the format's trigger (``<tool_call>``, ``{"name": ``,
``[TOOL_CALLS]``), then the call(s), constrained; with ``parallel_tool_calls`` false nothing
follows the first call. With ``response_format`` and ``"auto"``, the output is either the
calls or an answer valid against the response schema. A tool with ``strict: false`` gets any
JSON object as arguments (OpenAI: adherence not guaranteed); otherwise its ``parameters``
schema is enforced (objects without ``additionalProperties`` closed, as OpenAI's strict mode).
OpenAI custom tools (one raw string input) are called as ``{"name": ..., "input": "..."}``
in the same syntax, the input a JSON string that matches the tool's regex (``format``
``{"type": "grammar", "grammar": {"syntax": "regex", ...}}``, ECMA-262 dialect, the whole
input) or any string (``text``); Lark input grammars are refused.

Control tokens: where the model's tokenizer has Mistral's ``[TOOL_CALLS]`` or Llama's
``<|python_tag|>`` as a special token (``control_tokens``), the grammar allows that token
where its text goes (a ``token`` node of the structural tag; the same text written by
ordinary tokens stays allowed), and the server decodes the turn with special tokens shown, so
the parser reads it: Mistral's calls start with it, Llama's calls may follow it (dropped from
the content). Without such a token the text is written by ordinary tokens. The JSON of a call
is compact inside the arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from formcast.server.tools import ToolCallStream, custom_input_schema, tool_parameters

# what may sit between calls without being an answer: whitespace and separators
_LAYOUT = " \n\t;,"
_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


@dataclass(frozen=True)
class ToolFormat:
    """How one model family writes tool calls (see the module docstring).

    Attributes
    ----------
    name : str
        ``"hermes"``, ``"llama3_json"`` or ``"mistral"``.
    trigger : str
        The text that starts the calls inside free text.
    call_begin, call_end : str
        Around each call object.
    arguments_key : str
        The member holding the arguments (``"arguments"`` or ``"parameters"``).
    separator : str
        Between two calls.
    list_begin, list_end : str
        Around all the calls of a turn (Mistral's JSON array); list_begin starts with the
        trigger when it is not empty.
    marker : str
        A control token the family may write right before its calls (Llama's
        ``<|python_tag|>``); optional, and only where the tokenizer has it.
    """

    name: str
    trigger: str
    call_begin: str
    call_end: str
    arguments_key: str
    separator: str
    list_begin: str = ""
    list_end: str = ""
    marker: str = ""

    def control_tokens(self, special_texts: frozenset[str]) -> frozenset[str]:
        """The format's trigger and marker that are special tokens of the tokenizer."""
        return frozenset(t for t in (self.trigger, self.marker) if t and t in special_texts)

    def call_prefix(self, tool_name: str, is_custom: bool = False) -> str:
        """The text of a call up to its arguments (a custom tool's: up to its input)."""
        name = json.dumps(tool_name, ensure_ascii=False)
        key = "input" if is_custom else self.arguments_key
        return f'{self.call_begin}{{"name": {name}, "{key}": '

    def render_calls(self, calls: list[tuple[str, dict[str, Any] | str]]) -> str:
        """The text the model writes for ``calls`` (name, arguments; a custom tool's input is
        a str): arguments in the compact JSON layout the grammar generates."""
        texts = [
            self.call_prefix(name, isinstance(arguments, str))
            + json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
            + "}"
            + self.call_end
            for name, arguments in calls
        ]
        return self.list_begin + self.separator.join(texts) + self.list_end

    def instructions(self) -> str:
        """How to call a function, for a system prompt."""
        example = self.render_calls([("<function name>", {"<argument>": "<value>"})])
        return f"To call functions, write: {example}"


FORMATS: dict[str, ToolFormat] = {
    "hermes": ToolFormat("hermes", "<tool_call>", "<tool_call>\n", "\n</tool_call>", "arguments", "\n"),
    "llama3_json": ToolFormat(
        "llama3_json", '{"name": ', "", "", "parameters", "; ", marker="<|python_tag|>"
    ),
    "mistral": ToolFormat(
        "mistral", "[TOOL_CALLS]", "", "", "arguments", ", ", "[TOOL_CALLS][", "]"
    ),
}  # fmt: skip


def detect_format(chat_template: str | None) -> ToolFormat:
    """The format a chat template documents: Mistral's ``[TOOL_CALLS]``, Llama 3's
    ``"parameters"`` / ``<|python_tag|>``, else Hermes (``<tool_call>``, the default)."""
    template = chat_template or ""
    if "[TOOL_CALLS]" in template:
        return FORMATS["mistral"]
    if "<|python_tag|>" in template or ("<|eom_id|>" in template and "parameters" in template):
        return FORMATS["llama3_json"]
    return FORMATS["hermes"]


def _tool_tag(fmt: ToolFormat, tool: Any) -> dict[str, Any]:
    """The structural tag of one call of ``tool`` (Mistral's array delimiters are outside)."""
    if tool.custom is not None:
        parameters = custom_input_schema(tool)
    elif tool.function.strict is not False:
        parameters = tool_parameters(tool)
    else:
        parameters = _ANY_OBJECT
    begin = fmt.call_prefix(tool.name, tool.custom is not None)
    return {
        "type": "tag",
        "begin": begin,
        "content": {"type": "json_schema", "json_schema": parameters},
        "end": "}" + fmt.call_end,
    }


def _calls(
    fmt: ToolFormat, tools: list[Any], is_parallel: bool, control_tokens: frozenset[str]
) -> dict[str, Any]:
    """One or more calls (exactly one unless ``is_parallel``), with the list's delimiters and
    the family's control tokens where the tokenizer has them."""
    calls: dict[str, Any] = {
        "type": "tags_with_separator",
        "tags": [_tool_tag(fmt, tool) for tool in tools],
        "separator": fmt.separator,
        "at_least_one": True,
        "stop_after_first": not is_parallel,
    }
    if fmt.list_begin:
        is_token = fmt.trigger in control_tokens  # Mistral: the token, then the array
        begin = fmt.list_begin.removeprefix(fmt.trigger) if is_token else fmt.list_begin
        calls = {"type": "tag", "begin": begin, "content": calls, "end": fmt.list_end}
        if is_token:
            calls = {"type": "sequence", "elements": [_token(fmt.trigger), calls]}
    if fmt.marker in control_tokens:
        marker = {"type": "optional", "content": _token(fmt.marker)}
        calls = {"type": "sequence", "elements": [marker, calls]}
    return calls


def _token(text: str) -> dict[str, Any]:
    return {"type": "token", "token": text}


def tool_call_tag(
    fmt: ToolFormat,
    mode: str,
    tools: list[Any],
    is_parallel: bool,
    answer_schema: Any = None,
    control_tokens: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The structural tag (``{"type": "structural_tag", "format": ...}``) of a turn.

    Parameters
    ----------
    fmt : ToolFormat
    mode : str
        ``"required"`` (named tools come as required with one tool) or ``"auto"``.
    tools : list of ToolDefinition
    is_parallel : bool
        ``parallel_tool_calls``: several calls may follow one another.
    answer_schema : optional
        ``response_format``'s schema: under ``"auto"`` the output is the calls or an answer
        valid against it (instead of free text).
    control_tokens : frozenset of str
        The texts of the tokenizer's special tokens (``Vocabulary.special_token_texts``):
        the format's trigger or marker among them is allowed as that token.
    """
    if mode == "required":
        body = _calls(fmt, tools, is_parallel, control_tokens)
    elif answer_schema is not None:
        calls = _calls(fmt, tools, is_parallel, control_tokens)
        body = {
            "type": "or",
            "elements": [calls, {"type": "json_schema", "json_schema": answer_schema}],
        }
    elif fmt.list_begin:
        list_calls = _calls(fmt, tools, is_parallel, frozenset())  # a tag: its begin is text
        trigger = _token(fmt.trigger) if fmt.trigger in control_tokens else fmt.trigger
        body = {
            "type": "triggered_tags",
            "triggers": [trigger],
            "tags": [list_calls],
            "stop_after_first": True,
        }
    else:
        tags = [_tool_tag(fmt, tool) for tool in tools]
        triggers: list[Any] = [fmt.trigger]
        if fmt.marker in control_tokens:  # Llama: a call may also start with the marker
            tags += [{**tag, "begin": fmt.marker + tag["begin"]} for tag in tags]
            triggers.append(_token(fmt.marker))
        body = {
            "type": "triggered_tags",
            "triggers": triggers,
            "tags": tags,
            "stop_after_first": not is_parallel,
        }
    return {"type": "structural_tag", "format": body}


class ToolCallsParser:
    """Reads a turn written in ``fmt`` as it arrives: content outside the calls, and each call
    as OpenAI's streamed ``tool_calls`` deltas (index, id and name first, then ``arguments``
    pieces, see `ToolCallStream`).

    Content is the text outside the calls; text made only of whitespace and separators next to
    calls is dropped (the layout between calls, not an answer). Calls of the tools named in
    ``custom_names`` carry an ``input`` string and are handed out whole (see
    `ToolCallStream`).
    """

    def __init__(self, fmt: ToolFormat, custom_names: frozenset[str] = frozenset()) -> None:
        self.fmt = fmt
        self.custom_names = custom_names
        self.calls: list[ToolCallStream] = []
        self.content = ""
        self._pending = ""  # text not handed out yet (a possible trigger start, layout)
        self._call: ToolCallStream | None = None
        self._skip = ""  # literal text still expected after a call (its end)
        self._in_list = False  # inside Mistral's array

    def feed(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """``(content piece, tool_calls deltas)`` that ``text`` completes."""
        content: list[str] = []
        deltas: list[dict[str, Any]] = []
        for char in text:
            self._push(char, content, deltas)
        content_text = "".join(content)
        self.content += content_text
        return content_text, deltas

    def finish(self) -> tuple[str, list[dict[str, Any]]]:
        """End of the output: a cut call's held-back piece, and held-back content (a turn with
        no call keeps its text as content)."""
        deltas = self._call.finish() if self._call is not None else []
        rest = self._pending
        self._pending = ""
        if self.calls and not rest.strip(_LAYOUT):
            rest = ""
        self.content += rest
        return rest, deltas

    @property
    def num_complete(self) -> int:
        """Calls read whole."""
        return sum(call.is_complete for call in self.calls)

    def _push(self, char: str, content: list[str], deltas: list[dict[str, Any]]) -> None:
        fmt = self.fmt
        if self._call is not None:
            deltas.extend(self._call.feed(char))
            if self._call.is_complete or self._call.is_invalid:
                self._call = None
                self._skip = fmt.call_end
            return
        if self._skip:
            if char == self._skip[0]:
                self._skip = self._skip[1:]
                return
            self._skip = ""
        if self._in_list:
            if char == "]":
                self._in_list = False
            elif char == "{":
                self._start_call(char, deltas)
            return  # separators and layout inside the array
        self._pending += char
        begin = fmt.list_begin or fmt.trigger
        cut = self._pending.find(begin)
        if cut >= 0:
            before = self._pending[:cut]
            if fmt.marker:  # Llama's <|python_tag|> before a call: not content
                before = before.removesuffix(fmt.marker)
            if before.strip(_LAYOUT) or not self.calls:
                content.append(before)
            self._pending = ""
            if fmt.list_begin:
                self._in_list = True
            else:  # the stream skips the layout before the object ("\n" after <tool_call>);
                # Llama's trigger is the object's own start
                self._start_call(begin if begin.startswith("{") else "", deltas)
            return
        start = fmt.marker + begin  # hold back what may still become a call's start
        keep = next(
            (k for k in range(min(len(start) - 1, len(self._pending)), 0, -1)
             if self._pending.endswith(start[:k]) or self._pending.endswith(begin[:k])),
            0,
        )  # fmt: skip
        head = self._pending[: len(self._pending) - keep]
        if head.strip(_LAYOUT):
            content.append(head)
            self._pending = self._pending[len(head) :]

    def _start_call(self, text: str, deltas: list[dict[str, Any]]) -> None:
        call = ToolCallStream(
            len(self.calls), arguments_key=self.fmt.arguments_key, custom_names=self.custom_names
        )
        self.calls.append(call)
        self._call = call
        if text:
            deltas.extend(call.feed(text))
