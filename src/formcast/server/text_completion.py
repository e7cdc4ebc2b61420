"""``POST /v1/completions``: one engine request per prompt, ``n`` completions each.

``prompt`` may be a string, a list of strings, a list of token ids or a list of token id
lists; choice ``index`` is ``prompt_index * n + completion_index``. ``echo`` puts the prompt
text in front of each completion (the decoded ids for token prompts); ``logprobs=k`` returns
tokens, logprobs, ``k`` alternatives and text offsets of the generated tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from formcast.server.async_engine import EngineRequest
from formcast.server.errors import APIError, bad_request
from formcast.server.generation import Generation, new_queue
from formcast.server.grammars import request_grammar
from formcast.server.protocol import CompletionRequest, check_unsupported
from formcast.server.responses import envelope, new_id, now, sse, usage
from formcast.server.sampling import max_new_tokens, sampling_params_from
from formcast.server.serving_context import ServingContext

MAX_PROMPTS = 64


def prompt_list(prompt: Any) -> list[str | list[int]]:
    """The prompts of a ``prompt`` field (one or a batch)."""
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise bad_request("prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    prompts = list(prompt)
    if len(prompts) > MAX_PROMPTS:
        raise bad_request(f"at most {MAX_PROMPTS} prompts per request", param="prompt")
    return prompts


class TextCompletion:
    """One text completion request being served."""

    def __init__(self, context: ServingContext, body: CompletionRequest) -> None:
        self.context = context
        self.body = body
        self.response_id = new_id("cmpl")
        self.created = now()
        self.prompt_texts: list[str] = []
        self.num_top_logprobs = 0
        self.n = 1
        self.generation: Generation | None = None

    async def start(self) -> Generation:
        """Validate, compile the grammar, submit; raises `APIError` for bad input."""
        body, context = self.body, self.context
        context.check_model(body.model)
        check_unsupported(body)
        prompts = prompt_list(body.prompt)
        spec, param = request_grammar(body)
        params = sampling_params_from(body)
        self.n = params.n
        self.num_top_logprobs = params.logprobs or 0
        grammar = await context.compile(spec, param)
        jump_forward = False if params.logprobs is not None else body.jump_forward
        tokenizer = context.engine.llm.tokenizer
        self.prompt_texts = [
            p if isinstance(p, str) else tokenizer.decode(p, skip_special_tokens=False)
            for p in prompts
        ]
        events = new_queue()
        loop = asyncio.get_running_loop()
        requests = [
            EngineRequest(
                request_id=f"{self.response_id}-{k}",
                prompt=prompt,
                params=params,
                events=events,
                loop=loop,
                grammar=grammar,
                grammar_param=param,
                jump_forward=jump_forward,
                tag=k,
                is_max_tokens_explicit=max_new_tokens(body) is not None,
            )
            for k, prompt in enumerate(prompts)
        ]
        self.generation = Generation(context.engine, requests)
        await self.generation.start()
        return self.generation

    def _logprobs(self, token_ids: list[int], entries: Any, offset: int) -> Any:
        if entries is None:
            return None
        return self.context.token_texts.completion_logprobs(
            token_ids, entries, self.num_top_logprobs, offset
        )

    async def response(self) -> dict[str, Any]:
        """The ``text_completion`` body (runs the generation to completion)."""
        outputs = await self.generation.outputs()
        choices = []
        num_prompt = num_completion = 0
        for request in self.generation.requests:
            output = outputs[request.request_id]
            num_prompt += len(output.prompt_token_ids)
            prefix = self.prompt_texts[request.tag] if self.body.echo else ""
            for completion in output.outputs:
                num_completion += len(completion.token_ids)
                choices.append(
                    {
                        "index": request.tag * self.n + completion.index,
                        "text": prefix + completion.text,
                        "logprobs": self._logprobs(
                            completion.token_ids, completion.logprobs, len(prefix)
                        ),
                        "finish_reason": completion.finish_reason,
                    }
                )
        choices.sort(key=lambda choice: choice["index"])
        return {
            **envelope(
                self.response_id, "text_completion", self.created, self.context.model_name, choices
            ),
            "usage": usage(num_prompt, num_completion),
        }

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body = envelope(
            self.response_id, "text_completion", self.created, self.context.model_name, choices
        )
        if self.body.stream_options is not None and self.body.stream_options.include_usage:
            body["usage"] = None
        body.update(extra)
        return sse(body)

    async def stream(self) -> AsyncIterator[str]:
        """SSE chunks: text deltas per choice (echo first), then usage and [DONE]."""
        offsets: dict[int, int] = {}
        if self.body.echo:
            for request in self.generation.requests:
                for i in range(self.n):
                    index = request.tag * self.n + i
                    text = self.prompt_texts[request.tag]
                    offsets[index] = len(text)
                    yield self._chunk([_choice(index, text)])
        num_prompt = num_completion = 0
        try:
            async for kind, request, payload in self.generation.events():
                if kind == "done":
                    num_prompt += len(payload.prompt_token_ids)
                    num_completion += sum(len(c.token_ids) for c in payload.outputs)
                    continue
                index = request.tag * self.n + payload.index
                offset = offsets.get(index, 0)
                logprobs = self._logprobs(payload.token_ids, payload.logprobs, offset)
                offsets[index] = offset + len(payload.text)
                if payload.text or logprobs is not None or payload.finish_reason is not None:
                    yield self._chunk(
                        [_choice(index, payload.text, payload.finish_reason, logprobs)]
                    )
            if self.body.stream_options is not None and self.body.stream_options.include_usage:
                yield self._chunk([], usage=usage(num_prompt, num_completion))
        except APIError as exc:
            yield sse(exc.body())
        yield sse("[DONE]")


def _choice(index: int, text: str, reason: str | None = None, logprobs: Any = None) -> dict:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}
