"""Chat messages in OpenAI's shape -> the plain ``{"role", "content"}`` list the chat template takes.

- ``content`` may be a string or a list of parts; text parts are joined, other parts (images,
  audio, files) are refused with a 400.
- ``developer`` messages are system messages (OpenAI's newer name).
- An assistant message with ``tool_calls`` becomes the text the model writes for them in the
  server's tool-call format (:mod:`formcast.server.tool_formats`); a ``tool`` message keeps
  its role and content.
- With tools (and ``tool_choice`` other than ``"none"``), their description and the format's
  call syntax are appended to the first system message, or a system message carrying them is
  put first.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.server.errors import bad_request
from formcast.server.protocol import ToolDefinition
from formcast.server.tool_formats import FORMATS, ToolFormat
from formcast.server.tools import describe_tools

_ROLES = {"system", "developer", "user", "assistant", "tool"}


def message_text(content: Any, where: str) -> str:
    """The text of a message ``content`` (string, list of text parts, or None)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or "type" not in part:
                raise bad_request(
                    "a content part must be an object with a 'type' (text parts only)",
                    param=f"{where}.content[{i}]",
                )
            if part["type"] != "text":
                raise bad_request(
                    f"content part of type {part['type']!r} is not supported (text only)",
                    param=f"{where}.content[{i}]",
                )
            if not isinstance(part.get("text"), str):
                raise bad_request(
                    "a text content part needs 'text', a string",
                    param=f"{where}.content[{i}].text",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request("content must be a string or a list of parts", param=f"{where}.content")


def _tool_calls_text(tool_calls: Any, where: str, fmt: ToolFormat) -> str:
    if not isinstance(tool_calls, list):
        raise bad_request("tool_calls must be a list of calls", param=f"{where}.tool_calls")
    calls: list[tuple[str, Any]] = []
    for i, call in enumerate(tool_calls):
        at = f"{where}.tool_calls[{i}]"
        custom = call.get("custom") if isinstance(call, dict) else None
        if isinstance(custom, dict):  # a custom tool's call: its raw input string
            if not isinstance(custom.get("name"), str) or not isinstance(custom.get("input"), str):
                raise bad_request(
                    "a custom tool call needs 'custom' with 'name' and 'input' (strings)",
                    param=f"{at}.custom",
                )
            calls.append((custom["name"], custom["input"]))
            continue
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(
                "a tool call needs 'function' with the function's 'name' (a string)",
                param=f"{at}.function",
            )
        arguments = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise bad_request(
                    f"the tool call's arguments are not valid JSON ({exc.msg} at character "
                    f"{exc.pos})",
                    param=f"{at}.function.arguments",
                ) from exc
        calls.append((function["name"], arguments))
    return fmt.render_calls(calls)


def chat_messages(
    messages: list[dict[str, Any]],
    tools: list[ToolDefinition],
    tool_mode: str,
    fmt: ToolFormat = FORMATS["hermes"],
) -> list[dict[str, str]]:
    """Messages for the chat template (see the module docstring).

    Raises
    ------
    APIError
        No messages, an unknown role, unsupported content.
    """
    if not messages:
        raise bad_request("messages must hold at least one message", param="messages")
    converted: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if "role" not in message:
            raise bad_request("the message has no 'role'", param=f"{where}.role")
        role = message["role"]
        if not isinstance(role, str) or role not in _ROLES:
            raise bad_request(
                f"role {role!r} is not supported; use one of {sorted(_ROLES)}",
                param=f"{where}.role",
            )
        text = message_text(message.get("content"), where)
        if role == "assistant" and message.get("tool_calls"):
            calls = _tool_calls_text(message["tool_calls"], where, fmt)
            text = f"{text}\n{calls}" if text else calls
        converted.append({"role": "system" if role == "developer" else role, "content": text})
    if tools and tool_mode != "none":
        description = describe_tools(tools, tool_mode, fmt.instructions())
        if converted[0]["role"] == "system":
            first = converted[0]
            converted[0] = {"role": "system", "content": f"{first['content']}\n\n{description}"}
        else:
            converted.insert(0, {"role": "system", "content": description})
    return converted
