"""``POST /v1/chat/completions``: build the engine request, answer in one body or as SSE chunks.

Tool calls (see `formcast.server.tools`): a completion whose text is a complete call becomes
``message.tool_calls`` (``content`` null, ``finish_reason`` ``"tool_calls"``). When streaming,
text that is a call (``"required"``: all of it; ``"auto"``: when its first character is
``{``, which the grammar reserves for calls) is parsed as it arrives and sent as OpenAI
streams calls: a ``tool_calls`` delta with the call's index, id, type and name as soon as the
name is complete, then deltas carrying the next piece of ``arguments``; the pieces concatenate
to the ``arguments`` a non-streamed completion of the same tokens returns. The finish reason
is ``"tool_calls"`` for a complete call; a call cut by ``max_tokens`` ends with ``"length"``
after its partial arguments (as OpenAI), or, cut before its name was complete, is sent as
content. With logprobs, a step's logprobs ride on its first chunk (``delta`` ``{}`` when the
step completed no delta of the call).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from formcast.engine.outputs import CompletionOutput, StreamDelta
from formcast.server.async_engine import EngineRequest
from formcast.server.chat import chat_messages
from formcast.server.errors import APIError, bad_request
from formcast.server.generation import Generation, new_queue
from formcast.server.grammars import request_grammar
from formcast.server.protocol import ChatCompletionRequest, ToolDefinition, check_unsupported
from formcast.server.responses import envelope, new_id, now, sse, usage
from formcast.server.sampling import max_new_tokens, sampling_params_from
from formcast.server.serving_context import ServingContext
from formcast.server.tools import (
    ToolCallStream,
    openai_tool_call,
    parse_tool_call,
    selected_tools,
    tool_grammar,
)


class ChatCompletion:
    """One chat completion request being served."""

    def __init__(self, context: ServingContext, body: ChatCompletionRequest) -> None:
        self.context = context
        self.body = body
        self.response_id = new_id("chatcmpl")
        self.created = now()
        self.tool_mode = "none"
        self.tools: list[ToolDefinition] = []
        self.num_top_logprobs = 0
        self.generation: Generation | None = None

    async def start(self) -> Generation:
        """Validate, compile the grammar, submit; raises `APIError` for bad input."""
        body, context = self.body, self.context
        context.check_model(body.model)
        check_unsupported(body)
        self.tool_mode, self.tools = selected_tools(body.tools, body.tool_choice)
        spec, param = request_grammar(body)
        if self.tool_mode != "none":
            if spec is not None:
                raise bad_request(
                    f"tools (tool_choice {self.tool_mode!r}) cannot be combined with {param}; "
                    "use tool_choice='none' or drop the other constraint",
                    param=param,
                )
            spec, param = tool_grammar(self.tool_mode, self.tools), "tools"
        messages = chat_messages(body.messages, self.tools, self.tool_mode)
        params = sampling_params_from(body)
        self.num_top_logprobs = params.logprobs or 0
        grammar = await context.compile(spec, param)
        jump_forward = body.jump_forward
        if params.logprobs is not None:
            jump_forward = False  # every token sampled, so every token has a logprob
        request = EngineRequest(
            request_id=self.response_id,
            prompt=messages,
            params=params,
            events=new_queue(),
            loop=asyncio.get_running_loop(),
            grammar=grammar,
            grammar_param=param,
            jump_forward=jump_forward,
            is_max_tokens_explicit=max_new_tokens(body) is not None,
        )
        self.generation = Generation(context.engine, [request])
        await self.generation.start()
        return self.generation

    # -- one body ------------------------------------------------------------------------------

    def _message(self, completion: CompletionOutput) -> tuple[dict[str, Any], str | None]:
        message: dict[str, Any] = {"role": "assistant", "content": completion.text}
        reason = completion.finish_reason
        if self.tool_mode != "none":
            call = openai_tool_call(completion.text, self.tools)
            if call is not None:
                message["content"] = None
                message["tool_calls"] = [call]
                reason = "tool_calls"
        message["refusal"] = None
        return message, reason

    async def response(self) -> dict[str, Any]:
        """The ``chat.completion`` body (runs the generation to completion)."""
        outputs = await self.generation.outputs()
        output = outputs[self.response_id]
        choices = []
        for completion in output.outputs:
            message, reason = self._message(completion)
            logprobs = None
            if completion.logprobs is not None:
                logprobs = {
                    "content": self.context.token_texts.chat_logprobs(
                        completion.token_ids, completion.logprobs, self.num_top_logprobs
                    ),
                    "refusal": None,
                }
            choices.append(
                {
                    "index": completion.index,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": reason,
                }
            )
        num_completion = sum(len(c.token_ids) for c in output.outputs)
        return {
            **envelope(
                self.response_id, "chat.completion", self.created, self.context.model_name, choices
            ),
            "usage": usage(len(output.prompt_token_ids), num_completion),
        }

    # -- streaming -----------------------------------------------------------------------------

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body = envelope(
            self.response_id,
            "chat.completion.chunk",
            self.created,
            self.context.model_name,
            choices,
        )
        if self.body.stream_options is not None and self.body.stream_options.include_usage:
            body["usage"] = None
        body.update(extra)
        return sse(body)

    def _choice(
        self, index: int, delta: dict[str, Any], reason: str | None = None, logprobs: Any = None
    ) -> dict[str, Any]:
        return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": reason}

    async def stream(self) -> AsyncIterator[str]:
        """SSE chunks: a role chunk per choice, content or tool-call deltas, finish chunks,
        usage, [DONE]."""
        n = self.generation.requests[0].params.n
        texts = {i: "" for i in range(n)}  # each choice's text so far
        calls: dict[int, ToolCallStream | None] = {
            i: ToolCallStream() if self.tool_mode == "required" else None for i in range(n)
        }
        is_undecided = {i: self.tool_mode == "auto" for i in range(n)}
        for i in range(n):
            yield self._chunk([self._choice(i, {"role": "assistant", "content": ""})])
        try:
            async for kind, _, payload in self.generation.events():
                if kind == "done":
                    if self.body.stream_options and self.body.stream_options.include_usage:
                        num_completion = sum(len(c.token_ids) for c in payload.outputs)
                        used = usage(len(payload.prompt_token_ids), num_completion)
                        yield self._chunk([], usage=used)
                    continue
                delta: StreamDelta = payload
                i = delta.index
                texts[i] += delta.text
                if is_undecided[i] and delta.text:
                    is_undecided[i] = False  # the grammar: "{" starts a call, else text
                    if delta.text.startswith("{"):
                        calls[i] = ToolCallStream()
                call = calls[i]
                if call is not None:
                    deltas = [{"tool_calls": [entry]} for entry in call.feed(delta.text)]
                else:
                    deltas = [{"content": delta.text}] if delta.text else []
                if delta.logprobs is not None:
                    logprobs = {
                        "content": self.context.token_texts.chat_logprobs(
                            delta.token_ids, delta.logprobs, self.num_top_logprobs
                        ),
                        "refusal": None,
                    }
                    if not deltas:
                        deltas = [{} if call is not None else {"content": ""}]
                    yield self._chunk([self._choice(i, deltas[0], logprobs=logprobs)])
                    deltas = deltas[1:]
                for piece in deltas:
                    yield self._chunk([self._choice(i, piece)])
                if delta.finish_reason is not None:
                    for chunk in self._finish(i, texts[i], call, delta.finish_reason):
                        yield chunk
        except APIError as exc:
            yield sse(exc.body())
        yield sse("[DONE]")

    def _finish(self, index: int, text: str, call: ToolCallStream | None, reason: str) -> list[str]:
        """The last chunks of choice ``index``: the rest of its call, and its finish reason."""
        chunks = []
        if call is not None and call.has_started:
            for entry in call.finish():
                chunks.append(self._chunk([self._choice(index, {"tool_calls": [entry]})]))
            if call.is_complete and parse_tool_call(text, self.tools) is not None:
                reason = "tool_calls"
        elif call is not None and text:  # cut before the name was complete: plain content
            chunks.append(self._chunk([self._choice(index, {"content": text})]))
        return chunks + [self._chunk([self._choice(index, {}, reason)])]
