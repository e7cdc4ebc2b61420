"""Chat messages in OpenAI's shape -> the plain ``{"role", "content"}`` list the chat template takes.

- ``content`` may be a string or a list of parts; text parts are joined, other parts (images,
  audio, files) are refused with a 400.
- ``developer`` messages are system messages (OpenAI's newer name).
- An assistant message with ``tool_calls`` becomes the JSON the model writes for a call
  (``{"name", "arguments"}``, one per line); a ``tool`` message keeps its role and content.
- With tools (and ``tool_choice`` other than ``"none"``), their description is appended to
  the first system message, or a system message carrying it is put first.
"""

from __future__ import annotations

import json
from typing import Any

from formcast.server.errors import bad_request
from formcast.server.protocol import ToolDefinition
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
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad_request(
                    f"content part of type {kind!r} is not supported (text only)",
                    param=f"{where}.content[{i}]",
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise bad_request("content must be a string or a list of parts", param=f"{where}.content")


def _tool_calls_text(tool_calls: Any, where: str) -> str:
    lines = []
    for i, call in enumerate(tool_calls):
        try:
            function = call["function"]
            arguments = function.get("arguments") or "{}"
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            lines.append(
                json.dumps({"name": function["name"], "arguments": parsed}, ensure_ascii=False)
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise bad_request(
                f"malformed tool call ({type(exc).__name__}: {exc})",
                param=f"{where}.tool_calls[{i}]",
            ) from exc
    return "\n".join(lines)


def chat_messages(
    messages: list[dict[str, Any]], tools: list[ToolDefinition], tool_mode: str
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
        role = message.get("role")
        if role not in _ROLES:
            raise bad_request(
                f"role {role!r} is not supported; use one of {sorted(_ROLES)}",
                param=f"{where}.role",
            )
        text = message_text(message.get("content"), where)
        if role == "assistant" and message.get("tool_calls"):
            calls = _tool_calls_text(message["tool_calls"], where)
            text = f"{text}\n{calls}" if text else calls
        converted.append({"role": "system" if role == "developer" else role, "content": text})
    if tools and tool_mode != "none":
        description = describe_tools(tools, tool_mode)
        if converted[0]["role"] == "system":
            first = converted[0]
            converted[0] = {"role": "system", "content": f"{first['content']}\n\n{description}"}
        else:
            converted.insert(0, {"role": "system", "content": description})
    return converted
