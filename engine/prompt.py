"""Prompt: what a request may ask the engine to continue, defined and checked in one place.

A prompt is text, a list of token ids, or a list of chat messages (``{"role": ..., "content":
...}``; the engine applies the tokenizer's chat template). The engine, the facade and the HTTP
server all check prompts with :func:`check_prompt`.
"""

from __future__ import annotations

from typing import Any

from formcast.errors import RequestError

Prompt = str | list[int] | list[dict[str, Any]]


def check_prompt(prompt: object) -> Prompt:
    """``prompt`` as a `Prompt` (a tuple or array of ids becomes a list), or a clear error.

    Raises
    ------
    RequestError
        An empty string or list, a chat message without ``role`` and ``content`` (naming its
        index), or anything that is not text, token ids or chat messages (naming the type).
    """
    if isinstance(prompt, str):
        if not prompt:
            raise RequestError("the prompt is an empty string")
        return prompt
    to_list = getattr(prompt, "tolist", None)  # numpy arrays and tensors of ids
    if callable(to_list):
        prompt = to_list()
    if isinstance(prompt, (list, tuple)) and prompt:
        if all(isinstance(message, dict) for message in prompt):
            for k, message in enumerate(prompt):
                if "role" not in message or "content" not in message:
                    raise RequestError(
                        f"chat message #{k} needs 'role' and 'content' keys, got {sorted(message)}"
                    )
            return list(prompt)
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return list(prompt)
    raise RequestError(
        "a prompt must be a non-empty str, a list of chat messages "
        "({'role': ..., 'content': ...}) or a list of token ids; got "
        f"{type(prompt).__name__}"
    )
