"""``POST /v1/chat/completions``: build the engine request, answer in one body or as SSE chunks.

Tool calls (see `formcast.server.tool_formats`): the model writes calls in its family's format
(a structural tag constrains them: ``tool_choice``, ``parallel_tool_calls``, ``strict``, and
``response_format`` as the answer when no tool is called); the text is read back by a
`ToolCallsParser`. Complete calls become ``message.tool_calls`` (``content`` the text outside
them, or null; ``finish_reason`` ``"tool_calls"``). When streaming, each call is sent as
OpenAI streams calls: a ``tool_calls`` delta with the call's index, id, type and name as soon
as the name is complete, then deltas carrying the next piece of ``arguments``; the pieces
concatenate to the ``arguments`` a non-streamed completion of the same tokens returns. A call
cut by ``max_tokens`` ends with ``"length"`` after its partial arguments (as OpenAI). With
logprobs, a step's logprobs ride on its first chunk (``delta`` ``{}`` when the step completed
no delta).

Reasoning (see `formcast.server.reasoning`): the thoughts go to ``message.reasoning_content``
(streamed as ``reasoning_content`` deltas) and only the answer after the end tag is
``content`` or tool calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from formcast.engine.outputs import CompletionOutput, StreamDelta
from formcast.grammar.reasoning import ReasoningConfig, ReasoningSplitter
from formcast.grammar.spec import GrammarSpec
from formcast.server.async_engine import EngineRequest
from formcast.server.chat import chat_messages
from formcast.server.errors import APIError, bad_request
from formcast.server.generation import Generation, new_queue
from formcast.server.grammars import request_grammar
from formcast.server.protocol import ChatCompletionRequest, ToolDefinition, check_unsupported
from formcast.server.reasoning import opened_by_prompt, reasoning_spec, request_reasoning
from formcast.server.responses import envelope, new_id, now, sse, usage
from formcast.server.sampling import max_new_tokens, sampling_params_from
from formcast.server.serving_context import ServingContext
from formcast.server.tool_formats import ToolCallsParser, tool_call_tag
from formcast.server.tools import openai_call, selected_tools


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
        self.reasoning: ReasoningConfig | None = None

    async def start(self) -> Generation:
        """Validate, compile the grammar, submit; raises `APIError` for bad input."""
        body, context = self.body, self.context
        context.check_model(body.model)
        check_unsupported(body)
        self.tool_mode, self.tools = selected_tools(body.tools, body.tool_choice)
        spec, param = request_grammar(body)
        fmt = context.tool_format
        shows_special = False
        if self.tool_mode != "none":
            answer_schema = None
            if param == "response_format" and body.response_format.type == "json_schema":
                answer_schema = body.response_format.json_schema.schema_ or {}
            elif spec is not None:
                raise bad_request(
                    f"tools (tool_choice {self.tool_mode!r}) cannot be combined with {param}; "
                    "use tool_choice='none' or drop the other constraint",
                    param=param,
                )
            # a named tool_choice calls that function once (as OpenAI answers it); otherwise
            # parallel_tool_calls, true by default as in OpenAI's API
            is_named = not isinstance(body.tool_choice, str) and body.tool_choice is not None
            is_parallel = body.parallel_tool_calls is not False and not is_named
            special_texts = frozenset(t for t, _ in context.engine.vocab.special_token_texts)
            tag = tool_call_tag(
                fmt, self.tool_mode, self.tools, is_parallel, answer_schema, special_texts
            )
            spec, param = GrammarSpec.structural_tag(tag), "tools"
            # a control token ([TOOL_CALLS], <|python_tag|>) in the turn: the parser reads it
            shows_special = bool(fmt.control_tokens(special_texts))
        messages = chat_messages(body.messages, self.tools, self.tool_mode, fmt)
        prompt_text, prompt_ids = self._render(messages)
        config, has_budget = request_reasoning(
            context.reasoning,
            body.reasoning_effort,
            body.max_reasoning_tokens,
            body.chat_template_kwargs,
        )
        if config is not None:
            self.reasoning = opened_by_prompt(config, prompt_text)
            spec = reasoning_spec(self.reasoning, spec, has_budget)
            param = param or "max_reasoning_tokens"
        params = sampling_params_from(body)
        if self.tool_mode != "none" and shows_special:
            params = dataclasses.replace(params, skip_special_tokens=False)
        self.num_top_logprobs = params.logprobs or 0
        grammar = await context.compile(spec, param)
        jump_forward = body.jump_forward
        if params.logprobs is not None:
            jump_forward = False  # every token sampled, so every token has a logprob
        request = EngineRequest(
            request_id=self.response_id,
            prompt=prompt_ids,
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

    def _render(self, messages: list[dict[str, str]]) -> tuple[str, list[int]]:
        """The prompt text (chat template, with ``chat_template_kwargs``) and its token ids."""
        tokenizer = self.context.engine.llm.tokenizer
        options = self.body.chat_template_kwargs or {}
        try:
            text = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False, **options
            )
        except Exception as exc:  # a template raising on these messages / options
            raise bad_request(
                f"the chat template cannot render these messages: {type(exc).__name__}: {exc}",
                param="chat_template_kwargs" if options else "messages",
            ) from exc
        return text, list(tokenizer.encode(text, add_special_tokens=False))

    def _custom_names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.tools if tool.custom is not None)

    # -- one body ------------------------------------------------------------------------------

    def _message(self, completion: CompletionOutput) -> tuple[dict[str, Any], str | None]:
        text = completion.text
        message: dict[str, Any] = {"role": "assistant"}
        if self.reasoning is not None:
            message["reasoning_content"], text = self.reasoning.split(text)
        message["content"] = text
        reason = completion.finish_reason
        if self.tool_mode != "none":
            parser = ToolCallsParser(self.context.tool_format, self._custom_names())
            parser.feed(text)
            parser.finish()
            if parser.calls:  # as streamed: the calls whose name is known, cut ones partial
                message["content"] = parser.content.strip() or None
                started = [call for call in parser.calls if call.has_started]
                if started:
                    message["tool_calls"] = [openai_call(call) for call in started]
                if reason == "stop" and parser.num_complete:
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
        """SSE chunks: a role chunk per choice, reasoning, content or tool-call deltas, finish
        chunks, usage, [DONE]."""
        n = self.generation.requests[0].params.n
        fmt = self.context.tool_format
        custom_names = self._custom_names()
        parsers = {
            i: ToolCallsParser(fmt, custom_names) if self.tool_mode != "none" else None
            for i in range(n)
        }
        splitters = {
            i: ReasoningSplitter(self.reasoning) if self.reasoning is not None else None
            for i in range(n)
        }
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
                is_last = delta.finish_reason is not None
                deltas: list[dict[str, Any]] = []
                answer = delta.text
                splitter = splitters[i]
                if splitter is not None:
                    thoughts, answer = splitter.feed(delta.text)
                    if is_last:
                        thoughts += splitter.finish()
                    if thoughts:
                        deltas.append({"reasoning_content": thoughts})
                parser = parsers[i]
                if parser is None:
                    if answer:
                        deltas.append({"content": answer})
                else:
                    content, calls = parser.feed(answer)
                    if is_last:
                        rest, more = parser.finish()
                        content, calls = content + rest, calls + more
                    if content:
                        deltas.append({"content": content})
                    deltas += [{"tool_calls": [entry]} for entry in calls]
                if delta.logprobs is not None:
                    logprobs = {
                        "content": self.context.token_texts.chat_logprobs(
                            delta.token_ids, delta.logprobs, self.num_top_logprobs
                        ),
                        "refusal": None,
                    }
                    if not deltas:
                        deltas = [{} if parser is not None else {"content": ""}]
                    yield self._chunk([self._choice(i, deltas[0], logprobs=logprobs)])
                    deltas = deltas[1:]
                for piece in deltas:
                    yield self._chunk([self._choice(i, piece)])
                if is_last:
                    reason = delta.finish_reason
                    if reason == "stop" and parser is not None and parser.num_complete:
                        reason = "tool_calls"
                    yield self._chunk([self._choice(i, {}, reason)])
        except APIError as exc:
            yield sse(exc.body())
        yield sse("[DONE]")
